import Containers
import Dispatch
import Logging
import Synchronization
import Timekeeping
import VideoCoding

/// What a demuxing or pulling thread hands a session's decode loop, through a
/// `DemuxOutputQueue`.
enum DemuxOutput: Sendable {
    case sample(DemuxedSample, receivedAt: UInt64)
    case bytes([UInt8], receivedAt: UInt64)
    /// A push's bytes were all read by the demuxer (and the stream goes on with the next push).
    case pushEnded
    /// A pulled source's connection ended; the next one starts a new stream.
    case streamBreak
    /// The demuxer is done: its input ended (nil) or it failed.
    case ended(ContainerError?)

    var byteCount: Int {
        switch self {
        case .sample(let sample, _): sample.payload.count
        case .bytes(let bytes, _): bytes.count
        case .pushEnded, .streamBreak, .ended: 0
        }
    }
}

/// The outputs of a thread that demuxes or pulls, on their way to the session's decode loop:
/// bounded by their bytes (the thread waits while it holds `capacity`, which is the upload
/// queue's size, until the loop drained half), with the loop woken as an `UploadQueue` wakes it.
final class DemuxOutputQueue: Sendable {
    let capacity: Int
    private let state = Mutex(State())
    private let space = DispatchSemaphore(value: 0)

    private struct State {
        var items: [DemuxOutput] = []
        var head = 0
        var bytes = 0
        var closed = false
        var producerWaiting = false
        var consumerWaiting = true
        var wake: (@Sendable () -> Void)?
    }

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Adds an output, waiting while the queue is full (one output larger than the capacity
    /// still goes in alone). False when the queue was closed: the thread should stop.
    @discardableResult
    func append(_ output: DemuxOutput) -> Bool {
        while true {
            let (added, wake) = state.withLock { state -> (Bool?, (@Sendable () -> Void)?) in
                if state.closed { return (false, nil) }
                let size = output.byteCount
                guard size == 0 || state.bytes == 0 || state.bytes + size <= capacity else {
                    state.producerWaiting = true
                    return (nil, nil)
                }
                state.items.append(output)
                state.bytes += size
                guard state.consumerWaiting else { return (true, nil) }
                state.consumerWaiting = false
                return (true, state.wake)
            }
            if let added {
                wake?()
                return added
            }
            space.wait()
        }
    }

    /// The next output, or nil (the wake-up then runs when one arrives).
    func take() -> DemuxOutput? {
        let (output, release) = state.withLock { state -> (DemuxOutput?, Bool) in
            guard state.head < state.items.count else {
                state.consumerWaiting = true
                return (nil, false)
            }
            let output = state.items[state.head]
            state.head += 1
            if state.head == state.items.count {
                state.items.removeAll(keepingCapacity: true)
                state.head = 0
            }
            state.bytes -= output.byteCount
            guard state.producerWaiting, state.bytes <= capacity / 2 else { return (output, false) }
            state.producerWaiting = false
            return (output, true)
        }
        if release { space.signal() }
        return output
    }

    /// Runs `wake` when an output arrives after `take` returned nil (at once if one waits).
    func setWake(_ wake: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            state.wake = wake
            guard state.head < state.items.count else { return false }
            state.consumerWaiting = false
            return true
        }
        if runNow { wake() }
    }

    /// Drops what waits and refuses what follows; a waiting thread goes on (to stop).
    func close() {
        state.withLock { state in
            state.closed = true
            state.items = []
            state.head = 0
            state.bytes = 0
            state.wake = nil
        }
        space.signal()
    }

    /// Bytes waiting now.
    var queuedBytes: Int { state.withLock { $0.bytes } }
}

/// A container stream's input: the bytes of its pushes, one push after another, as a
/// demuxer reads them on its thread. Between pushes the demuxer waits here for the next one
/// (a session's stream continues across pushes); a flush, a push of something else, or a push
/// that broke off ends the input, and the demuxer drains what it holds.
final class PushFeed: DemuxByteInput, Sendable {
    private let state = Mutex(State())
    private let signal = DispatchSemaphore(value: 0)
    private let outputs: DemuxOutputQueue

    private struct State {
        var push: (any ByteSource)?
        /// Bytes taken from the push that the demuxer has not read yet.
        var pending: [UInt8] = []
        var pendingOffset = 0
        /// The input ends after the current push (flush).
        var endAfterPush = false
        /// No push follows: the demuxer gets the end.
        var ending = false
        var stopped = false
        /// When the newest bytes read arrived.
        var lastReceivedAt: UInt64 = 0
        /// How the last push ended, for its answer once the demuxer drained (flush, break-off).
        var finalOutcome: IngestEvent?
    }

    init(outputs: DemuxOutputQueue) {
        self.outputs = outputs
    }

    /// The next push's bytes follow (`prefix` first: what was read to tell what it is).
    /// `endsStream`: the push flushes; the input ends with it.
    func attach(_ push: any ByteSource, prefix: [UInt8], receivedAt: UInt64, endsStream: Bool) {
        state.withLock { state in
            state.push = push
            state.pending = prefix
            state.pendingOffset = 0
            state.endAfterPush = endsStream
            if !prefix.isEmpty { state.lastReceivedAt = receivedAt }
        }
        push.setConsumerWake { [signal] in signal.signal() }
        signal.signal()
    }

    /// No push follows the current one (or none is attached): the demuxer gets the end.
    func endInput() {
        state.withLock { state in
            if state.push == nil { state.ending = true } else { state.endAfterPush = true }
        }
        signal.signal()
    }

    /// The demuxer stops now: its session is closing.
    func stop() {
        state.withLock { $0.stopped = true }
        signal.signal()
    }

    /// Lets the demuxer ask its push again (a spooled push's answer may want pictures now).
    func poke() {
        signal.signal()
    }

    var lastReceivedAt: UInt64 { state.withLock { $0.lastReceivedAt } }
    /// How the last push ended (after the stream's end).
    var finalOutcome: IngestEvent? { state.withLock { $0.finalOutcome } }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> DemuxInputRead {
        while true {
            enum Step {
                case done(DemuxInputRead)
                case poll(any ByteSource)
                case wait
            }
            let step = state.withLock { state -> Step in
                if state.stopped { return .done(.interrupted) }
                if state.pendingOffset < state.pending.count {
                    let count = min(buffer.count, state.pending.count - state.pendingOffset)
                    state.pending.withUnsafeBytes { source in
                        buffer.copyMemory(
                            from: UnsafeRawBufferPointer(rebasing: source[state.pendingOffset..<(state.pendingOffset + count)]))
                    }
                    state.pendingOffset += count
                    return .done(.bytes(count))
                }
                if let push = state.push { return .poll(push) }
                return state.ending ? .done(.end) : .wait
            }
            switch step {
            case .done(let result):
                return result
            case .wait:
                signal.wait()
            case .poll(let push):
                guard let event = push.next() else {
                    signal.wait()
                    continue
                }
                switch event {
                case .bytes(let bytes, let receivedAt):
                    state.withLock { state in
                        state.pending = bytes
                        state.pendingOffset = 0
                        state.lastReceivedAt = receivedAt
                    }
                case .end:
                    let streamGoesOn = state.withLock { state -> Bool in
                        state.push = nil
                        guard state.endAfterPush else { return true }
                        state.ending = true
                        state.finalOutcome = .end
                        return false
                    }
                    // The demuxer read all of this push and asks for more: every sample its
                    // bytes make is out, so the push's answer can go.
                    if streamGoesOn { outputs.append(.pushEnded) }
                case .stopped(let stop):
                    // A push that broke off leaves a container cut anywhere: the stream ends.
                    state.withLock { state in
                        state.push = nil
                        state.ending = true
                        state.finalOutcome = .stopped(stop)
                    }
                case .sample, .streamBreak:
                    break  // a push's source has neither
                }
            }
        }
    }
}

/// Packets of tracks other than the video, counted by kind over a session's life (its
/// containers and sources), for its status.
final class IgnoredPackets: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    func add(_ totals: [String: Int], since previous: inout [String: Int]) {
        let delta = totals.compactMapValues { $0 }.reduce(into: [String: Int]()) { result, entry in
            let added = entry.value - (previous[entry.key] ?? 0)
            if added > 0 { result[entry.key] = added }
        }
        previous = totals
        guard !delta.isEmpty else { return }
        counts.withLock { counts in
            for (kind, count) in delta { counts[kind, default: 0] += count }
        }
    }

    var snapshot: [String: Int] { counts.withLock { $0 } }
}

/// A session's container stream: one demuxer, on a thread of its own, over the bytes of the
/// pushes that carry one container, from the push that starts it until a flush, a push of
/// something else, or a new file (an MP4's `ftyp`, an EBML header). Its samples wait in a
/// bounded queue for the session's decode loop.
final class ContainerStream: Sendable {
    let format: ContainerFormat
    let outputs: DemuxOutputQueue
    let feed: PushFeed
    private let interrupt: DemuxInterrupt
    private let finished = Flag()

    /// Set once, read anywhere.
    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .releasing) }
        var isSet: Bool { value.load(ordering: .acquiring) }
    }

    init(format: ContainerFormat, seekWindow: Int, queueBytes: Int, clock: any ServiceClock, ignored: IgnoredPackets, logger: Logger) {
        self.format = format
        let outputs = DemuxOutputQueue(capacity: queueBytes)
        let feed = PushFeed(outputs: outputs)
        let interrupt = DemuxInterrupt(clock: clock)
        self.outputs = outputs
        self.feed = feed
        self.interrupt = interrupt
        let finished = finished
        BlockingThread.start(name: "demux-\(format.rawValue)") { [finished] in
            var counted: [String: Int] = [:]
            let outcome: ContainerError?
            do throws(ContainerError) {
                let demuxer = try Demuxer(container: format, input: feed, seekWindow: seekWindow, interrupt: interrupt)
                outcome = Self.run(demuxer, into: outputs, feed: feed, ignored: ignored, counted: &counted)
            } catch {
                outcome = error
            }
            if let outcome, outcome.code != .sourceEnded || !interrupt.isStopped {
                logger.debug("container stream ended", metadata: ["container": "\(format.rawValue)", "error": "\(outcome)"])
            }
            finished.set()
            outputs.append(.ended(interrupt.isStopped ? nil : outcome))
        }
    }

    /// Reads samples until the input ends or the demuxer fails; returns the failure.
    private static func run(
        _ demuxer: Demuxer, into outputs: DemuxOutputQueue, feed: PushFeed, ignored: IgnoredPackets,
        counted: inout [String: Int]
    ) -> ContainerError? {
        while true {
            let next = demuxer.next()
            ignored.add(demuxer.ignoredPackets, since: &counted)
            switch next {
            case .sample(let sample):
                guard outputs.append(.sample(sample, receivedAt: feed.lastReceivedAt)) else { return nil }
            case .end:
                return nil
            case .failed(let error):
                return error
            }
        }
    }

    /// The demuxer has finished (its `.ended` is queued or read).
    var hasFinished: Bool { finished.isSet }

    /// Ends the stream now: the session is closing (or the stream is abandoned).
    func stop() {
        interrupt.stop()
        feed.stop()
        outputs.close()
    }
}
