import Decoding
import Dispatch
import FoundationEssentials
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

/// On-demand decoding: the decoder's life cycle, driven by requests for pictures and the clock.
///
///     idle ──demand──▶ queued ──slot──▶ catching_up ──newest unit──▶ live ──linger, nobody──▶ idle
///
/// - `demand` (a request for a picture, an MJPEG viewer, a multipart answer) wakes an idle
///   session: a slot of the shared `CatchUpPool` is asked for (refused past its queue: 503).
/// - With a slot, the decode queue opens a decoder and decodes from the last keyframe the
///   history holds (one GOP earlier for an open GOP) to its newest access unit, a few units per
///   turn so that the session's ingest keeps its pace, publishing only the newest picture at
///   the end; requests that waited for it then go on. The slot is freed once caught up.
/// - Live, each access unit is decoded as it arrives, while MJPEG viewers or long polls remain
///   and for `onDemandLinger` after the last request; then the decoder is released with its
///   memory (a check on the session's clock).
extension IngestWorker {
    /// Units a catch-up decodes per turn of the decode queue before it lets ingest run.
    static let catchUpUnitsPerTurn = 8
    /// A busy decoder is looked at again no sooner than this, even with a zero linger.
    static let shortestLingerCheck: UInt64 = 100_000_000

    var activity: DecoderActivity { state.withLock { $0.activity } }

    /// Units a catch-up decoder holds back beyond the stream's own buffering: one per extra
    /// frame thread, and the one being decoded.
    private var catchUpDelay: Int { max(1, context.configuration.catchUpDecoderThreads) }

    /// Someone wants pictures now. In on-demand mode an idle decoder is woken and `whenReady`
    /// is called (with nil, or the error that stopped the catch-up) when it has caught up; a live
    /// one just has its linger extended. In other modes it is always `.ready`.
    func demand(_ reason: DecodeDemand, whenReady: (@Sendable (SessionError?) -> Void)? = nil) -> DemandOutcome {
        let uptime = context.clock.uptime
        var token: UInt64?
        let decision = state.withLock { state -> (request: Bool, ready: Bool)? in
            guard !state.closed, state.facts.decodeMode == .onDemand else { return nil }
            state.lastDemand = uptime
            if state.activity == .live { return (false, true) }
            if let whenReady {
                token = state.nextWaiterToken
                state.nextWaiterToken += 1
                state.readyWaiters.append((token!, whenReady))
            }
            guard state.activity == .idle else { return (false, false) }
            state.activity = .queued
            return (true, false)
        }
        guard let decision else { return .ready }
        scheduleLingerCheck()
        if decision.ready { return .ready }
        guard decision.request else { return .waiting }
        let admission = context.services.catchUpPool.request { [weak self] permit in
            guard let self else { return permit.release() }
            decodeQueue.async { self.startCatchUp(permit, reason: reason) }
        }
        switch admission {
        case .started:
            return .waiting
        case .queued(let ticket):
            state.withLock { state in if state.activity == .queued { state.catchUpTicket = ticket } }
            return .waiting
        case .refused(let error):
            let others = state.withLock { state -> [(UInt64, @Sendable (SessionError?) -> Void)] in
                state.activity = .idle
                defer { state.readyWaiters = [] }
                return state.readyWaiters.filter { $0.0 != token }
            }
            context.metrics.recordCatchUp(kind: .wake, result: "refused")
            for (_, waiter) in others { waiter(error) }
            return .refused(error)
        }
    }

    /// An MJPEG viewer left: its interest lingers like a request's.
    func viewerLeft() {
        let uptime = context.clock.uptime
        let onDemand = state.withLock { state -> Bool in
            guard state.facts.decodeMode == .onDemand else { return false }
            state.lastDemand = uptime
            return true
        }
        if onDemand { scheduleLingerCheck() }
    }

    // MARK: - Catching up (decode queue)

    /// A catch-up slot was granted: open a decoder and start reading the history at its last
    /// keyframe (or go live at once when it holds none).
    private func startCatchUp(_ permit: CatchUpPermit, reason: DecodeDemand) {
        let proceed = state.withLock { state -> Bool in
            state.catchUpTicket = nil
            guard !state.closed, state.facts.decodeMode == .onDemand, state.activity == .queued else { return false }
            state.activity = .catchingUp
            return true
        }
        guard proceed else { return permit.release() }
        let started = context.clock.uptime
        let opened = decoder.withValue { slot -> Result<Int64?, DecodeError> in
            do throws(DecodeError) {
                try slot.openDecoder(keyframesOnly: false)
            } catch {
                return .failure(error)
            }
            guard let start = history.catchUpStart(delay: catchUpDelay) else { return .success(nil) }
            slot.beginCatchUp(
                CatchUpRun(replay: HistoryReplay(from: start), permit: permit, startedAt: started, answerAt: history.endIndex))
            return .success(start)
        }
        switch opened {
        case .failure(let error):
            permit.release()
            record(SessionError(error))
            context.metrics.recordCatchUp(kind: .wake, result: "failed")
            becomeIdle(answering: SessionError(error))
        case .success(nil):
            // Nothing held to start from: decode live from the next keyframe.
            permit.release()
            announceDecoderStarted(reason)
            goLive(waitsForKeyframe: true)
        case .success:
            announceDecoderStarted(reason)
            decodeQueue.async { [self] in catchUpTurn() }
        }
        refreshFacts()
    }

    /// One turn of the catch-up: a few units from the history, then the queue again (so the
    /// session's pushes are read meanwhile), until the newest unit is decoded.
    private func catchUpTurn() {
        switch catchUp(unitsAtMost: Self.catchUpUnitsPerTurn) {
        case nil: return
        case true?: finishCatchUp()
        case false?:
            // Nothing arrived while this turn decoded: caught up now, without another turn.
            if decoder.withValue({ $0.catchUp.map { $0.cursor >= history.endIndex } ?? false }) {
                return finishCatchUp()
            }
            answerOnceCaughtUpToTheRequests()
            decodeQueue.async { [self] in catchUpTurn() }
        }
    }

    /// The catch-up has decoded what was newest when it started: the newest picture so far is
    /// published and the requests waiting are answered now; the units that came meanwhile are
    /// decoded in the next turns (they are a few picture intervals' worth).
    private func answerOnceCaughtUpToTheRequests() {
        let best = decoder.withValue { slot -> PublishedFrame?? in
            guard var run = slot.catchUp, !run.answered, run.cursor >= run.answerAt else { return nil }
            run.answered = true
            slot.catchUp = run
            return .some(run.best)
        }
        guard let best else { return }
        if let best { publish(best) }
        answerReadyWaiters()
    }

    /// Decodes up to `unitsAtMost` units of the catch-up. Returns whether it has caught up, nil
    /// when no catch-up runs.
    private func catchUp(unitsAtMost: Int) -> Bool? {
        let turn = decoder.withValue { $0.catchUp(unitsAtMost: unitsAtMost, delay: catchUpDelay) }
        guard let turn else { return nil }
        if let error = turn.errors.last { record(SessionError(error)) }
        return turn.caughtUp
    }

    /// Caught up: the newest picture is published, the slot freed, the waiting requests go on,
    /// and from now on each access unit is decoded as it arrives.
    private func finishCatchUp() {
        guard let run = decoder.withValue({ $0.endCatchUp() }) else { return }
        if let best = run.best { publish(best) }
        let duration = Duration.nanoseconds(Int64(clamping: context.clock.uptime &- run.startedAt))
        context.metrics.recordCatchUp(kind: .wake, result: "ok", duration: duration, units: run.replay.unitsFed)
        context.logger.debug(
            "caught up", metadata: ["units": "\(run.replay.unitsFed)", "ms": "\(duration.nanoseconds / 1_000_000)"])
        goLive(waitsForKeyframe: run.lostItsPlace)
        refreshFacts()
    }

    /// The decoder decodes each unit as it arrives from now on; waiting requests go on.
    private func goLive(waitsForKeyframe: Bool) {
        decoder.withValue { $0.startLive(waitsForKeyframe: waitsForKeyframe) }
        answerReadyWaiters { state in
            if state.activity == .catchingUp || state.activity == .queued { state.activity = .live }
        }
        scheduleLingerCheck()
    }

    /// No decoder (it failed to open, or the pipeline changed): waiting requests go on with
    /// what there is, or get `error`.
    private func becomeIdle(answering error: SessionError?) {
        answerReadyWaiters(error) { $0.activity = .idle }
    }

    /// Hands every waiting request `error` (nil: go on), after `update` changed the state in
    /// the same lock, so that no request can start waiting in between and be missed.
    private func answerReadyWaiters(_ error: SessionError? = nil, updating update: (inout State) -> Void = { _ in }) {
        let waiters = state.withLock { state in
            update(&state)
            defer { state.readyWaiters = [] }
            return state.readyWaiters
        }
        for (_, waiter) in waiters { waiter(error) }
    }

    // MARK: - Linger and release

    /// Checks, on the session's clock, whether the decoder is still wanted: at `onDemandLinger`
    /// after the last demand, or sooner again while viewers or a catch-up keep it busy.
    func scheduleLingerCheck() {
        let linger = context.configuration.onDemandLinger.nanoseconds
        let due = state.withLock { state -> UInt64? in
            guard !state.closed, state.facts.decodeMode == .onDemand, state.activity != .idle, state.lingerDue == nil
            else { return nil }
            let (due, overflow) = state.lastDemand.addingReportingOverflow(linger)
            state.lingerDue = overflow ? .max : due
            return state.lingerDue
        }
        guard let due else { return }
        context.clock.schedule(at: due) { [weak self] in self?.lingerCheck() }
    }

    private func lingerCheck() {
        let watched = !viewers.isEmpty
        let now = context.clock.uptime
        let linger = context.configuration.onDemandLinger.nanoseconds
        enum Decision { case nothing, later(UInt64), release }
        let decision = state.withLock { state -> Decision in
            state.lingerDue = nil
            guard !state.closed, state.facts.decodeMode == .onDemand, state.activity != .idle else { return .nothing }
            // Still watched, answering a push, or not decoding live yet: look again a linger later.
            if watched || state.jobs.contains(where: \.isMultipart) || state.activity != .live {
                state.lastDemand = max(state.lastDemand, now)
                return .later(now + max(linger, Self.shortestLingerCheck))
            }
            if now &- state.lastDemand < linger { return .later(state.lastDemand + linger) }
            state.activity = .idle
            return .release
        }
        switch decision {
        case .nothing: break
        case .later(let due):
            let scheduled = state.withLock { state -> Bool in
                guard state.lingerDue == nil else { return false }
                state.lingerDue = due
                return true
            }
            if scheduled { context.clock.schedule(at: due) { [weak self] in self?.lingerCheck() } }
        case .release:
            decodeQueue.async { [self] in releaseDecoder(reason: "idle") }
        }
    }

    /// Frees the decoder and its memory (the catch-up that a new demand queued meanwhile
    /// opens its own after this, on this queue).
    private func releaseDecoder(reason: String) {
        guard decoder.withValue({ $0.releaseDecoder() }) else { return }
        context.events.emit(.decoderStopped) { $0.reason = reason }
        context.logger.debug("decoder released", metadata: ["reason": "\(reason)"])
        refreshFacts()
    }

    private func announceDecoderStarted(_ reason: DecodeDemand) {
        context.events.emit(.decoderStarted) { $0.reason = reason.rawValue }
        context.logger.debug("decoder started", metadata: ["reason": "\(reason.rawValue)"])
    }

    // MARK: - Pushes, modes, pipelines, close

    /// A multipart answer begins (decode queue): its pictures must be decoded as its push
    /// arrives, so an on-demand session is made live now: a catch-up under way is finished in
    /// this turn; an idle decoder opens and starts at the push's first keyframe.
    func decodeForMultipartAnswer() {
        let now = context.clock.uptime
        let activity = state.withLock { state -> DecoderActivity? in
            guard state.facts.decodeMode == .onDemand else { return nil }
            state.lastDemand = now
            return state.activity
        }
        switch activity {
        case nil, .live?: return
        case .catchingUp?:
            while catchUp(unitsAtMost: .max) == false {}
            finishCatchUp()
        case .idle?, .queued?:
            let ticket = state.withLock { state -> UInt64? in
                state.activity = .catchingUp
                defer { state.catchUpTicket = nil }
                return state.catchUpTicket
            }
            if let ticket { context.services.catchUpPool.cancel(ticket) }
            let failure = decoder.withValue { slot -> DecodeError? in
                do throws(DecodeError) {
                    try slot.openDecoder(keyframesOnly: false)
                    return nil
                } catch {
                    return error
                }
            }
            if let failure {
                record(SessionError(failure))
                becomeIdle(answering: nil)
            } else {
                announceDecoderStarted(.multipartAnswer)
                goLive(waitsForKeyframe: true)
            }
            refreshFacts()
        }
    }

    /// `PUT {"decode": ...}` changed the mode (decode queue). To on-demand: the decoder is
    /// released. From on-demand: a decoder opens now (if none runs) and starts at the next
    /// keyframe. Between keyframes and the others, what ingest hands on changes, so the next GOP
    /// of the history does not follow the last.
    func modeChanged(from previous: DecodeMode, to mode: DecodeMode) {
        if previous == .keyframes || mode == .keyframes { history.breakContinuity() }
        if mode == .onDemand {
            answerReadyWaiters { $0.activity = .idle }
            releaseDecoder(reason: "mode_changed")
            return
        }
        guard previous == .onDemand else { return }
        let ticket = state.withLock { state -> UInt64? in
            defer { state.catchUpTicket = nil }
            return state.catchUpTicket
        }
        if let ticket { context.services.catchUpPool.cancel(ticket) }
        let opened = decoder.withValue { slot -> Result<Bool, DecodeError> in
            guard slot.stream != nil else { return .success(false) }
            slot.endCatchUp()
            if !slot.hasDecoder {
                do throws(DecodeError) {
                    try slot.openDecoder(keyframesOnly: mode == .keyframes)
                } catch {
                    return .failure(error)
                }
                slot.startLive(waitsForKeyframe: true)
                return .success(true)
            }
            slot.setMode(mode)
            slot.startLive(waitsForKeyframe: true)
            return .success(false)
        }
        switch opened {
        case .failure(let error): record(SessionError(error))
        case .success(true): announceDecoderStarted(.modeChanged)
        case .success(false): break
        }
        answerReadyWaiters { $0.activity = .live }
    }

    /// A new pipeline took over (decode queue). An on-demand one has no decoder yet: a catch-up
    /// under way ends, and the next request wakes the new one.
    func pipelineReplaced() {
        guard state.withLock({ $0.facts.decodeMode == .onDemand }) else { return }
        decoder.withValue { $0.endCatchUp() }
        becomeIdle(answering: nil)
    }

    /// The session closes: a queued catch-up leaves the pool's queue and waiting requests are
    /// told (the decode queue frees the decoder and any slot with it).
    func endOnDemandDecoding() {
        let (ticket, waiters) = state.withLock { state in
            defer {
                state.catchUpTicket = nil
                state.readyWaiters = []
            }
            return (state.catchUpTicket, state.readyWaiters)
        }
        if let ticket { context.services.catchUpPool.cancel(ticket) }
        let gone = SessionError(.sessionNotFound, "the session was deleted")
        for (_, waiter) in waiters { waiter(gone) }
    }
}
