import Containers
import Dispatch
import FoundationEssentials
import Logging
import Synchronization
import Timekeeping

/// What a pull session pulls (`PUT /sessions/{id}` with a `source`).
public struct PullSourceSpec: Sendable, Equatable {
    public var url: SourceURL
    /// RTSP only: RTP over the RTSP connection (`tcp`, the default) or over UDP.
    public var transport: SourceTransport?

    public init(url: SourceURL, transport: SourceTransport? = nil) {
        self.url = url
        self.transport = transport
    }
}

/// Where a pull stands, for the session's status.
public struct SourceStatus: Sendable, Equatable {
    public enum State: String, Sendable, CaseIterable {
        /// Connecting (the first time, or again after a back-off).
        case connecting
        /// Connected and reading the stream.
        case live
        /// The connection failed or was lost; the next attempt follows its back-off.
        case retrying
        /// Stopped for good (the pull was replaced or removed).
        case stopped
    }

    /// The URL with its credentials left out (`SourceURL.redacted`).
    public var url: String
    public var transport: SourceTransport?
    public var state: State
    /// Why the last connection failed or ended.
    public var lastError: ErrorRecord?
    /// Connection attempts after the first.
    public var reconnects: Int
    /// When the current connection was made (nil unless live).
    public var connectedAt: Date?
    /// What the stream is read as (`rtsp`, `flv`, `mpegts`, `mov,mp4,...`, `annexb`), once connected.
    public var format: String?
    /// When the next attempt is due, while retrying.
    public var nextAttemptAt: Date?
}

/// A pull session's input: a thread that connects to the source, reads its video samples into
/// a bounded queue for the session's decode loop, and when the connection fails or ends, waits
/// a capped exponential back-off and connects again, until it is stopped. Each lost connection
/// ends the decoder's stream (`streamBreak`): the next one starts again at a random access point.
///
/// `stop()` (the session's DELETE) interrupts libavformat's blocking I/O at once through its
/// interrupt callback.
final class PullSource: ByteSource {
    let spec: PullSourceSpec
    private let outputs: DemuxOutputQueue
    private let interrupt: DemuxInterrupt
    private let status: Mutex<SourceStatus>
    private let sleeper = DispatchSemaphore(value: 0)
    private let context: SessionContext
    private let ignored: IgnoredPackets
    /// The first wait after a failure; it doubles up to `configuration.sourceRetryMax`.
    static let firstRetryDelay: Duration = .milliseconds(500)

    init(spec: PullSourceSpec, context: SessionContext, ignored: IgnoredPackets) {
        self.spec = spec
        self.context = context
        self.ignored = ignored
        outputs = DemuxOutputQueue(capacity: context.configuration.uploadQueueBytes)
        interrupt = DemuxInterrupt(clock: context.clock)
        status = Mutex(
            SourceStatus(
                url: spec.url.redacted, transport: spec.transport, state: .connecting, lastError: nil, reconnects: 0,
                connectedAt: nil, format: nil, nextAttemptAt: nil))
    }

    /// Starts pulling on a thread of its own.
    func start() {
        BlockingThread.start(name: "pull-\(spec.url.scheme.name)") { [self] in run() }
    }

    var snapshot: SourceStatus { status.withLock { $0 } }

    // MARK: - ByteSource

    var totalBytes: Int { 0 }

    func next() -> IngestEvent? {
        switch outputs.take() {
        case .sample(let sample, let receivedAt): .sample(sample, receivedAt: receivedAt)
        case .bytes(let bytes, let receivedAt): .bytes(bytes, receivedAt: receivedAt)
        case .streamBreak: .streamBreak
        case .pushEnded, .ended, nil: nil
        }
    }

    func setConsumerWake(_ wake: @escaping @Sendable () -> Void) {
        outputs.setWake(wake)
    }

    func close() {
        stop()
    }

    /// Stops now: a blocking connect or read is interrupted, a back-off ends, the thread exits.
    func stop() {
        interrupt.stop()
        outputs.close()
        status.withLock { status in
            status.state = .stopped
            status.connectedAt = nil
            status.nextAttemptAt = nil
        }
        sleeper.signal()
    }

    private var isStopped: Bool { interrupt.isStopped }

    // MARK: - The pulling thread

    private func run() {
        let configuration = context.configuration
        var failures = 0
        var attempts = 0
        while !isStopped {
            if attempts > 0 {
                status.withLock { $0.reconnects += 1 }
                context.metrics.recordSourceReconnect()
            }
            attempts += 1
            update(.connecting)
            let outcome: ContainerError
            if let refusal = configuration.sourcePolicy.check(spec.url) {
                // The policy is fixed, but a host name's addresses may have moved out of it.
                outcome = refusal
            } else {
                interrupt.rearm()
                do throws(ContainerError) {
                    let stream = try PulledStream(
                        source: spec.url, transport: spec.transport, policy: configuration.sourcePolicy,
                        interrupt: interrupt,
                        timeouts: .init(connect: configuration.sourceConnectTimeout, read: configuration.sourceReadTimeout),
                        seekWindow: configuration.containerSeekWindow)
                    failures = 0
                    connected(format: stream.formatName)
                    outcome = read(stream)
                } catch {
                    outcome = error
                }
            }
            if isStopped { break }
            failures += 1
            let delay = retryDelay(after: failures)
            lost(outcome, retryIn: delay)
            wait(delay)
        }
        context.logger.info("pull stopped", metadata: ["source": "\(spec.url.redacted)"])
    }

    /// Reads samples until the connection fails or the stream ends; returns why it stopped.
    private func read(_ stream: PulledStream) -> ContainerError {
        var counted: [String: Int] = [:]
        while true {
            let next = stream.next()
            ignored.add(stream.ignoredPackets, since: &counted)
            switch next {
            case .sample(let sample):
                guard outputs.append(.sample(sample, receivedAt: context.clock.uptime)) else { return stopped }
            case .bytes(let bytes):
                guard outputs.append(.bytes(bytes, receivedAt: context.clock.uptime)) else { return stopped }
            case .end:
                return ContainerError(.sourceEnded, "the source ended its stream")
            case .failed(let error):
                return error
            }
        }
    }

    private var stopped: ContainerError { ContainerError(.sourceEnded, "stopped") }

    /// The capped exponential back-off: 0.5 s, 1 s, 2 s, ... up to `sourceRetryMax`.
    private func retryDelay(after failures: Int) -> Duration {
        let cap = context.configuration.sourceRetryMax
        var delay = Self.firstRetryDelay
        for _ in 1..<max(1, min(failures, 30)) where delay < cap { delay *= 2 }
        return min(delay, cap)
    }

    /// Sleeps for `delay` on the service clock, or until stopped.
    private func wait(_ delay: Duration) {
        let woken = sleeper
        context.clock.schedule(at: context.clock.uptime + delay.nanoseconds) { woken.signal() }
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
        let now = context.clock.now
        let reconnects = status.withLock { status -> Int in
            status.state = .live
            status.connectedAt = now
            status.format = format
            return status.reconnects
        }
        guard !isStopped else { return }
        context.logger.info("source connected", metadata: ["source": "\(spec.url.redacted)", "format": "\(format)"])
        context.events.emit(.sourceConnected) { details in
            details.url = spec.url.redacted
            details.container = format
            details.reconnects = reconnects
        }
    }

    private func lost(_ error: ContainerError, retryIn delay: Duration) {
        let now = context.clock.now
        let record = ErrorRecord(code: error.code.rawValue, message: error.message, at: now)
        // The stream of that connection ends here: its delayed pictures come out (queued before
        // the state says so, so the decode loop has it when a reader sees `retrying`).
        let wasLive = status.withLock { $0.state == .live }
        if wasLive { outputs.append(.streamBreak) }
        let reconnects = status.withLock { status -> Int in
            guard status.state != .stopped else { return status.reconnects }
            status.state = .retrying
            status.lastError = record
            status.connectedAt = nil
            status.nextAttemptAt = now.addingTimeInterval(Double(delay.nanoseconds) / 1e9)
            return status.reconnects
        }
        context.metrics.recordError(code: error.code.rawValue)
        context.logger.warning(
            wasLive ? "source lost" : "source connection failed",
            metadata: [
                "source": "\(spec.url.redacted)", "code": "\(error.code.rawValue)", "message": "\(error.message)",
                "retryInMs": "\(delay.nanoseconds / 1_000_000)",
            ])
        context.events.emit(.sourceLost) { details in
            details.url = spec.url.redacted
            details.code = error.code.rawValue
            details.message = error.message
            details.reconnects = reconnects
        }
    }
}
