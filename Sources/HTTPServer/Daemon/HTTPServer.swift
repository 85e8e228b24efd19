import CMicroHTTPD
import Dispatch
import Logging
import Synchronization
import Timekeeping

#if canImport(Glibc)
import Glibc
#endif

public struct HTTPServerConfiguration: Sendable {
    /// Numeric IPv4 or IPv6 address to bind.
    public var host: String = "127.0.0.1"
    /// 0 picks a free port; read it back from `HTTPServer.port`.
    public var port: UInt16 = 8080
    /// libmicrohttpd worker threads (each runs its own epoll loop).
    public var threadPoolSize: Int = 2
    /// Open connections at most; more are closed as soon as they are accepted. Each worker
    /// thread holds its share, the last eighth of which is only entered by closing the
    /// connection that has been slowest (see `ConnectionDeadlines`).
    public var maxConnections: Int = 1024
    /// Open connections per client address at most (0: no limit, for use behind a proxy, where
    /// every connection comes from the proxy). One address cannot take every slot.
    public var maxConnectionsPerIP: Int = 256
    /// A request's head must arrive within this long of the connection opening or of its
    /// previous request ending (see `ConnectionDeadlines`).
    public var headerTimeout: Duration = .seconds(10)
    /// A request body must deliver `bodyProgressBytes` within this long, again and again, or
    /// it is answered 408 `body_timeout` and its connection closed; time the server holds the
    /// client back (its consumer is full) does not count. A live push sends far more.
    public var bodyTimeout: Duration = .seconds(10)
    public var bodyProgressBytes: Int = 1024
    /// Per-connection buffer memory; uploads arrive in pieces of about half of it.
    public var connectionMemoryLimit: Int = 32 * 1024
    /// Idle connections are closed after this; suspended connections never time out.
    public var connectionTimeout: Duration = .seconds(60)
    /// When set, the server speaks HTTPS only, with this certificate (reloaded by `reloadTLS()`).
    public var tls: TLSFiles?
    /// Pages of other origins that may read answers (CORS); nil: none (the browser's default).
    public var crossOrigin: CrossOriginPolicy?
    /// How long `stop()` lets in-flight requests finish before closing them.
    public var shutdownGracePeriod: Duration = .seconds(10)
    /// A streaming connection with nothing to send pulls its source with `idle: true` this
    /// often, so sources can resend their last chunk and dead clients get noticed.
    public var heartbeatInterval: Duration = .seconds(1)
    /// After an upload was answered mid-body (too large, the consumer stopped listening, the
    /// server stops), up to this many further bytes are read and dropped, so a client that
    /// reads its answer only after sending gets to see it; then the connection is closed.
    public var maxDiscardBytes: Int = 8 << 20
    /// ...and for at most this long (a live pusher sends forever, slowly).
    public var maxDiscardDuration: Duration = .seconds(2)
    /// At shutdown, how long uploads (answered 503 mid-body) may keep their connection so the
    /// answer reaches the client before the connection is closed.
    public var uploadShutdownLinger: Duration = .milliseconds(300)
    /// Called once per finished request (route pattern, status, duration), on a server thread.
    public var requestObserver: (@Sendable (RequestRecord) -> Void)?
    /// Called for each connection the server closes or refuses on its own (limits, deadlines,
    /// the tier for clients that behave), on a server thread; for metrics.
    public var connectionObserver: (@Sendable (ConnectionEvent) -> Void)?
    /// The RFC 9457 `type` of every problem answer is this prefix followed by the problem's
    /// code, e.g. "urn:example:problem:" gives "urn:example:problem:not_found". Nil leaves
    /// `type` out (RFC 9457 then reads it as "about:blank").
    public var problemTypePrefix: String?
    public var logger = Logger(label: "HTTPServer")

    public init() {}
}

/// A PEM certificate chain (leaf first) and its PEM private key, read at start and on
/// `HTTPServer.reloadTLS()`.
public struct TLSFiles: Sendable, Equatable {
    public var certificatePath: String
    public var keyPath: String

    public init(certificatePath: String, keyPath: String) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
    }

    /// Loads both files; nothing is used until they loaded together.
    func load() throws(HTTPServerError) -> OpaquePointer {
        var error = [CChar](repeating: 0, count: 512)
        guard let credentials = ft_tls_load(certificatePath, keyPath, &error, error.count) else {
            throw HTTPServerError(
                description: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return credentials
    }
}

/// A connection the server refused or closed on its own, for metrics.
public enum ConnectionEvent: Sendable, Equatable {
    /// Closed as soon as it was accepted: `maxConnections` were open.
    case refusedAtConnectionLimit
    /// Closed as soon as it was accepted: its address had `maxConnectionsPerIP` open.
    case refusedAtAddressLimit
    /// Its head did not arrive within `headerTimeout`, though some of it, or something, did.
    case headerTimeout
    /// Nothing arrived within `headerTimeout` of its opening or its previous request's end: a
    /// keep-alive connection held for a next request (a proxy's pool), closed to free the slot.
    case idle
    /// Its body delivered too little within `bodyTimeout` (answered 408, then closed).
    case bodyTimeout
    /// Closed to make room, having made no progress for longest while the server was near its
    /// connection limit.
    case evicted
}

/// One finished request, for metrics.
public struct RequestRecord: Sendable {
    public enum Outcome: Sendable, Equatable {
        case completed
        /// Answered before the request body ended (see `HTTPServerConfiguration.maxDiscardBytes`).
        case answeredEarly
        case clientGone
        case timedOut
        case serverShutdown
        case failed
    }

    /// Nil when libmicrohttpd refused the request before its head reached FrameTap (a
    /// Content-Length it cannot parse).
    public let method: HTTPMethod?
    /// The matched route pattern, or nil (unknown path).
    public let route: String?
    /// The status sent, or nil when the connection ended before an answer was queued.
    public let status: HTTPStatus?
    public let duration: Duration
    public let outcome: Outcome
}

public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// A libmicrohttpd server: a thread pool of epoll loops, suspend/resume instead of blocked
/// threads for deferred answers, streams and upload backpressure.
public final class HTTPServer: Sendable {
    let core: ServerCore
    private let daemon = Mutex<DaemonState?>(nil)

    /// Only ever inside `daemon` (a Mutex needs no Sendable value: it is what makes sharing safe).
    struct DaemonState {
        let pointer: OpaquePointer
        let loggerSlot: UnsafeMutablePointer<ft_mhd_logger_slot>
    }

    /// `authorizer` is asked about every routed request with what its route needs (see `Router`);
    /// without one every route is open. Every deadline, timeout, heartbeat and duration of the
    /// server is read from `clock`, and its timers drive them (the periodic deadline check too),
    /// so a test can move time by hand. libmicrohttpd's own idle timeout (`connectionTimeout`)
    /// runs on libmicrohttpd's.
    public init<Access>(
        configuration: HTTPServerConfiguration, router: Router<Access>,
        authorizer: (any RequestAuthorizer<Access>)? = nil, clock: any ServiceClock
    ) {
        let bound = router.mapAccess { access -> ServerCore.AccessCheck? in
            guard let authorizer else { return nil }
            return { request in authorizer.authorize(request, access: access) }
        }
        core = ServerCore(configuration: configuration, router: bound, clock: clock)
    }

    deinit {
        // libmicrohttpd holds an unretained pointer to `core`; never let it outlive us.
        stop(gracePeriod: .zero)
    }

    /// The bound port (useful with port 0), or 0 before `start()`.
    public var port: UInt16 { core.boundPort.load(ordering: .acquiring) }

    /// Requests currently being handled (including suspended and streaming ones).
    public var activeRequestCount: Int { core.activeCount }

    /// Connections libmicrohttpd has accepted and not yet closed.
    public var openConnectionCount: Int { core.deadlines.openCount }

    public func start() throws(HTTPServerError) {
        try daemon.withLock { (state: inout DaemonState?) throws(HTTPServerError) in
            guard state == nil else { return }
            let configuration = core.configuration
            let credentials = try configuration.tls?.load()
            let slot = UnsafeMutablePointer<ft_mhd_logger_slot>.allocate(capacity: 1)
            slot.initialize(to: ft_mhd_logger_slot())
            let coreReference = Unmanaged.passUnretained(core).toOpaque()
            var error: Int32 = 0
            let pointer = configuration.host.withCString { host -> OpaquePointer? in
                var config = ft_mhd_config()
                config.flags =
                    MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue
                    | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_ITC.rawValue
                config.port = configuration.port
                config.bind_host = host
                config.access_handler = accessHandlerCallback
                config.access_handler_cls = coreReference
                config.completed = requestCompletedCallback
                config.completed_cls = coreReference
                config.uri_logger = uriLogCallback
                config.uri_logger_cls = coreReference
                config.logger = logCallback
                config.logger_cls = coreReference
                config.thread_pool_size = UInt32(max(1, configuration.threadPoolSize))
                config.connection_limit = UInt32(max(0, configuration.maxConnections))
                config.per_ip_connection_limit = UInt32(max(0, configuration.maxConnectionsPerIP))
                config.notify_connection = notifyConnectionCallback
                config.notify_connection_cls = coreReference
                config.connection_memory_limit = max(0, configuration.connectionMemoryLimit)
                config.connection_timeout_seconds = UInt32(
                    clamping: max(0, configuration.connectionTimeout.components.seconds))
                config.tls = credentials == nil ? 0 : 1
                return ft_mhd_start(&config, slot, &error)
            }
            guard let pointer else {
                slot.deallocate()
                let reason = error == FT_MHD_BAD_BIND_HOST ? "not a numeric IP address" : "errno \(errno)"
                throw HTTPServerError(
                    description: "cannot listen on \(configuration.host):\(configuration.port) (\(reason))")
            }
            core.deadlines.start()
            let port = ft_mhd_bound_port(pointer)
            if let credentials, ft_tls_use(port, credentials) != 0 {
                MHD_stop_daemon(pointer)
                slot.deallocate()
                throw HTTPServerError(description: "too many TLS servers in one process")
            }
            core.boundPort.store(port, ordering: .releasing)
            core.listening.store(true, ordering: .releasing)
            state = DaemonState(pointer: pointer, loggerSlot: slot)
        }
    }

    /// Graceful stop: stop accepting, end streams and answer pending deferred responses
    /// (with their timeout answer, or 503), give other in-flight requests up to
    /// `gracePeriod` (default: the configured one), then close everything. Blocks the caller.
    public func stop(gracePeriod: Duration? = nil) {
        daemon.withLock { state in
            guard let daemon = state else { return }
            state = nil
            let grace = gracePeriod ?? core.configuration.shutdownGracePeriod
            let listenSocket = MHD_quiesce_daemon(daemon.pointer)
            core.listening.store(false, ordering: .releasing)
            core.draining.store(true, ordering: .releasing)
            core.endWaitingRequests()
            // Requests being answered get the grace period. Uploads were answered 503 at once
            // (at their next piece of body) and told to keep nothing more; they get a short
            // moment for that answer to go out, since an idle client may never send the piece
            // that lets it out, and then they are closed with everything else.
            core.waitForInFlightRequests(gracePeriod: grace)
            core.stopping.store(true, ordering: .releasing)
            // libmicrohttpd must not be stopped with suspended connections.
            core.resumeAllSuspended()
            MHD_stop_daemon(daemon.pointer)
            core.deadlines.stop()
            if listenSocket >= 0 { close(listenSocket) }
            daemon.loggerSlot.deallocate()
        }
    }

    /// Reads the certificate and key again; new connections get the new ones, open ones keep
    /// theirs. Nothing changes when they cannot be loaded (the error says why).
    public func reloadTLS() throws(HTTPServerError) {
        guard let files = core.configuration.tls else {
            throw HTTPServerError(description: "the server does not use TLS")
        }
        let credentials = try files.load()
        _ = ft_tls_use(port, credentials)
    }

    /// Starts (if needed), serves until SIGINT or SIGTERM, then stops gracefully. SIGHUP
    /// reloads the TLS certificate and key, then calls `onHangup` (the caller's own reload).
    public func run(onHangup: (@Sendable () -> Void)? = nil) throws(HTTPServerError) {
        try start()
        core.configuration.logger.notice(
            "listening",
            metadata: [
                "host": "\(core.configuration.host)", "port": "\(port)",
                "scheme": "\(core.configuration.tls == nil ? "http" : "https")",
            ])
        let stopSignal = DispatchSemaphore(value: 0)
        let queue = DispatchQueue(label: "HTTPServer.signals")
        // The default actions would kill the process before the graceful stop; Dispatch
        // sources receive the signals instead, on a normal queue thread.
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        var sources = [SIGINT, SIGTERM].map { number -> any DispatchSourceSignal in
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { stopSignal.signal() }
            source.resume()
            return source
        }
        signal(SIGHUP, SIG_IGN)
        let reload = DispatchSource.makeSignalSource(signal: SIGHUP, queue: queue)
        reload.setEventHandler { [self] in
            defer { onHangup?() }
            guard let files = core.configuration.tls else { return }
            do {
                try reloadTLS()
                core.configuration.logger.notice("TLS certificate reloaded", metadata: ["certificate": "\(files.certificatePath)"])
            } catch {
                core.configuration.logger.error(
                    "TLS certificate not reloaded; the previous one stays", metadata: ["reason": "\(error)"])
            }
        }
        reload.resume()
        sources.append(reload)
        stopSignal.wait()
        core.configuration.logger.notice("stopping")
        stop()
        for source in sources { source.cancel() }
    }
}

/// Everything libmicrohttpd's threads reach through the callback `cls` pointer.
final class ServerCore: Sendable {
    let configuration: HTTPServerConfiguration
    let clock: any ServiceClock
    /// Each route's access value bound to the authorizer: the check to run before its body.
    let router: Router<AccessCheck?>
    let boundPort = Atomic<UInt16>(0)
    let listening = Atomic<Bool>(false)
    /// Set once stop() began: new requests are refused with 503 and Connection: close.
    let draining = Atomic<Bool>(false)
    let deadlines: ConnectionDeadlines
    let logs: ConnectionLog
    /// Set right before MHD_stop_daemon: nothing may suspend any more.
    let stopping = Atomic<Bool>(false)
    private let nextID = Atomic<UInt64>(1)
    /// `until`: an `uptime`.
    private let expectedLogs = Mutex<[(prefix: String, until: UInt64)]>([])
    /// Every request from its URI callback until it completed, or until its connection closed:
    /// this is what keeps each `ConnectionContext` alive (libmicrohttpd's `*con_cls` holds an
    /// unretained pointer), so a request libmicrohttpd never reports completed is freed with
    /// its connection all the same.
    private let requests = Mutex(LiveRequests())
    /// Signalled, once `stop()` began, whenever what it waits for may have changed: a request
    /// ended, or one of its deadlines came. Counting, so no signal between a check and the wait
    /// is lost.
    private let shutdownProgress = DispatchSemaphore(value: 0)
    /// Bumped when `waitForInFlightRequests` begins and ends: its periodic looks stop with it.
    private let shutdownLooks = Atomic<UInt64>(0)

    typealias AccessCheck = @Sendable (HTTPRequest) -> HTTPError?

    private struct LiveRequests {
        var byID: [UInt64: ConnectionContext] = [:]
        /// The request each connection is on: one at a time, as a connection's next request
        /// begins only after its previous one completed.
        var byConnection: [UInt: ConnectionContext] = [:]
    }

    init(configuration: HTTPServerConfiguration, router: Router<AccessCheck?>, clock: any ServiceClock) {
        self.configuration = configuration
        self.clock = clock
        self.router = router
        logs = ConnectionLog(logger: configuration.logger, clock: clock)
        deadlines = ConnectionDeadlines(
            headerTimeout: configuration.headerTimeout, bodyTimeout: configuration.bodyTimeout,
            bodyProgressBytes: configuration.bodyProgressBytes,
            evictionThreshold: Self.evictionThreshold(configuration), clock: clock)
        deadlines.setHandlers(
            bodyTimedOut: { [weak self] body in self?.bodyTimedOut(body) ?? false },
            cut: { [weak self] cut in self?.connectionCut(cut) })
    }

    /// Each worker thread's share of `maxConnections` (libmicrohttpd splits the limit evenly,
    /// the remainder going one each to the first workers).
    static func connectionsPerWorker(_ configuration: HTTPServerConfiguration) -> Int {
        max(1, configuration.maxConnections / max(1, configuration.threadPoolSize))
    }

    /// Past this many connections on one worker, each new one evicts the slowest: an eighth of
    /// the worker's share is kept for connections that behave (at least 2; no tier for a share
    /// under 4).
    static func evictionThreshold(_ configuration: HTTPServerConfiguration) -> Int? {
        let share = connectionsPerWorker(configuration)
        guard share >= 4 else { return nil }
        return share - max(2, share / 8)
    }

    /// A body past its deadline: answered 408 when it is still being read, otherwise its
    /// connection is cut off (the caller does it on `false`).
    private func bodyTimedOut(_ body: ConnectionDeadlines.TimedOutBody) -> Bool {
        guard let context = requests.withLock({ $0.byConnection[body.key] }) else { return false }
        return context.answerBodyTimeout(stillCurrent: { [deadlines] in deadlines.isCurrent(body) })
    }

    private func connectionCut(_ cut: ConnectionDeadlines.Cut) {
        let event: ConnectionEvent
        switch cut {
        case .headerTimeout: event = .headerTimeout
        case .idle: event = .idle
        case .bodyTimeout: event = .bodyTimeout
        case .evicted: event = .evicted
        }
        configuration.connectionObserver?(event)
        logs.note(event)
    }

    func connectionNotified(_ connection: OpaquePointer, _ code: MHD_ConnectionNotificationCode) {
        switch code {
        case .CONNECTION_NOTIFY_STARTED:
            deadlines.opened(connection)
        case .CONNECTION_NOTIFY_CLOSED:
            // libmicrohttpd 0.9.75 closes some connections without reporting their request
            // completed (a refusal of its own it cannot send marks the connection closed
            // directly); the request ends here then, so nothing of it outlives the connection.
            if let orphan = requests.withLock({ $0.byConnection[Self.key(connection)] }) {
                orphan.completed(.REQUEST_TERMINATED_WITH_ERROR)
            }
            deadlines.closed(connection)
        default:
            break
        }
    }

    var isDraining: Bool { draining.load(ordering: .acquiring) }
    var isStopping: Bool { stopping.load(ordering: .acquiring) }
    var activeCount: Int { requests.withLock { $0.byID.count } }

    func makeContext(connection: OpaquePointer, rawTarget: [UInt8]) -> ConnectionContext {
        let id = nextID.add(1, ordering: .relaxed).oldValue
        let context = ConnectionContext(
            core: self, connection: MHDConnectionHandle(connection), id: id, rawTarget: rawTarget)
        let previous = requests.withLock { requests -> ConnectionContext? in
            requests.byID[id] = context
            return requests.byConnection.updateValue(context, forKey: Self.key(connection))
        }
        // Never seen, as a connection's next request starts after its previous one completed;
        // should it happen, the previous one ends now rather than never.
        previous?.completed(.REQUEST_TERMINATED_WITH_ERROR)
        return context
    }

    func forget(_ context: ConnectionContext) {
        requests.withLock { requests in
            requests.byID.removeValue(forKey: context.id)
            let key = Self.key(context.connection.pointer)
            if requests.byConnection[key] === context { requests.byConnection.removeValue(forKey: key) }
        }
        if isDraining { shutdownProgress.signal() }
    }

    private var liveContexts: [ConnectionContext] { requests.withLock { Array($0.byID.values) } }

    private static func key(_ connection: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: connection)) }

    func endWaitingRequests() {
        for context in liveContexts { context.endWaiting() }
    }

    func resumeAllSuspended() {
        for context in liveContexts { context.resumeForStop() }
    }

    /// `stop()`, once draining: returns when no request is being answered and the uploads are
    /// gone or had `uploadShutdownLinger`, or when `gracePeriod` is over, whichever comes first
    /// (both timed on the server's clock).
    func waitForInFlightRequests(gracePeriod: Duration) {
        let lingerEnds = clock.deadline(after: configuration.uploadShutdownLinger)
        let graceEnds = clock.deadline(after: gracePeriod)
        for deadline in [lingerEnds, graceEnds] {
            clock.schedule(at: deadline) { [weak self] in self?.shutdownProgress.signal() }
        }
        // A look every so often as well: a stream stalls by time passing, not by an event.
        let look = shutdownLooks.add(1, ordering: .relaxed).newValue
        defer { shutdownLooks.add(1, ordering: .relaxed) }
        scheduleShutdownLook(look)
        while true {
            let (answering, uploads) = shutdownWork()
            let now = clock.uptime
            if answering == 0 && (uploads == 0 || now >= lingerEnds) { return }
            if now >= graceEnds { return }
            shutdownProgress.wait()
        }
    }

    private func scheduleShutdownLook(_ look: UInt64) {
        clock.schedule(at: clock.deadline(after: ConnectionDeadlines.checkInterval)) { [weak self] in
            guard let self, self.shutdownLooks.load(ordering: .relaxed) == look else { return }
            self.shutdownProgress.signal()
            self.scheduleShutdownLook(look)
        }
    }

    /// Connections `stop()` still waits for: those answering a request, and uploads.
    private func shutdownWork() -> (answering: Int, uploads: Int) {
        var answering = 0
        var uploads = 0
        for context in liveContexts {
            switch context.shutdownWork {
            case .none: break
            case .answering: answering += 1
            case .upload: uploads += 1
            }
        }
        return (answering, uploads)
    }

    /// The next "application reported internal error" libmicrohttpd logs is ours: a connection
    /// we close on purpose (its answer went out early, or it passed the discard limit) by
    /// returning MHD_NO, for which libmicrohttpd has no quieter way.
    func expectDeliberateClose() {
        expectLog(startingWith: "Application reported internal error")
    }

    /// A stream ends because its client left (a viewer closed its tab): libmicrohttpd logs that
    /// as an application error.
    func expectStreamEndedForDepartedClient() {
        expectLog(startingWith: "Closing connection (application error generating response)")
    }

    /// libmicrohttpd reports what the server did on purpose in the same words as real trouble;
    /// the lines expected that way are logged at debug level instead of as warnings.
    /// An expectation lapses after a second, so one that never comes cannot hide a real error later.
    private func expectLog(startingWith prefix: String, times: Int = 1) {
        let until = clock.deadline(after: .seconds(1))
        expectedLogs.withLock { $0.append(contentsOf: repeatElement((prefix: prefix, until: until), count: times)) }
    }

    private func isExpected(_ message: String) -> Bool {
        let now = clock.uptime
        return expectedLogs.withLock { expected in
            expected.removeAll { $0.until < now }
            guard let index = expected.firstIndex(where: { message.hasPrefix($0.prefix) }) else { return false }
            expected.remove(at: index)
            return true
        }
    }

    /// libmicrohttpd's words (0.9.75) for a client that went away: mid-request, or while its
    /// answer was being sent (EPIPE, ECONNRESET; a send failure it gives no reason for).
    static func isClientDeparture(_ message: String) -> Bool {
        if message.hasPrefix("Connection was closed by remote side") || message.hasPrefix("Connection socket is closed when reading")
            || message.hasPrefix("Socket has been disconnected when reading") || message.hasPrefix("Failed to send data in request for")
        {
            return true
        }
        let departed = ["The socket is no longer available for sending", "The connection was forcibly closed by remote peer"]
        return message.hasPrefix("Failed to send") && departed.contains(where: message.contains)
    }

    func log(_ message: String) {
        if message.hasPrefix("Failed to parse `Content-Length'") || message.hasPrefix("Too large value of 'Content-Length'")
        {
            // See ConnectionContext.answerUnparsableContentLength.
            let thread = pthread_self()
            let candidates = liveContexts.filter { pthread_equal($0.thread, thread) != 0 }
            let answered = candidates.filter { $0.answerUnparsableContentLength() }.count
            if answered > 0 {
                expectLog(startingWith: "Error processing request", times: answered)
                expectLog(startingWith: "Failed to send the response headers", times: answered)
                configuration.logger.debug("libmicrohttpd: \(message) (answered with a problem instead)")
                return
            }
        }
        if message.hasPrefix("Error processing request"), message.contains("chunked encod") {
            // See ConnectionContext.answerMalformedChunk ("chunked encoding was syntactically
            // incorrect", "chunked encoded request is too large"). Two chunked bodies read on this
            // thread at once cannot be told apart: then libmicrohttpd's own answer goes out.
            let candidates = liveContexts.filter(\.mayBeReadingChunkedBodyOnThisThread)
            if candidates.count == 1, candidates[0].answerMalformedChunk() {
                expectLog(startingWith: "Failed to send")
                configuration.logger.debug("libmicrohttpd: \(message) (answered 400 invalid_chunked_encoding instead)")
                return
            }
        }
        if message.hasPrefix("Error: received handshake message out of context") {
            // libmicrohttpd's words for any failed TLS handshake: the client is gone, nothing to fix here.
            logs.write("tls-handshake", "a client failed the TLS handshake (plain HTTP on the HTTPS port?); closed", level: .info)
            return
        }
        if isExpected(message) {
            configuration.logger.debug("libmicrohttpd: \(message) (expected)")
            return
        }
        if message.hasPrefix("Server reached connection limit") {
            // Its words for both limits; a worker below its share refused for the address.
            let event: ConnectionEvent =
                deadlines.openOnThisWorker >= Self.connectionsPerWorker(configuration)
                ? .refusedAtConnectionLimit : .refusedAtAddressLimit
            configuration.connectionObserver?(event)
            logs.note(event)
            return
        }
        if Self.isClientDeparture(message) {
            // A client that left mid-request, or one the server cut off: nothing to act on.
            configuration.logger.debug("libmicrohttpd: \(message)")
            return
        }
        logs.write(String(message.prefix(40)), "libmicrohttpd: \(message)", level: .warning)
    }
}
