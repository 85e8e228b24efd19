import Containers
import Dispatch
import Synchronization
import VideoCoding

/// What a demuxing or pulling thread hands a session's decode loop, through a
/// `DemuxOutputQueue`.
enum DemuxOutput: Sendable {
    case sample(DemuxedSample, receivedAt: UInt64)
    case bytes(SlabBytes, receivedAt: UInt64)
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
/// a `WatermarkedQueue` whose producer is a thread, which blocks while the queue holds its
/// high watermark (the upload queue's size) until the loop drained it to the low one.
final class DemuxOutputQueue: Sendable {
    private let state: Mutex<WatermarkedQueue<DemuxOutput>>
    /// The blocked thread's side of the handshake: the producer's wake-up signals it.
    private let space = DispatchSemaphore(value: 0)

    init(watermark: HighLowWatermark) {
        var queue = WatermarkedQueue<DemuxOutput>(watermark: watermark)
        queue.setProducerWake { [space] in space.signal() }
        state = Mutex(queue)
    }

    /// Adds an output, waiting while the queue is full (one output larger than the watermark
    /// still goes in alone). False when the queue was closed: the thread should stop.
    @discardableResult
    func append(_ output: DemuxOutput) -> Bool {
        let weight = output.byteCount
        while true {
            let (added, wake) = state.withLock { queue -> (Bool?, WaitingSide.Wake?) in
                if queue.isEnded { return (false, nil) }
                guard queue.fits(weight: weight) else {
                    queue.producerWaits()
                    return (nil, nil)
                }
                return (true, queue.append(output, weight: weight))
            }
            if let added {
                wake?()
                return added
            }
            space.wait()
        }
    }

    /// The last output (`.ended`): it follows the others, and nothing follows it.
    func finish(with last: DemuxOutput) {
        let wake = state.withLock { queue -> WaitingSide.Wake? in
            guard !queue.isEnded else { return nil }
            return queue.end(with: last, droppingQueued: false)
        }
        wake?()
    }

    /// The next output, or nil (the wake-up then runs when one arrives).
    func take() -> DemuxOutput? {
        let (output, wake) = state.withLock { $0.take() }
        wake?()
        return output
    }

    /// Runs `wake` when an output arrives after `take` returned nil (at once if one waits).
    func setConsumerWake(_ wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.setConsumerWake(wake) }?()
    }

    /// Drops what waits and refuses what follows; a waiting thread goes on (to stop).
    func close() {
        state.withLock { $0.close() }?()
    }

    /// Bytes waiting now.
    var queuedBytes: Int { state.withLock { $0.queuedWeight } }
}
