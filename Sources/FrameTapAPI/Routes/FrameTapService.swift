import Decoding
import HTTPServer
import Logging
import Sessions

/// The whole service as `frametap serve` runs it: a session registry with its metrics, the
/// API routes, and the HTTP server. Tests build exactly this, on an ephemeral port.
public final class FrameTapService: Sendable {
    public let registry: SessionRegistry
    public let metrics: FrameTapMetrics
    public let api: FrameTapAPI
    public let server: HTTPServer

    /// `http.requestObserver` and `http.connectionObserver` are replaced by the API's metrics
    /// hooks (observers already set there still run after them), and `http.problemTypePrefix` by FrameTap's. `access` checks
    /// every route's permission (nil: every route is open). `http.clock` is the service's one
    /// clock: the sessions read it too. `hardware` is what `GET /system` and the hardware gauges
    /// report (default: probed once per process on first use).
    public init(
        http: HTTPServerConfiguration, sessions: ServerConfiguration, access: AccessControl? = nil,
        metrics: FrameTapMetrics = FrameTapMetrics(), hardware: HardwareReport = SystemInfo.hardware,
        logger: Logger = Logger(label: "frametap")
    ) {
        self.metrics = metrics
        SystemInfo.registerHardwareMetrics(metrics, hardware: hardware)
        registry = SessionRegistry(configuration: sessions, metrics: metrics, logger: logger, clock: http.clock)
        let api = FrameTapAPI(registry: registry, metrics: metrics, hardware: hardware, logger: logger)
        self.api = api
        var http = http
        http.problemTypePrefix = FrameTapAPI.problemTypePrefix
        let previousObserver = http.requestObserver
        http.requestObserver = { record in
            api.observe(record)
            previousObserver?(record)
        }
        let previousConnectionObserver = http.connectionObserver
        http.connectionObserver = { event in
            api.observe(event)
            previousConnectionObserver?(event)
        }
        server = HTTPServer(configuration: http, router: api.router(), authorizer: access)
    }

    /// The bound port (useful with port 0).
    public var port: UInt16 { server.port }

    /// Starts listening and the idle-session eviction; returns at once.
    public func start() throws(HTTPServerError) {
        try server.start()
        registry.startIdleEviction()
    }

    /// Graceful stop: in-flight requests finish (streams end), then every session is closed.
    public func stop() {
        server.stop()
        registry.shutdown()
    }

    /// Serves until SIGINT or SIGTERM, then stops gracefully.
    public func run() throws(HTTPServerError) {
        registry.startIdleEviction()
        defer { registry.shutdown() }
        try server.run()
    }
}
