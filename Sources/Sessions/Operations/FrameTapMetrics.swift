import CoreMetrics
import Decoding
import Ingest
import Metrics
import Prometheus
import Synchronization
import Timekeeping
import VideoCoding

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
    /// State the scrape-time series are computed from.
    private let scraped = Mutex(Scraped())

    private struct Scraped {
        var backendLabels: Set<[String]> = []
        var deviceLabels: Set<String> = []
        /// What each count kept since start-up (by series name) was at the last scrape: a
        /// counter series grows by the difference.
        var counts: [String: Int] = [:]
    }

    private struct LabelledKey: Hashable {
        let name: String
        let labels: [String]
    }

    /// Every request is counted: its two series are found by route and status alone, without
    /// building the label list that `labelled` is keyed by.
    private let requestSeries = Mutex<[RequestSeriesKey: RequestSeries]>([:])

    private struct RequestSeriesKey: Hashable {
        let route: String
        let status: Int
    }

    private struct RequestSeries: Sendable {
        let count: CoreMetrics.Counter
        let seconds: CoreMetrics.Timer
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
            Names.catchUpSeconds: fineBuckets,
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
        counter(Names.frameDownloads, [:]).increment(by: 0)
        counter(Names.decoderMemoryRefusals, [:]).increment(by: 0)
        counter(Names.historyGOPsShed, [:]).increment(by: 0)
        for reason in BackendFallback.Reason.allCases {
            for codec in VideoCodec.allCases {
                counter(Names.fallbacks, ["reason": reason.rawValue, "codec": codec.rawValue]).increment(by: 0)
            }
        }
        for limit in ["connections", "address"] { counter(Names.connectionsRefused, ["limit": limit]).increment(by: 0) }
        for reason in ["header_timeout", "idle", "body_timeout", "evicted"] {
            counter(Names.connectionsClosed, ["reason": reason]).increment(by: 0)
        }
        for kind in ["wake", "history"] {
            for result in ["ok", "failed", "refused"] {
                counter(Names.catchUps, ["kind": kind, "result": result]).increment(by: 0)
            }
        }
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
        let key = RequestSeriesKey(route: route, status: status)
        let series = requestSeries.withLock { $0[key] } ?? {
            let made = RequestSeries(
                count: counter(Names.requests, ["route": route, "status": String(status)]),
                seconds: timer(Names.requestSeconds, ["route": route]))
            requestSeries.withLock { $0[key] = made }
            return made
        }()
        series.count.increment()
        if let duration { series.seconds.recordNanoseconds(Int64(duration.nanoseconds)) }
    }

    /// One session's NAL-unit counters by type (see `NALUnitCounters`).
    func nalUnitCounter(type: String) -> CoreMetrics.Counter {
        counter(Names.nalUnits, ["type": type])
    }

    func recordError(code: String) {
        counter(Names.decodeErrors, ["code": code]).increment()
    }

    func recordEncode(format: String, duration: Duration) {
        counter(Names.encodes, ["format": format]).increment()
        timer(Names.encodeSeconds, ["format": format]).recordNanoseconds(Int64(duration.nanoseconds))
    }

    /// An upload that ended before its body did, by why: `client_gone`, `session_deleted`,
    /// `body_too_large`, `body_timeout`, `taken_over`, `shutting_down`, `spool_failed`, `spool_full`. All but the first were
    /// cut off by the server, and their client was answered at once.
    func recordUploadStopped(reason: String) {
        counter(Names.uploadsStopped, ["reason": reason]).increment()
    }

    /// A connection the HTTP server closed as soon as it was accepted, by the limit it met:
    /// `connections` (--max-connections) or `address` (--max-connections-per-ip).
    public func recordConnectionRefused(limit: String) {
        counter(Names.connectionsRefused, ["limit": limit]).increment()
    }

    /// Log lines the process's log budget left out (`LogLineBudget`).
    public func recordLogLinesLeftOut(_ count: Int) {
        counter(Names.logLinesLeftOut, [:]).increment(by: count)
    }

    /// A connection the HTTP server closed on its own, by why: `header_timeout` (a head begun
    /// and not finished), `idle` (nothing sent: a kept-alive connection), `body_timeout`
    /// (answered 408 first), `evicted` (made room, near the connection limit).
    public func recordConnectionClosed(reason: String) {
        counter(Names.connectionsClosed, ["reason": reason]).increment()
    }

    /// A session's decoder gave up a hardware back end, by why (`BackendFallback.Reason`) and the
    /// stream's codec (`unknown` when it gave up before the codec was known).
    func recordFallback(_ fallback: BackendFallback) {
        counter(Names.fallbacks, ["reason": fallback.reason.rawValue, "codec": fallback.codec?.rawValue ?? Self.unknownCodecLabel])
            .increment()
    }

    /// The `codec` label of a fallback that came before the stream's codec was known.
    public static let unknownCodecLabel = "unknown"

    /// Series that describe the present rather than count events, brought up to date right
    /// before an exposition: sessions by back end and device, sessions per hardware device, the
    /// downloads of hardware-decoded pictures since the last scrape, and the decoder memory budget.
    public func refresh(
        sessions: [SessionStatus], devices: [HardwareDeviceUsage], downloads: FrameDownloadCounter,
        decoderMemory: DecoderMemoryBudget, catchUps: CatchUpPool.Usage? = nil, warmDecoders: WarmDecoderPool.Usage? = nil,
        historyBytes: Int? = nil, historyMemory: (limit: Int, usage: HistoryMemoryBudget.Usage)? = nil,
        slabs: SlabPool.Usage? = nil, engines: [EnginePlacement.Report] = [],
        residentBytes: Int? = nil
    ) {
        var byBackend: [[String]: Int] = [:]
        for status in sessions {
            byBackend[[status.backend.rawValue, status.device?.description ?? "none"], default: 0] += 1
        }
        // Counts kept elsewhere since start-up, exposed as counters.
        var counts = [
            (Names.frameDownloads, downloads.downloads), (Names.frameDownloadFailures, downloads.failures),
            (Names.decoderMemoryRefusals, decoderMemory.usage.refusals),
        ]
        if let warmDecoders {
            counts += [(Names.warmDecoderHits, warmDecoders.hits), (Names.warmDecoderMisses, warmDecoders.misses)]
        }
        if let slabs { counts.append((Names.slabsAllocated, slabs.allocated)) }
        if let historyMemory { counts.append((Names.historyGOPsShed, historyMemory.usage.gopsShed)) }
        let (vanishedBackends, vanishedDevices, countsGrew) = scraped.withLock { scraped in
            let vanishedBackends = scraped.backendLabels.subtracting(byBackend.keys)
            scraped.backendLabels.formUnion(byBackend.keys)
            let deviceNames = Set(devices.map(\.device.description))
            let vanishedDevices = scraped.deviceLabels.subtracting(deviceNames)
            scraped.deviceLabels.formUnion(deviceNames)
            // Two scrapes at once may come here in either order: the older count, coming second,
            // adds nothing and leaves the newer one as the mark, so nothing is counted twice.
            let grew = counts.map { name, count in
                let before = scraped.counts[name, default: 0]
                scraped.counts[name] = max(before, count)
                return (name, count - before)
            }
            return (vanishedBackends, vanishedDevices, grew)
        }
        func sessionsGauge(_ labels: [String]) -> Prometheus.Gauge {
            registry.makeGauge(
                descriptor: .init(
                    metricName: Names.sessionsByBackend, unitName: "",
                    helpText: "Sessions by the back end decoding them and its device (none: software)"),
                labels: [("backend", labels[0]), ("device", labels[1])])
        }
        for (labels, count) in byBackend { sessionsGauge(labels).set(to: Double(count)) }
        var byState = Dictionary(uniqueKeysWithValues: SourceStatus.State.allCases.map { ($0.rawValue, 0) })
        for status in sessions { if let source = status.source { byState[source.state.rawValue, default: 0] += 1 } }
        for (state, count) in byState {
            registry.makeGauge(
                descriptor: .init(metricName: Names.pullSources, unitName: "", helpText: "Pull sessions by the state of their source"),
                labels: [("state", state)]
            ).set(to: Double(count))
        }
        for labels in vanishedBackends { sessionsGauge(labels).set(to: 0) }
        func deviceGauge(_ device: String) -> Prometheus.Gauge {
            registry.makeGauge(
                descriptor: .init(
                    metricName: Names.deviceSessions, unitName: "",
                    helpText: "Session decoders on each hardware device (one device context per device, shared)"),
                labels: [("device", device)])
        }
        for usage in devices { deviceGauge(usage.device.description).set(to: Double(usage.sessions)) }
        for device in vanishedDevices { deviceGauge(device).set(to: 0) }
        for (name, grew) in countsGrew { counter(name, [:]).increment(by: max(0, grew)) }
        let memory = decoderMemory.usage
        func memoryGauge(_ name: String, _ help: String) -> Prometheus.Gauge {
            registry.makeGauge(descriptor: .init(metricName: name, unitName: "", helpText: help), labels: [])
        }
        memoryGauge(Names.decoderMemoryLimit, "The decoder memory budget (--max-decoder-memory)")
            .set(to: Double(decoderMemory.limit))
        memoryGauge(Names.decoderMemoryUsed, "Decoder memory the sessions' decoders are estimated to hold")
            .set(to: Double(memory.bytes))
        memoryGauge(Names.sessionsDecoding, "Sessions with a decoder open (on-demand sessions only while someone looks)")
            .set(to: Double(sessions.filter(\.decoding).count))
        if let catchUps {
            memoryGauge(Names.catchUpBusy, "Catch-up decodes running (at most --max-catchup-decoders)")
                .set(to: Double(catchUps.busy))
            memoryGauge(Names.catchUpQueued, "Catch-up decodes waiting for a catch-up decoder")
                .set(to: Double(catchUps.queued))
        }
        if let warmDecoders {
            memoryGauge(Names.warmDecodersIdle, "Catch-up decoders kept open for the next catch-up")
                .set(to: Double(warmDecoders.idle))
        }
        if let residentBytes {
            memoryGauge(Names.residentBytes, "The process's resident memory (RSS, /proc/self/statm)").set(to: Double(residentBytes))
        }
        if let historyBytes {
            memoryGauge(Names.historyBytes, "Bytes of compressed history every session holds together")
                .set(to: Double(historyBytes))
        }
        if let historyMemory {
            memoryGauge(Names.historyMemoryLimit, "The memory every session's history may keep alive together (--max-history-memory)")
                .set(to: Double(historyMemory.limit))
            memoryGauge(Names.historyMemoryUsed, "The memory every session's history keeps alive (its bytes or its slabs, the larger)")
                .set(to: Double(historyMemory.usage.bytes))
        }
        if let slabs {
            memoryGauge(Names.slabsInUse, "Slabs of the shared pool holding received bytes (uploads, history)")
                .set(to: Double(slabs.inUse))
            memoryGauge(Names.slabsIdle, "Slabs of the shared pool waiting to be used again")
                .set(to: Double(slabs.idle))
        }
        refreshEngines(engines)
    }

    /// Each engine's capacity per codec, load, utilization and sessions (engines never vanish:
    /// one seen once stays in the placement).
    private func refreshEngines(_ engines: [EnginePlacement.Report]) {
        func gauge(_ name: String, _ help: String, _ labels: [(String, String)]) -> Prometheus.Gauge {
            registry.makeGauge(descriptor: .init(metricName: name, unitName: "", helpText: help), labels: labels)
        }
        for report in engines {
            let engine = ("engine", report.engine.description)
            for (codec, fps) in report.capacity.fps {
                gauge(
                    Names.engineCapacity, "Decoding capacity of each engine (device or cpu), 1080p-equivalent pictures per second",
                    [engine, ("codec", codec.rawValue)]
                ).set(to: fps)
            }
            gauge(Names.engineLoad, "Demand of the sessions placed on each engine, 1080p-equivalent pictures per second", [engine])
                .set(to: report.loadFPS)
            gauge(Names.engineUtilization, "Load of each engine over its capacity (above 1: overloaded)", [engine])
                .set(to: report.utilization)
            gauge(Names.engineSessions, "Session decoders placed on each engine", [engine]).set(to: Double(report.sessions))
        }
    }

    /// What a catch-up is for: an on-demand session waking up, or a picture from the past.
    enum CatchUpKind: String {
        case wake
        case history
    }

    /// A catch-up ended (`ok`, `failed`), or was refused for want of capacity (`refused`); how
    /// long an `ok` one took and how many access units it decoded.
    func recordCatchUp(kind: CatchUpKind, _ result: CatchUpResult) {
        counter(Names.catchUps, ["kind": kind.rawValue, "result": result.label]).increment()
        guard case .ok(let nanoseconds, let units) = result else { return }
        timer(Names.catchUpSeconds, ["kind": kind.rawValue]).recordNanoseconds(Int64(clamping: nanoseconds))
        if units > 0 { counter(Names.catchUpAccessUnits, ["kind": kind.rawValue]).increment(by: units) }
    }

    /// A pulled source's connection attempt after the first (after a failure or a loss).
    func recordSourceReconnect() {
        counter(Names.sourceReconnects, [:]).increment()
    }

    /// A container stream started on a session (a push of MPEG-TS, MP4, Matroska or FLV).
    func recordContainerStream(container: String) {
        counter(Names.containerStreams, ["container": container]).increment()
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
        public static let connectionsRefused = "frametap_http_connections_refused_total"
        public static let logLinesLeftOut = "frametap_log_lines_left_out_total"
        public static let connectionsClosed = "frametap_http_connections_closed_total"
        public static let mjpegClients = "frametap_mjpeg_clients"
        public static let uploadsStopped = "frametap_uploads_stopped_total"
        public static let fallbacks = "frametap_decoder_fallbacks_total"
        public static let sourceReconnects = "frametap_source_reconnects_total"
        public static let containerStreams = "frametap_container_streams_total"
        public static let pullSources = "frametap_pull_sources"
        public static let sessionsByBackend = "frametap_sessions_by_backend"
        public static let decoderMemoryLimit = "frametap_decoder_memory_limit_bytes"
        public static let decoderMemoryUsed = "frametap_decoder_memory_used_bytes"
        public static let decoderMemoryRefusals = "frametap_decoder_memory_refusals_total"
        public static let frameDownloads = "frametap_frame_downloads_total"
        public static let frameDownloadFailures = "frametap_frame_download_failures_total"
        public static let deviceSessions = "frametap_hardware_device_sessions"
        public static let engineCapacity = "frametap_engine_capacity_fps"
        public static let engineLoad = "frametap_engine_load_fps"
        public static let engineUtilization = "frametap_engine_utilization"
        public static let engineSessions = "frametap_engine_sessions"
        public static let catchUps = "frametap_catchup_decodes_total"
        public static let catchUpSeconds = "frametap_catchup_seconds"
        public static let catchUpAccessUnits = "frametap_catchup_access_units_total"
        public static let catchUpBusy = "frametap_catchup_decoders_busy"
        public static let catchUpQueued = "frametap_catchup_queue_length"
        public static let sessionsDecoding = "frametap_sessions_decoding"
        public static let warmDecodersIdle = "frametap_warm_decoders_idle"
        public static let warmDecoderHits = "frametap_warm_decoder_hits_total"
        public static let warmDecoderMisses = "frametap_warm_decoder_misses_total"
        public static let historyBytes = "frametap_history_bytes"
        public static let historyMemoryLimit = "frametap_history_memory_limit_bytes"
        public static let historyMemoryUsed = "frametap_history_memory_used_bytes"
        public static let historyGOPsShed = "frametap_history_gops_shed_total"
        public static let residentBytes = "frametap_process_resident_bytes"
        public static let slabsInUse = "frametap_slabs_in_use"
        public static let slabsIdle = "frametap_slabs_idle"
        public static let slabsAllocated = "frametap_slabs_allocated_total"
    }
}

/// One session's NAL-unit counters by type, held by its `DecodeReporter`: the shared cache behind
/// `FrameTapMetrics` is looked up once per type and session instead of on every decode step,
/// where its lock was contended by hundreds of sessions (measured: 2.75 % of the server's CPU in
/// the lock's slow path, and its futex wake-ups, at 320 on-demand sessions).
struct NALUnitCounters {
    private var byType: [String: CoreMetrics.Counter] = [:]

    mutating func record(type: String, count: Int, in metrics: FrameTapMetrics) {
        if let counter = byType[type] { return counter.increment(by: count) }
        let counter = metrics.nalUnitCounter(type: type)
        byType[type] = counter
        counter.increment(by: count)
    }
}
