import FoundationEssentials
import Synchronization
import Timekeeping

/// The server's catch-up decoders (`--max-catchup-decoders`): a catch-up (an on-demand session
/// decoding from its last keyframe to the newest picture, or a picture from the past) decodes
/// as fast as the decoder allows, so only this many run at once, and the live sessions keep
/// the rest of the machine. Requests past the slots wait in arrival order, at most
/// `queueLimit` of them (`--max-catchup-queue`); past that a request is refused
/// (`catchup_queue_full`, 503 with `Retry-After` from the recent catch-up durations).
///
/// Owns: the slots, the queue and the duration estimate. Any thread; a granted job runs on the
/// thread that freed the slot (or the caller's), so it only hands its work over. Public because
/// the budget is the server's: anything that decodes a session's history, in this target or
/// an output of its own, takes its slot here.
public final class CatchUpPool: Sendable {
    public let slots: Int
    public let queueLimit: Int
    /// The decoders kept warm between catch-ups, bounded by the slots.
    public let warmDecoders: WarmDecoderPool
    private let clock: any ServiceClock
    private let state = Mutex(State())

    /// A job to start once it has a slot: it gets the permit, which frees the slot when
    /// released (or dropped).
    public typealias Job = @Sendable (CatchUpPermit) -> Void

    private struct State {
        var busy = 0
        var queue: [(ticket: UInt64, job: Job)] = []
        var nextTicket: UInt64 = 1
        /// Mean catch-up duration (nanoseconds), exponentially weighted, for `Retry-After`.
        var meanDuration: Double = 250_000_000
        var granted = 0
        var refused = 0
    }

    public struct Usage: Sendable, Equatable {
        /// Catch-ups decoding now.
        public var busy: Int
        /// Catch-ups waiting for a slot.
        public var queued: Int
        public var granted: Int
        public var refused: Int
    }

    public enum Admission: Sendable, Equatable {
        /// The job ran (it has a slot).
        case started
        /// The job waits for a slot; `ticket` cancels it.
        case queued(ticket: UInt64)
        /// The queue is full: `catchup_queue_full`, saying when to try again.
        case refused(SessionError)
    }

    public init(slots: Int, queueLimit: Int, clock: any ServiceClock) {
        self.slots = max(1, slots)
        self.queueLimit = max(0, queueLimit)
        self.clock = clock
        warmDecoders = WarmDecoderPool(limits: .forCatchUps(slots: self.slots), clock: clock)
    }

    public var usage: Usage {
        state.withLock { Usage(busy: $0.busy, queued: $0.queue.count, granted: $0.granted, refused: $0.refused) }
    }

    /// Runs `job` now when a slot is free, queues it, or refuses it.
    public func request(_ job: @escaping Job) -> Admission {
        let admission = state.withLock { state -> Admission in
            if state.busy < slots && state.queue.isEmpty {
                state.busy += 1
                state.granted += 1
                return .started
            }
            guard state.queue.count < queueLimit else {
                state.refused += 1
                // The queue ahead of it, and itself, over the slots that work through it.
                let waitNanoseconds = Double(state.queue.count + 1) * state.meanDuration / Double(slots)
                return .refused(refusal(retryAfter: max(1, Int((waitNanoseconds / 1e9).rounded(.up)))))
            }
            let ticket = state.nextTicket
            state.nextTicket += 1
            state.queue.append((ticket, job))
            return .queued(ticket: ticket)
        }
        if admission == .started { job(CatchUpPermit(pool: self, startedAt: clock.uptime)) }
        return admission
    }

    private func refusal(retryAfter: Int) -> SessionError {
        SessionError(
            .catchUpQueueFull,
            "every catch-up decoder is busy and \(queueLimit) catch-ups wait; try again in \(retryAfter) s",
            retryAfterSeconds: retryAfter)
    }

    /// A queued job is no longer wanted (its session ended). Returns false when it already started.
    @discardableResult
    public func cancel(_ ticket: UInt64) -> Bool {
        state.withLock { state in
            guard let position = state.queue.firstIndex(where: { $0.ticket == ticket }) else { return false }
            state.queue.remove(at: position)
            return true
        }
    }

    fileprivate func release(startedAt: UInt64) {
        let duration = Double(clock.uptime &- startedAt)
        let next = state.withLock { state -> Job? in
            state.meanDuration = 0.8 * state.meanDuration + 0.2 * duration
            guard !state.queue.isEmpty else {
                state.busy -= 1
                return nil
            }
            state.granted += 1
            return state.queue.removeFirst().job
        }
        next?(CatchUpPermit(pool: self, startedAt: clock.uptime))
    }
}

/// One slot of the `CatchUpPool`, held while a catch-up decodes; released once, explicitly or
/// when dropped.
public final class CatchUpPermit: Sendable {
    private let pool: CatchUpPool
    private let startedAt: UInt64
    private let released = Atomic<Bool>(false)

    fileprivate init(pool: CatchUpPool, startedAt: UInt64) {
        self.pool = pool
        self.startedAt = startedAt
    }

    public func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        pool.release(startedAt: startedAt)
    }

    deinit { release() }
}

/// How a catch-up ended, a wake's or a picture from the past's (`frametap_catchup_decodes_total`).
enum CatchUpResult: Equatable {
    /// It decoded `units` access units in `duration` nanoseconds, whether or not the picture asked
    /// for was held.
    case ok(duration: UInt64, units: Int)
    case failed
    case refused

    /// A catch-up that ended in `error`: no room in the decoder memory budget is a refusal
    /// for want of capacity, as a full catch-up queue is; anything else failed.
    init(endingIn error: SessionError) {
        self = error.code == .decoding(.decoderMemoryExceeded) ? .refused : .failed
    }

    /// `frametap_catchup_decodes_total`'s `result` label.
    var label: String {
        switch self {
        case .ok: "ok"
        case .failed: "failed"
        case .refused: "refused"
        }
    }
}
