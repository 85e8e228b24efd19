import CMicroHTTPD
import Synchronization
import Timekeeping

#if canImport(Glibc)
    import Glibc
#endif

/// What a connection is doing, as far as slow or silent clients are concerned, and what is
/// done about those. libmicrohttpd's idle timeout cannot give any of it, because every byte a
/// client sends resets it:
/// - a connection gets `headerTimeout` to send a request's head, from when it opens and again
///   from when its previous request ended, so a client trickling its headers a byte at a time
///   cannot hold connection slots for ever;
/// - a request body must deliver `bodyProgressBytes` within every `bodyTimeout` (counted while
///   the server reads it, not while it holds the client back), so a body trickled a byte at a
///   time cannot either; the request is answered 408 (the `bodyTimedOut` handler) and then cut off;
/// - a connection whose answer went out before its body ended is cut off after a while
///   (`cutOff(_:after:)`), even when its client goes quiet;
/// - a body whose client has closed its end is ended at once: in epoll mode libmicrohttpd
///   0.9.75 takes a short read for "nothing more to read" and clears its read-ready flag, so a
///   FIN that arrived together with the body's last bytes raises no new edge and is never read
///   until the 60 s idle timeout. Bodies that went quiet are probed with a peeking `recv`, and
///   one whose peer has closed gets `shutdown(SHUT_RD)`: the edge libmicrohttpd missed;
/// - one tier of connections is kept for clients that behave: once a worker thread holds all
///   but a reserve of its share of `maxConnections` (`evictionThreshold`), each connection it
///   accepts closes one of its connections that is making no progress (a head not complete, or
///   a body stalled): one of the client address that holds the most connections, and of those
///   the one stalled longest. So clients sending slowly, from one address or many, cannot fill
///   every slot, and a client with a connection or two is the last to lose one; a connection
///   that sent its head at once, or whose answer is under way, is never chosen.
/// A connection past its deadline, or evicted, has its socket shut down, which libmicrohttpd
/// sees as the client leaving; it then closes it as usual. The checks run every
/// `checkInterval` on the server's clock, so a test that moves a manual clock sees late
/// connections cut off.
///
/// Safe against fd reuse: libmicrohttpd reports a connection closed (removing it here, under
/// the lock the shutdown also takes) before it closes the socket.
final class ConnectionDeadlines: Sendable {
    /// Why a connection was closed by the server rather than by its client or libmicrohttpd.
    enum Cut: Sendable {
        /// `headerTimeout` passed with part of a head sent, or on a connection that sent nothing
        /// since it opened or its previous request ended (`idle`, by TCP's count of the bytes
        /// received): a keep-alive connection a client or a proxy holds for its next request,
        /// which is nothing to worry about. Over TLS the handshake counts as something sent.
        case headerTimeout, idle, bodyTimeout, evicted
    }

    private enum Phase {
        /// Waiting for a request's head, since the connection opened or its previous request ended.
        case head(since: UInt64)
        /// Reading a body: when it last delivered `bodyProgressBytes` and what came since then,
        /// when its last byte came, and when it was last probed for a closed peer.
        case body(progressAt: UInt64, sinceProgress: Int, lastByteAt: UInt64, probedAt: UInt64)
        /// Body reading paused by the server (its consumer is full): nothing is the client's fault.
        case bodyPaused
        /// Everything else: the handler runs, the answer is written, a stream is served.
        case answering
    }

    private struct Entry {
        let fd: Int32
        /// Tells this connection from a later one libmicrohttpd allocates at the same address.
        let serial: UInt64
        /// The libmicrohttpd worker thread that accepted the connection and runs it.
        let worker: UInt
        let address: ClientAddress
        var phase: Phase
        var deadline: UInt64?
        var deadlineCut: Cut?
        var evicted = false
        /// The bytes the socket had received when the present wait for a head began (none when
        /// it opened), to tell at its deadline whether anything came since.
        var bytesBeforeHead: UInt64 = 0
    }

    private struct Connections {
        var entries: [UInt: Entry] = [:]
        /// Open connections of each worker thread that are not being evicted.
        var openByWorker: [UInt: Int] = [:]
        /// Open connections of each client address that are not being evicted.
        var openByAddress: [ClientAddress: Int] = [:]

        mutating func forget(_ entry: Entry) {
            openByWorker[entry.worker, default: 1] -= 1
            let left = openByAddress[entry.address, default: 1] - 1
            openByAddress[entry.address] = left > 0 ? left : nil
        }
        var nextSerial: UInt64 = 1
    }

    /// A body past its deadline, to answer: its connection, and which one it was.
    struct TimedOutBody: Sendable {
        let key: UInt
        let serial: UInt64
        var connection: OpaquePointer? { OpaquePointer(bitPattern: key) }
    }

    /// How often deadlines are checked: how late past its deadline a connection may be cut off.
    static let checkInterval = Duration.milliseconds(100)
    /// A body silent this long is probed for a closed peer, at most this often.
    static let silentBodyProbeInterval = Duration.milliseconds(300)

    let headerTimeout: Duration
    let bodyTimeout: Duration
    let bodyProgressBytes: Int
    /// Connections a worker thread may hold before each new one evicts the slowest (nil: no tier).
    let evictionThreshold: Int?
    private let clock: any ServiceClock
    private let connections = Mutex(Connections())
    /// Bumped by `start()` and `stop()`: a scheduled check of an earlier run does nothing.
    private let run = Atomic<UInt64>(0)
    private let expired = Atomic<Int>(0)
    private let handlers = Mutex<Handlers>(Handlers())

    private struct Handlers {
        /// Told (on the checking thread, no lock held) about each body past its deadline;
        /// returns whether it answered the request (408), otherwise the connection is cut off at
        /// once. The connection may have closed meanwhile: `isCurrent` says whether it is still it.
        var bodyTimedOut: @Sendable (TimedOutBody) -> Bool = { _ in false }
        /// Told about every connection closed here, for counting and logging.
        var cut: @Sendable (Cut) -> Void = { _ in }
    }

    init(
        headerTimeout: Duration, bodyTimeout: Duration, bodyProgressBytes: Int, evictionThreshold: Int?,
        clock: any ServiceClock
    ) {
        self.headerTimeout = headerTimeout
        self.bodyTimeout = bodyTimeout
        self.bodyProgressBytes = max(1, bodyProgressBytes)
        self.evictionThreshold = evictionThreshold
        self.clock = clock
    }

    /// Set once, before `start()`.
    func setHandlers(
        bodyTimedOut: @escaping @Sendable (TimedOutBody) -> Bool, cut: @escaping @Sendable (Cut) -> Void
    ) {
        handlers.withLock { $0 = Handlers(bodyTimedOut: bodyTimedOut, cut: cut) }
    }

    private func onCut(_ cut: Cut) { handlers.withLock { $0.cut }(cut) }
    private func onBodyTimeout(_ body: TimedOutBody) -> Bool { handlers.withLock { $0.bodyTimedOut }(body) }

    /// Connections cut off at a deadline so far.
    var expiredCount: Int { expired.load(ordering: .relaxed) }

    /// Connections opened and not yet closed.
    var openCount: Int { connections.withLock { $0.entries.count } }

    /// Request bodies being read now, each with its deadline running.
    var bodiesBeingRead: Int {
        connections.withLock { state in
            state.entries.values.count { if case .body = $0.phase { true } else { false } }
        }
    }

    /// A new connection, on the worker thread that accepted it. Past the worker's threshold it
    /// evicts the connection of that worker that has been slowest.
    func opened(_ connection: OpaquePointer) {
        let fd = ft_mhd_connection_fd(connection)
        guard fd >= 0 else { return }
        let now = clock.uptime
        let deadline = clock.deadline(after: headerTimeout)
        let worker = UInt(pthread_self())
        let address = ClientAddress(connection)
        let newKey = Self.key(connection)
        let evicted = connections.withLock { state -> Bool in
            state.entries[newKey] = Entry(
                fd: fd, serial: state.nextSerial, worker: worker, address: address, phase: .head(since: now),
                deadline: deadline, deadlineCut: .headerTimeout)
            state.nextSerial += 1
            let open = state.openByWorker[worker, default: 0] + 1
            state.openByWorker[worker] = open
            state.openByAddress[address, default: 0] += 1
            guard let evictionThreshold, open > evictionThreshold else { return false }
            // The heaviest address first, then the connection stalled longest.
            var chosen: (key: UInt, addressLoad: Int, since: UInt64)?
            for (key, entry) in state.entries where entry.worker == worker && !entry.evicted && key != newKey {
                let since: UInt64
                switch entry.phase {
                case .head(let started): since = started
                case .body(let progressAt, _, _, _): since = progressAt
                case .bodyPaused, .answering: continue
                }
                let load = state.openByAddress[entry.address, default: 0]
                if let current = chosen, load < current.addressLoad || (load == current.addressLoad && since >= current.since) {
                    continue
                }
                chosen = (key, load, since)
            }
            guard let chosen, let entry = state.entries[chosen.key] else { return false }
            // Under the lock: the socket cannot have been closed (and its number reused) yet.
            _ = shutdown(entry.fd, Int32(SHUT_RDWR))
            state.entries[chosen.key]?.evicted = true
            state.entries[chosen.key]?.deadline = nil
            state.forget(entry)
            return true
        }
        if evicted { onCut(.evicted) }
    }

    /// The head is in: what follows (body, answer, a long poll) is not bounded by the header timeout.
    func headersArrived(_ connection: OpaquePointer) {
        update(connection) { entry in
            entry.phase = .answering
            entry.deadline = nil
        }
    }

    /// The server starts reading the request's body (also after a pause it ended).
    func bodyStarted(_ connection: OpaquePointer) {
        let now = clock.uptime
        let deadline = clock.deadline(after: bodyTimeout)
        update(connection) { entry in
            entry.phase = .body(progressAt: now, sinceProgress: 0, lastByteAt: now, probedAt: now)
            entry.deadline = deadline
            entry.deadlineCut = .bodyTimeout
        }
    }

    /// `count` body bytes arrived: every `bodyProgressBytes` of them push the body deadline back.
    func bodyReceived(_ connection: OpaquePointer, _ count: Int) {
        let now = clock.uptime
        update(connection) { entry in
            guard case .body(let progressAt, let sinceProgress, _, let probedAt) = entry.phase else { return }
            let total = sinceProgress + count
            if total >= bodyProgressBytes {
                entry.phase = .body(progressAt: now, sinceProgress: 0, lastByteAt: now, probedAt: probedAt)
                entry.deadline = clock.deadline(after: bodyTimeout)
            } else {
                entry.phase = .body(progressAt: progressAt, sinceProgress: total, lastByteAt: now, probedAt: probedAt)
            }
        }
    }

    /// The server holds the client back (its consumer is full): no deadline until `bodyResumed`.
    func bodyPaused(_ connection: OpaquePointer) {
        update(connection) { entry in
            guard case .body = entry.phase else { return }
            entry.phase = .bodyPaused
            entry.deadline = nil
        }
    }

    /// The server reads on: the client gets a whole `bodyTimeout` again.
    func bodyResumed(_ connection: OpaquePointer) {
        let paused = connections.withLock { state -> Bool in
            guard case .bodyPaused = state.entries[Self.key(connection)]?.phase else { return false }
            return true
        }
        if paused { bodyStarted(connection) }
    }

    /// The body is complete, or the server stopped reading it.
    func bodyEnded(_ connection: OpaquePointer) {
        update(connection) { entry in
            switch entry.phase {
            case .body, .bodyPaused:
                entry.phase = .answering
                entry.deadline = nil
            case .head, .answering:
                break
            }
        }
    }

    /// A request ended; the connection may carry another one, whose head the clock now waits for.
    func requestEnded(_ connection: OpaquePointer) {
        let now = clock.uptime
        let deadline = clock.deadline(after: headerTimeout)
        let received = ft_tcp_bytes_received(ft_mhd_connection_fd(connection))
        update(connection) { entry in
            entry.phase = .head(since: now)
            entry.deadline = deadline
            entry.deadlineCut = .headerTimeout
            entry.bytesBeforeHead = received
        }
    }

    /// The connection is cut off `delay` from now, whatever it sends meanwhile.
    func cutOff(_ connection: OpaquePointer, after delay: Duration) {
        let deadline = clock.deadline(after: delay)
        update(connection) { entry in
            entry.phase = .answering
            entry.deadline = deadline
            entry.deadlineCut = nil
        }
    }

    /// Whether `body` still names the connection whose body timed out (it has not closed since).
    func isCurrent(_ body: TimedOutBody) -> Bool {
        connections.withLock { $0.entries[body.key]?.serial == body.serial }
    }

    /// Shuts the connection of a timed-out body down now, unless it closed meanwhile.
    func cutNow(_ body: TimedOutBody) {
        connections.withLock { state in
            guard let entry = state.entries[body.key], entry.serial == body.serial else { return }
            _ = shutdown(entry.fd, Int32(SHUT_RDWR))
            state.entries[body.key]?.deadline = nil
        }
    }

    func closed(_ connection: OpaquePointer) {
        connections.withLock { state in
            guard let entry = state.entries.removeValue(forKey: Self.key(connection)), !entry.evicted else { return }
            state.forget(entry)
        }
    }

    /// Open connections on the calling libmicrohttpd worker thread.
    var openOnThisWorker: Int {
        let worker = UInt(pthread_self())
        return connections.withLock { $0.openByWorker[worker, default: 0] }
    }

    /// Checks every `checkInterval` from now until `stop()`.
    func start() {
        scheduleCheck(run: run.add(1, ordering: .relaxed).newValue)
    }

    func stop() {
        run.add(1, ordering: .relaxed)
    }

    private func update(_ connection: OpaquePointer, _ change: (inout Entry) -> Void) {
        connections.withLock { state in
            let key = Self.key(connection)
            guard var entry = state.entries[key] else { return }
            change(&entry)
            state.entries[key] = entry
        }
    }

    private func scheduleCheck(run current: UInt64) {
        clock.schedule(at: clock.deadline(after: Self.checkInterval)) { [weak self] in
            guard let self, self.run.load(ordering: .relaxed) == current else { return }
            self.check()
            self.scheduleCheck(run: current)
        }
    }

    private func check() {
        let now = clock.uptime
        let probeInterval = Self.silentBodyProbeInterval.nanoseconds
        var cuts: [Cut] = []
        var timedOutBodies: [TimedOutBody] = []
        connections.withLock { state in
            for (key, entry) in state.entries {
                if let deadline = entry.deadline, deadline <= now {
                    state.entries[key]?.deadline = nil
                    if entry.deadlineCut == .bodyTimeout {
                        // Answered outside the lock (the answer takes the connection's own lock).
                        timedOutBodies.append(TimedOutBody(key: key, serial: entry.serial))
                        continue
                    }
                    // Under the lock: the socket cannot have been closed (and its number reused) yet.
                    var cut = entry.deadlineCut
                    if cut == .headerTimeout, case let received = ft_tcp_bytes_received(entry.fd), received != .max,
                        received == entry.bytesBeforeHead
                    {
                        cut = .idle
                    }
                    _ = shutdown(entry.fd, Int32(SHUT_RDWR))
                    if let cut { cuts.append(cut) } else { expired.add(1, ordering: .relaxed) }
                    continue
                }
                guard case .body(let progressAt, let sinceProgress, let lastByteAt, let probedAt) = entry.phase,
                    now >= lastByteAt + probeInterval, now >= probedAt + probeInterval
                else { continue }
                state.entries[key]?.phase = .body(
                    progressAt: progressAt, sinceProgress: sinceProgress, lastByteAt: lastByteAt, probedAt: now)
                if Self.peerHasClosed(entry.fd) {
                    // A new edge for libmicrohttpd, whose next read then returns the end it missed:
                    // it ends the request as the client's abort.
                    _ = shutdown(entry.fd, Int32(SHUT_RD))
                }
            }
        }
        expired.add(cuts.count + timedOutBodies.count, ordering: .relaxed)
        for cut in cuts { onCut(cut) }
        for body in timedOutBodies {
            onCut(.bodyTimeout)
            if !onBodyTimeout(body) { cutNow(body) }
        }
    }

    /// Whether the peer has closed its sending side and nothing it sent is left unread (or the
    /// connection failed): a peek that finds the end rather than bytes or nothing yet.
    private static func peerHasClosed(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        let got = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        if got == 0 { return true }
        return got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR
    }

    private static func key(_ connection: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: connection)) }
}

/// A client's IP address (IPv4 mapped into IPv6), to count its connections; all-zero when unknown.
struct ClientAddress: Hashable, Sendable {
    let high: UInt64
    let low: UInt64

    init(_ connection: OpaquePointer) {
        var bytes = [UInt8](repeating: 0, count: 16)
        _ = ft_mhd_client_address(connection, &bytes)
        high = bytes[0..<8].reduce(0) { $0 << 8 | UInt64($1) }
        low = bytes[8..<16].reduce(0) { $0 << 8 | UInt64($1) }
    }
}
