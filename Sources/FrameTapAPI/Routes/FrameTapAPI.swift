import Containers
import Decoding
import HTTPServer
import Imaging
import Ingest
import Logging
import SessionCatalog
import Sessions
import VideoCoding

/// The FrameTap HTTP API on top of the session layer. Every handler returns without decoding
/// or encoding: cached pictures are answered at once from the cache (zero copy), anything
/// else is a deferred answer completed by a session worker while the connection is suspended.
public struct FrameTapAPI: Sendable {
    public let registry: SessionRegistry
    /// `PUT` and `DELETE` go through it: declared sessions, and those `--state-dir` keeps.
    public let catalog: SessionCatalog
    public let configuration: ConfigurationStatus
    public let metrics: FrameTapMetrics
    /// The decoding hardware found at start-up (`GET /system`).
    public let hardware: HardwareReport
    /// Whose pushes make sessions (`--max-sessions-per-token`); nil without access control.
    let access: AccessControl?
    let logger: Logger
    /// Refusals a client can cause by the hundred (503 at a limit), rate-limited.
    private let refusals: RateLimitedLog
    /// `GET /events`: each event encoded once for all its readers.
    let encodedEvents = EncodedEvents()

    /// The longest `?wait=` accepted, in milliseconds.
    static let maxWaitMilliseconds = 30_000
    /// Largest `PUT /sessions/{id}` body (a tiny JSON object).
    static let maxOptionsBytes = 64 << 10
    /// Every problem's RFC 9457 `type` is this followed by its code (openapi.yaml).
    public static let problemTypePrefix = "urn:frametap:problem:"
    /// What the boundaries of multipart answers and MJPEG streams start with.
    static let boundaryPrefix = "frametap"

    public init(
        catalog: SessionCatalog, configuration: ConfigurationStatus, metrics: FrameTapMetrics,
        hardware: HardwareReport = SystemInfo.hardware, access: AccessControl? = nil, logger: Logger
    ) {
        self.access = access
        registry = catalog.registry
        self.catalog = catalog
        self.configuration = configuration
        self.metrics = metrics
        self.hardware = hardware
        self.logger = logger
        refusals = RateLimitedLog(logger: logger, clock: registry.clock)
    }

    /// The API over `registry` alone: no configuration file, no `--state-dir`.
    public init(
        registry: SessionRegistry, metrics: FrameTapMetrics, hardware: HardwareReport = SystemInfo.hardware, logger: Logger
    ) {
        self.init(
            catalog: SessionCatalog(registry: registry, logger: logger),
            configuration: ConfigurationStatus(
                file: nil, events: registry.events, metrics: metrics, clock: registry.clock, logger: logger),
            metrics: metrics, hardware: hardware, logger: logger)
    }

    /// Every route of the API, each with what it needs from a token (see `RoutePermission`).
    public func router() -> Router<RoutePermission> {
        var router = Router<RoutePermission>()
        let health = Self.healthResponse
        router.get("/healthz", access: .public) { _ in .reusing(health) }
        router.get("/metrics", access: .admin) { [metrics, registry] _ in
            registry.refreshMetrics()
            return .text(metrics.exposition(), contentType: FrameTapMetrics.expositionContentType)
        }
        router.get("/system", access: .admin) { [registry, catalog, configuration, hardware] _ in
            var info = SystemInfo(
                configuration: registry.configuration, services: registry.services, limits: registry.limits.current,
                activeSessions: registry.count, hardware: hardware)
            info.configurationFile = SystemInfo.ConfigurationFile(
                configuration.snapshot, stateDirectory: catalog.store?.directory, declaredSessions: catalog.declaredCount,
                persistedSessions: catalog.persistedCount)
            return .json(WireJSON.bytes(SystemInfoJSON(info)))
        }
        router.get("/sessions", access: .admin) { [registry] _ in
            .json(WireJSON.bytes(SessionListJSON(registry.statusList())))
        }
        router.get("/sessions/{id}", access: .view(.path("id"))) { [self] request throws(HTTPError) in
            try sessionStatus(request)
        }
        router.add(.put, "/sessions/{id}", access: .admin, maxBodyBytes: Self.maxOptionsBytes) {
            [self] request throws(HTTPError) in try configureSession(request)
        }
        router.delete("/sessions/{id}", access: .admin) { [self] request throws(HTTPError) in try deleteSession(request) }
        // Admin, like the PUT that made the pull: it makes the server connect somewhere now.
        router.post("/sessions/{id}/source/retry", access: .admin, maxBodyBytes: 0) { [self] request throws(HTTPError) in
            try retrySource(request)
        }
        // The body limits are the upload queue's (one place for the announced and the streamed size).
        router.addUpload(.post, "/sessions/{id}/nalus", access: .push(.path("id"))) { [self] request throws(HTTPError) in
            try pushNALUnits(request)
        }
        for (name, format) in [("latest.jpg", PictureFormat.jpeg), ("latest.yuv", .yuv), ("latest.rgb", .rgb)] {
            router.get("/sessions/{id}/frame/\(name)", access: .view(.path("id"))) { [self] request throws(HTTPError) in
                try latestPicture(request, format: format)
            }
        }
        for (name, format) in [("at.jpg", PictureFormat.jpeg), ("at.yuv", .yuv), ("at.rgb", .rgb)] {
            router.get("/sessions/{id}/frame/\(name)", access: .view(.path("id"))) { [self] request throws(HTTPError) in
                try pastPicture(request, format: format)
            }
        }
        router.get("/sessions/{id}/history", access: .view(.path("id"))) { [self] request throws(HTTPError) in
            try history(request)
        }
        router.get("/sessions/{id}/frames.mjpeg", access: .view(.path("id"))) { [self] request throws(HTTPError) in
            try mjpeg(request)
        }
        router.get("/events", access: .adminUnlessNarrowed(to: .query("session"))) { [self] request throws(HTTPError) in
            try events(request)
        }
        Console.register(in: &router)
        return router
    }

    /// Built once: every health check queues the same prepared response.
    private static let healthResponse: ReusableResponse = {
        do {
            return try ReusableResponse(
                headers: ["Content-Type": "application/json", "Cache-Control": "no-store"],
                body: SharedBytes(#"{"status":"ok"}"# + "\n"))
        } catch {
            fatalError("libmicrohttpd cannot build a fixed response: \(error)")
        }
    }()

    /// The server hook: one metric sample per finished request, by route template and status
    /// (499 when the client left before any answer), and a log line for server-side failures.
    public func observe(_ record: RequestRecord) {
        let status = record.status?.code ?? 499
        metrics.recordRequest(route: record.route ?? "unmatched", status: status, duration: record.duration)
        // Built only for a line that is written: most requests write none.
        var metadata: Logger.Metadata {
            ["method": "\(record.method.map { "\($0)" } ?? "unread")", "route": "\(record.route ?? "unmatched")", "status": "\(status)"]
        }
        if record.outcome == .answeredEarly {
            // The server stopped listening to a body on purpose (deleted session, limit, shutdown).
            logger.info("upload answered before its body ended", metadata: metadata)
        } else if status == 503 {
            // A limit reached (sessions, pulls, catch-ups, decoder memory) or a source that cannot
            // give a picture now: the server works as it should, and a client retrying at once
            // must not write a line each time.
            refusals.write(
                "\(record.route ?? "unmatched") 503", "request refused for now (a limit reached, or a source not ready)",
                level: .warning, metadata: metadata)
        } else if status >= 500 {
            logger.error("request failed", metadata: metadata)
        }
    }

    /// The server hook for connections it refused or closed on its own (limits, deadlines, the
    /// tier for clients that behave): counted in /metrics (the server logs them, rate-limited).
    public func observe(_ event: ConnectionEvent) {
        switch event {
        case .refusedAtConnectionLimit: metrics.recordConnectionRefused(limit: "connections")
        case .refusedAtAddressLimit: metrics.recordConnectionRefused(limit: "address")
        case .headerTimeout: metrics.recordConnectionClosed(reason: "header_timeout")
        case .idle: metrics.recordConnectionClosed(reason: "idle")
        case .bodyTimeout: metrics.recordConnectionClosed(reason: "body_timeout")
        case .evicted: metrics.recordConnectionClosed(reason: "evicted")
        }
    }

    // MARK: - Sessions

    func session(for request: HTTPRequest) throws(HTTPError) -> Session {
        let id = try SessionID.fromPath(request)
        do {
            return try registry.session(id)
        } catch {
            throw HTTPError(error)
        }
    }

    func sessionStatus(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        noStore(.json(WireJSON.bytes(SessionStatusJSON(try session(for: request).status()))))
    }

    /// Creates the session when missing (201), otherwise reconfigures it (200). With a
    /// `source`, the session pulls it: a URL the policy does not allow is refused before any
    /// connection is made (403 `source_not_allowed`), and past `--max-pull-sessions` with 503.
    /// With `--state-dir` the definition is on disk before the answer; a declared session takes
    /// only its own definition (409 `declared_session` otherwise).
    func configureSession(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        let id = try SessionID.fromPath(request)
        let options = try SessionOptionsJSON.parse(request.body)
        do {
            let (session, created) = try catalog.put(id, options)
            return noStore(.json(WireJSON.bytes(SessionStatusJSON(session.status())), status: created ? .created : .ok))
        } catch {
            throw HTTPError(error)
        }
    }

    /// 204; 409 `declared_session` for a session the configuration file declares. With
    /// `--state-dir` the deletion is on disk before the answer.
    func deleteSession(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        let id = try SessionID.fromPath(request)
        do {
            try catalog.delete(id)
        } catch {
            throw HTTPError(error)
        }
        return HTTPResponse(status: .noContent)
    }

    /// Ends a pull's back-off: it connects now. The answer is the session's status (its source
    /// `connecting` once the attempt began; a source already connecting or live is left as it is).
    func retrySource(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        let session = try session(for: request)
        do {
            _ = try session.retrySource()
        } catch {
            throw HTTPError(error)
        }
        return noStore(.json(WireJSON.bytes(SessionStatusJSON(session.status()))))
    }

    private func noStore(_ response: HTTPResponse) -> HTTPResponse {
        var response = response
        response.headers.add("Cache-Control", "no-store")
        return response
    }

    // MARK: - Upload

    /// `POST /sessions/{id}/nalus`. Runs when the headers are in and returns where the body
    /// goes: the session's upload queue, drained by its decode loop, which decodes it as it
    /// arrives (JSON answer) or spools it (multipart answer, decoded as the answer is read).
    func pushNALUnits(_ request: HTTPRequest) throws(HTTPError) -> (sink: any RequestBodySink, answer: HTTPResponse) {
        let id = try SessionID.fromPath(request)
        let query = QueryReader(request)
        let flush = try query.bool("flush") ?? false
        let takeover = try query.bool("takeover") ?? false
        let publisher = try query.text("publisher")
        if let publisher, (try? SessionID(publisher)) == nil {
            throw .invalidParameter(
                "publisher must be 1 to 128 letters, digits and . _ ~ -, not . or .. (a name for this client's stream), "
                    + "got '\(publisher)'")
        }
        let multipart = Self.acceptsMultipart(request.headers["Accept"])
        // The picture parameters only matter for a multipart answer, but a malformed one is a
        // 400 either way (never silently ignored).
        let requested = try Self.pictureRequest(query, format: query.oneOf("format", PictureFormat.self) ?? .jpeg)
        let codec = try Self.statedCodec(query.oneOf("codec", VideoCodec.self), contentType: request.headers["Content-Type"])
        let content = try Self.pushContent(contentType: request.headers["Content-Type"])
        let configuration = registry.configuration
        let limit = multipart ? min(configuration.maxSpoolBytes, configuration.maxBodyBytes ?? .max) : configuration.maxBodyBytes
        if let limit, let length = request.contentLength, length > limit { throw .bodyTooLarge(limit: limit) }
        let session: Session
        let created: Bool
        do {
            (session, created) = try catalog.openForPush(id, tenant: access?.tenant(of: request))
        } catch {
            throw HTTPError(error)
        }
        // A session this push made goes again when the push is refused before anything was
        // read. One whose client left, or that the shutdown ended, keeps what it counted (its
        // client's next push finds its uploadsAborted); one taken over is the newer push's.
        let registry = registry
        let failed: @Sendable (SessionError) -> Void = { error in
            guard created, ![.uploadAborted, .shuttingDown, .pushTakenOver].contains(error.code),
                session.standing.origin != .declared
            else { return }
            registry.discardIfUnused(session)
        }
        let handoff = AnswerHandoff()
        guard multipart else {
            let queue: UploadQueue<SessionError>
            do {
                queue = try session.beginUpload(
                    flush: flush, codec: codec, content: content, publisher: publisher, takeover: takeover
                ) { result in
                    switch result {
                    case .success(let summary): handoff.complete(.json(WireJSON.bytes(UploadSummaryJSON(summary))))
                    case .failure(let error):
                        handoff.complete(.problem(HTTPError(error)))
                        failed(error)
                    }
                }
            } catch {
                failed(error)
                throw HTTPError(error)
            }
            return (UploadSink(queue), .deferred { promise in handoff.attach(promise) })
        }
        let spool: SpooledUpload
        do {
            spool = try session.beginSpooledUpload(
                requested, flush: flush, codec: codec, content: content, publisher: publisher, takeover: takeover)
        } catch {
            failed(error)
            throw HTTPError(error)
        }
        let boundary = Multipart.makeBoundary(prefix: Self.boundaryPrefix)
        let logger = logger
        spool.onUploadEnd { result in
            switch result {
            case .success:
                handoff.complete(
                    HTTPResponse(
                        headers: [
                            "Content-Type": Multipart.mixedContentType(boundary: boundary), "Cache-Control": "no-store",
                        ],
                        body: .stream(
                            MultipartAnswerSource(spool: spool, session: session, boundary: boundary, logger: logger))))
            case .failure(let error):
                handoff.complete(.problem(HTTPError(error)))
                failed(error)
            }
        }
        return (
            UploadSink(spool.queue),
            .deferred { promise in
                // A client gone before the body ended never gets the stream: free the spool now.
                promise.onCancel { spool.cancel() }
                handoff.attach(promise)
            }
        )
    }

    /// The codec a push says it carries: `?codec=`, or its Content-Type's media type, `video/H264`
    /// (RFC 6184) or `video/H265` (RFC 7798), case-insensitive, parameters ignored. Other media
    /// types say nothing; the two disagreeing is a 400.
    static func statedCodec(_ parameter: VideoCodec?, contentType: String?) throws(HTTPError) -> VideoCodec? {
        let mediaType = contentType?.split(separator: ";").first.map { $0.trimmingWhitespace().lowercased() }
        let fromType: VideoCodec? =
            switch mediaType {
            case "video/h264": .h264
            case "video/h265": .h265
            default: nil
            }
        if let parameter, let fromType, parameter != fromType {
            throw HTTPError.invalidParameter(
                "codec=\(parameter.rawValue) contradicts Content-Type \(contentType ?? "")")
        }
        return parameter ?? fromType
    }

    /// What a push's Content-Type says it carries: a container (`video/mp2t`, `video/mp4`,
    /// `video/iso.segment`, `video/x-matroska`, `video/webm`, `video/x-flv`), an elementary
    /// stream (`video/H264`, `video/H265`), or nothing (no Content-Type, or another one such as
    /// `application/octet-stream`: the first bytes tell).
    /// A multipart form (`curl -F`) is refused before a byte is read: the file inside it is
    /// wrapped in the form's boundaries and headers. (`application/x-www-form-urlencoded` is what
    /// `curl --data-binary` sends by default, so it says nothing.)
    static func pushContent(contentType: String?) throws(HTTPError) -> PushContent? {
        guard let contentType else { return nil }
        if let format = ContainerFormat(mediaType: contentType) { return .container(format) }
        let mediaType = contentType.split(separator: ";").first.map { $0.trimmingWhitespace().lowercased() }
        if mediaType == "multipart/form-data" {
            throw HTTPError(
                status: .unsupportedMediaType, code: IngestErrorCode.contentTypeMismatch.rawValue,
                detail: "a push is the stream's bytes as they are, not a form (multipart/form-data, as curl -F sends): "
                    + "send the file with curl --data-binary @FILE")
        }
        return mediaType == "video/h264" || mediaType == "video/h265" ? .elementaryStream : nil
    }

    /// True when the client lists `multipart/mixed` with a non-zero q, and at least as high a q as
    /// the JSON summary (`application/json`, when it is listed: a wildcard names neither answer).
    static func acceptsMultipart(_ accept: String?) -> Bool {
        guard let accept else { return false }
        var multipartQuality: Double?
        var jsonQuality: Double?
        for item in accept.split(separator: ",") {
            let parts = item.split(separator: ";").map { $0.trimmingWhitespace().lowercased() }
            let quality = parts.dropFirst().lazy.filter { $0.hasPrefix("q=") }.compactMap { Double($0.dropFirst(2)) }
                .first.map { min(max($0, 0), 1) } ?? 1
            switch parts.first {
            case "multipart/mixed": multipartQuality = max(multipartQuality ?? 0, quality)
            case "application/json": jsonQuality = max(jsonQuality ?? 0, quality)
            default: break
            }
        }
        guard let multipartQuality, multipartQuality > 0 else { return false }
        return multipartQuality >= (jsonQuality ?? 0)
    }

    static func pictureRequest(_ query: QueryReader, format: PictureFormat) throws(HTTPError) -> PictureRequest {
        let request = PictureRequest(
            format: format,
            width: try query.int("width", in: 1...PictureOptions.maxDimension),
            height: try query.int("height", in: 1...PictureOptions.maxDimension),
            quality: try query.int("quality", in: PictureOptions.qualityRange))
        do {
            return try request.validated()
        } catch {
            throw HTTPError(error)
        }
    }

    // MARK: - Pictures

    /// `GET /sessions/{id}/frame/latest.{jpg,yuv,rgb}`: a cache hit or a 304 is answered right
    /// here; an encode or a long poll is a deferred answer (no thread waits).
    func latestPicture(_ request: HTTPRequest, format: PictureFormat) throws(HTTPError) -> HTTPResponse {
        let query = QueryReader(request)
        let pictureRequest = try Self.pictureRequest(query, format: format)
        let waitMilliseconds = try query.int("wait", in: 0...Self.maxWaitMilliseconds) ?? 0
        let after = try query.unsigned("after")
        let ifNoneMatch = request.ifNoneMatch
        let clientHas = PictureAnswerCondition(
            entityTags: ifNoneMatch?.entityTags ?? [], anyEntityTag: ifNoneMatch?.matchesAny ?? false, after: after)
        let session = try session(for: request)
        let handoff = AnswerHandoff()
        session.requestPicture(pictureRequest, clientHas: clientHas, wait: .milliseconds(waitMilliseconds)) {
            [clock = session.clock] result in
            handoff.complete(PictureResponses.answer(result, now: clock.uptime))
        }
        guard waitMilliseconds > 0 else { return handoff.response() }
        // The session answers 304 itself when the wait ends; this is only a backstop.
        return handoff.response(timeout: .milliseconds(waitMilliseconds) + .seconds(5)) {
            PictureResponses.notModified(etag: nil)
        }
    }

    /// `GET /sessions/{id}/frames.mjpeg`: live multipart/x-mixed-replace, newest picture wins.
    /// A source that connects on demand and is not live is connected first, as for `latest.jpg`:
    /// when it cannot be, the answer is 503 `source_not_ready`, not a stream that never sends.
    func mjpeg(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        let query = QueryReader(request)
        let pictureRequest = try Self.pictureRequest(query, format: .jpeg)
        let fps = try query.double("fps", in: 0.1...120)
        let session = try session(for: request)
        // The viewer comes first: it keeps the connection wanted from now on.
        let response = try Self.mjpeg(session, pictureRequest, fps: fps)
        guard session.awaitsOnDemandSource, case .stream(let viewer) = response.body else { return response }
        let wait = Duration.milliseconds(Self.maxWaitMilliseconds)
        return .deferred(
            timeout: wait + .seconds(5),
            onTimeout: {
                .problem(HTTPError(SessionError(.sourceNotReady, "the source gave no picture in time", retryAfterSeconds: 1)))
            }
        ) { promise in
            // The viewer goes with a client that leaves, a timeout or the server's stop.
            promise.onCancel { viewer.close(.clientGone) }
            // The first picture is encoded as the viewer asks, so its first part is ready too.
            session.requestPicture(pictureRequest, wait: wait) { result in
                if case .failure(let error) = result, error.code != .noFrameYet {
                    viewer.close(.clientGone)
                    return _ = promise.fail(HTTPError(error))
                }
                if !promise.succeed(response) { viewer.close(.clientGone) }
            }
        }
    }

    /// The MJPEG answer of a new viewer of `session`.
    private static func mjpeg(_ session: Session, _ pictureRequest: PictureRequest, fps: Double?) throws(HTTPError) -> HTTPResponse {
        let viewer: Viewer
        do {
            viewer = try session.subscribe(pictureRequest, maxFPS: fps)
        } catch {
            throw HTTPError(error)
        }
        let boundary = Multipart.makeBoundary(prefix: Self.boundaryPrefix)
        return HTTPResponse(
            headers: [
                "Content-Type": Multipart.mixedReplaceContentType(boundary: boundary),
                "Cache-Control": "no-cache, no-store, must-revalidate", "Pragma": "no-cache",
                "X-Accel-Buffering": "no",
            ],
            body: .stream(MJPEGSource(viewer: viewer, boundary: boundary)))
    }
}
