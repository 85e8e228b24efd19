import Decoding
import Dispatch
import Foundation
import H264
import Imaging
import Logging
import Synchronization

/// One live stream: ingest → decode → newest picture → encoded-picture cache → readers.
///
/// Threads: every public method may be called from any thread (libmicrohttpd's) and returns
/// without decoding or encoding. Decoding runs on the session's serial decode worker,
/// encoding on its serial encode worker; different sessions run in parallel. All shared
/// state sits behind one `Mutex` whose critical sections never call out: callbacks given to
/// a session are always invoked with no lock held, on a session worker, on the timer queue,
/// or (where documented) synchronously on the calling thread.
public final class Session: Sendable {
    public let id: SessionID
    public let createdAt: Date
    let configuration: ServerConfiguration
    let metrics: FrameTapMetrics
    let logger: Logger
    let decodeQueue: DispatchQueue
    let encodeQueue: DispatchQueue
    let decoding: DecodeWorkerState
    let encoding: EncodeWorkerState
    let state: Mutex<State>

    /// Deadlines (long-poll timeouts, MJPEG pacing) of every session; the work done there is a
    /// lock and a hand-off, so one queue is plenty.
    static let timerQueue = DispatchQueue(label: "frametap.sessions.timers")

    /// Creates the session and its decoder. Throws `.pipeline(.decoderUnavailable)` when the
    /// back end asked for (`vaapi`) cannot open.
    public init(
        id: SessionID, configuration: ServerConfiguration, options: SessionOptions = SessionOptions(),
        metrics: FrameTapMetrics, logger: Logger
    ) throws(SessionError) {
        self.id = id
        self.configuration = configuration
        self.metrics = metrics
        var logger = logger
        logger[metadataKey: "session"] = "\(id)"
        self.logger = logger
        createdAt = Date()
        let backendChoice = options.backend ?? configuration.backend
        let mode = options.decode ?? .all
        let pipeline: DecoderPipeline
        do {
            pipeline = try DecoderPipeline(configuration: configuration, backend: backendChoice, mode: mode)
        } catch {
            throw SessionError(error)
        }
        decodeQueue = DispatchQueue(label: "frametap.session.\(id).decode")
        encodeQueue = DispatchQueue(label: "frametap.session.\(id).encode")
        decoding = DecodeWorkerState(pipeline: pipeline)
        encoding = EncodeWorkerState()
        state = Mutex(
            State(
                lastActivity: createdAt, lastActivityUptime: Self.uptime(), backendChoice: backendChoice,
                backend: pipeline.backend, backendReason: pipeline.backendReason, decodeMode: mode,
                quality: options.quality ?? configuration.defaultQuality))
    }

    static func uptime() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    // MARK: - Configuration

    /// Applies `PUT /sessions/{id}`. Quality and decode mode apply at once; a different back end
    /// is opened right here (so an unavailable one fails this call and changes nothing) and
    /// takes over at the next stream start (after a flush), or at once when no stream is under way.
    public func configure(_ options: SessionOptions) throws(SessionError) {
        let current = state.withLock { ($0.closed, $0.backendChoice, $0.decodeMode) }
        guard !current.0 else { throw .notFound(id) }
        let replacement: PipelineTransfer?
        if let backend = options.backend, backend != current.1 {
            do {
                let pipeline = try DecoderPipeline(
                    configuration: configuration, backend: backend, mode: options.decode ?? current.2)
                replacement = PipelineTransfer(pipeline: pipeline)
            } catch {
                throw SessionError(error)
            }
        } else {
            replacement = nil
        }
        state.withLock { state in
            if let quality = options.quality { state.quality = quality }
            if let mode = options.decode { state.decodeMode = mode }
            if let backend = options.backend { state.backendChoice = backend }
        }
        let mode = options.decode
        decodeQueue.async { [self] in
            if let mode { decoding.setMode(mode) }
            if let replacement {
                decoding.replace(with: replacement.pipeline)
                refreshDecoderFacts()
            }
        }
        logger.info(
            "session configured",
            metadata: [
                "backend": "\(options.backend?.rawValue ?? "unchanged")",
                "decode": "\(options.decode?.rawValue ?? "unchanged")",
                "quality": "\(options.quality.map(String.init) ?? "unchanged")",
            ])
    }

    /// Back end facts can change on the decode worker (a pipeline swap, VA-API refusing a profile).
    func refreshDecoderFacts() {
        guard let pipeline = decoding.pipeline else { return }
        let facts = (pipeline.backend, pipeline.backendReason, pipeline.format)
        let counters = decoding.counters(adding: pipeline)
        state.withLock { state in
            state.backend = facts.0
            state.backendReason = facts.1
            if let format = facts.2 { state.format = format }
            state.counters.merge(decoder: counters)
        }
    }

    // MARK: - Status

    public func status() -> SessionStatus {
        let now = Self.uptime()
        return state.withLock { state in
            SessionStatus(
                id: id, backend: state.backend, backendReason: state.backendReason, decode: state.decodeMode,
                quality: state.quality, createdAt: createdAt, lastActivityAt: state.lastActivity,
                format: state.format, counters: state.counters,
                latestFrame: state.latest.map { $0.info(now: now) }, lastError: state.lastError,
                subscribers: state.subscribers.count, uploading: state.writer != nil)
        }
    }

    /// Number of pictures encoded so far (each (picture, size, quality, format) at most once).
    public var encodeCount: Int { state.withLock { $0.encodes } }

    public var isClosed: Bool { state.withLock { $0.closed } }

    /// Upload bytes waiting for the decoder (never above `uploadQueueBytes`).
    public var queuedUploadBytes: Int { state.withLock { $0.queuedBytes } }

    /// The newest picture's sequence, nil before the first one.
    public var latestSequence: UInt64? { state.withLock { $0.latest?.sequence } }

    /// True when nothing uses the session and nothing happened for `idleTimeout`.
    func isIdle(now: UInt64) -> Bool {
        state.withLock { state in
            state.writer == nil && state.subscribers.isEmpty && state.waiters.isEmpty
                && now &- state.lastActivityUptime >= configuration.idleTimeout.nanoseconds
        }
    }

    /// Nanoseconds until this session could become idle (for `Retry-After`), nil when in use.
    func nanosecondsUntilIdle(now: UInt64) -> UInt64? {
        state.withLock { state in
            guard state.writer == nil, state.subscribers.isEmpty, state.waiters.isEmpty else { return nil }
            let idleFor = now &- state.lastActivityUptime
            let timeout = configuration.idleTimeout.nanoseconds
            return idleFor >= timeout ? 0 : timeout - idleFor
        }
    }

    // MARK: - Close

    /// Frees the decoder (and its VA-API context), cached pictures and queued upload bytes;
    /// ends MJPEG viewers (their next poll answers `.ended`), fails waiting requests with
    /// `session_not_found` and completes a pending upload with the same error.
    public func close(reason: String = "deleted") {
        let taken: ClosedLeftovers? = state.withLock { state in
            guard !state.closed else { return nil }
            state.closed = true
            let leftovers = ClosedLeftovers(
                waiters: Array(state.waiters.values),
                subscriberCallbacks: state.subscribers.values.compactMap(\.callback),
                subscriberCount: state.subscribers.count,
                pendingFinishes: state.queue.compactMap(\.finishCompletion),
                roomCallback: state.roomCallback,
                spool: state.spool)
            state.waiters.removeAll()
            state.subscribers.removeAll()
            state.queue.removeAll()
            state.queuedBytes = 0
            state.roomCallback = nil
            state.spool = nil
            state.writer = nil
            state.cache.removeAll()
            state.cacheOrder.removeAll()
            state.latest = nil
            return leftovers
        }
        guard let taken else { return }
        decodeQueue.async { [decoding] in decoding.release() }
        encodeQueue.async { [encoding] in encoding.release() }
        let gone = SessionError.notFound(id)
        for waiter in taken.waiters { waiter.completion(.failure(gone)) }
        for callback in taken.subscriberCallbacks { callback() }
        for completion in taken.pendingFinishes { completion(.failure(gone)) }
        taken.roomCallback?()
        taken.spool?.sessionClosed()
        if taken.subscriberCount > 0 { metrics.mjpegClients.decrement(by: Double(taken.subscriberCount)) }
        logger.info("session closed", metadata: ["reason": "\(reason)"])
    }

    private struct ClosedLeftovers {
        var waiters: [Waiter]
        var subscriberCallbacks: [@Sendable () -> Void]
        var subscriberCount: Int
        var pendingFinishes: [UploadCompletion]
        var roomCallback: (@Sendable () -> Void)?
        var spool: SpooledUpload?
    }

    // MARK: - Publishing (decode worker)

    /// Runs one decoder step on the decode worker and publishes what it produced: counters,
    /// format, errors, then the frames in output order. The newest undamaged one becomes the
    /// latest picture: a picture libavcodec concealed errors in (`hasDecodeErrors`, already an
    /// error of the step) never replaces a good one. Returns every published frame, damaged
    /// ones included, oldest first (a multipart answer sends them all, as the ffmpeg CLI does).
    @discardableResult
    func runDecoderStep(
        receivedAt: UInt64?, progress: UploadProgress?, _ body: (DecoderPipeline) -> DecoderPipeline.Step
    ) -> [PublishedFrame] {
        dispatchPrecondition(condition: .onQueue(decodeQueue))
        guard let pipeline = decoding.pipeline else { return [] }
        let step = body(pipeline)
        let counters = decoding.counters(adding: pipeline)
        let facts = (pipeline.backend, pipeline.backendReason, pipeline.format)
        let now = Date()
        let nowUptime = Self.uptime()

        var published: [PublishedFrame] = []
        var before = SessionCounters()
        var wake = WakeUps()
        let open = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            before = state.counters
            state.counters.merge(decoder: counters)
            state.backend = facts.0
            state.backendReason = facts.1
            if let format = facts.2 { state.format = format }
            for error in step.errors {
                state.lastError = ErrorRecord(code: error.code.rawValue, message: error.message, at: now)
            }
            guard !step.frames.isEmpty else { return true }
            for frame in step.frames {
                let entry = PublishedFrame(frame: frame, sequence: state.nextSequence, backend: facts.0)
                state.nextSequence += 1
                published.append(entry)
            }
            state.lastActivity = now
            state.lastActivityUptime = nowUptime
            guard let newest = published.last(where: { !$0.frame.hasDecodeErrors }) else { return true }
            let previous = state.latest
            state.latest = newest
            // Keep the previous picture's encodings too: a request that read it as the
            // latest just before this publish must still find them.
            state.cacheFloor = previous?.sequence ?? newest.sequence
            state.evictCache(olderThan: state.cacheFloor)
            wake = state.takeWakeUps(newest: newest)
            return true
        }
        guard open else { return [] }

        recordStepMetrics(before: before, after: counters, errors: step.errors, frames: published.count)
        if let receivedAt, !published.isEmpty {
            metrics.decodeLatency.recordNanoseconds(Int64(clamping: nowUptime &- receivedAt))
        }
        progress?.record(frames: published.count, errors: step.errors, at: now, logger: logger)
        if progress == nil { logErrors(step.errors) }
        wake.run(session: self)
        return published
    }

    private func recordStepMetrics(before: SessionCounters, after: SessionCounters, errors: [DecodeError], frames: Int) {
        let newBytes = after.bytes - before.bytes
        if newBytes > 0 { metrics.bytesIn.increment(by: newBytes) }
        for (type, count) in after.nalUnits {
            let delta = count - (before.nalUnits[type] ?? 0)
            if delta > 0 { metrics.recordNALUnits(type: type, count: delta) }
        }
        if frames > 0 { metrics.framesDecoded.increment(by: frames) }
        for error in errors { metrics.recordError(code: error.code.rawValue) }
    }

    private func logErrors(_ errors: [DecodeError]) {
        for error in errors {
            logger.warning("decode error", metadata: ["code": "\(error.code.rawValue)", "message": "\(error.message)"])
        }
    }

    /// An error outside the decoder (encode failure, aborted upload): remembered and counted.
    func recordError(_ error: SessionError) {
        let now = Date()
        state.withLock { state in
            state.lastError = ErrorRecord(code: error.code.rawValue, message: error.message, at: now)
            if error.code == .uploadAborted { state.counters.uploadsAborted += 1 }
        }
        metrics.recordError(code: error.code.rawValue)
        logger.warning("session error", metadata: ["code": "\(error.code.rawValue)", "message": "\(error.message)"])
    }

    func touch() {
        let now = Date()
        let uptime = Self.uptime()
        state.withLock { state in
            state.lastActivity = now
            state.lastActivityUptime = uptime
        }
    }
}

/// A picture the session published, with its session-wide sequence number (1, 2, ...; never
/// reused, also across flushes and back end changes, so it is a valid ETag basis).
struct PublishedFrame: Sendable {
    let frame: DecodedFrame
    let sequence: UInt64
    let backend: DecoderBackend

    func info(now: UInt64) -> LatestFrameInfo {
        LatestFrameInfo(
            seq: sequence, pts: frame.pts, keyframe: frame.isKeyframe, width: frame.width, height: frame.height,
            ageMs: Int((now &- frame.decodedAtUptimeNanoseconds) / 1_000_000))
    }
}

/// What a publish must do once the lock is released.
struct WakeUps {
    var waiters: [Waiter] = []
    var newest: PublishedFrame?
    var subscribers: [UInt64] = []

    func run(session: Session) {
        if let newest {
            for waiter in waiters {
                session.serve(newest, request: waiter.request, quality: waiter.quality, completion: waiter.completion)
            }
        }
        for id in subscribers { session.evaluateSubscriber(id) }
    }
}

/// The decoder and what it accumulated, owned by the decode worker.
final class DecodeWorkerState: @unchecked Sendable {
    // @unchecked: touched only on the session's decode queue.
    private(set) var pipeline: DecoderPipeline?
    /// A back end chosen while a stream was under way; it takes over at the next stream start.
    private var pending: DecoderPipeline?
    /// Counters of pipelines replaced earlier, so session counters never go backwards.
    private var retired = SessionCounters()

    init(pipeline: DecoderPipeline) {
        self.pipeline = pipeline
    }

    func counters(adding pipeline: DecoderPipeline) -> SessionCounters {
        var total = retired
        total.add(pipeline.counters)
        return total
    }

    func setMode(_ mode: DecodeMode) {
        pipeline?.keyframesOnly = mode == .keyframes
        pending?.keyframesOnly = mode == .keyframes
    }

    func replace(with replacement: DecoderPipeline) {
        guard let current = pipeline else { return }
        if current.midStream {
            pending = replacement
        } else {
            retired.add(current.counters)
            pipeline = replacement
        }
    }

    /// After a flush: a pending back end takes over now that no stream is under way.
    func streamEnded() {
        guard let replacement = pending, let current = pipeline else { return }
        retired.add(current.counters)
        pipeline = replacement
        pending = nil
    }

    func release() {
        pipeline = nil
        pending = nil
    }
}

/// The picture encoder, owned by the encode worker (a `PictureEncoder` keeps a TurboJPEG
/// handle and scaler caches that must not be shared between threads).
final class EncodeWorkerState: @unchecked Sendable {
    // @unchecked: touched only on the session's encode queue.
    private var encoder: PictureEncoder?

    func encode(_ frame: DecodedFrame, _ options: PictureOptions) throws(ImagingError) -> EncodedPicture {
        if encoder == nil { encoder = try PictureEncoder() }
        return try encoder!.encode(frame, options)
    }

    func release() { encoder = nil }
}

extension SessionCounters {
    mutating func add(_ other: SessionCounters) {
        stream.add(other.stream)
    }

    /// Takes the decoder's counters, keeping the session's own (`uploadsAborted`).
    mutating func merge(decoder: SessionCounters) {
        let aborted = uploadsAborted
        self = decoder
        uploadsAborted = aborted
    }
}
