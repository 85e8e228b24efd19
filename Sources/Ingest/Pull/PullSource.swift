import Containers
import Dispatch
import FoundationEssentials
import Logging
import Synchronization
import Timekeeping
import VideoCoding

/// A pull session's input: a thread that connects to the source, reads its video samples into
/// a bounded queue for the session's decode loop, and when the connection fails or ends, waits
/// a capped exponential back-off and connects again, until it is stopped. While it waits, a
/// source that refuses connections is probed, and connected as soon as it accepts again
/// (`ReconnectPlan`). Each lost connection ends the decoder's stream (`streamBreak`): the next
/// one starts again at a random access point.
///
/// A pull that connects on demand (`ConnectMode.onDemand`) starts idle and is connected only
/// between `connectNow()` and `release()`: a release ends the connection at once (its stream
/// ends like a lost one's) or the back-off under way, and the pull waits, idle, for the next
/// `connectNow()`, which connects at once. Whoever runs the pull decides when (a session's
/// `ConnectionDemand`); the pull only does it.
///
/// `stop()` (the session's DELETE) interrupts libavformat's blocking I/O at once through its
/// interrupt callback; `retryNow()` ends a back-off.
public final class PullSource<Failure: IngestFailure>: IngestSource {
    public let spec: PullSourceSpec
    private let outputs: DemuxOutputQueue
    private let interrupt: DemuxInterrupt
    private let status: Mutex<SourceStatus>
    private let sleeper = DispatchSemaphore(value: 0)
    /// Set by `retryNow()`, taken by the waiting thread.
    private let retryRequested = Mutex(false)
    /// After the source refused the credentials: no attempt before this uptime, also across an
    /// on-demand connection let go and asked for again (each request would otherwise be one
    /// more failed login); ended by `retryNow()` or a connection that succeeds.
    private let credentialsRefused = Mutex<(until: UInt64, error: ContainerError)?>(nil)
    /// Whether the pull is to be connected: always, or on demand between `connectNow()` and `release()`.
    private let wanted: Mutex<Bool>
    private let settings: PullSettings
    private let clock: any ServiceClock
    private let logger: Logger
    private let observer: any PullObserver
    private let ignored: IgnoredPackets
    /// Access units the session assembled of its stream so far, for `maxBytesWithoutAccessUnit`.
    private let accessUnits = Atomic<Int>(0)

    /// Annex B bytes a source may send without the session making one access unit of them: a
    /// body of noise, or of another format the sniffing took for Annex B, would otherwise be read
    /// for ever at whatever rate it comes.
    public static var maxBytesWithoutAccessUnit: Int { ProgressBudget.standardLimit }

    public init(
        spec: PullSourceSpec, settings: PullSettings, clock: any ServiceClock, logger: Logger, observer: any PullObserver,
        ignored: IgnoredPackets
    ) {
        self.spec = spec
        self.settings = settings
        self.clock = clock
        self.logger = logger
        self.observer = observer
        self.ignored = ignored
        outputs = DemuxOutputQueue(watermark: HighLowWatermark(capacity: settings.queueBytes))
        interrupt = DemuxInterrupt(clock: clock)
        wanted = Mutex(spec.connect == .always)
        status = Mutex(
            SourceStatus(
                url: spec.url.redacted, transport: spec.transport ?? spec.url.scheme.transports.first,
                connect: spec.connect,
                state: spec.connect == .always ? .connecting : .idle, lastError: nil, reconnects: 0, connectedAt: nil,
                format: nil, nextAttemptAt: nil))
    }

    public func accessUnitsAssembled(total: Int) {
        accessUnits.store(total, ordering: .relaxed)
    }

    /// Starts pulling on a thread of its own.
    public func start() {
        BlockingThread.start(name: "pull-\(spec.url.scheme.name)") { [self] in run() }
    }

    public var snapshot: SourceStatus {
        var snapshot = status.withLock { $0 }
        // An idle pull's wait for refused credentials (`becomeIdle`) says nothing once over.
        if snapshot.state == .idle, let next = snapshot.nextAttemptAt, next <= clock.now {
            snapshot.nextAttemptAt = nil
            snapshot.failures = 0
        }
        return snapshot
    }

    // MARK: - IngestSource

    public var totalBytes: Int { 0 }

    public func next() -> IngestEvent<Failure>? {
        switch outputs.take() {
        case .sample(let sample, let receivedAt): .sample(sample, receivedAt: receivedAt)
        case .bytes(let bytes, let receivedAt): .bytes(bytes, receivedAt: receivedAt)
        case .streamBreak: .streamBreak
        case .pushEnded, .ended, nil: nil
        }
    }

    public func setConsumerWake(_ wake: @escaping @Sendable () -> Void) {
        outputs.setConsumerWake(wake)
    }

    public func close() {
        stop()
    }

    /// Stops now: a blocking connect or read is interrupted, a back-off ends, the thread exits.
    public func stop() {
        interrupt.stop()
        outputs.close()
        status.withLock { status in
            status.state = .stopped
            status.connectedAt = nil
            status.nextAttemptAt = nil
        }
        sleeper.signal()
    }

    /// Ends the back-off now: the next attempt starts at once. False (and nothing changes)
    /// unless the pull is waiting to retry.
    @discardableResult
    public func retryNow() -> Bool {
        let held = credentialsRefused.withLock { held in defer { held = nil }; return held != nil }
        let waiting = status.withLock { $0.state == .retrying }
        guard waiting else { return held }
        retryRequested.withLock { $0 = true }
        sleeper.signal()
        logger.info("retry asked for", metadata: ["source": "\(spec.url.redacted)"], source: PulledSourceLog.source)
        return true
    }

    /// On demand: connects now, unless connected or connecting already, and stays connected
    /// (retrying as always after a failure) until `release()`.
    public func connectNow() {
        guard spec.connect == .onDemand else { return }
        let idle = wanted.withLock { wanted in defer { wanted = true }; return !wanted }
        if idle { sleeper.signal() }
    }

    /// On demand: lets the connection go now (a blocking connect or read is interrupted, a
    /// back-off ends); the pull waits, idle, until `connectNow()`.
    public func release() {
        guard spec.connect == .onDemand else { return }
        let connected = wanted.withLock { wanted in defer { wanted = false }; return wanted }
        guard connected else { return }
        interrupt.letGo()
        sleeper.signal()
    }

    private var isStopped: Bool { interrupt.isStopped }
    private var isWanted: Bool { wanted.withLock { $0 } }

    // MARK: - The pulling thread

    private func run() {
        var failures = 0
        // RTSP, RTMP and SRT carry live streams by nature; only an HTTP body may be a stored file.
        let paced = if case .httpGet = spec.url.scheme.opening { true } else { false }
        var pacing: SourcePacing? = paced ? SourcePacing() : nil
        // Whether the next attempt follows a failed or lost one (an on-demand connection made
        // after its idle time is no reconnect).
        var reconnecting = false
        while waitUntilWanted() {
            if waitOutRefusedCredentials(failures: failures) == .letGo {
                becomeIdle()
                failures = 0
                reconnecting = false
                continue
            }
            if isStopped { break }
            if reconnecting {
                status.withLock { $0.reconnects += 1 }
                observer.pullReconnecting()
            }
            retryRequested.withLock { $0 = false }
            update(.connecting)
            let outcome: ContainerError
            var fileRead = false
            if let refusal = settings.policy.check(spec.url) {
                // The policy is fixed, but a host name's addresses may have moved out of it.
                outcome = refusal
            } else {
                do throws(ContainerError) {
                    let stream = try PulledStream(
                        source: spec.url, transport: spec.transport, policy: settings.policy, interrupt: interrupt,
                        timeouts: .init(connect: settings.connectTimeout, read: settings.readTimeout),
                        seekWindow: settings.seekWindow)
                    connected(format: stream.formatName)
                    let (end, proven) = read(stream, mayBeFile: paced, pacing: &pacing)
                    // Only a connection that gave some of the stream for a while starts the
                    // back-off again: one that opens and fails at once (a login page, a stream
                    // that never starts after PLAY) would otherwise be retried every 0.5 s.
                    if proven { failures = 0 }
                    outcome = end
                    fileRead = end.code == .sourceEnded && proven
                } catch {
                    outcome = error
                }
            }
            if isStopped { break }
            // A file read to its end plays again on its own schedule; anything else (a failure,
            // a connection let go) starts afresh.
            if fileRead && interrupt.reason == nil && isWanted {
                pacing?.fileEnded()
            } else {
                pacing = paced ? SourcePacing() : nil
            }
            if interrupt.reason == .letGo || !isWanted {
                // Let go on purpose: no failure, and the next connection is no reconnect.
                becomeIdle()
                failures = 0
                reconnecting = false
                continue
            }
            failures += 1
            reconnecting = true
            let delay = retryDelay(after: failures, outcome: outcome.code)
            if outcome.code == .sourceUnauthorized {
                let until = clock.uptime + UInt64(max(0, delay.nanoseconds))
                credentialsRefused.withLock { $0 = (until, outcome) }
            }
            var plan = ReconnectPlan(
                failedAt: clock.uptime, backOff: delay,
                probeInterval: ReachabilityProbe.canProbe(spec.url) ? settings.probeInterval : nil)
            lost(outcome, failures: failures, retryIn: delay)
            waitOut(&plan)
            // A camera that was away and is back starts a fresh back-off: should its stream
            // not be ready yet, the next attempts come 0.5 s, 1 s, ... after, not a grown wait.
            if plan.sourceReturned { failures = 0 }
            if !isWanted {
                failures = 0
                reconnecting = false
            }
        }
        logger.info("pull stopped", metadata: ["source": "\(spec.url.redacted)"], source: PulledSourceLog.source)
    }

    /// While refused credentials hold the pull off (`credentialsRefused`), each request that
    /// connects it again is told at once, with the time left, and nothing is sent to the source
    /// until then. `.letGo` when the pull was let go or stopped meanwhile.
    private enum HoldOutcome { case over, letGo }

    private func waitOutRefusedCredentials(failures: Int) -> HoldOutcome {
        while let held = credentialsRefused.withLock({ $0 }), clock.uptime < held.until {
            let left = Duration.nanoseconds(Int64(clamping: held.until - clock.uptime))
            lost(held.error, failures: max(failures, 1), retryIn: left)
            var plan = ReconnectPlan(failedAt: clock.uptime, backOff: left, probeInterval: nil)
            waitOut(&plan)
            if isStopped || interrupt.reason == .letGo || !isWanted { return .letGo }
            // The wait ran out, or a retry was asked for (which ended the hold).
            if clock.uptime >= held.until { credentialsRefused.withLock { if $0?.until == held.until { $0 = nil } } }
        }
        return .over
    }

    /// Returns at once while the pull is wanted; otherwise (on demand, nobody asks) it waits,
    /// idle, until `connectNow()`. False when the pull was stopped.
    private func waitUntilWanted() -> Bool {
        while !isStopped {
            // The interrupt is cleared before `wanted` is read: a `release()` from here on keeps
            // its `.letGo` for the connection about to be made, one before it reads as unwanted.
            interrupt.rearm()
            if isWanted { return true }
            becomeIdle()
            sleeper.wait()
        }
        return false
    }

    /// Reads samples until the connection fails or the stream ends; returns why it stopped, and
    /// whether it proved itself: handed on some of the stream `PullSettings.provenAfter` or
    /// more after it opened, or, when it `mayBeFile` (an HTTP body), ended as a whole file of
    /// samples (a short file that loops). A live stream that ends sooner (a camera that drops
    /// its clients after a second or two) proved nothing: its back-off grows.
    private func read(
        _ stream: PulledStream, mayBeFile: Bool, pacing: inout SourcePacing?
    ) -> (end: ContainerError, proven: Bool) {
        let openedAt = clock.uptime
        var lastDelivery: UInt64?
        var sampled = false
        let end = readUntilEnd(stream, pacing: &pacing) { isSample in
            sampled = sampled || isSample
            lastDelivery = clock.uptime
        }
        let delivering = lastDelivery.map { Duration.nanoseconds(Int64($0 &- openedAt)) }
        return (end, PullSettings.proved(delivering: delivering, sampled: sampled, end: end.code, mayBeFile: mayBeFile))
    }

    /// `read(_:)`'s loop; `delivering` runs before each sample (true) or piece of Annex B
    /// (false) is handed on.
    private func readUntilEnd(
        _ stream: PulledStream, pacing: inout SourcePacing?, delivering: (_ isSample: Bool) -> Void
    ) -> ContainerError {
        var counted: [String: Int] = [:]
        // A source's Annex B bytes land in the pool's slabs, as an upload's do.
        var landing = SlabWriter()
        defer { landing.release() }
        var accessUnitsSeen = accessUnits.load(ordering: .relaxed)
        var annexB = ProgressBudget(limit: Self.maxBytesWithoutAccessUnit, progress: accessUnitsSeen)
        while true {
            let asked = clock.uptime
            let next = stream.next()
            let now = clock.uptime
            ignored.add(stream.ignoredPackets, since: &counted)
            switch next {
            case .sample(let sample):
                if let due = pacing?.sample(pts: sample.pts, readTook: now &- asked, now: now), let end = hold(until: due) {
                    return end
                }
                delivering(true)
                guard outputs.append(.sample(sample, receivedAt: clock.uptime)) else { return stopped }
            case .bytes(let bytes):
                // Annex B bytes carry no timestamps to hold them to; the read still counts.
                _ = pacing?.sample(pts: nil, readTook: now &- asked, now: now)
                let assembled = accessUnits.load(ordering: .relaxed)
                if assembled != accessUnitsSeen {
                    accessUnitsSeen = assembled
                    stream.progressed()
                }
                guard annexB.spend(bytes.count, progress: assembled) else {
                    return ContainerError(
                        .sourceFailed,
                        "the source sent \(Self.maxBytesWithoutAccessUnit >> 20) MiB read as Annex B without one whole picture "
                            + "of H.264 or H.265 in it")
                }
                delivering(false)
                let receivedAt = clock.uptime
                var taken = true
                bytes.withUnsafeBytes { buffer in
                    landing.land(buffer) { piece in
                        if taken { taken = outputs.append(.bytes(piece, receivedAt: receivedAt)) }
                    }
                }
                guard taken else { return stopped }
            case .end:
                return ContainerError(.sourceEnded, "the source ended its stream")
            case .failed(let error):
                return error
            }
        }
    }

    private var stopped: ContainerError { ContainerError(.sourceEnded, "stopped") }

    /// Waits until `due` (`SourcePacing`). Returns why the connection ends when it was stopped,
    /// let go or refused meanwhile, as a read interrupted then would; nil to go on.
    private func hold(until due: UInt64) -> ContainerError? {
        while true {
            if case .refused(let error) = interrupt.reason { return error }
            if isStopped || interrupt.reason != nil || !isWanted { return stopped }
            guard clock.uptime < due else { return nil }
            sleep(until: due)
        }
    }

    /// The capped exponential back-off: 0.5 s, 1 s, 2 s, ... up to `settings.retryMax`.
    /// Refused credentials wait `PullSettings.unauthorizedRetry` at least.
    private func retryDelay(after failures: Int, outcome: ContainerErrorCode) -> Duration {
        let cap = settings.retryMax
        var delay = PullSettings.firstRetryDelay
        for _ in 1..<max(1, min(failures, 30)) where delay < cap { delay *= 2 }
        if outcome == .sourceUnauthorized { return max(min(delay, cap), PullSettings.unauthorizedRetry) }
        return min(delay, cap)
    }

    /// Follows `plan` until it says connect (or the pull is stopped or let go): sleeps on the service
    /// clock, probes the source when due, and ends early on `retryNow()`.
    private func waitOut(_ plan: inout ReconnectPlan) {
        let probeTimeout = min(settings.probeInterval, settings.connectTimeout)
        while !isStopped && isWanted {
            if retryRequested.withLock({ requested in defer { requested = false }; return requested }) {
                plan.retryNow()
            }
            switch plan.next(at: clock.uptime) {
            case .connect:
                return
            case .wait(let deadline):
                sleep(until: deadline)
            case .probe:
                let startedAt = clock.uptime
                // The allow list again: the probe connects too, if only for a moment.
                let reachable =
                    settings.policy.check(spec.url) == nil && ReachabilityProbe.accepts(spec.url, timeout: probeTimeout)
                plan.probed(reachable: reachable, at: startedAt)
            }
        }
    }

    /// Sleeps until `deadline` on the service clock, or until stopped or asked to retry. May
    /// wake early (a timer of an earlier sleep); the caller asks its plan again.
    private func sleep(until deadline: UInt64) {
        let woken = sleeper
        clock.schedule(at: deadline) { woken.signal() }
        sleeper.wait()
    }

    private func update(_ state: SourceStatus.State) {
        status.withLock { status in
            guard status.state != .stopped else { return }
            status.state = state
            status.nextAttemptAt = nil
        }
    }

    private func connected(format: String) {
        credentialsRefused.withLock { $0 = nil }
        let now = clock.now
        let reconnects = status.withLock { status -> Int in
            status.state = .live
            status.connectedAt = now
            status.format = format
            status.failures = 0
            return status.reconnects
        }
        guard !isStopped else { return }
        logger.info(
            "source connected", metadata: ["source": "\(spec.url.redacted)", "format": "\(format)"], source: PulledSourceLog.source)
        observer.pullConnected(format: format, reconnects: reconnects)
    }

    private func lost(_ error: ContainerError, failures: Int, retryIn delay: Duration) {
        let now = clock.now
        let record = ErrorRecord(code: error.code.rawValue, message: error.message, at: now)
        // The stream of that connection ends here: its delayed pictures come out (queued before
        // the state says so, so the decode loop has it when a reader sees `retrying`).
        let wasLive = status.withLock { $0.state == .live }
        if wasLive { outputs.append(.streamBreak) }
        let reconnects = status.withLock { status -> Int in
            guard status.state != .stopped else { return status.reconnects }
            status.state = .retrying
            status.lastError = record
            status.failures = failures
            status.connectedAt = nil
            status.nextAttemptAt = now.addingTimeInterval(Double(delay.nanoseconds) / 1e9)
            return status.reconnects
        }
        logger.warning(
            wasLive ? "source lost" : "source connection failed",
            metadata: [
                "source": "\(spec.url.redacted)", "code": "\(error.code.rawValue)", "message": "\(error.message)",
                "retryInMs": "\(delay.nanoseconds / 1_000_000)",
            ], source: PulledSourceLog.source)
        observer.pullLost(error, reconnects: reconnects, retryIn: delay)
    }

    /// Not connected because nobody asks: a live connection's stream ends (as a lost one's),
    /// a back-off is forgotten; the last error stays for the status to show, and so does the
    /// wait refused credentials impose (`credentialsRefused`), which outlasts the connection.
    private func becomeIdle() {
        let wasLive = status.withLock { $0.state == .live }
        if wasLive { outputs.append(.streamBreak) }
        let heldUntil = credentialsRefused.withLock { $0?.until }
        let (uptime, now) = (clock.uptime, clock.now)
        let changed = status.withLock { status -> Bool in
            guard status.state != .stopped, status.state != .idle else { return false }
            status.state = .idle
            status.connectedAt = nil
            if let heldUntil, heldUntil > uptime {
                status.nextAttemptAt = now.addingTimeInterval(Double(heldUntil - uptime) / 1e9)
            } else {
                status.failures = 0
                status.nextAttemptAt = nil
            }
            return true
        }
        guard changed, !isStopped else { return }
        logger.info("source released: nobody asks for its pictures", metadata: ["source": "\(spec.url.redacted)"], source: PulledSourceLog.source)
        observer.pullReleased()
    }
}

/// The `source` of a pulled source's log lines (swift-log's, for the module otherwise): they come
/// as often as the source's backoff lets them, which no client sets, so the process's log gives
/// them no budget (a client's flood must not hide a camera's outage).
public enum PulledSourceLog {
    public static let source = "PulledSource"
}
