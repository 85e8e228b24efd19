import Synchronization
import Timekeeping

/// When a producer must pause and when it may go on, as SwiftNIO's `HighLowWatermark`: the
/// producer stops once `high` bytes wait and is woken once the consumer has brought them down
/// to `low`, not at the first free byte, so a connection is not suspended and resumed for
/// every small piece.
public struct HighLowWatermark: Sendable, Equatable {
    public let low: Int
    public let high: Int

    public init(low: Int, high: Int) {
        precondition(low >= 0 && low < high, "a watermark needs 0 <= low < high")
        self.low = low
        self.high = high
    }

    /// Pause at `capacity` bytes, resume at half of it.
    public init(capacity: Int) {
        self.init(low: capacity / 2, high: max(capacity, 1))
    }
}

/// One upload's bytes on their way from the HTTP server to the session's ingest worker: the
/// only queue on that path, bounded by its watermark whatever the body's size.
///
/// Producer (the HTTP server, on its threads): `offer` each piece; a piece that does not fit
/// whole means "suspend the connection until the producer wake-up runs"; then `finish` or
/// `abort`. Consumer (the ingest worker, on its queue): `take` until a terminal event; the
/// consumer wake-up runs whenever something arrives after `take` returned nil. Either side
/// may stop the upload: the consumer with `refuse` (the session is gone, a limit was passed),
/// the producer with `abort` (the client left, the server stops).
public final class UploadQueue: Sendable {
    public enum Event: Sendable, Equatable {
        /// Bytes in arrival order, with the monotonic time they arrived.
        case bytes([UInt8], receivedAt: UInt64)
        /// The whole body arrived.
        case end
        /// Nothing more follows.
        case stopped(Stop)
    }

    public enum Stop: Sendable, Equatable {
        /// The connection ended before the body did. Bytes that arrived before are still delivered.
        case clientGone
        /// The server stopped listening (shutdown). Queued bytes are dropped: nothing more is decoded.
        case serverShutdown
        /// The upload was refused: past `maxBytes` (the bytes before the limit are delivered),
        /// or by the consumer (queued bytes are dropped).
        case refused(SessionError)
        /// The server answered before the body ended, for the consumer (which, having decided
        /// that answer, stopped listening already). Queued bytes are dropped.
        case answered
    }

    public enum Offer: Sendable, Equatable {
        /// This many leading bytes were taken. Fewer than offered: the queue is full (or not
        /// admitted yet); keep the rest and wait for the producer wake-up.
        case accepted(Int)
        /// The upload is over for the server: answer the client with this error now.
        case refused(SessionError)
    }

    private struct State {
        var chunks: [(bytes: [UInt8], receivedAt: UInt64)] = []
        var headIndex = 0
        var queuedBytes = 0
        var totalBytes = 0
        var highestQueued = 0
        var admitted: Bool
        var terminal: Event?
        var terminalDelivered = false
        /// Set once the producer can offer nothing more (finished, aborted or refused).
        var producerDone = false
        var refusal: SessionError?
        var producerWaiting = false
        var producerWake: (@Sendable () -> Void)?
        /// The consumer has nothing and wants to hear of the next event (true from the start).
        var consumerWaiting = true
        var consumerWake: (@Sendable () -> Void)?

        mutating func takeConsumerWake() -> (@Sendable () -> Void)? {
            guard consumerWaiting else { return nil }
            consumerWaiting = false
            return consumerWake
        }

        mutating func dropQueued() {
            chunks.removeAll()
            headIndex = 0
            queuedBytes = 0
        }
    }

    public let watermark: HighLowWatermark
    /// Largest body accepted; the offer that would pass it is refused with `bodyTooLarge`.
    public let maxBytes: Int?
    private let clock: any ServiceClock
    private let state: Mutex<State>
    /// Told (on the producer's thread, so it must be quick and not call back into the producer)
    /// when the queue itself refuses the body past `maxBytes`: that is when the upload ends for
    /// the server, whatever the consumer gets to later.
    private let onLimit: @Sendable (SessionError) -> Void

    /// `admitted: false` makes the queue take nothing until `admit()`: an upload that waits for
    /// an earlier one of the same session to be decoded holds no bytes.
    public init(
        watermark: HighLowWatermark, maxBytes: Int? = nil, admitted: Bool = true, clock: any ServiceClock,
        onLimit: @escaping @Sendable (SessionError) -> Void = { _ in }
    ) {
        self.watermark = watermark
        self.maxBytes = maxBytes
        self.clock = clock
        self.onLimit = onLimit
        state = Mutex(State(admitted: admitted))
    }

    // MARK: - Producer

    public func offer(_ bytes: UnsafeRawBufferPointer) -> Offer {
        let receivedAt = clock.uptime
        var wake: (@Sendable () -> Void)?
        var passedLimit = false
        let offer = state.withLock { state -> Offer in
            if let refusal = state.refusal { return .refused(refusal) }
            guard !state.producerDone else {
                return .refused(SessionError(.invalidParameter, "this upload has already ended"))
            }
            if let maxBytes, state.totalBytes + bytes.count > maxBytes {
                let refusal = SessionError(.bodyTooLarge, "request body exceeds \(maxBytes) bytes")
                state.refusal = refusal
                state.producerDone = true
                state.terminal = .stopped(.refused(refusal))
                wake = state.takeConsumerWake()
                passedLimit = true
                return .refused(refusal)
            }
            let room = state.admitted ? max(0, watermark.high - state.queuedBytes) : 0
            let taken = min(room, bytes.count)
            if taken < bytes.count { state.producerWaiting = true }
            guard taken > 0 else { return .accepted(0) }
            state.chunks.append((Array(UnsafeRawBufferPointer(rebasing: bytes[..<taken])), receivedAt))
            state.queuedBytes += taken
            state.totalBytes += taken
            state.highestQueued = max(state.highestQueued, state.queuedBytes)
            wake = state.takeConsumerWake()
            return .accepted(taken)
        }
        // The limit first: what it records must come before what the consumer does next.
        if passedLimit, case .refused(let refusal) = offer { onLimit(refusal) }
        wake?()
        return offer
    }

    /// The whole body arrived: the consumer gets `.end` after the queued bytes.
    public func finish() {
        terminate(.end, dropQueued: false)
    }

    /// The producer stops before the body ended. After `.serverShutdown` nothing more is
    /// decoded (the queued bytes are dropped); otherwise the bytes that arrived are still delivered.
    public func abort(_ reason: Stop) {
        terminate(.stopped(reason), dropQueued: reason == .serverShutdown || reason == .answered)
    }

    /// Runs `wake` (any thread) whenever a suspended producer may go on: room was made, the
    /// queue was admitted, or the upload was refused (the next `offer` says so).
    public func setProducerWake(_ wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.producerWake = wake }
    }

    // MARK: - Consumer

    /// The next event without waiting, or nil when nothing is queued yet (the consumer
    /// wake-up then runs when something arrives). After the terminal event, always nil.
    public func take() -> Event? {
        var wake: (@Sendable () -> Void)?
        let event = state.withLock { state -> Event? in
            if state.headIndex < state.chunks.count {
                let chunk = state.chunks[state.headIndex]
                state.chunks[state.headIndex].bytes = []
                state.headIndex += 1
                // Taken slots are dropped once they are half the array, so a queue that never
                // runs empty (decoder slightly slower than the network) does not grow.
                if state.headIndex == state.chunks.count {
                    state.chunks.removeAll(keepingCapacity: true)
                    state.headIndex = 0
                } else if state.headIndex >= 64 && state.headIndex * 2 >= state.chunks.count {
                    state.chunks.removeFirst(state.headIndex)
                    state.headIndex = 0
                }
                state.queuedBytes -= chunk.bytes.count
                if state.producerWaiting && state.queuedBytes <= watermark.low {
                    state.producerWaiting = false
                    wake = state.producerWake
                }
                return .bytes(chunk.bytes, receivedAt: chunk.receivedAt)
            }
            if let terminal = state.terminal, !state.terminalDelivered {
                state.terminalDelivered = true
                // Nothing follows: the wake-ups usually capture the other side, which holds
                // this queue; letting them go breaks that reference cycle.
                state.consumerWake = nil
                state.producerWake = nil
                return terminal
            }
            state.consumerWaiting = true
            return nil
        }
        wake?()
        return event
    }

    /// Runs `wake` (on whichever thread offers or terminates) when an event arrives after
    /// `take()` returned nil, and at once when one is already waiting.
    public func setConsumerWake(_ wake: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            guard !state.terminalDelivered else { return false }
            state.consumerWake = wake
            let pending = state.headIndex < state.chunks.count || state.terminal != nil
            if pending { state.consumerWaiting = false }
            return pending
        }
        if runNow { wake() }
    }

    /// Lets a queue made with `admitted: false` take bytes.
    public func admit() {
        let wake = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.admitted else { return nil }
            state.admitted = true
            guard state.producerWaiting else { return nil }
            state.producerWaiting = false
            return state.producerWake
        }
        wake?()
    }

    /// The consumer stops listening: queued bytes are dropped, the producer's next `offer`
    /// answers `.refused(error)` (a suspended producer is woken to learn it), and `take`
    /// delivers `.stopped(.refused(error))` if no terminal event was delivered yet.
    public func refuse(_ error: SessionError) {
        let wakes = state.withLock { state -> [@Sendable () -> Void] in
            guard state.refusal == nil, !state.terminalDelivered else { return [] }
            state.refusal = error
            state.producerDone = true
            state.dropQueued()
            state.terminal = .stopped(.refused(error))
            state.producerWaiting = false
            return [state.producerWake, state.takeConsumerWake()].compactMap { $0 }
        }
        for wake in wakes { wake() }
    }

    // MARK: - Facts

    /// True once the producer can add nothing more (finished, aborted or refused).
    public var isProducerDone: Bool { state.withLock { $0.producerDone } }
    /// True once the upload was refused (by the limit or the consumer).
    public var isRefused: Bool { state.withLock { $0.refusal != nil } }
    /// Bytes waiting right now.
    public var queuedBytes: Int { state.withLock { $0.queuedBytes } }
    /// The most bytes that ever waited at once (never above `watermark.high`).
    public var highestQueuedBytes: Int { state.withLock { $0.highestQueued } }
    /// Bytes accepted so far.
    public var totalBytes: Int { state.withLock { $0.totalBytes } }

    private func terminate(_ event: Event, dropQueued: Bool) {
        let wake = state.withLock { state -> (@Sendable () -> Void)? in
            guard state.terminal == nil else { return nil }
            state.producerDone = true
            state.terminal = event
            if dropQueued { state.dropQueued() }
            return state.takeConsumerWake()
        }
        wake?()
    }
}
