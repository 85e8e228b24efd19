/// Why pictures were asked for: what wakes an on-demand decoder (`decoder.started` events say
/// it) or connects an on-demand pull.
enum DecodeDemand: String, Sendable {
    case pictureRequest = "picture_request"
    case mjpegViewer = "mjpeg_viewer"
    case multipartAnswer = "multipart_answer"
    case modeChanged = "mode_changed"
}

/// The life of a session's decoder on demand, as a value: what it is doing, who waits for it,
/// and what happens next. Each event returns the actions that follow from it, which
/// `OnDemandDecoding` runs (the way async-http-client's connection pool state machine returns
/// actions for its executor); the machine itself holds no thread, lock, closure or clock: times
/// come in with the events, and a request waiting for a catch-up is a token.
///
///     idle ──demanded──▶ queued ──slot granted──▶ catching up ──done──▶ live ◀──demanded──┐
///       ▲                  │ refused                                       │ nobody watches │
///       │◀─────────────────┘                                               ▼                │
///       └──────────────────────────────── linger elapsed ◀──────────── lingering ──────────┘
///
/// - A demand (a request for a picture, an MJPEG viewer) wakes an idle decoder: a slot of the
///   shared `CatchUpPool` is requested (refused past its queue: `catchup_queue_full`).
/// - With a slot, a decoder opens and catches up from the last keyframe the history holds to
///   its newest access unit, a few units per turn of the decode queue; the requests that woke it
///   are answered once it has decoded what was newest when they asked.
/// - Live, each access unit is decoded as it arrives, while viewers or multipart answers
///   remain; when a linger check finds nobody, the decoder lingers for `linger` after the last
///   demand, then is released with its memory.
/// - A multipart answer needs every picture of its push: it makes the decoder live at once (a
///   catch-up under way finishes in one go; an idle decoder opens at the push's next keyframe).
/// - A session that does not decode on demand (`all`, `keyframes`) is `always` live.
struct DecoderDemand {
    enum State: Equatable {
        /// Not on demand: the decoder runs for its mode.
        case always
        /// No decoder: nothing is decoded and no decoder memory is held.
        case idle
        /// Waiting for a catch-up slot; `ticket` takes it out of the pool's queue (nil until the
        /// pool said it queued it).
        case queued(DecodeDemand, ticket: UInt64?)
        /// A slot held: a decoder decodes the history from its last keyframe (since `startedAt`).
        case catchingUp(DecodeDemand, startedAt: UInt64)
        /// A decoder opens to decode live at once, without a catch-up (a multipart answer).
        case starting(DecodeDemand)
        /// Decoding each access unit as it arrives; someone looked lately.
        case live
        /// Decoding live with nobody watching, until the linger after the last demand elapsed.
        case lingering
        /// The session closed.
        case closed
    }

    /// How a decoder opens.
    enum Opening: Equatable {
        /// With a catch-up decoder's threads, catching up from the history's last keyframe.
        case catchUp
        /// Live from the next keyframe, for `mode`.
        case live(DecodeMode)
    }

    enum Action: Equatable {
        /// Ask the catch-up pool for a slot; its answer comes back as `slotQueued`,
        /// `slotRefused` or (on the decode queue) `slotGranted`.
        case requestSlot(DecodeDemand)
        /// Take a catch-up out of the pool's queue.
        case cancelQueuedSlot(ticket: UInt64)
        /// Give the slot held back to the pool.
        case releaseSlot
        /// Open a decoder; the outcome comes back as `decoderOpened` or `decoderFailedToOpen`.
        case openDecoder(Opening)
        /// Decode a few more units of the catch-up on the next turn of the decode queue; the
        /// outcome comes back as `catchUpProgressed`, `catchUpReachedRequests` or `catchUpDone`.
        case continueCatchUp
        /// Decode the rest of the catch-up now; the outcome comes back as `catchUpDone`.
        case finishCatchUpNow
        /// Make the catch-up's newest good picture so far the session's newest.
        case publishCatchUpPicture
        /// The catch-up ends (publishing its newest picture or not): what it pinned is let go.
        case endCatchUp(publishing: Bool)
        /// From now on each access unit is decoded as it arrives.
        case goLive(waitsForKeyframe: Bool)
        /// Release the decoder and its memory (announced as `decoder.stopped` if one was open).
        case releaseDecoder(reason: String)
        /// Let the requests with these tokens go on (nil), or fail them.
        case answer([UInt64], SessionError?)
        /// Run a linger check at this uptime (it comes back as `lingerCheckDue`).
        case scheduleLingerCheck(at: UInt64)
        case announceDecoderStarted(DecodeDemand)
        case recordCatchUp(CatchUpResult)
        case recordError(SessionError)
    }

    private(set) var state: State
    private(set) var mode: DecodeMode
    /// Requests waiting for the decoder, in arrival order.
    private(set) var waiters: [UInt64] = []
    /// How long the decoder stays after the last demand (a request, a viewer or multipart
    /// answer coming or leaving), and the pending linger check.
    private(set) var linger: DemandLinger
    /// The pending linger check, if one is scheduled.
    var lingerCheckDue: UInt64? { linger.checkDue }

    init(mode: DecodeMode, linger: Duration) {
        self.mode = mode
        self.linger = DemandLinger(linger.nanoseconds)
        state = mode == .onDemand ? .idle : .always
    }

    /// What the status says the decoder does.
    var activity: DecoderActivity {
        switch state {
        case .always, .live, .lingering: .live
        case .idle, .closed: .idle
        case .queued: .queued
        case .catchingUp, .starting: .catchingUp
        }
    }

    /// Whether a request may go on at once (a decoder decodes live, or none is needed); after
    /// a demand, otherwise, it waits for the catch-up or was refused.
    var answersAtOnce: Bool {
        switch state {
        case .always, .live, .lingering, .closed: true
        case .idle, .queued, .catchingUp, .starting: false
        }
    }

    private var isOnDemand: Bool { state != .always && state != .closed }

    // MARK: - Demand

    /// Someone wants pictures now: `waiter` (a request that waits for the catch-up, if one is
    /// needed) is answered by a later `answer` action.
    mutating func demanded(_ reason: DecodeDemand, waiter: UInt64?, at now: UInt64) -> [Action] {
        guard isOnDemand else { return [] }
        linger.demanded(at: now)
        var actions: [Action] = []
        switch state {
        case .live, .lingering:
            state = .live
        case .queued, .catchingUp, .starting:
            if let waiter { waiters.append(waiter) }
        case .idle:
            if let waiter { waiters.append(waiter) }
            state = .queued(reason, ticket: nil)
            actions.append(.requestSlot(reason))
        case .always, .closed:
            break
        }
        return actions + scheduleLingerCheck()
    }

    /// An MJPEG viewer left: its interest lingers like a request's.
    mutating func viewerLeft(at now: UInt64) -> [Action] {
        guard isOnDemand else { return [] }
        linger.demanded(at: now)
        return scheduleLingerCheck()
    }

    /// A multipart answer begins (decode queue): its pictures must be decoded as its push
    /// arrives, so the decoder goes live now.
    mutating func multipartAnswerBegan(at now: UInt64) -> [Action] {
        guard isOnDemand else { return [] }
        linger.demanded(at: now)
        switch state {
        case .catchingUp:
            return [.finishCatchUpNow]
        case .idle, .queued:
            var actions: [Action] = []
            if case .queued(_, let ticket?) = state { actions.append(.cancelQueuedSlot(ticket: ticket)) }
            state = .starting(.multipartAnswer)
            return actions + [.openDecoder(.live(.onDemand))]
        case .live, .lingering, .starting, .always, .closed:
            return []
        }
    }

    /// A multipart answer ended: its interest lingers like a request's.
    mutating func multipartAnswerEnded(at now: UInt64) -> [Action] {
        guard isOnDemand else { return [] }
        linger.demanded(at: now)
        return scheduleLingerCheck()
    }

    // MARK: - The catch-up pool

    /// The pool queued the catch-up: `ticket` takes it out again.
    mutating func slotQueued(ticket: UInt64) -> [Action] {
        guard case .queued(let reason, nil) = state else { return [.cancelQueuedSlot(ticket: ticket)] }
        state = .queued(reason, ticket: ticket)
        return []
    }

    /// The pool's queue is full: the waiting requests fail with `error`, except `caller`'s,
    /// which is told by the demand's own answer.
    mutating func slotRefused(_ error: SessionError, caller: UInt64?) -> [Action] {
        guard case .queued = state else { return [] }
        state = .idle
        let others = waiters.filter { $0 != caller }
        waiters = []
        return (others.isEmpty ? [] : [.answer(others, error)]) + [.recordCatchUp(.refused)]
    }

    /// A slot was granted (decode queue): a decoder opens to catch up, unless the catch-up is no
    /// longer wanted.
    mutating func slotGranted(at now: UInt64) -> [Action] {
        guard case .queued(let reason, _) = state else { return [.releaseSlot] }
        state = .catchingUp(reason, startedAt: now)
        return [.openDecoder(.catchUp)]
    }

    // MARK: - The decoder

    /// The decoder opened; `catchingUp`: the history holds a keyframe to catch up from.
    mutating func decoderOpened(catchingUp: Bool) -> [Action] {
        switch state {
        case .catchingUp(let reason, _):
            guard catchingUp else {
                // Nothing held to start from: decode live from the next keyframe.
                return [.releaseSlot, .announceDecoderStarted(reason)] + goLive(waitsForKeyframe: true)
            }
            return [.announceDecoderStarted(reason), .continueCatchUp]
        case .starting(let reason):
            return [.announceDecoderStarted(reason)] + goLive(waitsForKeyframe: true)
        case .always:
            return [.announceDecoderStarted(.modeChanged), .goLive(waitsForKeyframe: true)]
        case .idle, .queued, .live, .lingering, .closed:
            return []
        }
    }

    /// The decoder did not open: the waiting requests fail with `error` when they asked for a
    /// catch-up, and go on with what there is when a multipart answer needed the decoder.
    mutating func decoderFailedToOpen(_ error: SessionError) -> [Action] {
        switch state {
        case .catchingUp:
            state = .idle
            return [.releaseSlot, .recordError(error), .recordCatchUp(CatchUpResult(endingIn: error))] + answerWaiters(error)
        case .starting:
            state = .idle
            return [.recordError(error)] + answerWaiters(nil)
        case .always:
            return [.recordError(error)]
        case .idle, .queued, .live, .lingering, .closed:
            return []
        }
    }

    /// A turn of the catch-up decoded more units, and more remain.
    mutating func catchUpProgressed() -> [Action] {
        guard case .catchingUp = state else { return [] }
        return [.continueCatchUp]
    }

    /// The catch-up decoded what was newest when it started: the requests that woke it go on
    /// with the newest picture so far, while it catches up on what arrived meanwhile.
    mutating func catchUpReachedRequests() -> [Action] {
        guard case .catchingUp = state else { return [] }
        return [.publishCatchUpPicture] + answerWaiters(nil) + [.continueCatchUp]
    }

    /// The catch-up decoded the newest unit (`units` in all), or lost its place (the history
    /// dropped what it read): live decoding starts now, at the next keyframe after a lost place.
    mutating func catchUpDone(lostItsPlace: Bool, units: Int, at now: UInt64) -> [Action] {
        guard case .catchingUp(_, let startedAt) = state else { return [] }
        let result = CatchUpResult.ok(duration: now &- startedAt, units: units)
        return [.endCatchUp(publishing: true), .releaseSlot, .recordCatchUp(result)]
            + goLive(waitsForKeyframe: lostItsPlace)
    }

    /// The catch-up cannot give anything (the decoder memory budget has no room for the
    /// stream's decoder; the error is recorded where it arose): the waiting requests fail with
    /// `error`. While viewers or a multipart answer still watch (`watched`), the decoder goes
    /// live from the next keyframe, whose parameter sets ask the budget again; otherwise it goes.
    mutating func catchUpFailed(_ error: SessionError, watched: Bool) -> [Action] {
        guard case .catchingUp = state else { return [] }
        let ended: [Action] = [.endCatchUp(publishing: false), .releaseSlot, .recordCatchUp(CatchUpResult(endingIn: error))]
        let answered = answerWaiters(error)
        if watched { return ended + answered + goLive(waitsForKeyframe: true) }
        state = .idle
        return ended + [.releaseDecoder(reason: "decoder_memory_exceeded")] + answered
    }

    // MARK: - Linger

    /// The linger check fell due (decode queue). `watched`: MJPEG viewers or a multipart answer
    /// still want pictures.
    mutating func lingerCheckDue(watched: Bool, at now: UInt64) -> [Action] {
        linger.checkFell()
        guard isOnDemand, state != .idle else { return [] }
        switch state {
        case .live, .lingering:
            if watched {
                state = .live
            } else if !linger.hasElapsed(at: now) {
                state = .lingering
                return lingerCheck(at: linger.checkAtLingerEnd())
            } else {
                state = .idle
                return [.releaseDecoder(reason: "idle")]
            }
        case .queued, .catchingUp, .starting, .idle, .always, .closed:
            break
        }
        // Still watched, or not decoding live yet: look again a linger later.
        return lingerCheck(at: linger.stillWanted(at: now))
    }

    private mutating func scheduleLingerCheck() -> [Action] {
        guard isOnDemand, state != .idle else { return [] }
        return lingerCheck(at: linger.checkAtLingerEnd())
    }

    private func lingerCheck(at due: UInt64?) -> [Action] {
        due.map { [.scheduleLingerCheck(at: $0)] } ?? []
    }

    // MARK: - Mode, back end, close

    /// `PUT {"decode": ...}` changed the mode (decode queue). To on-demand: the decoder is
    /// released. From on-demand: a decoder opens now (if none runs) and decodes from the next
    /// keyframe; what waited goes on.
    mutating func modeChanged(to newMode: DecodeMode) -> [Action] {
        guard state != .closed else { return [] }
        let previous = mode
        mode = newMode
        if newMode == .onDemand {
            guard previous != .onDemand else { return [] }
            state = .idle
            return answerWaiters(nil) + [.releaseDecoder(reason: "mode_changed")]
        }
        guard previous == .onDemand else { return [] }
        var actions: [Action] = []
        let decoderOpen: Bool
        switch state {
        case .queued(_, let ticket):
            if let ticket { actions.append(.cancelQueuedSlot(ticket: ticket)) }
            decoderOpen = false
        case .catchingUp:
            actions += [.endCatchUp(publishing: false), .releaseSlot]
            decoderOpen = true
        case .live, .lingering, .starting:
            decoderOpen = true
        case .idle, .always, .closed:
            decoderOpen = false
        }
        state = .always
        actions.append(decoderOpen ? .goLive(waitsForKeyframe: true) : .openDecoder(.live(newMode)))
        return actions + answerWaiters(nil)
    }

    /// A new back end took over the stream (decode queue). On demand it has no decoder yet: a
    /// catch-up under way ends, and the next demand wakes the new one.
    mutating func backEndReplaced() -> [Action] {
        guard isOnDemand else { return [] }
        var actions: [Action] = []
        switch state {
        case .queued(_, let ticket?):
            actions.append(.cancelQueuedSlot(ticket: ticket))
        case .catchingUp:
            actions += [.endCatchUp(publishing: false), .releaseSlot]
        default:
            break
        }
        state = .idle
        return actions + answerWaiters(nil)
    }

    /// The session closes: a queued catch-up leaves the pool's queue and the waiting requests
    /// are told (the decode queue frees the decoder and any slot with it).
    mutating func closed() -> [Action] {
        guard state != .closed else { return [] }
        var actions: [Action] = []
        if case .queued(_, let ticket?) = state { actions.append(.cancelQueuedSlot(ticket: ticket)) }
        state = .closed
        return actions + answerWaiters(SessionError(.sessionNotFound, "the session was deleted"))
    }

    // MARK: -

    /// Live from now on: the waiting requests go on, and the linger is checked.
    private mutating func goLive(waitsForKeyframe: Bool) -> [Action] {
        state = .live
        return [.goLive(waitsForKeyframe: waitsForKeyframe)] + answerWaiters(nil) + scheduleLingerCheck()
    }

    /// Every waiting request goes on (nil) or fails; none when nobody waits.
    private mutating func answerWaiters(_ error: SessionError?) -> [Action] {
        defer { waiters = [] }
        return waiters.isEmpty ? [] : [.answer(waiters, error)]
    }
}

extension UInt64 {
    /// `self + other`, or the largest value when that does not fit.
    func addingSaturated(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
