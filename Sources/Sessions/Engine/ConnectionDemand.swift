import Ingest

/// The connection of a pull that connects on demand (`"connect": "on-demand"`), as a value:
/// whether it is wanted, who waits for its first picture, and what happens next. Like
/// `DecoderDemand`, each event returns the actions that follow, which `OnDemandConnection` runs;
/// the machine holds no thread, lock, closure or clock: times come in with the events, and a
/// request waiting for the first picture is a token with its deadline.
///
///     idle ──demanded──▶ connecting ──a picture of this connection──▶ live ◀──demanded──┐
///       ▲                 (waiters)                                     │ nobody watches │
///       │                                                               ▼                │
///       └─────────────────────────────── linger elapsed ◀────────── lingering ──────────┘
///
/// - A demand (a request for a picture, an MJPEG viewer) on an idle pull connects it; the
///   requests that came wait for the first picture decoded from that connection, each until its
///   deadline (then `source_not_ready`).
/// - Connected, the session's decoder is asked for too (on demand it wakes then, so the
///   connection's first keyframe is decoded); while requests wait, they count as watching, for
///   the decoder as for the connection.
/// - An attempt that fails answers the waiting requests with the source's error, as do later
///   requests until an attempt connects; the pull retries meanwhile, as a pull that is always
///   connected does.
/// - Live, requests go on at once. When a linger check finds nobody watching (no MJPEG viewer,
///   no long poll, no request waiting), the connection lingers for `linger` after the last
///   demand, then is let go: the pull waits, idle, for the next demand.
/// - A pull that is always connected, or no pull at all, is `always`: nothing waits.
struct ConnectionDemand {
    enum State: Equatable {
        /// Not on demand (a pull always connected, or none): requests never wait here.
        case always
        /// Not connected: nobody asked lately.
        case idle
        /// Wanted: connecting (or retrying), until a picture of this connection comes.
        case connecting(DecodeDemand)
        /// Connected and its pictures decoded; someone looked lately.
        case live
        /// Connected with nobody watching, until the linger after the last demand elapsed.
        case lingering
        /// The session closed.
        case closed
    }

    enum Action: Equatable {
        /// Have the pull connect (`PullSource.connectNow`).
        case connect
        /// Have the pull let its connection go (`PullSource.release`).
        case release
        /// Ask the session's decoder for pictures (an on-demand decoder wakes).
        case wakeDecoder(DecodeDemand)
        /// Let the requests with these tokens go on (nil), or fail them.
        case answer([UInt64], SessionError?)
        /// Tell the machine at this uptime that the request's wait is over (`waitExpired`).
        case scheduleWaitDeadline(token: UInt64, at: UInt64)
        /// Run a linger check at this uptime (it comes back as `lingerCheckDue`).
        case scheduleLingerCheck(at: UInt64)
    }

    /// A request waiting for the connection's first picture.
    struct Waiter: Equatable {
        let token: UInt64
        let deadline: UInt64
        /// How long it waits (nanoseconds): `firstPictureWait`, or less where its client said so.
        let wait: UInt64
    }

    private(set) var state: State
    /// Requests waiting for the first picture, in arrival order.
    private(set) var waiters: [Waiter] = []
    /// When the connection being waited for was made; pictures of bytes received before it are
    /// of an earlier connection.
    private(set) var connectedAt: UInt64?
    /// Why the last attempt failed, while no attempt has connected since: a request is answered
    /// with it at once.
    private(set) var failure: SessionError?
    /// How long the connection stays after the last demand (a request, or a viewer coming or
    /// leaving), and the pending linger check.
    private(set) var linger: DemandLinger
    /// The pending linger check, if one is scheduled.
    var lingerCheckDue: UInt64? { linger.checkDue }
    /// How long a request waits for the first picture of a connection.
    let firstPictureWait: UInt64

    init(connect: ConnectMode, linger: Duration, firstPictureWait: Duration) {
        self.linger = DemandLinger(linger.nanoseconds)
        self.firstPictureWait = firstPictureWait.nanoseconds
        state = connect == .onDemand ? .idle : .always
    }

    /// Whether a request may go on at once (after its demand, otherwise, it waits).
    var answersAtOnce: Bool {
        switch state {
        case .always, .live, .lingering, .closed: true
        case .idle, .connecting: false
        }
    }

    /// Whether the pull is to be connected now.
    var wantsConnection: Bool {
        switch state {
        case .connecting, .live, .lingering: true
        case .always, .idle, .closed: false
        }
    }

    /// Whether a connection is made and its first picture is waited for.
    var awaitsFirstPicture: Bool {
        if case .connecting = state { return connectedAt != nil }
        return false
    }

    private var isOnDemand: Bool { state != .always && state != .closed }

    // MARK: - Demand

    /// Someone wants pictures now: `waiter` (a request that waits for the first picture, if the
    /// connection has none yet) is answered by a later `answer` action, within `firstPictureWait`
    /// or the shorter `waitLimit` its client gave (a long poll's `wait`, nanoseconds).
    mutating func demanded(_ reason: DecodeDemand, waiter: UInt64?, waitLimit: UInt64? = nil, at now: UInt64) -> [Action] {
        guard isOnDemand else { return [] }
        linger.demanded(at: now)
        var actions: [Action] = []
        switch state {
        case .live, .lingering:
            state = .live
        case .idle:
            state = .connecting(reason)
            connectedAt = nil
            failure = nil
            actions.append(.connect)
            actions += wait(waiter, limit: waitLimit, at: now)
        case .connecting:
            if let failure, let waiter {
                actions.append(.answer([waiter], failure))
            } else {
                actions += wait(waiter, limit: waitLimit, at: now)
            }
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

    private mutating func wait(_ waiter: UInt64?, limit: UInt64?, at now: UInt64) -> [Action] {
        guard let waiter else { return [] }
        let wait = min(firstPictureWait, limit ?? .max)
        let deadline = now.addingSaturated(wait)
        waiters.append(Waiter(token: waiter, deadline: deadline, wait: wait))
        return [.scheduleWaitDeadline(token: waiter, at: deadline)]
    }

    // MARK: - The pull

    /// The pull connected at `now`: its pictures are what the waiting requests wait for, and
    /// the decoder is asked for them.
    mutating func connected(at now: UInt64) -> [Action] {
        guard case .connecting(let reason) = state else { return [] }
        connectedAt = now
        failure = nil
        return [.wakeDecoder(reason)]
    }

    /// An attempt failed, or the connection was lost before its first picture: the waiting
    /// requests, and those that come before an attempt connects, are answered with `error`.
    mutating func connectionFailed(_ error: SessionError) -> [Action] {
        guard case .connecting = state else { return [] }
        connectedAt = nil
        failure = error
        return answerWaiters(error)
    }

    /// A picture was published at `now`, decoded from bytes received at `receivedAt`. The
    /// requests it answers wanted pictures until their answer: the linger counts from then, so
    /// a first picture that took most of a GOP leaves the next request the whole linger.
    mutating func picturePublished(receivedAt: UInt64, at now: UInt64) -> [Action] {
        guard case .connecting = state, let connectedAt, receivedAt >= connectedAt else { return [] }
        state = .live
        if !waiters.isEmpty { linger.demanded(at: now) }
        return answerWaiters(nil) + scheduleLingerCheck()
    }

    /// The decoder could not be woken for the connection's pictures (`catchup_queue_full`).
    mutating func decoderRefused(_ error: SessionError) -> [Action] {
        guard case .connecting = state else { return [] }
        return answerWaiters(error)
    }

    /// A request's wait for the first picture ended at its deadline.
    mutating func waitExpired(token: UInt64, at now: UInt64) -> [Action] {
        guard let index = waiters.firstIndex(where: { $0.token == token }), waiters[index].deadline <= now else {
            return []
        }
        let seconds = Double(waiters.remove(at: index).wait) / 1e9
        let wait = seconds == seconds.rounded() ? "\(Int(seconds))" : "\(seconds)"
        let error = SessionError(
            .sourceNotReady, "no picture came from the source within \(wait) s of the request (it connects on demand)",
            retryAfterSeconds: 1)
        return [.answer([token], error)]
    }

    // MARK: - Linger

    /// The linger check fell due. `watched`: MJPEG viewers or long polls still want pictures.
    mutating func lingerCheckDue(watched: Bool, at now: UInt64) -> [Action] {
        linger.checkFell()
        guard wantsConnection else { return [] }
        if watched || !waiters.isEmpty {
            if state == .lingering { state = .live }
        } else if !linger.hasElapsed(at: now) {
            if state == .live { state = .lingering }
            return lingerCheck(at: linger.checkAtLingerEnd())
        } else {
            state = .idle
            connectedAt = nil
            failure = nil
            return [.release]
        }
        // Still watched: look again a linger later.
        return lingerCheck(at: linger.stillWanted(at: now))
    }

    private mutating func scheduleLingerCheck() -> [Action] {
        guard wantsConnection else { return [] }
        return lingerCheck(at: linger.checkAtLingerEnd())
    }

    private func lingerCheck(at due: UInt64?) -> [Action] {
        due.map { [.scheduleLingerCheck(at: $0)] } ?? []
    }

    // MARK: - The pull's life

    /// A pull began (`connect` says how it connects), or the session's pull ended (nil): what
    /// waited for an earlier pull goes on.
    mutating func pullChanged(to connect: ConnectMode?) -> [Action] {
        guard state != .closed else { return [] }
        state = connect == .onDemand ? .idle : .always
        connectedAt = nil
        failure = nil
        return answerWaiters(nil)
    }

    /// The session closes: the waiting requests are told.
    mutating func closed() -> [Action] {
        guard state != .closed else { return [] }
        state = .closed
        return answerWaiters(SessionError(.sessionNotFound, "the session was deleted"))
    }

    // MARK: -

    /// Every waiting request goes on (nil) or fails; none when nobody waits.
    private mutating func answerWaiters(_ error: SessionError?) -> [Action] {
        defer { waiters = [] }
        return waiters.isEmpty ? [] : [.answer(waiters.map(\.token), error)]
    }
}
