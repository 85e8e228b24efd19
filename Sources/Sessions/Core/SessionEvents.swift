import FoundationEssentials
import Synchronization
import Timekeeping
import VideoCoding

/// Something that happened to a session, as `GET /events` sends it. Events mark changes of
/// state (created, first picture, new format, back end, upload start and end, viewers, an
/// error, an on-demand decoder starting or stopping), never pictures: a 30 fps stream makes no
/// events while nothing changes.
public struct SessionEvent: Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        case sessionCreated = "session.created"
        case sessionRemoved = "session.removed"
        case pictureFirst = "picture.first"
        case formatChanged = "format.changed"
        case backendSelected = "backend.selected"
        /// Named apart from EventSource's own `error` (a connection failure), which a listener
        /// for a server event called `error` would also get.
        case error = "session.error"
        case uploadStarted = "upload.started"
        case uploadEnded = "upload.ended"
        case viewersChanged = "viewers.changed"
        /// An on-demand session opened a decoder (`reason`: what asked for a picture).
        case decoderStarted = "decoder.started"
        /// An on-demand session released its decoder and its memory (`reason`: `idle` after the
        /// linger, `mode_changed`).
        case decoderStopped = "decoder.stopped"
        /// A pull session connected to its source (again).
        case sourceConnected = "source.connected"
        /// A pull session's connection failed or was lost; it retries after a back-off.
        case sourceLost = "source.lost"
        /// A pull that connects on demand let its connection go: nobody asked for its pictures
        /// for the linger (`reason`: `idle`).
        case sourceReleased = "source.released"
        /// Some of the session's events were dropped for its budget (`dropped`: how many): its
        /// state is in `GET /sessions/{id}`. It comes before the next event admitted.
        case eventsDropped = "events.dropped"
        /// Not a session's event: the configuration file was read (at start, on `SIGHUP`, when it
        /// changed on disk) and its difference applied (`changes`: the sessions created, removed,
        /// updated, restarted; `restartNeeded`: options that take effect only at a restart).
        case configApplied = "config.applied"
        /// Not a session's event: the configuration file was read again but does not parse or
        /// validate; nothing of it was applied (`message`, `file`, `line`, `column`).
        case configRejected = "config.rejected"
        /// Not a session's event: the reader missed events (it fell behind the history, or
        /// asked to resume from an id this process never issued) and should fetch the state anew.
        case resync
    }

    /// Increasing within a process, and past every id of an earlier process (they start from
    /// the start-up time), so a `Last-Event-ID` from before a restart reads as "history lost".
    public let id: UInt64
    public let kind: Kind
    /// Nil for `resync`, which is about the reader, and for the configuration's events.
    public let session: SessionID?
    /// When it happened (the log's clock).
    public let at: Date
    public let details: SessionEventDetails
}

/// What an event says besides its kind, session and time; members left nil say nothing.
public struct SessionEventDetails: Sendable {
    public var reason: String?
    public var backend: String?
    public var device: String?
    public var fallback: Bool?
    public var decode: String?
    public var seq: UInt64?
    public var width: Int?
    public var height: Int?
    public var format: StreamFormat?
    public var code: String?
    public var message: String?
    public var multipart: Bool?
    public var result: String?
    public var bytes: Int?
    public var frames: Int?
    public var viewers: Int?
    public var waiting: Int?
    /// A pulled source's URL, its credentials left out.
    public var url: String?
    public var reconnects: Int?
    /// What a push carried (`mpegts`, `mp4`, `matroska`, `flv`, `annexb`).
    public var container: String?
    /// Events of the session dropped for its budget since the last one admitted.
    public var dropped: Int?
    /// Who asked for a created session (`SessionOrigin`).
    public var origin: String?
    /// The configuration file, and the place in it an error is at.
    public var file: String?
    public var line: Int?
    public var column: Int?
    /// What a reload did, by kind (`created`, `removed`, `updated`, `restarted`, `failed`): session ids.
    public var changes: [String: [String]]?
    /// Options changed in the file that take effect only when the server restarts.
    public var restartNeeded: [String]?

    public init() {}

    static func with(_ fill: (inout SessionEventDetails) -> Void) -> SessionEventDetails {
        var details = SessionEventDetails()
        fill(&details)
        return details
    }
}

/// The recent events of every session, for every `GET /events` reader. There is no queue per
/// reader: each one keeps a cursor into one bounded history, so a slow or stalled reader costs
/// nothing; when its cursor falls out of the history it gets `resync` and goes on from the newest.
public final class SessionEventLog: Sendable {
    /// Events kept for `Last-Event-ID` resumes and slow readers.
    public static let defaultCapacity = 1024

    public let capacity: Int
    let clock: any ServiceClock
    private let state: Mutex<State>

    private struct State {
        /// Oldest first; between `capacity` and twice that many before the oldest are dropped
        /// in one go (amortised: no shifting on every event).
        var events: [SessionEvent] = []
        /// The id the next event gets.
        var nextID: UInt64
        /// Readers waiting for the next event, each called once.
        var waiters: [UInt64: @Sendable () -> Void] = [:]
        var nextWaiter: UInt64 = 0
    }

    public init(capacity: Int = SessionEventLog.defaultCapacity, clock: any ServiceClock) {
        precondition(capacity > 0)
        self.capacity = capacity
        self.clock = clock
        // Milliseconds since 1970 times 1000: later than any id an earlier process gave out,
        // unless that one made a thousand events per millisecond of its life.
        let firstID = UInt64(max(0, clock.now.timeIntervalSince1970 * 1000)) * 1000 + 1
        state = Mutex(State(nextID: firstID))
    }

    /// The id of the newest event (one below the first id before any).
    public var newestID: UInt64 { state.withLock { $0.nextID - 1 } }

    /// `session`: nil for an event about the server (the configuration's), which only readers of
    /// every session get.
    public func publish(_ kind: SessionEvent.Kind, session: SessionID?, details: SessionEventDetails = SessionEventDetails()) {
        append(kind, session: session, details: details).wakeReaders()
    }

    /// Readers to wake after an append, for a caller that appends under its own lock (so that the
    /// event's place in the log matches the change it reports) and wakes once that lock is released.
    struct Wakeups {
        fileprivate let waiters: [@Sendable () -> Void]
        func wakeReaders() { for wake in waiters { wake() } }
    }

    /// Adds the event; its readers are woken by `wakeReaders()` on the result.
    func append(_ kind: SessionEvent.Kind, session: SessionID?, details: SessionEventDetails) -> Wakeups {
        let at = clock.now
        return state.withLock { state in
            let event = SessionEvent(id: state.nextID, kind: kind, session: session, at: at, details: details)
            state.nextID += 1
            state.events.append(event)
            if state.events.count >= 2 * capacity { state.events.removeFirst(state.events.count - capacity) }
            defer { state.waiters.removeAll() }
            return Wakeups(waiters: Array(state.waiters.values))
        }
    }

    public enum Read: Sendable {
        /// Events after the cursor (of the session asked for, when one was), oldest first, and
        /// the cursor to read after next time (it moves past other sessions' events too).
        case events([SessionEvent], cursor: UInt64)
        /// The cursor is not in the history: events were missed. Send `resync` (with this id)
        /// and read on after `newest`.
        case gap(newest: UInt64, reason: String)
    }

    /// At most `limit` events after `cursor`.
    public func read(after cursor: UInt64, session: SessionID? = nil, limit: Int = 64) -> Read {
        state.withLock { state in
            let newest = state.nextID - 1
            if cursor > newest { return .gap(newest: newest, reason: "unknown_id") }
            let oldest = state.events.first?.id ?? state.nextID
            if cursor + 1 < oldest { return .gap(newest: newest, reason: "history_lost") }
            var found: [SessionEvent] = []
            var position = cursor
            var index = Int(cursor + 1 - oldest)
            while index < state.events.count, found.count < limit {
                let event = state.events[index]
                if session == nil || event.session == session { found.append(event) }
                position = event.id
                index += 1
            }
            return .events(found, cursor: position)
        }
    }

    /// The `resync` event a reader is sent for a gap, with the id to resume after.
    public func resync(newest: UInt64, reason: String) -> SessionEvent {
        SessionEvent(id: newest, kind: .resync, session: nil, at: clock.now, details: .with { $0.reason = reason })
    }

    /// Calls `wake` once, at the next event. Returns a token for `cancelWait`.
    public func waitForNext(_ wake: @escaping @Sendable () -> Void) -> UInt64 {
        state.withLock { state in
            state.nextWaiter += 1
            state.waiters[state.nextWaiter] = wake
            return state.nextWaiter
        }
    }

    public func cancelWait(_ token: UInt64) {
        _ = state.withLock { $0.waiters.removeValue(forKey: token) }
    }

    /// Readers waiting now (for tests: a reader that left is forgotten).
    public var waitingReaders: Int { state.withLock { $0.waiters.count } }
}

/// A session's way to `SessionEventLog.publish`: its id is filled in, and a session made
/// outside a registry (tests, the `decode` command) has no log and publishes nothing.
///
/// Each session has a budget (`burst` events at once, `perSecond` on average): events mark
/// changes, but a hostile stream can change its format or fail differently on every picture, and
/// one session's flood must not push every other session's events out of the shared history.
/// Past the budget events are dropped (the state stays right in `GET /sessions`), never
/// silently: the next event admitted is preceded by `events.dropped` with their number, which
/// the budget pays for as well. An `upload.started` pays for its `upload.ended` too, which then
/// goes whatever the budget holds (`emitPaid`), so a reader never sees an upload begin that does
/// not end, and no upload ends that was not seen to begin. Once the session is removed it is
/// silenced: nothing of it follows its `session.removed`.
final class SessionEventSink: Sendable {
    static let burst = 50.0
    static let perSecond = 10.0

    private struct Budget {
        var tokens: TokenBucket
        var silenced = false
    }

    let log: SessionEventLog?
    let session: SessionID
    private let budget: Mutex<Budget>

    init(log: SessionEventLog?, session: SessionID) {
        self.log = log
        self.session = session
        budget = Mutex(Budget(tokens: TokenBucket(burst: Self.burst, perSecond: Self.perSecond, at: log?.clock.uptime ?? 0)))
    }

    /// Publishes `kind` when the budget admits it; returns whether it went. `upload.started`
    /// costs two: its `upload.ended` is paid for with it.
    @discardableResult
    func emit(_ kind: SessionEvent.Kind, _ fill: (inout SessionEventDetails) -> Void = { _ in }) -> Bool {
        guard let log else { return false }
        let now = log.clock.uptime
        let cost = kind == .uploadStarted ? 2 : 1
        let (admitted, droppedBefore) = budget.withLock { budget in
            budget.silenced ? (false, 0) : budget.tokens.admit(cost: cost, at: now)
        }
        guard admitted else { return false }
        if droppedBefore > 0 { log.publish(.eventsDropped, session: session, details: .with { $0.dropped = droppedBefore }) }
        log.publish(kind, session: session, details: .with(fill))
        return true
    }

    /// An event dropped with another (the `upload.ended` of a dropped `upload.started`): it is
    /// counted in the next `events.dropped`.
    func countDropped() {
        budget.withLock { budget in
            if !budget.silenced { budget.tokens.countDropped() }
        }
    }

    /// Publishes an event its start already paid for (`upload.ended` of an `upload.started`
    /// that went), unless the session was removed.
    func emitPaid(_ kind: SessionEvent.Kind, _ fill: (inout SessionEventDetails) -> Void = { _ in }) {
        guard let log, !budget.withLock({ $0.silenced }) else { return }
        log.publish(kind, session: session, details: .with(fill))
    }

    /// The session was removed: its `session.removed` is the last of it.
    func silence() {
        budget.withLock { $0.silenced = true }
    }
}
