import Containers
import Dispatch
import Synchronization
import VideoCoding

/// A container stream's input: the bytes of its pushes, one push after another, as a
/// demuxer reads them on its thread. Between pushes the demuxer waits here for the next one
/// (a session's stream continues across pushes); a flush, a push of something else, or a push
/// that broke off ends the input, and the demuxer drains what it holds.
final class PushFeed<Failure: IngestFailure>: DemuxByteInput, Sendable {
    private let state = Mutex(State())
    private let signal = DispatchSemaphore(value: 0)
    private let outputs: DemuxOutputQueue

    private struct State {
        var push: (any IngestSource<Failure>)?
        /// Bytes taken from the push that the demuxer has not read yet.
        var pending = SlabBytes.empty
        var pendingOffset = 0
        /// The input ends after the current push (flush).
        var endAfterPush = false
        /// No push follows: the demuxer gets the end.
        var ending = false
        var stopped = false
        /// When the newest bytes read arrived.
        var lastReceivedAt: UInt64 = 0
        /// How the last push ended, for its answer once the demuxer drained (flush, break-off).
        var finalOutcome: IngestEvent<Failure>?
    }

    init(outputs: DemuxOutputQueue) {
        self.outputs = outputs
    }

    /// The next push's bytes follow (`prefix` first: what was read to tell what it is).
    /// `endsStream`: the push flushes; the input ends with it.
    func attach(_ push: any IngestSource<Failure>, prefix: [UInt8], receivedAt: UInt64, endsStream: Bool) {
        state.withLock { state in
            state.push = push
            state.pending = prefix.isEmpty ? .empty : SlabBytes(prefix)
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
    var finalOutcome: IngestEvent<Failure>? { state.withLock { $0.finalOutcome } }

    /// What `read` does next, decided under the lock.
    private enum ReadStep {
        case done(DemuxInputRead)
        case poll(any IngestSource<Failure>)
        case wait
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> DemuxInputRead {
        while true {
            let step = state.withLock { state -> ReadStep in
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
