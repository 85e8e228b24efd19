import Containers
import Decoding
import Dispatch
import FoundationEssentials
import Imaging
import Ingest
import Logging
import Synchronization
import VideoCoding
import Timekeeping

/// One live stream, made of parts that each own their state:
///
/// - `DecodeLoop`: the pushes and pulls, read into the session's decoder on its decode queue;
///   what the decoder reports (counters, format, back end, last error) is its `DecodeReporter`'s,
///   and whether a decoder runs on demand its `OnDemandDecoding`'s;
/// - `PictureCache`: the encoded pictures and the encodes in flight, on its encode queue;
/// - `ViewerSet`: the newest picture and everyone waiting for it (long polls, MJPEG viewers).
///
/// Bytes flow ingest → history → (decoder) → newest picture → cache → viewers. The session's
/// `CompressedHistory` holds its recent access units, whatever the decode mode; pictures from
/// the past are decoded from it (`requestPastPicture`). Every public method may be called from
/// any thread and returns without decoding or encoding; callbacks run with no lock held.
public final class Session: Sendable {
    public let id: SessionID
    public let createdAt: Date
    /// Whose push made it, as `--max-sessions-per-token` counts (`SessionRegistry.openSession`).
    let tenant: String?
    public let clock: any ServiceClock
    let context: SessionContext
    let loop: DecodeLoop
    let pictures: PictureCache
    let viewers: ViewerSet
    let history: CompressedHistory
    /// Who keeps the session (`PUT`'s `owner`), shown in its status.
    private let keeper: Mutex<SessionOwner?>
    private let standingState: Mutex<SessionStanding>

    /// Creates the session and its decoder. Throws `.decoding(.decoderUnavailable)` when the
    /// back end asked for cannot open.
    public init(
        id: SessionID, configuration: ServerConfiguration, services: SessionServices,
        options: SessionOptions = SessionOptions(), metrics: FrameTapMetrics, logger: Logger,
        events: SessionEventLog? = nil, standing: SessionStanding = SessionStanding(), tenant: String? = nil
    ) throws(SessionError) {
        self.id = id
        self.tenant = tenant
        let clock = services.clock
        self.clock = clock
        standingState = Mutex(standing)
        createdAt = clock.now
        var logger = logger
        logger[metadataKey: "session"] = "\(id)"
        let context = SessionContext(
            configuration: configuration, services: services, metrics: metrics, logger: logger,
            activity: SessionActivity(clock: clock), events: SessionEventSink(log: events, session: id))
        self.context = context
        let mode = options.decode ?? configuration.defaultDecode
        let stream: SessionDecoder.Stream
        do {
            stream = try SessionDecoder.stream(
                context: context, backend: options.backend ?? configuration.backend, codec: options.codec, mode: mode)
        } catch {
            throw SessionError(error)
        }
        let encodeQueue = DispatchQueue(label: "frametap.session.\(id).encode")
        // The cache reports encode failures to the decode loop's reporter, which keeps the last
        // error; the loop is made after the cache (and holds it), so the report goes through a weak box.
        let failureSink = WeakBox<DecodeLoop>()
        let pictures = PictureCache(
            encodeQueue: encodeQueue, encoderFactory: services.encoderFactory,
            defaultQuality: options.quality ?? configuration.defaultQuality,
            sizeLimit: configuration.pictureSizeLimit, metrics: metrics, clock: clock,
            onFailure: { error in failureSink.value?.reporter.record(error) })
        let activity = context.activity
        let eventSink = context.events
        // `viewers.changed` when MJPEG viewers come or go; long polls alone make none (a
        // thumbnail grid long-polls every picture, and events are never per picture). The counts
        // are read again under `announced`, so of two changes racing the later count is the one
        // announced last.
        let announced = Mutex(0)
        let viewerSet = WeakBox<ViewerSet>()
        let viewers = ViewerSet(
            clock: clock, pictures: pictures, repeatInterval: configuration.mjpegRepeatInterval,
            onChange: { _, _ in
                activity.touch()
                announced.withLock { announcedViewers in
                    guard let set = viewerSet.value else { return }
                    let (viewers, waiting) = (set.viewerCount, set.waiterCount)
                    guard viewers != announcedViewers else { return }
                    announcedViewers = viewers
                    eventSink.emit(.viewersChanged) { details in
                        details.viewers = viewers
                        details.waiting = waiting
                    }
                }
            })
        viewerSet.value = viewers
        let history = CompressedHistory(limits: configuration.historyLimits, budget: services.historyMemory)
        let loop = DecodeLoop(
            id: id, stream: stream, mode: mode, context: context, viewers: viewers, pictures: pictures,
            history: history)
        failureSink.value = loop
        self.pictures = pictures
        self.viewers = viewers
        self.loop = loop
        self.history = history
        keeper = Mutex(options.owner ?? nil)
    }

    // MARK: - Configuration

    /// Applies `PUT /sessions/{id}`. Quality and decode mode apply at once; a different back end
    /// is opened right here (so an unavailable one fails this call and changes nothing) and
    /// takes over at the next stream start (after a flush), or at once when no stream is under way.
    /// Options equal to the session's own change nothing: a `PUT` of the same definition (as
    /// `frametap sync` sends every pass) leaves the decoder, its counters and viewers as they are.
    public func configure(_ options: SessionOptions) throws(SessionError) {
        guard !loop.isClosed else { throw .notFound(id) }
        let facts = loop.reporter.facts
        var stream: SessionDecoder.Stream?
        let newBackend = options.backend.flatMap { $0 == facts.backendChoice ? nil : $0 }
        let newCodec = options.codec.flatMap { $0 == facts.statedCodec ? nil : $0 }
        let newMode = options.decode.flatMap { $0 == facts.decodeMode ? nil : $0 }
        let newQuality = options.quality.flatMap { $0 == pictures.defaultQuality ? nil : $0 }
        if newBackend != nil || newCodec != nil {
            do {
                stream = try SessionDecoder.stream(
                    context: context, backend: newBackend ?? facts.backendChoice,
                    codec: newCodec ?? facts.statedCodec, mode: newMode ?? facts.decodeMode)
            } catch {
                throw SessionError(error)
            }
        }
        let newOwner: SessionOwner?? = options.owner.flatMap { owner in
            keeper.withLock { current in
                guard current != owner else { return nil }
                current = owner
                return .some(owner)
            }
        }
        if let newQuality { pictures.defaultQuality = newQuality }
        if newMode != nil || newBackend != nil || newCodec != nil {
            loop.configure(mode: newMode, backend: newBackend, codec: newCodec, stream: stream)
        }
        guard newMode != nil || newBackend != nil || newCodec != nil || newQuality != nil || newOwner != nil else { return }
        context.logger.info(
            "session configured",
            metadata: [
                "backend": "\(newBackend?.rawValue ?? "unchanged")",
                "codec": "\(newCodec?.rawValue ?? "unchanged")",
                "decode": "\(newMode?.rawValue ?? "unchanged")",
                "quality": "\(newQuality.map(String.init) ?? "unchanged")",
                "owner": "\(newOwner.map { $0?.rawValue ?? "none" } ?? "unchanged")",
            ])
    }

    // MARK: - Uploads

    /// Starts a `POST .../nalus` answered with JSON. Feed the body to the returned queue;
    /// `completion` runs once, on the decode queue, when the upload was decoded (with `flush`,
    /// to the end of the stream) or failed. Throws `.sessionBusy` while another upload's body
    /// is arriving: one stream has one byte order, and two writers interleaving pieces cut
    /// anywhere would corrupt it.
    /// `codec`: what the push says it carries (its `?codec=` or Content-Type); another codec than
    /// the stream's is `codec_mismatch` before anything is read. `content`: a container its
    /// Content-Type names (read through libavformat), an elementary stream, or nil (its first
    /// bytes tell). `publisher`: who pushes (`PublisherHold`: another's pushes are refused while
    /// its hold lasts, and its own push whose body is arriving is taken over). `takeover`: instead
    /// of `session_busy`, the push whose body is arriving ends (`push_taken_over`) after what of it
    /// arrived was decoded, and this one follows it.
    public func beginUpload(
        flush: Bool, codec: VideoCodec? = nil, content: PushContent? = nil, publisher: String? = nil,
        takeover: Bool = false, completion: @escaping @Sendable (Result<UploadSummary, SessionError>) -> Void
    ) throws(SessionError) -> UploadQueue<SessionError> {
        try loop.beginUpload(
            flush: flush, codec: codec, content: content, publisher: publisher, takeover: takeover, completion: completion)
    }

    /// Starts a `POST .../nalus` answered with one part per picture (see `SpooledUpload`).
    public func beginSpooledUpload(
        _ request: PictureRequest, flush: Bool, codec: VideoCodec? = nil, content: PushContent? = nil,
        publisher: String? = nil, takeover: Bool = false
    ) throws(SessionError) -> SpooledUpload {
        try loop.beginSpooledUpload(
            request: try request.validated(), flush: flush, codec: codec, content: content, publisher: publisher,
            takeover: takeover)
    }

    // MARK: - Pulls

    /// Starts pulling `spec` (the registry checked the policy and the pull limit), replacing a
    /// pull of another source; returns false when it pulls `spec` already, which goes on
    /// untouched. `policy` is what its redirects and later attempts are checked against.
    /// Throws `session_busy` while a push is under way.
    func startPull(_ spec: PullSourceSpec, policy: SourcePolicy) throws(SessionError) -> Bool {
        guard !loop.isClosed else { throw .notFound(id) }
        if let current = loop.pull {
            if current.spec == spec { return false }
            loop.endPull()
        }
        _ = try loop.beginPull(spec, policy: policy)
        return true
    }

    /// Stops the pull, if any (`PUT` with `"source": null`).
    func stopPull() {
        loop.endPull()
    }

    /// Whether the session pulls (its source is not stopped).
    public var isPulling: Bool { loop.pull != nil }

    /// `POST /sessions/{id}/source/retry`: ends the pull's back-off, so it connects now. False
    /// when there was none to end (the source is connecting or live). Throws `not_pulling` when
    /// the session pulls no source.
    public func retrySource() throws(SessionError) -> Bool {
        guard !loop.isClosed else { throw .notFound(id) }
        guard let pull = loop.pull else {
            throw SessionError(.notPulling, "session '\(id)' pulls no source: PUT one with {\"source\": {\"url\": ...}}")
        }
        context.activity.touch()
        return pull.retryNow()
    }

    // MARK: - Standing

    /// Who asked for the session and whether `--state-dir` keeps it; set by whoever defines
    /// sessions (the catalog of declared and kept sessions).
    public var standing: SessionStanding {
        get { standingState.withLock { $0 } }
        set { standingState.withLock { $0 = newValue } }
    }

    // MARK: - Pictures

    /// `GET /sessions/{id}/frame/latest.{jpg,yuv,rgb}`.
    ///
    /// - `clientHas`: its entity tags (a tag equal to the current one answers 304) and its
    ///   `after` (the sequence the client has; without `wait`, not newer answers 304).
    /// - `wait`: long-poll (capped at `maxLongPoll`) until a picture newer than `after`, or than
    ///   the newest sequence its entity tags name, or than nothing (the first picture);
    ///   on timeout 304.
    ///
    /// `completion` runs exactly once: synchronously on the calling thread when the answer is
    /// known at once (cached picture, 304, error), otherwise later on the encode queue or a
    /// timer. N simultaneous requests for the same picture and options share one encode.
    ///
    /// An idle on-demand session is woken first: the request is answered once the decoder has
    /// caught up to the newest picture (503 `catchup_queue_full` when no catch-up can be queued).
    /// An idle pull that connects on demand is connected before that, and the request waits for
    /// the connection's first picture (503 `source_not_ready` when the attempt fails or no
    /// picture comes within `--source-connect-timeout` + `--source-read-timeout`, or within
    /// `wait` when that is given and shorter: the wait counts from the request).
    public func requestPicture(
        _ request: PictureRequest, clientHas: PictureAnswerCondition = PictureAnswerCondition(), wait: Duration = .zero,
        completion: @escaping @Sendable (Result<PictureAnswer, SessionError>) -> Void
    ) {
        do {
            _ = try request.validated()
        } catch {
            completion(.failure(error))
            return
        }
        guard !loop.isClosed else {
            completion(.failure(.notFound(id)))
            return
        }
        context.activity.touch()
        let wait = min(max(wait, .zero), context.configuration.maxLongPoll)
        // The wait counts from the request: time spent connecting an on-demand pull is part of it.
        let deadline = clock.uptime.addingSaturated(wait.nanoseconds)
        let answer: @Sendable () -> Void = { [viewers, id, clock, loop] in
            let now = clock.uptime
            let left = Duration.nanoseconds(Int64(clamping: deadline > now ? deadline - now : 0))
            viewers.requestPicture(request, clientHas: clientHas, wait: left) { result in
                completion(
                    result.mapError { error in
                        if error.code == .sessionNotFound { return .notFound(id) }
                        return loop.explainingNoPictureYet(error)
                    })
            }
        }
        let decode: @Sendable () -> Void = { [loop, id] in
            let outcome = loop.onDemand.demand(.pictureRequest) { error in
                guard let error else { return answer() }
                completion(.failure(error.code == .sessionNotFound ? .notFound(id) : error))
            }
            switch outcome {
            case .ready: answer()
            case .waiting: break
            case .refused(let error): completion(.failure(error))
            }
        }
        // A pull that connects on demand is connected first, and the request waits for its
        // first picture; then the decoder is asked, as for any session.
        let connecting = loop.connection.demand(.pictureRequest, waitLimit: wait > .zero ? wait : nil) { [id] error in
            guard let error else { return decode() }
            completion(.failure(error.code == .sessionNotFound ? .notFound(id) : error))
        }
        switch connecting {
        case .ready: decode()
        case .waiting: break
        case .refused(let error): completion(.failure(error))
        }
    }

    /// The session pulls a source that connects on demand and is not live now: a viewer would
    /// wait for its connection, which may fail.
    public var awaitsOnDemandSource: Bool {
        guard let source = loop.pull?.snapshot else { return false }
        return source.connect == .onDemand && source.state != .live
    }

    /// Registers an MJPEG viewer. Throws `.sessionNotFound` after close and `.invalidParameter`
    /// for bad options (fps must be 0.1...120 when given; a size the newest picture cannot be
    /// served at, as `latest.jpg` would answer).
    public func subscribe(_ request: PictureRequest, maxFPS: Double? = nil) throws(SessionError) -> Viewer {
        let request = try request.validated()
        if let maxFPS, !(0.1...120).contains(maxFPS) {
            throw SessionError(.invalidParameter, "fps must be 0.1...120")
        }
        if let newest = viewers.newest { try pictures.check(newest, request) }
        let minInterval = maxFPS.map { UInt64(1e9 / $0) } ?? 0
        // An idle on-demand session connects and starts decoding for its viewer (who waits for
        // the first part).
        if case .refused(let error) = loop.connection.demand(.mjpegViewer) { throw error }
        if case .refused(let error) = loop.onDemand.demand(.mjpegViewer) { throw error }
        let viewerID: UInt64
        do {
            viewerID = try viewers.addViewer(request: request, minInterval: minInterval)
        } catch {
            throw .notFound(id)
        }
        context.metrics.mjpegClients.increment()
        context.logger.debug("MJPEG viewer joined", metadata: ["viewer": "\(viewerID)"])
        return Viewer(session: self, id: viewerID, request: request, maxFPS: maxFPS)
    }

    func viewerLeft(_ viewerID: UInt64) {
        guard viewers.removeViewer(viewerID) else { return }
        loop.onDemand.viewerLeft()
        loop.connection.viewerLeft()
        context.metrics.mjpegClients.decrement()
        context.logger.debug("MJPEG viewer left", metadata: ["viewer": "\(viewerID)"])
    }

    // MARK: - Status

    public func status() -> SessionStatus {
        let facts = loop.reporter.facts
        let source = loop.pull?.snapshot
        return SessionStatus(
            id: id, codec: facts.codec, codecStated: facts.codec != nil && facts.codecIsStated,
            statedCodec: facts.statedCodec, backend: facts.backend, backendReason: facts.backendReason,
            encoder: pictures.encoderIdentity ?? pictures.chosenEncoder, device: facts.device,
            fallbacks: Array(facts.fallbacks), decode: facts.decodeMode, decoder: loop.onDemand.activity,
            quality: pictures.defaultQuality, createdAt: createdAt, lastActivityAt: context.activity.lastDate,
            format: facts.format, counters: facts.counters,
            latestFrame: viewers.newest.map { $0.info(now: clock.uptime) },
            lastError: Self.newer(facts.lastError, source?.lastError),
            subscribers: viewers.viewerCount, uploading: loop.isUploading, hold: loop.hold, rates: loop.reporter.rates,
            source: source, owner: keeper.withLock { $0 }, ignoredPackets: loop.ignoredPackets.snapshot,
            standing: standing)
    }

    /// The session's last error is the newer of the decoder's and the source's: a camera that
    /// cannot be reached says so where every client looks, not only under `source`.
    private static func newer(_ decoding: ErrorRecord?, _ source: ErrorRecord?) -> ErrorRecord? {
        guard let decoding else { return source }
        guard let source else { return decoding }
        return source.at > decoding.at ? source : decoding
    }

    /// What the session's compressed history holds (`GET /sessions/{id}/history`).
    public func historySummary() -> HistorySummary { HistorySummary(history.summary) }

    /// The access units the session's compressed history holds, for outputs that want coded
    /// video (read-only; see `CompressedHistoryView`).
    public var accessUnits: CompressedHistoryView { CompressedHistoryView(history: history) }

    /// Bytes of compressed history held.
    var historyBytes: Int { history.bytes }

    /// Pictures encoded so far (each (picture, size, quality, format) at most once).
    public var encodeCount: Int { pictures.encodeCount }
    /// The encoder of the session's pictures and why it serves (made by the services'
    /// `encoderFactory`); nil before the first encode.
    public var pictureEncoder: PictureEncoderIdentity? { pictures.encoderIdentity }
    public var isClosed: Bool { loop.isClosed }
    /// The newest picture's sequence, nil before the first one.
    public var latestSequence: UInt64? { viewers.newest?.sequence }
    /// Long polls waiting for a newer picture.
    public var waitingRequests: Int { viewers.waiterCount }
    /// MJPEG viewers connected.
    public var viewerCount: Int { viewers.viewerCount }

    /// Answers on the decode queue, once the step under way ended (a concluded push's job is
    /// gone by then), whether nothing of a stream was ever read into the session (no access
    /// unit, no picture) and nothing uses it (upload, viewer, waiting request, pull).
    func checkUnused(_ answer: @escaping @Sendable (Bool) -> Void) {
        loop.decodeQueue.async { [self] in
            let status = status()
            answer(isUnused && status.counters.accessUnits == 0 && status.latestFrame == nil)
        }
    }

    /// Nothing uses the session right now.
    var isUnused: Bool { !loop.isBusy && viewers.isEmpty }

    /// True when the idle timeout may remove the session (see `SessionStanding`), nothing uses
    /// it and nothing happened for `timeout`.
    func isIdle(now: UInt64, timeout: Duration) -> Bool {
        nanosecondsUntilIdle(now: now, timeout: timeout) == 0
    }

    /// Nanoseconds until this session could become idle (for `Retry-After`), nil when in use or
    /// when it never expires.
    func nanosecondsUntilIdle(now: UInt64, timeout: Duration) -> UInt64? {
        guard standing.expiresWhenIdle, !loop.isBusy, viewers.isEmpty, !loop.isHeld(at: now) else { return nil }
        let idleFor = now &- context.activity.lastUptime
        let timeout = timeout.nanoseconds
        return idleFor >= timeout ? 0 : timeout - idleFor
    }

    // MARK: - Close

    /// What a client whose push is cut off is told, for `close`'s reason.
    static func endedBecause(_ reason: String) -> String {
        switch reason {
        case "deleted": "the session was deleted"
        case "declared":
            "the configuration file now declares this session and took its id over: push again, from a keyframe, "
                + "to the declared session"
        case "restarted": "a reading of the configuration file restarted the session: push again, from a keyframe"
        case "undeclared": "the session was removed from the configuration file"
        case "idle": "the session was removed after its idle timeout"
        default: "the session was removed (\(reason))"
        }
    }

    /// Frees the decoder (and its hardware context), the cached pictures and queued upload
    /// bytes; refuses uploads in progress (their clients are answered `session_not_found` at
    /// once, saying why), ends MJPEG viewers and fails waiting requests.
    public func close(reason: String = "deleted") {
        guard !loop.isClosed else { return }
        let gone = SessionError.notFound(id)
        let endedViewers = viewers.viewerCount
        loop.close(why: Self.endedBecause(reason))
        viewers.close(failing: gone)
        pictures.close(failing: gone)
        if endedViewers > 0 { context.metrics.mjpegClients.decrement(by: Double(endedViewers)) }
        context.logger.info("session closed", metadata: ["reason": "\(reason)"])
    }
}

/// One MJPEG viewer (`GET /sessions/{id}/frames.mjpeg`). The HTTP layer's content reader loop:
///
///     switch viewer.poll() {
///     case .picture(let served, _): write the part (headers + served.picture.bytes)
///     case .wait:  suspend the connection; viewer.notifyWhenReady { resume it }
///     case .ended: write the closing boundary, end the response
///     }
///     ... and when the response is freed (client gone): viewer.cancel()
public final class Viewer: Sendable {
    public let session: Session
    public let request: PictureRequest
    /// Most parts per second, nil for as many as decoded.
    public let maxFPS: Double?
    let id: UInt64

    init(session: Session, id: UInt64, request: PictureRequest, maxFPS: Double?) {
        self.session = session
        self.id = id
        self.request = request
        self.maxFPS = maxFPS
    }

    /// Non-blocking; any thread. Starts the encode of the newest picture when one is due.
    public func poll() -> ViewerPoll { session.viewers.poll(id) }

    /// Calls `callback` once when `poll` has something (a newer picture, a repeat that is due,
    /// or the end), at once on this thread when it already has. Call it after suspending.
    public func notifyWhenReady(_ callback: @escaping @Sendable () -> Void) {
        session.viewers.notifyWhenReady(id, callback)
    }

    /// The viewer left: forget it. Idempotent.
    public func cancel() { session.viewerLeft(id) }
}

/// A reference that does not keep its object alive, settable once the object exists.
final class WeakBox<Object: AnyObject & Sendable>: Sendable {
    private let reference = Mutex<Weak>(Weak())

    /// Only read and written under `reference`'s lock.
    private struct Weak {
        weak var object: Object?
    }

    var value: Object? {
        get { reference.withLock { $0.object } }
        set { reference.withLock { $0.object = newValue } }
    }
}
