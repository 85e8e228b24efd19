import CoreMetrics
import Metrics
import Prometheus
import Synchronization

/// The service's metrics: swift-metrics objects backed by one Prometheus registry.
///
/// Every metric is created with an explicit factory instead of the process-wide
/// `MetricsSystem`, so each server (and each test) has its own registry and counts;
/// `bootstrapGlobalMetricsSystem()` additionally routes other libraries' metrics there.
public final class FrameTapMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    public let factory: PrometheusMetricsFactory

    let activeSessions: CoreMetrics.Meter
    let bytesIn: CoreMetrics.Counter
    let framesDecoded: CoreMetrics.Counter
    let mjpegClients: CoreMetrics.Meter
    let decodeLatency: CoreMetrics.Timer
    private let labelled = Mutex<[LabelledKey: AnyObject]>([:])

    private struct LabelledKey: Hashable {
        let name: String
        let labels: [String]
    }

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        // Sub-millisecond steps matter for small JPEGs and for decode latency.
        let fineBuckets: [Duration] = [
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
            .milliseconds(20), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .seconds(2.5),
        ]
        factory.durationHistogramBuckets = [
            Names.encodeSeconds: fineBuckets,
            Names.decodeLatency: fineBuckets,
            Names.requestSeconds: fineBuckets,
        ]
        self.factory = factory
        activeSessions = CoreMetrics.Meter(label: Names.activeSessions, factory: factory)
        bytesIn = CoreMetrics.Counter(label: Names.bytesIn, factory: factory)
        framesDecoded = CoreMetrics.Counter(label: Names.framesDecoded, factory: factory)
        mjpegClients = CoreMetrics.Meter(label: Names.mjpegClients, factory: factory)
        decodeLatency = CoreMetrics.Timer(label: Names.decodeLatency, factory: factory)
        // Present from the start so dashboards see zeros rather than missing series.
        activeSessions.set(0)
        mjpegClients.set(0)
    }

    /// Makes this registry the backend of `MetricsSystem` for the whole process (call once, at start-up).
    public func bootstrapGlobalMetricsSystem() {
        MetricsSystem.bootstrap(factory)
    }

    /// The Prometheus text exposition, for `GET /metrics`.
    public func exposition() -> String {
        registry.emitToString()
    }

    public static let expositionContentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The HTTP layer's hook: one call per finished request.
    /// `route` must be a template (`/sessions/{id}/frame/latest.jpg`), never a raw path, so the
    /// number of series stays bounded.
    public func recordRequest(route: String, status: Int, duration: Duration? = nil) {
        counter(Names.requests, ["route": route, "status": String(status)]).increment()
        if let duration {
            timer(Names.requestSeconds, ["route": route]).recordNanoseconds(Int64(duration.nanoseconds))
        }
    }

    func recordNALUnits(type: String, count: Int) {
        counter(Names.nalUnits, ["type": type]).increment(by: count)
    }

    func recordError(code: String) {
        counter(Names.decodeErrors, ["code": code]).increment()
    }

    func recordEncode(format: String, duration: Duration) {
        counter(Names.encodes, ["format": format]).increment()
        timer(Names.encodeSeconds, ["format": format]).recordNanoseconds(Int64(duration.nanoseconds))
    }

    /// An upload that ended before its body did, by why: `client_gone`, `session_deleted`,
    /// `body_too_large`, `shutting_down`, `spool_failed`. All but the first were cut off by the
    /// server, and their client was answered at once.
    func recordUploadStopped(reason: String) {
        counter(Names.uploadsStopped, ["reason": reason]).increment()
    }

    func recordSessionEnded(reason: String) {
        counter(Names.sessionsEnded, ["reason": reason]).increment()
    }

    func recordSessionCreated() {
        counter(Names.sessionsCreated, [:]).increment()
    }

    private func counter(_ name: String, _ labels: KeyValuePairs<String, String>) -> CoreMetrics.Counter {
        cached(name, labels) { CoreMetrics.Counter(label: name, dimensions: $0, factory: factory) }
    }

    private func timer(_ name: String, _ labels: KeyValuePairs<String, String>) -> CoreMetrics.Timer {
        cached(name, labels) { CoreMetrics.Timer(label: name, dimensions: $0, factory: factory) }
    }

    // swift-metrics objects are cheap to use but not to create (a registry lookup under a lock),
    // and the hot path (every upload chunk) needs them by label value.
    private func cached<Metric: AnyObject>(
        _ name: String, _ labels: KeyValuePairs<String, String>, make: ([(String, String)]) -> Metric
    ) -> Metric {
        let key = LabelledKey(name: name, labels: labels.flatMap { [$0.key, $0.value] })
        return labelled.withLock { cache in
            if let existing = cache[key] as? Metric { return existing }
            let metric = make(labels.map { ($0.key, $0.value) })
            cache[key] = metric
            return metric
        }
    }

    /// Series names, so tests and dashboards agree on them.
    public enum Names {
        public static let activeSessions = "frametap_sessions_active"
        public static let sessionsCreated = "frametap_sessions_created_total"
        public static let sessionsEnded = "frametap_sessions_ended_total"
        public static let bytesIn = "frametap_ingest_bytes_total"
        public static let nalUnits = "frametap_nal_units_total"
        public static let framesDecoded = "frametap_frames_decoded_total"
        public static let decodeErrors = "frametap_decode_errors_total"
        public static let decodeLatency = "frametap_decode_latency_seconds"
        public static let encodes = "frametap_picture_encodes_total"
        public static let encodeSeconds = "frametap_picture_encode_seconds"
        public static let requests = "frametap_http_requests_total"
        public static let requestSeconds = "frametap_http_request_seconds"
        public static let mjpegClients = "frametap_mjpeg_clients"
        public static let uploadsStopped = "frametap_uploads_stopped_total"
    }
}
