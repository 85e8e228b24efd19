import Containers
import Dispatch
import FoundationEssentials
import Ingest
import Logging
import Synchronization
import Timekeeping
import VideoCoding

/// All live sessions: create-or-get within the limits, lookup, list, delete, idle eviction.
/// Every method may be called from any thread.
public final class SessionRegistry: Sendable {
    public let configuration: ServerConfiguration
    /// The limits a reload may change; the registry reads them at each use.
    public let limits: RuntimeLimits
    /// What the sessions share at run time (the clock among them), built once at start-up.
    public let services: SessionServices
    public let metrics: FrameTapMetrics
    public var clock: any ServiceClock { services.clock }
    /// Held while a pull is admitted and started, so two at once cannot both pass the limit.
    private let pulls = Mutex(())
    /// What happened to the sessions lately, for `GET /events`.
    public let events: SessionEventLog
    let logger: Logger
    private let table = Mutex(Table())
    private let evicting = Atomic<Bool>(false)
    private let memoryReturn: MemoryReturn

    private struct Table {
        var sessions: [SessionID: Session] = [:]
        /// Sessions being created outside the lock (opening a decoder can take a while):
        /// they count against `maxSessions` already.
        var reserved = 0
        /// Of those, by the tenant whose push makes them (`Session.tenant`).
        var reservedByTenant: [String: Int] = [:]
    }

    public init(
        configuration: ServerConfiguration, services: SessionServices, metrics: FrameTapMetrics, logger: Logger,
        events: SessionEventLog? = nil
    ) {
        self.configuration = configuration
        self.services = services
        limits = RuntimeLimits(configuration)
        self.metrics = metrics
        self.logger = logger
        self.events = events ?? SessionEventLog(clock: services.clock)
        memoryReturn = MemoryReturn(clock: services.clock)
    }

    /// The session, or `.sessionNotFound`.
    public func session(_ id: SessionID) throws(SessionError) -> Session {
        guard let session = find(id) else { throw .notFound(id) }
        return session
    }

    public func find(_ id: SessionID) -> Session? {
        table.withLock { $0.sessions[id] }
    }

    /// Create-or-get (`POST .../nalus` and `PUT` both create). A new session gets `options` and
    /// `standing`; an existing one is returned unchanged (`PUT` then calls `Session.configure`).
    /// Throws `.tooManySessions` (503, with `retryAfterSeconds`) at the limit, and
    /// `.decoding(.decoderUnavailable)` when a forced back end cannot open.
    /// `tenant`: whose push makes the session (`AccessControl.tenant`), held to
    /// `--max-sessions-per-token`; nil for the admin's, a declared session's, or without access control.
    public func openSession(
        _ id: SessionID, options: SessionOptions = SessionOptions(), standing: SessionStanding = SessionStanding(),
        tenant: String? = nil
    ) throws(SessionError) -> (session: Session, created: Bool) {
        let maxSessions = limits.current.maxSessions
        let existing = try table.withLock { table throws(SessionError) -> Session? in
            if let session = table.sessions[id] { return session }
            guard table.sessions.count + table.reserved < maxSessions else {
                let retryAfter = retryAfterSeconds(table.sessions.values, reserved: table.reserved)
                let kept = retryAfter == nil ? ": every one is kept (declared, or kept by --state-dir), so none will expire; "
                    + "delete one or raise --max-sessions" : ""
                throw SessionError(
                    .tooManySessions, "the server holds its maximum of \(maxSessions) sessions\(kept)",
                    retryAfterSeconds: retryAfter)
            }
            if let tenant, let perToken = configuration.maxSessionsPerToken {
                let own = table.sessions.values.filter { $0.tenant == tenant }
                let reserved = table.reservedByTenant[tenant, default: 0]
                guard own.count + reserved < perToken else {
                    throw SessionError(
                        .tooManySessions,
                        "the sessions this token may push to hold \(perToken) sessions, the most one token's pushes may "
                            + "make (--max-sessions-per-token): push to one of them, or wait until one goes idle",
                        retryAfterSeconds: retryAfterSeconds(own, reserved: reserved),
                        facts: ["limit": .text("token")])
                }
                table.reservedByTenant[tenant, default: 0] += 1
            }
            table.reserved += 1
            return nil
        }
        if let existing { return (existing, false) }
        let unreserve: (inout Table) -> Void = { table in
            table.reserved -= 1
            guard let tenant, let count = table.reservedByTenant[tenant] else { return }
            table.reservedByTenant[tenant] = count > 1 ? count - 1 : nil
        }

        let created: Session
        do {
            created = try Session(
                id: id, configuration: configuration, services: services, options: options, metrics: metrics,
                logger: logger, events: events, standing: standing, tenant: tenant)
        } catch {
            table.withLock { unreserve(&$0) }
            logger.error(
                "session creation failed",
                metadata: ["session": "\(id)", "code": "\(error.code.rawValue)", "message": "\(error.message)"])
            throw error
        }
        let status = created.status()
        // Announced in the same critical section as the insert: nothing of the session (an
        // upload, a viewer, a delete) can be announced before it.
        let (winner, wakeups) = table.withLock { table -> (Session, SessionEventLog.Wakeups?) in
            unreserve(&table)
            if let other = table.sessions[id] { return (other, nil) }
            table.sessions[id] = created
            let wakeups = events.append(
                .sessionCreated, session: id,
                details: .with { details in
                    details.backend = status.backend.rawValue
                    details.device = status.device?.description
                    details.reason = status.backendReason
                    details.decode = status.decode.rawValue
                    details.origin = standing.origin.rawValue
                })
            return (created, wakeups)
        }
        wakeups?.wakeReaders()
        guard winner === created else {
            // Another request created the same id meanwhile; theirs stands.
            created.close(reason: "duplicate")
            return (winner, false)
        }
        metrics.activeSessions.increment()
        metrics.recordSessionCreated()
        logger.info(
            "session created",
            metadata: [
                // Why that back end is in the session's status (`backendReason`): the same long words
                // for every session of a machine without hardware.
                "session": "\(id)", "backend": "\(status.backend.rawValue)",
                "decode": "\(status.decode.rawValue)", "origin": "\(standing.origin.rawValue)",
            ])
        return (created, true)
    }

    // MARK: - Pulls

    /// Checks a pull before anything is created or connected: the source policy
    /// (`source_not_allowed`; `policy`, or `--allow-sources` as it is now) and the pull limit
    /// (`too_many_pull_sessions`; a session that pulls already may change its source).
    public func admitPull(_ spec: PullSourceSpec, for id: SessionID, policy: SourcePolicy? = nil) throws(SessionError) {
        if let refusal = (policy ?? limits.current.sourcePolicy).check(spec.url) { throw SessionError(refusal) }
        try pulls.withLock { _ throws(SessionError) in try checkPullLimit(excluding: id) }
    }

    /// Starts (or replaces) `session`'s pull, within `--max-pull-sessions`; a session that pulls
    /// `spec` already goes on as it is. Its redirects and later attempts are checked against
    /// `policy`, or `--allow-sources` as it is now.
    public func startPull(_ spec: PullSourceSpec, on session: Session, policy: SourcePolicy? = nil) throws(SessionError) {
        let policy = policy ?? limits.current.sourcePolicy
        let started = try pulls.withLock { _ throws(SessionError) in
            try checkPullLimit(excluding: session.id)
            return try session.startPull(spec, policy: policy)
        }
        guard started else { return }
        logger.info("pull session", metadata: ["session": "\(session.id)", "source": "\(spec.url.redacted)"])
    }

    public func stopPull(on session: Session) {
        pulls.withLock { _ in session.stopPull() }
    }

    private func checkPullLimit(excluding id: SessionID) throws(SessionError) {
        let pulling = list().filter { $0.id != id && $0.isPulling }.count
        let maxPullSessions = limits.current.maxPullSessions
        guard pulling < maxPullSessions else {
            throw SessionError(
                .tooManyPullSessions,
                "the server pulls its maximum of \(maxPullSessions) sources (--max-pull-sessions)",
                retryAfterSeconds: 5)
        }
    }

    /// Every session, ordered by id.
    public func list() -> [Session] {
        table.withLock { Array($0.sessions.values) }.sorted { $0.id < $1.id }
    }

    public func statusList() -> SessionList {
        SessionList(sessions: list().map { $0.status() })
    }

    public var count: Int { table.withLock { $0.sessions.count } }

    /// Brings the metrics that describe the present up to date (call before an exposition).
    public func refreshMetrics() {
        let sessions = list()
        metrics.refresh(
            sessions: sessions.map { $0.status() }, devices: services.devicePool.usage(),
            downloads: services.frameDownloads, decoderMemory: services.decoderMemory,
            catchUps: services.catchUpPool.usage, warmDecoders: services.catchUpPool.warmDecoders.usage,
            historyBytes: sessions.reduce(0) { $0 + $1.historyBytes },
            historyMemory: (services.historyMemory.limit, services.historyMemory.usage), slabs: SlabPool.shared.usage,
            engines: services.devicePool.engines.report(), residentBytes: ProcessMemory.residentBytes())
    }

    /// `DELETE /sessions/{id}`: removes and closes the session (frees its decoder, VA-API
    /// context, cached pictures; ends its MJPEG viewers).
    public func delete(_ id: SessionID) throws(SessionError) {
        guard let session = remove(reason: "deleted", { [$0.sessions[id]].compactMap { $0 } }).first else {
            throw .notFound(id)
        }
        end(session, reason: "deleted")
    }

    /// Removes and closes the session for `reason` (`session.removed`'s), as `delete` does for
    /// `deleted`; false when there is none.
    @discardableResult
    public func remove(_ id: SessionID, reason: String) -> Bool {
        guard let session = remove(reason: reason, { [$0.sessions[id]].compactMap { $0 } }).first else { return false }
        end(session, reason: reason)
        return true
    }

    /// A push created `session` and failed: unless something of a stream was read into it or
    /// something uses it meanwhile, it goes (a refused first push leaves no session behind).
    public func discardIfUnused(_ session: Session) {
        session.checkUnused { [self] unused in
            guard unused else { return }
            let removed = remove(reason: "refused") { table in
                table.sessions[session.id] === session && session.isUnused ? [session] : []
            }
            for session in removed { end(session, reason: "refused") }
        }
    }

    /// Takes the matching sessions out and announces their removal in the same critical section,
    /// so a session created again under the same id is announced after the old one's end.
    private func remove(reason: String, _ pick: (Table) -> [Session]) -> [Session] {
        let (removed, wakeups) = table.withLock { table -> ([Session], [SessionEventLog.Wakeups]) in
            let removed = pick(table)
            var wakeups: [SessionEventLog.Wakeups] = []
            for session in removed {
                table.sessions[session.id] = nil
                session.context.events.silence()
                wakeups.append(events.append(.sessionRemoved, session: session.id, details: .with { $0.reason = reason }))
            }
            return (removed, wakeups)
        }
        for wakeup in wakeups { wakeup.wakeReaders() }
        return removed
    }

    /// Removes sessions idle for the idle timeout (no upload, no viewer, no waiting request, no
    /// activity), of those that may expire (`SessionStanding`). Returns their ids.
    @discardableResult
    public func evictIdle() -> [SessionID] {
        let now = clock.uptime
        let timeout = limits.current.idleTimeout
        let evicted = remove(reason: "idle") { $0.sessions.values.filter { $0.isIdle(now: now, timeout: timeout) } }
        for session in evicted { end(session, reason: "idle") }
        return evicted.map(\.id).sorted()
    }

    /// Checks for idle sessions periodically (a quarter of the idle timeout, 1...30 s), on the
    /// registry's clock.
    public func startIdleEviction() {
        guard !evicting.exchange(true, ordering: .acquiringAndReleasing) else { return }
        scheduleEviction()
    }

    private func scheduleEviction() {
        let quarter = limits.current.idleTimeout / 4
        let interval = min(max(quarter, .seconds(1)), .seconds(30))
        clock.schedule(at: clock.uptime + interval.nanoseconds) { [weak self] in
            guard let self, evicting.load(ordering: .acquiring) else { return }
            evictIdle()
            scheduleEviction()
        }
    }

    /// Stops eviction and closes every session (server shutdown).
    public func shutdown() {
        evicting.store(false, ordering: .releasing)
        let all = remove(reason: "shutdown") { Array($0.sessions.values) }
        for session in all { end(session, reason: "shutdown") }
    }

    private func end(_ session: Session, reason: String) {
        session.close(reason: reason)
        metrics.activeSessions.decrement()
        metrics.recordSessionEnded(reason: reason)
        memoryReturn.soon()
    }

    /// Seconds until the first session can be evicted (at least 1), the idle timeout when all are
    /// busy; nil when none ever expires (all kept, and no session being made), so no retry would help.
    private func retryAfterSeconds(_ sessions: some Sequence<Session>, reserved: Int) -> Int? {
        guard reserved > 0 || sessions.contains(where: { $0.standing.expiresWhenIdle }) else { return nil }
        let now = clock.uptime
        let timeout = limits.current.idleTimeout
        let soonest = sessions.compactMap { $0.nanosecondsUntilIdle(now: now, timeout: timeout) }.min()
            ?? timeout.nanoseconds
        return max(1, Int((soonest + 999_999_999) / 1_000_000_000))
    }
}
