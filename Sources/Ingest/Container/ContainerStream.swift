import Containers
import Logging
import Synchronization
import Timekeeping

/// Where a session keeps its open container stream between pushes (decode queue).
public final class ContainerStreamSlot<Failure: IngestFailure>: Sendable {
    private let stream = Mutex<ContainerStream<Failure>?>(nil)

    public init() {}

    var current: ContainerStream<Failure>? {
        get { stream.withLock { $0 } }
        set { stream.withLock { $0 = newValue } }
    }

    /// Clears the slot if it holds `ended`.
    func clear(_ ended: ContainerStream<Failure>) {
        stream.withLock { if $0 === ended { $0 = nil } }
    }

    /// The session is closing.
    public func stop() {
        stream.withLock { stream in
            stream?.stop()
            stream = nil
        }
    }
}

/// Packets of tracks other than the video, counted by kind over a session's life (its
/// containers and sources), for its status.
public final class IgnoredPackets: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    public init() {}

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

    public var snapshot: [String: Int] { counts.withLock { $0 } }
}

/// A session's container stream: one demuxer, on a thread of its own, over the bytes of the
/// pushes that carry one container, from the push that starts it until a flush, a push of
/// something else, or a new file (an MP4's `ftyp`, an EBML header). Its samples wait in a
/// bounded queue for the session's decode loop.
public final class ContainerStream<Failure: IngestFailure>: Sendable {
    let format: ContainerFormat
    let outputs: DemuxOutputQueue
    let feed: PushFeed<Failure>
    private let interrupt: DemuxInterrupt
    private let finished = Flag()

    /// Set once, read anywhere.
    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .releasing) }
        var isSet: Bool { value.load(ordering: .acquiring) }
    }

    public init(
        format: ContainerFormat, seekWindow: Int, queueBytes: Int, clock: any ServiceClock, ignored: IgnoredPackets,
        logger: Logger
    ) {
        self.format = format
        let outputs = DemuxOutputQueue(watermark: HighLowWatermark(capacity: queueBytes))
        let feed = PushFeed<Failure>(outputs: outputs)
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
                outcome = Self.run(demuxer, format: format, into: outputs, feed: feed, ignored: ignored, counted: &counted)
            } catch {
                outcome = error
            }
            if let outcome, outcome.code != .sourceEnded || !interrupt.isStopped {
                logger.debug("container stream ended", metadata: ["container": "\(format.rawValue)", "error": "\(outcome)"])
            }
            finished.set()
            outputs.finish(with: .ended(interrupt.isStopped ? nil : outcome))
        }
    }

    /// Reads samples until the input ends or the demuxer fails; returns the failure. A container
    /// that ends without one video sample read is one: its samples lie past its end, its sizes
    /// lie, or it holds none, and a push of it would otherwise be a 200 with nothing in it.
    private static func run(
        _ demuxer: Demuxer, format: ContainerFormat, into outputs: DemuxOutputQueue, feed: PushFeed<Failure>,
        ignored: IgnoredPackets, counted: inout [String: Int]
    ) -> ContainerError? {
        var samples = 0
        while true {
            let next = demuxer.next()
            ignored.add(demuxer.ignoredPackets, since: &counted)
            switch next {
            case .sample(let sample):
                samples += 1
                guard outputs.append(.sample(sample, receivedAt: feed.lastReceivedAt)) else { return nil }
            case .end:
                guard samples > 0 else {
                    return ContainerError(
                        .invalidContainer, "the \(format.rawValue) container ended without one video sample that could be read")
                }
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
