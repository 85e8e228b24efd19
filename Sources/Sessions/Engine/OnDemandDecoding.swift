import Decoding
import Dispatch
import Synchronization
import Timekeeping

/// What a request that asked for decoding does next.
enum DemandOutcome: Sendable {
    /// Go on now: the decoder runs (or none is needed in this mode).
    case ready
    /// A catch-up runs first; the waiter passed along is called when it ended.
    case waiting
    /// No catch-up slot and the pool's queue is full (`catchup_queue_full`).
    case refused(SessionError)
}

/// Runs a session's `DecoderDemand`: events come in from any thread (requests, viewers, the
/// pool, the clock) and from the decode queue (the decoder, the catch-up, the loop), are applied
/// to the machine under one lock, and the actions it returns run here, outside the lock: the
/// pool is asked, the decoder opened, caught up, made live or released on the decode queue, the
/// requests waiting answered, the linger checked on the clock. The machine decides; this only
/// does what it says, and tells it how that went (an outcome is the next event).
///
/// Owns: the machine and the closures of the requests waiting for it.
final class OnDemandDecoding: Sendable {
    typealias Action = DecoderDemand.Action

    private struct State {
        var machine: DecoderDemand
        /// The requests waiting for a catch-up, by the token the machine knows them by.
        var waiting: [UInt64: @Sendable (SessionError?) -> Void] = [:]
        var nextToken: UInt64 = 1
    }

    /// Units a catch-up decodes per turn of the decode queue before it lets ingest run.
    static let catchUpUnitsPerTurn = 8

    private let state: Mutex<State>
    private let decodeQueue: DispatchQueue
    private let decoder: QueueBound<SessionDecoder>
    private let context: SessionContext
    private let reporter: DecodeReporter
    private let newest: NewestPicture
    /// Whether a multipart answer is under way: like a viewer, it keeps the decoder.
    private let answersMultipart: @Sendable () -> Bool
    /// Whether requests wait for the first picture of an on-demand connection: they keep it too.
    private let awaitsSource: @Sendable () -> Bool

    init(
        mode: DecodeMode, decodeQueue: DispatchQueue, decoder: QueueBound<SessionDecoder>, context: SessionContext,
        reporter: DecodeReporter, newest: NewestPicture, answersMultipart: @escaping @Sendable () -> Bool,
        awaitsSource: @escaping @Sendable () -> Bool
    ) {
        state = Mutex(State(machine: DecoderDemand(mode: mode, linger: context.configuration.onDemandLinger)))
        self.decodeQueue = decodeQueue
        self.decoder = decoder
        self.context = context
        self.reporter = reporter
        self.newest = newest
        self.answersMultipart = answersMultipart
        self.awaitsSource = awaitsSource
    }

    var activity: DecoderActivity { state.withLock { $0.machine.activity } }

    /// Units a catch-up decoder holds back beyond the stream's own buffering: one per extra
    /// frame thread, and the one being decoded.
    private var catchUpDelay: Int { max(1, context.configuration.catchUpDecoderThreads) }

    // MARK: - Events

    /// Someone wants pictures now. On demand, an idle decoder is woken and `whenReady` is called
    /// (with nil, or the error that stopped the catch-up) when it has caught up; a live one has
    /// its linger extended. In other modes it is always `.ready`.
    func demand(_ reason: DecodeDemand, whenReady: (@Sendable (SessionError?) -> Void)? = nil) -> DemandOutcome {
        let now = context.clock.uptime
        let (token, actions, atOnce) = state.withLock { state in
            var token: UInt64?
            if whenReady != nil {
                token = state.nextToken
                state.nextToken += 1
            }
            let actions = state.machine.demanded(reason, waiter: token, at: now)
            if let token, let whenReady, state.machine.waiters.contains(token) { state.waiting[token] = whenReady }
            return (token, actions, state.machine.answersAtOnce)
        }
        let refusal = run(actions, caller: token)
        if let refusal { return .refused(refusal) }
        return atOnce ? .ready : .waiting
    }

    /// An MJPEG viewer left: its interest lingers like a request's.
    func viewerLeft() {
        let now = context.clock.uptime
        apply { $0.viewerLeft(at: now) }
    }

    /// A multipart answer begins (decode queue): an on-demand decoder goes live now.
    func multipartAnswerBegan() {
        let now = context.clock.uptime
        apply { $0.multipartAnswerBegan(at: now) }
    }

    /// A multipart answer ended: its interest lingers like a request's.
    func multipartAnswerEnded() {
        let now = context.clock.uptime
        apply { $0.multipartAnswerEnded(at: now) }
    }

    /// `PUT {"decode": ...}` changed the mode (decode queue).
    func modeChanged(to mode: DecodeMode) {
        apply { $0.modeChanged(to: mode) }
    }

    /// A new back end took over the stream (decode queue).
    func backEndReplaced() {
        apply { $0.backEndReplaced() }
    }

    /// The session closes: a queued catch-up leaves the pool's queue and waiting requests are
    /// told (the decode queue frees the decoder and any slot with it).
    func close() {
        apply { $0.closed() }
    }

    /// A catch-up slot was granted (decode queue): held by the session's decoder, which gives
    /// it back when the machine says so.
    private func slotGranted(_ permit: CatchUpPermit) {
        decoder.withValue { $0.holdCatchUpSlot(permit) }
        let now = context.clock.uptime
        apply { $0.slotGranted(at: now) }
    }

    /// MJPEG viewers, a multipart answer or requests waiting for an on-demand source still want pictures.
    private func isWatched() -> Bool {
        !newest.viewers.isEmpty || answersMultipart() || awaitsSource()
    }

    /// The linger check fell due (decode queue).
    private func lingerCheckDue() {
        let watched = isWatched()
        let now = context.clock.uptime
        apply { $0.lingerCheckDue(watched: watched, at: now) }
    }

    /// One turn of the catch-up (decode queue): a few units from the history; the next turn
    /// is queued behind what arrived meanwhile, so the session's pushes are read meanwhile.
    private func catchUpTurn() {
        guard let turn = decoder.withValue({ $0.catchUp(unitsAtMost: Self.catchUpUnitsPerTurn, delay: catchUpDelay) })
        else { return }
        if let error = turn.errors.last { reporter.record(SessionError(error)) }
        progressed(caughtUp: turn.caughtUp)
    }

    /// Ends the catch-up when it can give nothing (`CatchUpRun.failure`); returns whether it did.
    private func endCatchUpIfItFailed() -> Bool {
        guard let failure = decoder.withValue({ $0.catchUp?.failure }) else { return false }
        let watched = isWatched()
        apply { $0.catchUpFailed(SessionError(failure), watched: watched) }
        return true
    }

    private func progressed(caughtUp: Bool) {
        if endCatchUpIfItFailed() { return }
        switch decoder.withValue({ $0.catchUpProgress(caughtUp: caughtUp) }) {
        case nil: break
        case .reading?: apply { $0.catchUpProgressed() }
        case .answering?: apply { $0.catchUpReachedRequests() }
        case .done(let lostItsPlace, let units)?:
            let now = context.clock.uptime
            apply { $0.catchUpDone(lostItsPlace: lostItsPlace, units: units, at: now) }
        }
    }

    // MARK: - Actions

    private func apply(_ event: (inout DecoderDemand) -> [Action]) {
        run(state.withLock { event(&$0.machine) })
    }

    /// Runs `actions` in order; an action's outcome, fed back as an event, runs its own actions
    /// before the next. Returns the pool's refusal, if it refused `caller`'s catch-up.
    @discardableResult
    private func run(_ actions: [Action], caller: UInt64? = nil) -> SessionError? {
        var refusal: SessionError?
        for action in actions {
            switch action {
            case .requestSlot:
                refusal = requestSlot(caller: caller) ?? refusal
            case .cancelQueuedSlot(let ticket):
                context.services.catchUpPool.cancel(ticket)
            case .releaseSlot:
                decoder.withValue { $0.releaseCatchUpSlot() }
            case .openDecoder(let opening):
                openDecoder(opening)
            case .continueCatchUp:
                decodeQueue.async { [self] in catchUpTurn() }
            case .finishCatchUpNow:
                var caughtUp = false
                while !caughtUp, let turn = decoder.withValue({ $0.catchUp(unitsAtMost: .max, delay: catchUpDelay) }) {
                    if let error = turn.errors.last { reporter.record(SessionError(error)) }
                    caughtUp = turn.caughtUp
                }
                if endCatchUpIfItFailed() { continue }
                // Without a catch-up left to finish (never expected), live decoding starts at a keyframe.
                let progress = decoder.withValue { $0.catchUpProgress(caughtUp: true) } ?? .done(lostItsPlace: true, units: 0)
                if case .done(let lostItsPlace, let units) = progress {
                    let now = context.clock.uptime
                    apply { $0.catchUpDone(lostItsPlace: lostItsPlace, units: units, at: now) }
                }
            case .publishCatchUpPicture:
                if let best = decoder.withValue({ $0.catchUp?.best }) { newest.publish(best) }
            case .endCatchUp(let publishing):
                let run = decoder.withValue { $0.endCatchUp() }
                if publishing, let best = run?.best { newest.publish(best) }
            case .goLive(let waitsForKeyframe):
                decoder.withValue { $0.startLive(waitsForKeyframe: waitsForKeyframe) }
            case .releaseDecoder(let reason):
                releaseDecoder(reason: reason)
            case .answer(let tokens, let error):
                let waiting = state.withLock { state in tokens.compactMap { state.waiting.removeValue(forKey: $0) } }
                for waiter in waiting { waiter(error) }
            case .scheduleLingerCheck(let due):
                // The clock's timer only hands the check over to the decode queue, which owns the decoder.
                context.clock.schedule(at: due) { [weak self] in
                    guard let self else { return }
                    decodeQueue.async { [weak self] in self?.lingerCheckDue() }
                }
            case .announceDecoderStarted(let reason):
                context.events.emit(.decoderStarted) { $0.reason = reason.rawValue }
                context.logger.debug("decoder started", metadata: ["reason": "\(reason.rawValue)"])
            case .recordCatchUp(let result):
                record(result)
            case .recordError(let error):
                reporter.record(error)
            }
        }
        return refusal
    }

    /// Asks the pool for a slot; a grant comes to the decode queue. Returns its refusal.
    private func requestSlot(caller: UInt64?) -> SessionError? {
        let admission = context.services.catchUpPool.request { [weak self] permit in
            guard let self else { return permit.release() }
            decodeQueue.async { self.slotGranted(permit) }
        }
        switch admission {
        case .started:
            return nil
        case .queued(let ticket):
            apply { $0.slotQueued(ticket: ticket) }
            return nil
        case .refused(let error):
            // The caller is told by its demand's answer, not by its waiter.
            if let caller { state.withLock { _ = $0.waiting.removeValue(forKey: caller) } }
            apply { $0.slotRefused(error, caller: caller) }
            return error
        }
    }

    /// Opens a decoder (decode queue), and for a catch-up begins it at the history's last
    /// keyframe; tells the machine how that went.
    private func openDecoder(_ opening: DecoderDemand.Opening) {
        let opened = decoder.withValue { slot -> Result<Bool, DecodeError> in
            do throws(DecodeError) {
                switch opening {
                case .catchUp:
                    try slot.openDecoder(keyframesOnly: false)
                    return .success(slot.beginCatchUp(delay: catchUpDelay))
                case .live(let mode):
                    // A new back end that took over in the same change may have opened one already.
                    if !slot.hasDecoder { try slot.openDecoder(keyframesOnly: mode == .keyframes) }
                    return .success(false)
                }
            } catch {
                return .failure(error)
            }
        }
        switch opened {
        case .success(let catchingUp): apply { $0.decoderOpened(catchingUp: catchingUp) }
        case .failure(let error): apply { $0.decoderFailedToOpen(SessionError(error)) }
        }
        refreshFacts()
    }

    /// Frees the decoder and its memory (decode queue); a demand that came meanwhile opens its
    /// own after this, on this queue.
    private func releaseDecoder(reason: String) {
        guard decoder.withValue({ $0.releaseDecoder() }) else { return }
        context.events.emit(.decoderStopped) { $0.reason = reason }
        context.logger.debug("decoder released", metadata: ["reason": "\(reason)"])
        refreshFacts()
    }

    private func refreshFacts() {
        if let snapshot = decoder.withValue({ $0.snapshot() }) { reporter.refresh(snapshot) }
    }

    private func record(_ result: CatchUpResult) {
        context.metrics.recordCatchUp(kind: .wake, result)
        if case .ok(let nanoseconds, let units) = result {
            context.logger.debug("caught up", metadata: ["units": "\(units)", "ms": "\(nanoseconds / 1_000_000)"])
        }
    }
}
