import Decoding
import HTTPServer
import Logging
import SessionCatalog
import Sessions

/// The whole service as `frametap serve` runs it: a session registry with its metrics, the
/// API routes, and the HTTP server. Tests build exactly this, on an ephemeral port.
public final class FrameTapService: Sendable {
    public let registry: SessionRegistry
    /// The declared and kept sessions; `PUT` and `DELETE` go through it.
    public let catalog: SessionCatalog
    /// How the configuration file was read (`GET /system`, events, metrics).
    public let configuration: ConfigurationStatus
    public let metrics: FrameTapMetrics
    public let api: FrameTapAPI
    public let server: HTTPServer

    /// `http.requestObserver` and `http.connectionObserver` are replaced by the API's metrics
    /// hooks (observers already set there still run after them), and `http.problemTypePrefix` by FrameTap's. `access` checks
    /// every route's permission (nil: every route is open). `services.clock` is the service's one
    /// clock: it replaces `http.clock`, so the HTTP edge reads it too. `hardware` is what
    /// `GET /system` and the hardware gauges report (default: probed once per process on first use).
    /// `state` is `--state-dir`'s store with the definitions it held at start (`catalog.restore()`
    /// makes them), `configurationFile` the file the server was started with.
    public init(
        http: HTTPServerConfiguration, sessions: ServerConfiguration, services: SessionServices,
        access: AccessControl? = nil,
        metrics: FrameTapMetrics = FrameTapMetrics(), hardware: HardwareReport = SystemInfo.hardware,
        state: (store: SessionStateStore, saved: [SessionID: SessionOptions])? = nil, configurationFile: String? = nil,
        logger: Logger = Logger(label: "frametap")
    ) {
        self.metrics = metrics
        SystemInfo.registerHardwareMetrics(metrics, hardware: hardware)
        registry = SessionRegistry(configuration: sessions, services: services, metrics: metrics, logger: logger)
        catalog = SessionCatalog(registry: registry, store: state?.store, saved: state?.saved ?? [:], logger: logger)
        configuration = ConfigurationStatus(
            file: configurationFile, events: registry.events, metrics: metrics, clock: services.clock,
            logger: Logger(label: "frametap.configuration"))
        let api = FrameTapAPI(
            catalog: catalog, configuration: configuration, metrics: metrics, hardware: hardware, access: access,
            logger: logger)
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
        server = HTTPServer(configuration: http, router: api.router(), authorizer: access, clock: services.clock)
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

    /// Serves until SIGINT or SIGTERM, then stops gracefully; `onHangup` runs on each SIGHUP
    /// (after the TLS files are read again).
    public func run(onHangup: (@Sendable () -> Void)? = nil) throws(HTTPServerError) {
        registry.startIdleEviction()
        defer { registry.shutdown() }
        try server.run(onHangup: onHangup)
    }
}
