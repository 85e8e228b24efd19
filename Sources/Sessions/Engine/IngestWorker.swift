import Containers
import Decoding
import Dispatch
import FoundationEssentials
import Ingest
import Logging
import Synchronization
import Timekeeping
import VideoCoding

/// A session's one decode loop: each push's bytes, from its input (an `IngestSource`), through
/// the decoder to the newest picture, on the session's serial decode queue.
///
/// Pushes are jobs in arrival order. Only the first one takes bytes (the others wait with an
/// empty, unadmitted queue), so a session holds at most one upload queue's worth of bytes. A
/// second push while one's body is still arriving is refused (`session_busy`): one stream
/// has one byte order. Whatever the source (a live push's `UploadQueue`, a spooled push's
/// `SpoolReplay`, a pull's `PullSource`), the loop does the same: decode what it reads and
/// publish the pictures; at the push's end, one end-of-stream path (flush, facts refresh,
/// events, log); then the push's answer (a JSON summary, or the end of a multipart answer)
/// gets its outcome.
///
/// Every access unit ingest hands on goes into the session's `CompressedHistory` (its only
/// writer) before any decoder sees it. In on-demand mode no decoder runs until someone asks
/// for a picture (`demand`); then one catches up from the history and decodes live until the
/// interest lingered out (`IngestWorker+OnDemand.swift`).
///
/// Owns: the jobs, the decoder (bound to the decode queue), its activity on demand and what the
/// decoder reports: counters, format, back end and why, the last error.
final class IngestWorker: Sendable {
    /// What the status page shows of the decoder; replaced after every decoder step.
    struct Facts: Sendable {
        var backendChoice: DecoderBackendChoice
        /// The codec stated for the stream (`PUT`); nil: detected.
        var statedCodec: VideoCodec?
        /// The stream's codec, stated or detected; nil until known.
        var codec: VideoCodec?
        var backend: DecoderBackend
        var backendReason: String
        /// The hardware device decoding now; nil in software.
        var device: HardwareDeviceID?
        /// The latest switches to another back end (at most `Facts.fallbackHistory`), oldest first.
        var fallbacks: [BackendFallback] = []
        var decodeMode: DecodeMode
        var format: StreamFormat?
        var counters = SessionCounters()
        var lastError: ErrorRecord?

        static let fallbackHistory = 8

        /// Takes what the decoder says now.
        mutating func update(_ snapshot: DecoderSnapshot) {
            counters.merge(decoder: snapshot.counters)
            if let codec = snapshot.codec { self.codec = codec }
            backend = snapshot.backend
            backendReason = snapshot.backendReason
            device = snapshot.device
            if let format = snapshot.format { self.format = format }
            fallbacks = Array((fallbacks + snapshot.newFallbacks).suffix(Self.fallbackHistory))
        }
    }

    struct State {
        var closed = false
        var jobs: [UploadJob] = []
        var facts: Facts
        var rates: InputRateMeter
        /// What the decoder does: always `live` outside on-demand mode.
        var activity: DecoderActivity
        /// Requests waiting for a catch-up to end, each called once (with nil, or why not).
        var readyWaiters: [(UInt64, @Sendable (SessionError?) -> Void)] = []
        var nextWaiterToken: UInt64 = 1
        /// Uptime of the last request for a picture (or the last MJPEG viewer leaving).
        var lastDemand: UInt64 = 0
        /// Uptime the pending linger check runs at.
        var lingerDue: UInt64?
        /// The catch-up's place in the pool's queue while it waits for a slot.
        var catchUpTicket: UInt64?
        /// When each code last made an `error` event (the codes are a fixed set): a stream that
        /// fails on every picture makes one event per code and second, not one per picture.
        var errorEventAt: [String: UInt64] = [:]

        /// Whether an error with `code` is news worth an event now (and remembers it if so).
        mutating func admitErrorEvent(code: String, at uptime: UInt64) -> Bool {
            if let last = errorEventAt[code], uptime &- last < 1_000_000_000 { return false }
            errorEventAt[code] = uptime
            return true
        }
    }

    let id: SessionID
    let decodeQueue: DispatchQueue
    let decoder: QueueBound<DecoderSlot>
    let state: Mutex<State>
    let context: SessionContext
    /// Where the newest picture goes.
    let viewers: ViewerSet
    let pictures: PictureCache
    /// Where every access unit goes first (this worker is its only writer).
    let history: CompressedHistory
    /// The session's open container stream, between the pushes that carry it.
    private let containers = ContainerStreamSlot<SessionError>()
    /// Packets of container tracks other than the video, counted.
    let ignoredPackets = IgnoredPackets()

    init(
        id: SessionID, pipeline: DecoderPipeline, mode: DecodeMode, context: SessionContext, viewers: ViewerSet,
        pictures: PictureCache, history: CompressedHistory
    ) {
        self.id = id
        decodeQueue = DispatchQueue(label: "frametap.session.\(id).decode")
        decoder = QueueBound(DecoderSlot(pipeline: pipeline), queue: decodeQueue)
        state = Mutex(
            State(
                facts: Facts(
                    backendChoice: pipeline.backendChoice, statedCodec: pipeline.statedCodec, codec: pipeline.codec,
                    backend: pipeline.backend,
                    backendReason: pipeline.backendReason, device: pipeline.device, fallbacks: pipeline.fallbacks,
                    decodeMode: mode),
                rates: InputRateMeter(startedAt: context.clock.uptime), activity: mode == .onDemand ? .idle : .live))
        self.context = context
        self.viewers = viewers
        self.pictures = pictures
        self.history = history
    }

    var facts: Facts { state.withLock { $0.facts } }

    var rates: SessionRates {
        let now = context.clock.uptime
        return state.withLock { $0.rates.rates(at: now) }
    }

    /// True while an upload is queued, arriving or answering.
    var isBusy: Bool { state.withLock { !$0.jobs.isEmpty } }

    /// True while an upload's body is arriving (status `uploading`).
    var isUploading: Bool { state.withLock { $0.jobs.contains { $0.holdsSlot && !$0.isPull } } }

    /// The pull under way, if the session pulls.
    var pull: PullSource<SessionError>? {
        state.withLock { state in
            state.jobs.lazy.compactMap { job -> PullSource<SessionError>? in
                if case .pull(let source) = job.answer { return source }
                return nil
            }.first
        }
    }

    // MARK: - Pushes

    /// Starts a `POST .../nalus` answered with JSON: the body is decoded as it arrives.
    /// `completion` runs once with the summary, or the failure.
    func beginUpload(
        flush: Bool, codec: VideoCodec?, content: PushContent?,
        completion: @escaping @Sendable (Result<UploadSummary, SessionError>) -> Void
    ) throws(SessionError) -> UploadQueue<SessionError> {
        let job = try enqueue(flush: flush, codec: codec) { queue in
            (route(queue, upload: queue, content: content, flush: flush), .summary(completion))
        }
        return job.upload!
    }

    /// Starts a `POST .../nalus` answered with one part per picture: the body is spooled as it
    /// arrives and decoded as the answer is read (see `SpooledUpload`, `SpoolReplay`).
    func beginSpooledUpload(
        request: PictureRequest, flush: Bool, codec: VideoCodec?, content: PushContent?
    ) throws(SessionError) -> SpooledUpload {
        let configuration = context.configuration
        let file: SpoolFile
        do {
            file = try SpoolFile(directory: configuration.spoolDirectory, budget: configuration.spoolBudget)
        } catch {
            throw SessionError(error)
        }
        let spooledLimit = min(configuration.maxBodyBytes ?? .max, configuration.maxSpoolBytes)
        let job = try enqueue(flush: flush, codec: codec, maxBytes: spooledLimit) { queue in
            let answer = SpooledUpload(queue: queue, request: request, worker: self, pictures: pictures)
            let replay = SpoolReplay(
                upload: queue, file: file, clock: context.clock, wantsBytes: { answer.wantsPictures },
                spooled: { answer.uploadEnded(.success(())) })
            return (route(replay, upload: queue, content: content, flush: flush), .multipart(answer))
        }
        guard case .multipart(let answer) = job.answer else { preconditionFailure("a multipart job was made") }
        return answer
    }

    /// A push's bytes as the decode loop reads them: through the session's container stream
    /// when they are a container, straight on when they are Annex B (`PushSniffer`).
    private func route(
        _ source: any IngestSource<SessionError>, upload: UploadQueue<SessionError>, content: PushContent?, flush: Bool
    ) -> any IngestSource<SessionError> {
        let context = context
        let ignored = ignoredPackets
        return PushSniffer(
            upload: source, declared: content, flush: flush, slot: containers,
            startStream: { format in
                context.metrics.recordContainerStream(container: format.rawValue)
                context.logger.debug("container stream started", metadata: ["container": "\(format.rawValue)"])
                return ContainerStream(
                    format: format, seekWindow: context.configuration.containerSeekWindow,
                    queueBytes: context.configuration.uploadQueueBytes, clock: context.clock, ignored: ignored,
                    logger: context.logger)
            },
            streamFailed: { [weak self] error in self?.record(SessionError(error)) },
            refuse: { [weak upload] error in upload?.refuse(error) })
    }

    // MARK: - Pulls

    /// Starts pulling `spec`: the session's one job from now on (a push gets `session_busy`),
    /// until `endPull` or the session closes. Throws `session_busy` while a push is under way.
    /// `policy` (the allow list when the pull starts) checks its redirects and later attempts.
    func beginPull(_ spec: PullSourceSpec, policy: SourcePolicy) throws(SessionError) -> PullSource<SessionError> {
        var settings = context.configuration.pullSettings
        settings.policy = policy
        let source = PullSource<SessionError>(
            spec: spec, settings: settings, clock: context.clock, logger: context.logger,
            observer: SessionPullObserver(source: spec.url.redacted, context: context), ignored: ignoredPackets)
        let job = try state.withLock { state throws(SessionError) -> UploadJob in
            guard !state.closed else { throw SessionError(.sessionNotFound, "the session was closed") }
            guard !state.jobs.contains(where: \.holdsSlot) else {
                throw SessionError(.sessionBusy, "a push or a pull is under way on this session")
            }
            let job = UploadJob(
                upload: nil, source: source, flush: false, codec: nil, answer: .pull(source),
                progress: QueueBound(UploadProgress(), queue: decodeQueue))
            state.jobs.append(job)
            return job
        }
        // A container stream left open by earlier pushes has no push to continue it any more.
        containers.stop()
        job.source.setConsumerWake { [weak self] in self?.wake() }
        source.start()
        context.activity.touch()
        context.logger.info("pull started", metadata: ["source": "\(spec.url.redacted)"])
        return source
    }

    /// Stops the pull now (its thread is interrupted), and ends its stream: its delayed
    /// pictures come out. The session stays, and may be pushed to or pull again.
    func endPull() {
        // Out of the jobs now, so a new pull or a push may follow at once; the stream's end is
        // decoded on the decode queue before anything of theirs.
        let job = state.withLock { state -> UploadJob? in
            guard let index = state.jobs.firstIndex(where: \.isPull) else { return nil }
            return state.jobs.remove(at: index)
        }
        guard let job, case .pull(let source) = job.answer else { return }
        source.stop()
        decodeQueue.async { [self] in
            endOfStream(job)
            job.source.close()
        }
    }

    /// `codec`: what the push says it carries (`?codec=`, its Content-Type); another codec than
    /// the stream's known one is refused before a byte is read.
    private func enqueue(
        flush: Bool, codec: VideoCodec?, maxBytes: Int? = nil,
        _ makeSource: (UploadQueue<SessionError>) -> (any IngestSource<SessionError>, UploadJob.Answer)
    ) throws(SessionError) -> UploadJob {
        let configuration = context.configuration
        let job = try state.withLock { state throws(SessionError) -> UploadJob in
            guard !state.closed else { throw SessionError(.sessionNotFound, "the session was closed") }
            guard !state.jobs.contains(where: \.holdsSlot) else {
                if state.jobs.contains(where: \.isPull) {
                    throw SessionError(.sessionBusy, "this session pulls its stream from a source; push to another session")
                }
                throw SessionError(.sessionBusy, "another upload to this session is in progress")
            }
            if let codec, let known = state.facts.codec, codec != known {
                throw SessionError(
                    DecodeError(
                        .codecMismatch,
                        "this push is \(codec.displayName) (its codec parameter or Content-Type), but the session's "
                            + "stream is \(known.displayName)"))
            }
            let queue = UploadQueue(
                watermark: HighLowWatermark(capacity: configuration.uploadQueueBytes),
                maxBytes: maxBytes ?? configuration.maxBodyBytes, admitted: state.jobs.isEmpty, clock: context.clock,
                onLimit: { [weak self] error in self?.bodyPassedLimit(error) })
            let (source, answer) = makeSource(queue)
            let job = UploadJob(
                upload: queue, source: source, flush: flush, codec: codec, answer: answer,
                progress: QueueBound(UploadProgress(), queue: decodeQueue))
            state.jobs.append(job)
            return job
        }
        job.source.setConsumerWake { [weak self] in self?.wake() }
        context.activity.touch()
        context.logger.debug("upload started", metadata: ["multipart": "\(job.isMultipart)"])
        context.events.emit(.uploadStarted) { $0.multipart = job.isMultipart }
        return job
    }

    func wake() {
        decodeQueue.async { [self] in decodeLoop() }
    }

    /// The decode loop: reads the first job's source until it has nothing ready, moving on to
    /// the next job when one ends.
    private func decodeLoop() {
        while let job = state.withLock({ $0.closed ? nil : $0.jobs.first }), let event = job.source.next() {
            // The push's counts start where the previous push's decoding ended, and what it says
            // it carries holds for its bytes (the stream's codec when none is known yet; a
            // parameter set of another codec is refused).
            let beginning = job.progress.withValue { progress in
                defer { progress.begin(counters: facts.counters) }
                return !progress.hasBegun
            }
            if beginning { decoder.withValue { $0.pipeline?.beginPush(saying: job.codec) } }
            // A multipart answer sends the pictures of its push: an on-demand session decodes
            // while one runs.
            if beginning, job.isMultipart { decodeForMultipartAnswer() }
            switch event {
            case .bytes(let bytes, let receivedAt):
                let errors = step(receivedAt: receivedAt, job: job) {
                    $0.push(bytes, onAccessUnit: $1, onPicture: $2)
                }.errors
                // A push of another codec, or of none, is refused at once: nothing more of it
                // reaches the decoder, and its client gets the problem now.
                if let refusal = errors.first(where: { $0.code == .codecMismatch || $0.code == .unknownCodec }) {
                    job.upload?.refuse(SessionError(refusal))
                }
            case .sample(let sample, let receivedAt):
                let errors = step(receivedAt: receivedAt, job: job) { $0.push(sample: sample, onAccessUnit: $1, onPicture: $2) }.errors
                if let refusal = errors.first(where: { $0.code == .codecMismatch }) {
                    job.upload?.refuse(SessionError(refusal))
                }
            case .streamBreak:
                // A pulled source's connection ended: its stream ends with it.
                endOfStream(job)
            case .end:
                if job.flush {
                    endOfStream(job)
                } else {
                    step(receivedAt: nil, job: job) { pipeline, _, _ in pipeline.endPush() }
                }
                context.logger.debug("upload finished", metadata: ["bytes": "\(job.source.totalBytes)"])
                conclude(job, summary(of: job.progress, bytes: job.source.totalBytes, flushed: job.flush))
            case .stopped(let stop):
                decoder.withValue { $0.pipeline?.abandonIncompleteUnit() }
                let error = stopped(stop)
                if case .multipart(let answer) = job.answer { answer.uploadEnded(.failure(error)) }
                conclude(job, .failure(error))
                endJob(job)
            }
        }
    }

    /// A push's outcome is known: a JSON answer is sent and its job ends now; a multipart
    /// answer ends once its last part is out (`multipartAnswerEnded`).
    private func conclude(_ job: UploadJob, _ outcome: Result<UploadSummary, SessionError>) {
        switch job.answer {
        case .summary:
            job.complete(outcome) { uploadEnded($0, bytes: job.source.totalBytes) }
            endJob(job)
        case .multipart(let answer):
            answer.conclude(outcome)
        case .pull:
            endJob(job)
        }
    }

    /// The end of a stream, whichever push ends it: every delayed picture, then a pending back
    /// end may take over; facts, events and the log follow.
    private func endOfStream(_ job: UploadJob) {
        let pictures = step(receivedAt: nil, job: job) { $0.finish(onAccessUnit: $1, onPicture: $2) }.pictures
        history.endStream()
        if decoder.withValue({ $0.streamEnded() }) { pipelineReplaced() }
        refreshFacts()
        context.logger.info("stream flushed", metadata: ["frames": "\(pictures)"])
    }

    /// Removes a finished job, frees its source and lets the next one take bytes.
    private func endJob(_ job: UploadJob) {
        let next = state.withLock { state -> UploadJob? in
            guard let index = state.jobs.firstIndex(where: { $0 === job }) else { return nil }
            state.jobs.remove(at: index)
            // A multipart answer's interest in pictures lingers like a request's.
            if job.isMultipart { state.lastDemand = context.clock.uptime }
            return index == 0 ? state.jobs.first : nil
        }
        if job.isMultipart { scheduleLingerCheck() }
        decodeQueue.async { job.source.close() }
        guard let next else { return }
        next.upload?.admit()
        wake()
    }

    // MARK: - Multipart answers

    /// The answer took its last waiting picture to encode: decode on (the loop asks the first
    /// job's source, which asks its answer).
    func answerWantsPictures() {
        wake()
    }

    /// The answer sent its end: the push is over.
    func multipartAnswerEnded(_ answer: SpooledUpload, _ outcome: Result<UploadSummary, SessionError>) {
        guard let job = job(answeredBy: answer) else { return }
        uploadEnded(outcome, bytes: job.source.totalBytes)
        endJob(job)
    }

    /// The answer's request is over before the answer ended (`beforeItsEnd`: its client left
    /// or the server stops), or after.
    func multipartAnswerCancelled(_ answer: SpooledUpload, beforeItsEnd: Bool, serverShutdown: Bool) {
        guard let job = job(answeredBy: answer) else { return }
        if beforeItsEnd {
            let error = serverShutdown
                ? SessionError(.shuttingDown, "the server is shutting down")
                : SessionError(.uploadAborted, "the client disconnected before the answer ended")
            if !serverShutdown { record(error) }
            uploadEnded(.failure(error), bytes: job.source.totalBytes)
        }
        endJob(job)
    }

    private func job(answeredBy answer: SpooledUpload) -> UploadJob? {
        state.withLock { state in state.jobs.first { $0.answers(with: answer) } }
    }

    /// The answer to a finished upload: its summary, or a failure when a flushed body produced
    /// no picture at all but errors (the same push that a client could not tell from silence).
    private func summary(
        of progress: QueueBound<UploadProgress>, bytes: Int, flushed: Bool
    ) -> Result<UploadSummary, SessionError> {
        let facts = facts
        let latest = viewers.newest?.sequence
        return progress.withValue { progress in
            progress.outcome(
                summary: progress.summary(
                    counters: facts.counters, bytes: bytes, latestSeq: latest, format: facts.format,
                    flushed: flushed, session: id),
                flushed: flushed)
        }
    }

    /// `upload.ended`, once per upload, when its answer is known (on the decode queue).
    /// `frames` is sent with a summary only: a failed upload's count lives on the decode queue,
    /// and a failure can be answered from another thread (the session closed).
    private func uploadEnded(_ result: Result<UploadSummary, SessionError>, bytes: Int) {
        context.events.emit(.uploadEnded) { details in
            switch result {
            case .success(let summary):
                details.result = "ok"
                details.frames = summary.frames
            case .failure(let error):
                details.result = error.code.rawValue
            }
            details.bytes = bytes
        }
    }

    /// An upload that ended before its body did: recorded (and logged truthfully) as what it is.
    private func stopped(_ stop: IngestStop<SessionError>) -> SessionError {
        switch stop {
        case .clientGone:
            let error = SessionError(.uploadAborted, "the client disconnected before the upload ended")
            record(error)
            context.metrics.recordUploadStopped(reason: "client_gone")
            return error
        case .serverShutdown:
            context.logger.info("upload stopped: the server is shutting down; nothing more of it is decoded")
            context.metrics.recordUploadStopped(reason: "shutting_down")
            return SessionError(.shuttingDown, "the server is shutting down")
        case .refused(let error):
            // Recorded here, in order with the push's end (a reader of the status after the
            // answer finds it); a body past its limit was counted when the queue refused it
            // (`bodyPassedLimit`).
            record(error)
            if error.code == .ingest(.spoolFailed) || error.code == .ingest(.spoolFull) {
                context.metrics.recordUploadStopped(reason: error.code == .ingest(.spoolFull) ? "spool_full" : "spool_failed")
            }
            return error
        case .answered:
            return SessionError(.uploadAborted, "the upload was answered before its body ended")
        }
    }

    /// The upload's queue refused its body past the limit, on the producer's thread: the
    /// client is answered 413 now, so it is counted now (and recorded when the decode loop
    /// reaches the queue's stop event, see `stopped`).
    private func bodyPassedLimit(_ error: SessionError) {
        context.metrics.recordUploadStopped(reason: "body_too_large")
    }

    // MARK: - Decoding

    /// Runs one decoder step on the decode queue and publishes what it produced: counters,
    /// format, errors, then the newest undamaged picture. Every access unit goes into the
    /// history first, stamped with when its bytes arrived. Each picture comes out with its
    /// number (`PictureNumbering`) and is handed to the push's answer (a multipart answer sends
    /// them all, damaged ones included, as the ffmpeg CLI does); only the newest is kept beyond
    /// that, so a step that decodes many pictures never holds them all. Returns how many
    /// pictures it decoded.
    @discardableResult
    private func step(
        receivedAt: UInt64?, job: UploadJob,
        _ body: (DecoderPipeline, (IndexedAccessUnit) -> Void, DecoderPipeline.PictureHandler) -> [DecodeError]
    ) -> (pictures: Int, errors: [DecodeError]) {
        var pictures = 0
        var newest: PublishedFrame?
        let stamp = ReceiveStamp(clock: context.clock, receivedAt: receivedAt)
        let newestBefore = viewers.newest?.sequence ?? 0
        let outcome = decoder.withValue { slot -> ([DecodeError], DecoderSnapshot)? in
            guard let pipeline = slot.pipeline else { return nil }
            let errors = body(
                pipeline,
                { unit in history.append(unit, receivedAt: stamp.date, receivedUptime: stamp.uptime) },
                { frame, number in
                    let published = PublishedFrame(
                        frame: frame, sequence: number, backend: frame.decodedBy, at: context.clock,
                        receivedAt: frame.accessUnitIndex.flatMap(history.receivedAt))
                    pictures += 1
                    // A picture libavcodec concealed errors in (an error of this step) never
                    // replaces a good one as the newest, and the newest only ever moves on.
                    if !frame.hasDecodeErrors, number > max(newestBefore, newest?.sequence ?? 0) { newest = published }
                    job.deliver(published)
                })
            guard let snapshot = slot.snapshot() else { return nil }
            return (errors, snapshot)
        }
        guard let (errors, snapshot) = outcome else { return (0, []) }
        let counters = snapshot.counters
        let now = context.clock.now
        let uptime = context.clock.uptime
        let changes = state.withLock { state -> (before: Facts, after: Facts, newError: ErrorRecord?)? in
            guard !state.closed else { return nil }
            let before = state.facts
            state.facts.update(snapshot)
            for error in errors {
                state.facts.lastError = ErrorRecord(code: error.code.rawValue, message: error.message, at: now)
            }
            state.rates.record(
                bytes: state.facts.counters.bytes - before.counters.bytes, pictures: pictures, at: uptime)
            let newError = state.facts.lastError.flatMap { error in
                errors.isEmpty || !state.admitErrorEvent(code: error.code, at: uptime) ? nil : error
            }
            return (before, state.facts, newError)
        }
        guard let changes else { return (0, errors) }
        let before = changes.before.counters
        report(snapshot.newFallbacks)
        announce(from: changes.before, to: changes.after, fallbacks: snapshot.newFallbacks)
        if let error = changes.newError { announce(error) }
        if let newest { publish(newest) }
        if pictures > 0 { context.activity.touch() }
        recordMetrics(before: before, after: counters, errors: errors, frames: pictures)
        if let receivedAt, pictures > 0 {
            context.metrics.decodeLatency.recordNanoseconds(Int64(clamping: context.clock.uptime &- receivedAt))
        }
        job.progress.withValue { $0.record(frames: pictures, errors: errors, at: now, logger: context.logger) }
        return (pictures, errors)
    }

    /// Makes `newest` the session's newest picture (on the decode queue: only this queue
    /// publishes, so the newest cannot change between these calls).
    func publish(_ newest: PublishedFrame) {
        let previous = viewers.newest?.sequence
        guard newest.sequence > previous ?? 0 else { return }
        pictures.newestChanged(previous: previous, newest: newest.sequence)
        viewers.publish(newest)
        if previous == nil {
            let info = newest.info(now: context.clock.uptime)
            context.events.emit(.pictureFirst) { details in
                details.seq = info.seq
                details.width = info.width
                details.height = info.height
            }
        }
    }

    func recordMetrics(before: SessionCounters, after: SessionCounters, errors: [DecodeError], frames: Int) {
        let metrics = context.metrics
        let newBytes = after.bytes - before.bytes
        if newBytes > 0 { metrics.bytesIn.increment(by: newBytes) }
        decoder.withValue { slot in
            for (type, count) in after.nalUnits {
                let delta = count - (before.nalUnits[type] ?? 0)
                if delta > 0 { slot.nalUnitCounters.record(type: type, count: delta, in: metrics) }
            }
        }
        if frames > 0 { metrics.framesDecoded.increment(by: frames) }
        for error in errors { metrics.recordError(code: error.code.rawValue) }
    }

    /// An error outside the decoder (encode failure, aborted upload, limit): remembered and counted.
    func record(_ error: SessionError) {
        let now = context.clock.now
        let uptime = context.clock.uptime
        let record = ErrorRecord(code: error.code.rawValue, message: error.message, at: now)
        let isNews = state.withLock { state in
            state.facts.lastError = record
            if error.code == .uploadAborted { state.facts.counters.uploadsAborted += 1 }
            return state.admitErrorEvent(code: record.code, at: uptime)
        }
        if isNews { announce(record) }
        context.metrics.recordError(code: error.code.rawValue)
        context.logger.warning("session error", metadata: ["code": "\(error.code.rawValue)", "message": "\(error.message)"])
    }

    /// Back end facts can change on the decode queue without a step (a pipeline swap, a
    /// decoder opened or released on demand).
    func refreshFacts() {
        guard let snapshot = decoder.withValue({ $0.snapshot() }) else { return }
        let (before, after) = state.withLock { state in
            let before = state.facts
            state.facts.update(snapshot)
            return (before, state.facts)
        }
        report(snapshot.newFallbacks)
        announce(from: before, to: after, fallbacks: snapshot.newFallbacks)
    }

    /// `format.changed` and `backend.selected` when a decoder step changed them.
    private func announce(from before: Facts, to after: Facts, fallbacks: [BackendFallback]) {
        if let format = after.format, format != before.format {
            context.events.emit(.formatChanged) { $0.format = format }
        }
        if after.backend != before.backend || after.device != before.device || !fallbacks.isEmpty {
            context.events.emit(.backendSelected) { details in
                details.backend = after.backend.rawValue
                details.device = after.device?.description
                details.reason = after.backendReason
                details.fallback = !fallbacks.isEmpty
            }
        }
    }

    private func announce(_ error: ErrorRecord) {
        context.events.emit(.error) { details in
            details.code = error.code
            details.message = error.message
        }
    }

    /// A decoder gave up its back end (hardware refused the stream, or failed mid-stream):
    /// counted by why, and logged with what it said.
    private func report(_ fallbacks: [BackendFallback]) {
        for fallback in fallbacks {
            context.metrics.recordFallback(fallback)
            context.logger.info(
                "decoder fell back",
                metadata: [
                    "from": "\(fallback.from.rawValue)", "to": "\(fallback.to.rawValue)",
                    "reason": "\(fallback.reason.rawValue)", "codec": "\(fallback.codec?.rawValue ?? "unknown")",
                    "message": "\(fallback.message)",
                ])
        }
    }

    // MARK: - Configuration

    /// `PUT /sessions/{id}`: the decode mode applies at once; a new back end (already opened by
    /// the caller, so an unavailable one failed the request) takes over at the next stream
    /// start, or at once when no stream is under way.
    func configure(
        mode: DecodeMode?, backend choice: DecoderBackendChoice?, codec: VideoCodec?, pipeline: sending DecoderPipeline?
    ) {
        let previousMode = state.withLock { state -> DecodeMode in
            let previous = state.facts.decodeMode
            if let mode { state.facts.decodeMode = mode }
            if let choice { state.facts.backendChoice = choice }
            if let codec { state.facts.statedCodec = codec }
            return previous
        }
        // The pipeline was built on the caller's thread (so a back end that cannot open fails
        // the caller's request) and is handed over to the decode queue, which owns it from then on.
        let handover = Mutex(pipeline)
        decodeQueue.async { [self] in
            let replacement = handover.withLock { $0.take() }
            let replaced = decoder.withValue { slot -> Bool in
                if let mode { slot.setMode(mode) }
                guard let replacement else { return false }
                return slot.replace(with: replacement)
            }
            if let mode, mode != previousMode { modeChanged(from: previousMode, to: mode) }
            if replaced { pipelineReplaced() }
            refreshFacts()
        }
    }

    // MARK: - Close

    /// Refuses every push (their clients are answered `session_not_found` at once), ends
    /// multipart answers, and frees the decoder on its queue.
    func close() {
        let jobs = state.withLock { state -> [UploadJob] in
            guard !state.closed else { return [] }
            state.closed = true
            defer { state.jobs = [] }
            return state.jobs
        }
        let gone = SessionError(.sessionNotFound, "the session was deleted")
        endOnDemandDecoding()
        containers.stop()
        for job in jobs {
            if let upload = job.upload, !upload.isProducerDone {
                context.metrics.recordUploadStopped(reason: "session_deleted")
                context.logger.info("upload stopped: the session was deleted; its client is told at once")
            }
            job.upload?.refuse(gone)
            switch job.answer {
            case .pull(let source):
                // At once, not on the decode queue: libavformat's blocking I/O is interrupted now.
                source.stop()
            case .summary:
                job.complete(.failure(gone)) { uploadEnded($0, bytes: job.source.totalBytes) }
            case .multipart(let answer):
                if answer.sessionClosed(gone) { uploadEnded(.failure(gone), bytes: job.source.totalBytes) }
            }
        }
        decodeQueue.async { [decoder] in
            for job in jobs { job.source.close() }
            decoder.withValue { $0.release() }
        }
    }

    var isClosed: Bool { state.withLock { $0.closed } }
}

/// What a session's parts share: configuration, clock, metrics, logger, activity, events.
struct SessionContext: Sendable {
    let configuration: ServerConfiguration
    let clock: any ServiceClock
    let metrics: FrameTapMetrics
    let logger: Logger
    let activity: SessionActivity
    let events: SessionEventSink
}

/// When a session was last used (an upload byte, a picture, a request, a viewer leaving),
/// for idle eviction and the status page.
final class SessionActivity: Sendable {
    private let clock: any ServiceClock
    private let last: Mutex<(uptime: UInt64, date: Date)>

    init(clock: any ServiceClock) {
        self.clock = clock
        last = Mutex((clock.uptime, clock.now))
    }

    func touch() {
        let now = (clock.uptime, clock.now)
        last.withLock { $0 = now }
    }

    var lastUptime: UInt64 { last.withLock { $0.uptime } }
    var lastDate: Date { last.withLock { $0.date } }
}

/// One push as the decode loop handles it: where its bytes come from, and how it is answered.
final class UploadJob: Sendable {
    enum Answer: Sendable {
        /// JSON, once the push ended.
        case summary(@Sendable (Result<UploadSummary, SessionError>) -> Void)
        /// One part per picture as the push is decoded.
        case multipart(SpooledUpload)
        /// No answer: a pulled source, read until it is stopped.
        case pull(PullSource<SessionError>)
    }

    /// Where the HTTP server puts the body; nil for a pull.
    let upload: UploadQueue<SessionError>?
    /// What the decode loop reads: `upload` itself, or its spooled replay.
    let source: any IngestSource<SessionError>
    /// End the stream with this push (`?flush=true`).
    let flush: Bool
    /// The codec the push says it carries, if it says.
    let codec: VideoCodec?
    let answer: Answer
    /// What this push produced so far; touched on the decode queue only.
    let progress: QueueBound<UploadProgress>
    /// A summary answer is sent once, whoever ends the push first (its last event, or close).
    private let completed = Atomic<Bool>(false)

    init(
        upload: UploadQueue<SessionError>?, source: any IngestSource<SessionError>, flush: Bool, codec: VideoCodec?, answer: Answer,
        progress: QueueBound<UploadProgress>
    ) {
        self.upload = upload
        self.source = source
        self.flush = flush
        self.codec = codec
        self.answer = answer
        self.progress = progress
    }

    /// Sends a summary answer, once, after `announce` (so a client reacting to its answer
    /// finds the push's end already announced).
    func complete(_ result: Result<UploadSummary, SessionError>, announce: (Result<UploadSummary, SessionError>) -> Void) {
        guard case .summary(let completion) = answer,
            completed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        announce(result)
        completion(result)
    }

    /// A picture decoded from this push: a multipart answer sends them all (damaged ones too, as
    /// the ffmpeg CLI does); a JSON answer only counts them.
    func deliver(_ published: PublishedFrame) {
        if case .multipart(let answer) = answer { answer.add(published) }
    }

    var isMultipart: Bool {
        if case .multipart = answer { return true }
        return false
    }

    var isPull: Bool {
        if case .pull = answer { return true }
        return false
    }

    func answers(with spooled: SpooledUpload) -> Bool {
        if case .multipart(let answer) = answer { return answer === spooled }
        return false
    }

    /// A push holds the session's upload slot while its body arrives, and a multipart one until
    /// its answer ended too (or it was refused: then no answer follows). The client may push
    /// again as soon as it was answered.
    var holdsSlot: Bool {
        switch answer {
        case .summary: !(upload?.isProducerDone ?? true)
        case .multipart(let answer): !answer.isOver && !(upload?.isRefused ?? true)
        case .pull: true
        }
    }
}

/// The decoder and what it accumulated; lives on the decode queue (`QueueBound`).
struct DecoderSlot {
    private(set) var pipeline: DecoderPipeline?
    /// A back end chosen while a stream was under way; it takes over at the next stream start.
    private var pending: DecoderPipeline?
    /// Counters of pipelines replaced earlier, so session counters never go backwards.
    private var retired = SessionCounters()
    /// The on-demand catch-up under way, if any.
    var catchUp: CatchUpRun?
    /// The session's NAL-unit counters by type, for `/metrics`.
    var nalUnitCounters = NALUnitCounters()

    init(pipeline: DecoderPipeline) {
        self.pipeline = pipeline
    }

    /// Fallbacks of the current pipeline already reported.
    private var reportedFallbacks = 0

    func counters(adding pipeline: DecoderPipeline) -> SessionCounters {
        var total = retired
        total.add(pipeline.counters)
        return total
    }

    /// What the decoder says now, and the fallbacks not reported before.
    mutating func snapshot() -> DecoderSnapshot? {
        guard let pipeline else { return nil }
        let fallbacks = pipeline.fallbacks
        let fresh = Array(fallbacks.dropFirst(min(reportedFallbacks, fallbacks.count)))
        reportedFallbacks = fallbacks.count
        return DecoderSnapshot(
            counters: counters(adding: pipeline), codec: pipeline.codec, backend: pipeline.backend, backendReason: pipeline.backendReason,
            device: pipeline.device, format: pipeline.format, newFallbacks: fresh)
    }

    mutating func setMode(_ mode: DecodeMode) {
        pipeline?.keyframesOnly = mode == .keyframes
        pending?.keyframesOnly = mode == .keyframes
    }

    /// Returns whether `replacement` took over now (no stream under way); otherwise it waits
    /// for the stream's end. It numbers on from the current pipeline's access units.
    mutating func replace(with replacement: DecoderPipeline) -> Bool {
        guard let current = pipeline else { return false }
        if current.midStream {
            pending = replacement
            return false
        }
        take(replacement, from: current)
        return true
    }

    /// After a flush: a pending back end takes over now that no stream is under way. Returns
    /// whether one did.
    mutating func streamEnded() -> Bool {
        guard let replacement = pending, let current = pipeline else { return false }
        take(replacement, from: current)
        pending = nil
        return true
    }

    private mutating func take(_ replacement: DecoderPipeline, from current: DecoderPipeline) {
        retired.add(current.counters)
        replacement.nextIndex = current.nextIndex
        pipeline = replacement
        reportedFallbacks = 0
    }

    mutating func release() {
        pipeline = nil
        pending = nil
        catchUp = nil
    }
}

/// What the decode queue tells the rest of the session after a step.
struct DecoderSnapshot: Sendable {
    let counters: SessionCounters
    let codec: VideoCodec?
    let backend: DecoderBackend
    let backendReason: String
    let device: HardwareDeviceID?
    let format: StreamFormat?
    let newFallbacks: [BackendFallback]
}

/// When the bytes of a decoder step arrived, as the history stamps its access units: the
/// source's receive time (uptime), and the wall clock at that moment.
struct ReceiveStamp {
    let uptime: UInt64
    let date: Date

    init(clock: any ServiceClock, receivedAt: UInt64?) {
        let now = clock.uptime
        let wall = clock.now
        uptime = receivedAt ?? now
        date = wall.addingTimeInterval(-Double(now > uptime ? now - uptime : 0) / 1e9)
    }
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
