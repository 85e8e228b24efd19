import Synchronization
import Timekeeping
import VideoCoding

/// One upload's bytes on their way from the HTTP server to the session's decode loop: the
/// only queue on that path, a `WatermarkedQueue` bounded whatever the body's size.
///
/// Producer (the HTTP server, on its threads): `offer` each piece; a piece that does not fit
/// whole means "suspend the connection until the producer wake-up runs"; then `finish` or
/// `abort`. Consumer (the decode loop, on its queue): `take` until a terminal event; the
/// consumer wake-up runs whenever something arrives after `take` returned nil. Either side
/// may stop the upload: the consumer with `refuse` (the session is gone, a limit was passed),
/// the producer with `abort` (the client left, the server stops).
public final class UploadQueue<Failure: IngestFailure>: Sendable {
    public enum Event: Sendable, Equatable {
        /// Bytes in arrival order, with the monotonic time they arrived: where they landed, in
        /// the pool's slabs, which the units cut from them share with the session's history.
        case bytes(SlabBytes, receivedAt: UInt64)
        /// The whole body arrived.
        case end
        /// Nothing more follows.
        case stopped(IngestStop<Failure>)
    }

    public enum Offer: Sendable, Equatable {
        /// This many leading bytes were taken. Fewer than offered: the queue is full (or not
        /// admitted yet); keep the rest and wait for the producer wake-up.
        case accepted(Int)
        /// The upload is over for the server: answer the client with this error now.
        case refused(Failure)
    }

    private struct State {
        /// `.bytes` events, weighing their bytes; the terminal event is the queue's end.
        var queue: WatermarkedQueue<Event>
        var totalBytes = 0
        var admitted: Bool
        /// Set once the producer can offer nothing more (finished, aborted or refused).
        var producerDone = false
        var refusal: Failure?
    }

    public let watermark: HighLowWatermark
    /// Largest body accepted; the offer that would pass it is refused with `body_too_large`.
    public let maxBytes: Int?
    private let clock: any ServiceClock
    /// Where offered bytes land: each byte is copied once, into a slab of the pool (a session's
    /// pushes share one, see `SlabLanding`).
    private let landing: SlabLanding
    private let state: Mutex<State>
    /// Told (on the producer's thread, so it must be quick and not call back into the producer)
    /// when the queue itself refuses the body past `maxBytes`: that is when the upload ends for
    /// the server, whatever the consumer gets to later.
    private let onLimit: @Sendable (Failure) -> Void

    /// `admitted: false` makes the queue take nothing until `admit()`: an upload that waits for
    /// an earlier one of the same session to be decoded holds no bytes.
    public init(
        watermark: HighLowWatermark, maxBytes: Int? = nil, admitted: Bool = true, clock: any ServiceClock,
        landing: SlabLanding? = nil, onLimit: @escaping @Sendable (Failure) -> Void = { _ in }
    ) {
        self.watermark = watermark
        self.maxBytes = maxBytes
        self.clock = clock
        self.onLimit = onLimit
        self.landing = landing ?? SlabLanding()
        state = Mutex(State(queue: WatermarkedQueue(watermark: watermark), admitted: admitted))
    }

    // MARK: - Producer

    public func offer(_ bytes: UnsafeRawBufferPointer) -> Offer {
        let receivedAt = clock.uptime
        var wake: WaitingSide.Wake?
        var passedLimit = false
        let offer = state.withLock { state -> Offer in
            if let refusal = state.refusal { return .refused(refusal) }
            guard !state.producerDone else {
                return .refused(Failure(IngestError(.uploadEnded, "this upload has already ended")))
            }
            if let maxBytes, state.totalBytes + bytes.count > maxBytes {
                let refusal = Failure(IngestError(.bodyTooLarge, "request body exceeds \(maxBytes) bytes"))
                state.refusal = refusal
                state.producerDone = true
                wake = state.queue.end(with: .stopped(.refused(refusal)), droppingQueued: false)
                passedLimit = true
                return .refused(refusal)
            }
            let room = state.admitted ? state.queue.room : 0
            let taken = min(room, bytes.count)
            if taken < bytes.count { state.queue.producerWaits() }
            guard taken > 0 else { return .accepted(0) }
            var rest = UnsafeRawBufferPointer(rebasing: bytes[..<taken])
            while !rest.isEmpty {
                let piece = landing.landSome(rest)
                rest = UnsafeRawBufferPointer(rebasing: rest[piece.count...])
                if let woken = state.queue.append(.bytes(piece, receivedAt: receivedAt), weight: piece.count) { wake = woken }
            }
            state.totalBytes += taken
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
    public func abort(_ reason: IngestStop<Failure>) {
        terminate(.stopped(reason), dropQueued: reason == .serverShutdown || reason == .answered)
    }

    /// Runs `wake` (any thread) whenever a suspended producer may go on: room was made, the
    /// queue was admitted, or the upload was refused (the next `offer` says so).
    public func setProducerWake(_ wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.queue.setProducerWake(wake) }
    }

    // MARK: - Consumer

    /// The next event without waiting, or nil when nothing is queued yet (the consumer
    /// wake-up then runs when something arrives). After the terminal event, always nil.
    public func take() -> Event? {
        let (event, wake) = state.withLock { $0.queue.take() }
        wake?()
        return event
    }

    /// Runs `wake` (on whichever thread offers or terminates) when an event arrives after
    /// `take()` returned nil, and at once when one is already waiting.
    public func setConsumerWake(_ wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.queue.setConsumerWake(wake) }?()
    }

    /// Lets a queue made with `admitted: false` take bytes.
    public func admit() {
        let wake = state.withLock { state -> WaitingSide.Wake? in
            guard !state.admitted else { return nil }
            state.admitted = true
            return state.queue.wakeProducer()
        }
        wake?()
    }

    /// The consumer stops listening: the producer's next `offer` answers `.refused(error)` (a
    /// suspended producer is woken to learn it), and `take` delivers `.stopped(.refused(error))`
    /// if no terminal event was delivered yet: at once when `droppingQueued` (the default), after
    /// the bytes already queued otherwise. Returns false when the upload had already ended.
    @discardableResult
    public func refuse(_ error: Failure, droppingQueued: Bool = true) -> Bool {
        var refused = false
        let wakes = state.withLock { state -> [WaitingSide.Wake] in
            guard state.refusal == nil, !state.queue.isOver, !(state.producerDone && !droppingQueued) else { return [] }
            state.refusal = error
            state.producerDone = true
            refused = true
            let consumer = state.queue.end(with: .stopped(.refused(error)), droppingQueued: droppingQueued)
            return [state.queue.interruptProducer(), consumer].compactMap { $0 }
        }
        for wake in wakes { wake() }
        return refused
    }

    // MARK: - Facts

    /// True once the producer can add nothing more (finished, aborted or refused).
    public var isProducerDone: Bool { state.withLock { $0.producerDone } }
    /// True once the upload was refused (by the limit or the consumer).
    public var isRefused: Bool { state.withLock { $0.refusal != nil } }
    /// Bytes waiting right now.
    public var queuedBytes: Int { state.withLock { $0.queue.queuedWeight } }
    /// The most bytes that ever waited at once (never above `watermark.high`).
    public var highestQueuedBytes: Int { state.withLock { $0.queue.highestWeight } }
    /// Bytes accepted so far.
    public var totalBytes: Int { state.withLock { $0.totalBytes } }

    private func terminate(_ event: Event, dropQueued: Bool) {
        let wake = state.withLock { state -> WaitingSide.Wake? in
            guard !state.queue.isEnded else { return nil }
            state.producerDone = true
            return state.queue.end(with: event, droppingQueued: dropQueued)
        }
        wake?()
    }
}

/// A live push: its bytes are decoded as they arrive.
extension UploadQueue: IngestSource {
    public func next() -> IngestEvent<Failure>? { take().map(IngestEvent.init) }
    public func close() {}
}

extension IngestEvent {
    init(_ event: UploadQueue<Failure>.Event) {
        switch event {
        case .bytes(let bytes, let receivedAt): self = .bytes(bytes, receivedAt: receivedAt)
        case .end: self = .end
        case .stopped(let stop): self = .stopped(stop)
        }
    }
}
