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
/// Pushes and pulls are jobs (`IngestJob`) in arrival order. Only the first one takes bytes (the
/// others wait with an empty, unadmitted queue), so a session holds at most one upload queue's
/// worth of bytes. A second push while one's body is still arriving is refused
/// (`session_busy`): one stream has one byte order. Whatever the source (a live push's
/// `UploadQueue`, a spooled push's `SpoolReplay`, a pull's `PullSource`), the loop does the same:
/// read it into the session's decoder (`SessionDecoder`), each access unit into the session's
/// `CompressedHistory` (its only writer) before any decoder sees it, and publish the pictures;
/// at a stream's end, one end-of-stream path (flush, facts, events, log); then the push's answer
/// (a JSON summary, or the end of a multipart answer) gets its outcome.
///
/// What the decoder reports goes to the `DecodeReporter`; whether a decoder runs at all on
/// demand is `OnDemandDecoding`'s to say.
///
/// Owns: the jobs, and the session's decoder (bound to the decode queue).
final class DecodeLoop: Sendable {
    private struct State {
        var closed = false
        var jobs: [IngestJob] = []
        var publisherHold = PublisherHold()
    }

    let id: SessionID
    let decodeQueue: DispatchQueue
    let decoder: QueueBound<SessionDecoder>
    private let state = Mutex(State())
    private let context: SessionContext
    let reporter: DecodeReporter
    /// Starts and stops the decoder on demand; told when a multipart answer begins, the mode
    /// changes or a new back end takes over.
    let onDemand: OnDemandDecoding
    /// Connects a pull that connects on demand while its pictures are asked for; told when a
    /// pull begins or ends and when a picture is published.
    let connection: OnDemandConnection
    private let newest: NewestPicture
    private let pictures: PictureCache
    /// Where every access unit goes first (this loop is its only writer).
    private let history: CompressedHistory
    /// Where this session's pushes land, one after another in the same slabs.
    private let landing = SlabLanding()
    /// The session's open container stream, between the pushes that carry it.
    private let containers = ContainerStreamSlot<SessionError>()
    /// The session as the warm catch-up decoders know it: they are lent only within it, and
    /// closed with it.
    let warmDecoderOwner = WarmDecoderPool.Owner.make()
    /// Packets of container tracks other than the video, counted.
    let ignoredPackets = IgnoredPackets()
    /// When the newest bytes (or sample) read had arrived: an access unit handed on later whose
    /// last byte came with them (its end shown only by the next push, or by a flush) arrived then.
    private let lastBytesStamp: QueueBound<ReceiveStamp?>

    init(
        id: SessionID, stream: SessionDecoder.Stream, mode: DecodeMode, context: SessionContext, viewers: ViewerSet,
        pictures: PictureCache, history: CompressedHistory
    ) {
        self.id = id
        let decodeQueue = DispatchQueue(label: "frametap.session.\(id).decode")
        self.decodeQueue = decodeQueue
        let joined = stream.streamDecoder
        let facts = DecodeReporter.Facts(
            backendChoice: stream.backendChoice, statedCodec: stream.statedCodec, codec: joined.codec,
            codecIsStated: joined.codecIsStated,
            backend: joined.backend, backendReason: joined.backendReason, device: joined.device,
            fallbacks: joined.fallbacks, decodeMode: mode)
        let reporter = DecodeReporter(facts: facts, context: context, decodeQueue: decodeQueue)
        let decoder = QueueBound(
            SessionDecoder(stream, warmDecoderOwner: warmDecoderOwner, context: context, history: history), queue: decodeQueue)
        lastBytesStamp = QueueBound(nil, queue: decodeQueue)
        // The executors ask whether a multipart answer runs or requests wait for the source, and
        // are told of each picture; the loop is made after them.
        let loop = WeakBox<DecodeLoop>()
        let newest = NewestPicture(
            viewers: viewers, pictures: pictures, context: context,
            published: { picture in loop.value?.pictureWasPublished(picture) })
        let onDemand = OnDemandDecoding(
            mode: mode, decodeQueue: decodeQueue, decoder: decoder, context: context, reporter: reporter, newest: newest,
            answersMultipart: { loop.value?.answersMultipart ?? false },
            awaitsSource: { loop.value?.connection.awaitsPictures ?? false })
        self.onDemand = onDemand
        connection = OnDemandConnection(context: context, decoding: onDemand, viewers: viewers)
        self.decoder = decoder
        self.reporter = reporter
        self.newest = newest
        self.context = context
        self.pictures = pictures
        self.history = history
        loop.value = self
    }

    /// True while an upload is queued, arriving or answering.
    var isBusy: Bool { state.withLock { !$0.jobs.isEmpty } }

    /// True while a multipart answer runs: it wants every picture of its push.
    var answersMultipart: Bool { state.withLock { $0.jobs.contains(where: \.isMultipart) } }

    /// True while a push's body is arriving or its bytes are still being read (status
    /// `uploading`): once false, the counters hold all of it, so a client whose push broke off
    /// reads there where to resume.
    var isUploading: Bool { state.withLock { $0.jobs.contains { !$0.isPull && !$0.isAnswered } } }

    /// `no_frame_yet` says what the session waits for: its source, its stream's first bytes, a
    /// stream it can decode (its last error says why not), or the first point decoding can start
    /// from (`waitingFor`: `source`, `stream`, `decodable_picture`, `keyframe`).
    func explainingNoPictureYet(_ error: SessionError) -> SessionError {
        guard error.code == .noFrameYet else { return error }
        let facts = reporter.facts
        let waitingFor: String
        let why: String
        if let source = pull?.snapshot, source.state != .live {
            waitingFor = "source"
            let cause = source.lastError.map { ": \($0.code): \($0.message)" } ?? ""
            why = "its source is \(source.state.rawValue)\(cause)"
        } else if facts.counters.bytes == 0 {
            waitingFor = "stream"
            why = "nothing of its stream has arrived yet"
        } else if facts.counters.framesDecoded == 0, let failure = facts.lastError,
            DecodeError.Code(rawValue: failure.code) != nil
        {
            // Decoding failed: no keyframe will mend that.
            waitingFor = "decodable_picture"
            why = "\(facts.counters.bytes) bytes of its stream arrived and none decoded to a picture: \(failure.code): "
                + failure.message
        } else if facts.counters.framesDecoded == 0 {
            waitingFor = "keyframe"
            let keyframe = facts.codec == .h265 ? "an IRAP picture" : "an IDR picture or a recovery point"
            why = "\(facts.counters.bytes) bytes of its stream arrived, and decoding starts at a keyframe "
                + "(\(keyframe)), which a camera sends once a GOP: pictures before the first are left out"
        } else {
            return error
        }
        return SessionError(.noFrameYet, error.message + ": " + why, facts: ["waitingFor": .text(waitingFor)])
    }

    /// What holds the stream now (`PublisherHold`), if anything does.
    var hold: StreamHold? {
        let now = context.clock.uptime
        return state.withLock { $0.publisherHold.hold(at: now) }
    }

    /// Whether a publisher's hold (`PublisherHold`) lasts at `now`: the session is in use.
    func isHeld(at now: UInt64) -> Bool {
        state.withLock { $0.publisherHold.holds(at: now) }
    }

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
        flush: Bool, codec: VideoCodec?, content: PushContent?, publisher: String?, takeover: Bool,
        completion: @escaping @Sendable (Result<UploadSummary, SessionError>) -> Void
    ) throws(SessionError) -> UploadQueue<SessionError> {
        let job = try enqueue(flush: flush, codec: codec, publisher: publisher, takeover: takeover) { queue in
            (route(queue, upload: queue, content: content, flush: flush), .summary(completion))
        }
        return job.upload!
    }

    /// Starts a `POST .../nalus` answered with one part per picture: the body is spooled as it
    /// arrives and decoded as the answer is read (see `SpooledUpload`, `SpoolReplay`).
    func beginSpooledUpload(
        request: PictureRequest, flush: Bool, codec: VideoCodec?, content: PushContent?, publisher: String?,
        takeover: Bool
    ) throws(SessionError) -> SpooledUpload {
        let configuration = context.configuration
        let file: SpoolFile
        do {
            file = try SpoolFile(directory: configuration.spoolDirectory, budget: context.services.spoolBudget)
        } catch {
            throw SessionError(error)
        }
        let spooledLimit = min(configuration.maxBodyBytes ?? .max, configuration.maxSpoolBytes)
        let job = try enqueue(flush: flush, codec: codec, publisher: publisher, takeover: takeover, maxBytes: spooledLimit) {
            queue in
            let answer = SpooledUpload(queue: queue, request: request, loop: self, pictures: pictures)
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
            streamFailed: { [reporter] error in reporter.record(SessionError(error)) },
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
            observer: SessionPullObserver(source: spec.url.redacted, context: context, connection: connection),
            ignored: ignoredPackets)
        let job = try state.withLock { state throws(SessionError) -> IngestJob in
            guard !state.closed else { throw SessionError(.sessionNotFound, "the session was closed") }
            guard !state.jobs.contains(where: \.holdsSlot) else {
                throw SessionError(.sessionBusy, "a push or a pull is under way on this session")
            }
            let job = IngestJob(
                upload: nil, source: source, flush: false, codec: nil, answer: .pull(source),
                progress: QueueBound(UploadProgress(), queue: decodeQueue))
            state.jobs.append(job)
            return job
        }
        // A container stream left open by earlier pushes has no push to continue it any more.
        containers.stop()
        job.source.setConsumerWake { [weak self] in self?.wake() }
        connection.pullChanged(to: source)
        source.start()
        context.activity.touch()
        context.logger.info(
            "pull started", metadata: ["source": "\(spec.url.redacted)", "connect": "\(spec.connect.rawValue)"])
        return source
    }

    /// Stops the pull now (its thread is interrupted), and ends its stream: its delayed
    /// pictures come out. The session stays, and may be pushed to or pull again.
    func endPull() {
        // Out of the jobs now, so a new pull or a push may follow at once; the stream's end is
        // decoded on the decode queue before anything of theirs.
        let job = state.withLock { state -> IngestJob? in
            guard let index = state.jobs.firstIndex(where: \.isPull) else { return nil }
            return state.jobs.remove(at: index)
        }
        guard let job, case .pull(let source) = job.answer else { return }
        connection.pullChanged(to: nil)
        source.stop()
        decodeQueue.async { [self] in
            endOfStream(job)
            job.source.close()
        }
    }

    /// `codec`: what the push says it carries (`?codec=`, its Content-Type); another codec than
    /// the stream's known one is refused before a byte is read. `publisher`: who pushes
    /// (`PublisherHold`); a push whose body is still arriving, by the same publisher, is taken
    /// over. `takeover`: a push whose body is still arriving, anyone's, is taken over, and a
    /// publisher's hold does not stop this one. A push taken over stops taking bytes (its client,
    /// if still there, is answered `push_taken_over`); what of it already arrived is decoded
    /// before this push's first byte, and its unfinished access unit dropped, as for any push
    /// that broke off.
    private func enqueue(
        flush: Bool, codec: VideoCodec?, publisher: String?, takeover: Bool, maxBytes: Int? = nil,
        _ makeSource: (UploadQueue<SessionError>) -> (any IngestSource<SessionError>, IngestJob.Answer)
    ) throws(SessionError) -> IngestJob {
        let configuration = context.configuration
        let now = context.clock.uptime
        var takenOver: IngestJob?
        var admitted = false
        let job = try state.withLock { state throws(SessionError) -> IngestJob in
            guard !state.closed else { throw SessionError(.sessionNotFound, "the session was closed") }
            let holder = state.jobs.first(where: \.holdsSlot)
            if let holder, holder.isPull {
                throw SessionError(
                    .sessionBusy, "this session pulls its stream from a source; push to another session",
                    facts: ["heldBy": .text("pull")])
            }
            if !takeover, let refusal = state.publisherHold.refusal(of: publisher, at: now) { throw refusal }
            if let holder {
                // Its body is whole: only its reader can end a multipart answer being read.
                guard holder.upload?.isProducerDone == false else {
                    throw SessionError(
                        .sessionBusy,
                        "the push under way has its whole body and answers as multipart/mixed: it holds the session "
                            + "until its reader has read its answer, or leaves", facts: ["heldBy": .text("push")])
                }
                guard takeover || (publisher != nil && holder.publisher == publisher) else {
                    throw SessionError(
                        .sessionBusy,
                        "another upload to this session is in progress; if it is yours and its connection vanished, "
                            + "push with takeover=true to end it now (otherwise it holds the session until "
                            + "--body-timeout passes without its bytes), or name your pushes with publisher= so that "
                            + "yours take over yours",
                        facts: ["heldBy": .text("push")])
                }
                takenOver = holder
            }
            if let codec, let known = reporter.facts.codec, codec != known {
                throw SessionError(
                    DecodeError(
                        .codecMismatch,
                        "this push is \(codec.displayName) (its codec parameter or Content-Type), but the session's "
                            + "stream is \(known.displayName)"))
            }
            let queue = UploadQueue(
                watermark: HighLowWatermark(capacity: configuration.uploadQueueBytes),
                maxBytes: maxBytes ?? configuration.maxBodyBytes, admitted: state.jobs.isEmpty, clock: context.clock,
                landing: landing, onLimit: { [weak self] error in self?.bodyPassedLimit(error) })
            let (source, answer) = makeSource(queue)
            let job = IngestJob(
                upload: queue, source: source, flush: flush, codec: codec, publisher: publisher, answer: answer,
                progress: QueueBound(UploadProgress(), queue: decodeQueue))
            // Last, once nothing can refuse this push any more.
            takenOver?.isTakenOver.store(true, ordering: .releasing)
            state.jobs.append(job)
            admitted = state.jobs.count == 1
            state.publisherHold.pushBegan(by: publisher, job: ObjectIdentifier(job), takingOver: takeover)
            return job
        }
        // Outside the lock: the refusal wakes the other push's connection.
        let how = takeover ? "takeover=true" : "its publisher's newer push"
        if let takenOver, takenOver.upload?.refuse(
            SessionError(.pushTakenOver, "a newer push to this session took it over (\(how))"), droppingQueued: false
        ) == true {
            reporter.countTakeover()
            context.metrics.recordUploadStopped(reason: "taken_over")
            context.logger.info("upload stopped: a newer push took the session over; its client is told at once")
        }
        job.source.setConsumerWake { [weak self] in self?.wake() }
        context.activity.touch()
        if admitted { announceStart(of: job) }
        return job
    }

    /// `upload.started`, when the push takes its first byte: at once, or once the push before it
    /// (one it took over, or a multipart answer being read) ended, so that one's `upload.ended`
    /// comes first. A push that ends while still queued announces neither.
    private func announceStart(of job: IngestJob) {
        context.logger.debug("upload started", metadata: ["multipart": "\(job.isMultipart)"])
        job.announcement.startDecided(went: context.events.emit(.uploadStarted, { $0.multipart = job.isMultipart }))
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
            let beginning = job.progress.withValue { !$0.hasBegun }
            if beginning {
                let counters = reporter.facts.counters
                job.progress.withValue { $0.begin(counters: counters) }
                decoder.withValue { $0.stream?.beginPush(saying: job.codec) }
            }
            // A multipart answer sends the pictures of its push: an on-demand session decodes
            // while one runs.
            if beginning, job.isMultipart { onDemand.multipartAnswerBegan() }
            switch event {
            case .bytes(let bytes, let receivedAt):
                let from = decoder.withValue { $0.stream?.nextStreamOffset }
                let stepped = step(receivedAt: receivedAt, bytesFrom: from, job: job) { stream, onAccessUnit, onPicture in
                    stream.push(bytes, onAccessUnit: onAccessUnit, onPicture: onPicture)
                }
                // A push of another codec, or of none, is refused at once: nothing more of it
                // reaches the decoder, and its client gets the problem now.
                let refusing: [DecodeError.Code] = [.codecMismatch, .unknownCodec, .lengthPrefixedUnits]
                if let refusal = stepped.errors.first(where: { refusing.contains($0.code) }) {
                    refuseRest(of: job, refusal)
                } else if job.upload != nil, !job.isMultipart,
                    !job.progress.withValue({ $0.spend(bytes.count, accessUnitsAssembled: stepped.accessUnitsAssembled) })
                {
                    refuseRest(
                        of: job,
                        DecodeError(
                            .invalidData,
                            "\(UploadProgress.maxBytesWithoutAccessUnit >> 20) MiB of this push made no access unit of "
                                + "H.264 or H.265; the push is refused from there on"))
                }
            case .sample(let sample, let receivedAt):
                let errors = step(receivedAt: receivedAt, job: job) { stream, onAccessUnit, onPicture in
                    sample.payload.withUnsafeBytes {
                        stream.push(
                            sample: $0, described: sample.description, pts: sample.pts, onAccessUnit: onAccessUnit,
                            onPicture: onPicture)
                    }
                }.errors
                if let refusal = errors.first(where: { $0.code == .codecMismatch }) {
                    refuseRest(of: job, refusal)
                }
            case .streamBreak:
                // A pulled source's connection ended: its stream ends with it.
                endOfStream(job)
            case .end:
                if job.flush {
                    endOfStream(job)
                } else if job.progress.withValue({ $0.refusal != nil }) {
                    // Refused from some point on (a spooled push reads to its end): what it left
                    // unfinished goes, and the next push is read again.
                    decoder.withValue { $0.stream?.abandonIncompleteAccessUnit() }
                } else {
                    step(receivedAt: nil, job: job) { stream, _, _ in stream.endPush() }
                }
                context.logger.debug("upload finished", metadata: ["bytes": "\(job.source.totalBytes)"])
                conclude(job, summary(of: job.progress, bytes: job.source.totalBytes, flushed: job.flush))
            case .stopped(let stop):
                // The access unit under way goes, even one an earlier push began (its end not seen
                // yet): `counters.accessUnits` then says exactly where the client resumes, and a
                // client that resumes there loses nothing and repeats nothing.
                decoder.withValue { $0.stream?.abandonIncompleteAccessUnit() }
                // A push refused from some point on (its container broke, a limit) keeps what it
                // decoded before: a flushed one also gets the pictures its decoder still held,
                // and a multipart answer sends every picture before its problem part.
                let refused = if case .refused = stop { true } else { false }
                // A push taken over never finished its body: its flush does not apply, and the
                // push that took over continues the stream.
                let takenOver = if case .refused(let error) = stop, error.code == .pushTakenOver { true } else { false }
                if refused, job.flush, !takenOver { endOfStream(job) }
                let error = stopped(stop)
                if case .multipart(let answer) = job.answer {
                    answer.uploadEnded(.failure(error))
                    // Its answer ends after the job is gone, and finds nothing to announce then.
                    uploadEnded(.failure(error), of: job)
                }
                conclude(job, .failure(error), keepingPictures: refused)
                endJob(job)
            }
        }
    }

    /// The rest of a push is refused: a live upload is answered with `refusal` now; a spooled one
    /// (a multipart answer's) reads to its end, none of it decoded, and ends with it.
    private func refuseRest(of job: IngestJob, _ refusal: DecodeError) {
        job.progress.withValue { $0.refuse(refusal) }
        job.upload?.refuse(SessionError(refusal))
    }

    /// A push's outcome is known: a JSON answer is sent and its job ends now; a multipart
    /// answer ends once its last part is out (`multipartAnswerEnded`).
    private func conclude(_ job: IngestJob, _ outcome: Result<UploadSummary, SessionError>, keepingPictures: Bool = false) {
        switch job.answer {
        case .summary:
            endPublisherPush(job)
            job.complete(outcome) { uploadEnded($0, of: job) }
            endJob(job)
        case .multipart(let answer):
            answer.conclude(outcome, keepingPictures: keepingPictures || job.progress.withValue { $0.refusal != nil })
        case .pull:
            endJob(job)
        }
    }

    /// The end of a stream, whichever push ends it: every delayed picture, then a pending back
    /// end may take over; facts, events and the log follow.
    private func endOfStream(_ job: IngestJob) {
        step(receivedAt: nil, job: job) { $0.finish(onAccessUnit: $1, onPicture: $2) }
        history.endStream()
        if decoder.withValue({ $0.streamEnded() }) { onDemand.backEndReplaced() }
        refreshFacts()
        // The pictures of the push (or pull) that ended it, those the flush released included.
        context.logger.info("stream flushed", metadata: ["frames": "\(job.progress.withValue { $0.frames })"])
    }

    /// A push ended, for its publisher's hold: once, and before its answer goes, so that the
    /// client's next push finds the hold as this one left it.
    private func endPublisherPush(_ job: IngestJob) {
        guard !job.isPull,
            job.endedPublisherPush.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        let now = context.clock.uptime
        state.withLock { $0.publisherHold.pushEnded(job: ObjectIdentifier(job), flushed: job.flush, at: now) }
    }

    /// Removes a finished job, frees its source and lets the next one take bytes.
    private func endJob(_ job: IngestJob) {
        endPublisherPush(job)
        let next = state.withLock { state -> IngestJob? in
            guard let index = state.jobs.firstIndex(where: { $0 === job }) else { return nil }
            state.jobs.remove(at: index)
            return index == 0 ? state.jobs.first : nil
        }
        // A multipart answer's interest in pictures lingers like a request's.
        if job.isMultipart { onDemand.multipartAnswerEnded() }
        decodeQueue.async { job.source.close() }
        guard let next else { return }
        next.upload?.admit()
        // After the ended push's own start (and so its end, asked for before this), should its
        // thread not have announced it yet.
        if !next.isPull {
            if job.isPull {
                announceStart(of: next)
            } else {
                job.announcement.whenStartDecided { [weak self] in self?.announceStart(of: next) }
            }
        }
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
        endPublisherPush(job)
        uploadEnded(outcome, of: job)
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
            if !serverShutdown { reporter.record(error) }
            uploadEnded(.failure(error), of: job)
            // What the spool had handed on and was not decoded yet (a container stream reads
            // ahead), and the pictures its decoder still held, are the abandoned push's: its
            // stream ends here (those pictures are published, as a flush would), and none of it
            // is decoded into the next push. Only for the push being decoded, and on the decode
            // queue, so that no step of the loop runs between the cut and the next push.
            decodeQueue.async { [self] in
                if !serverShutdown, state.withLock({ $0.jobs.first === job }) {
                    containers.stop()
                    decoder.withValue { $0.stream?.abandonIncompleteAccessUnit() }
                    endOfStream(job)
                }
                endJob(job)
            }
            return
        }
        endJob(job)
    }

    private func job(answeredBy answer: SpooledUpload) -> IngestJob? {
        state.withLock { state in state.jobs.first { $0.answers(with: answer) } }
    }

    /// The answer to a finished upload: its summary, or a failure when a flushed body produced
    /// no picture at all but errors (the same push that a client could not tell from silence).
    private func summary(
        of progress: QueueBound<UploadProgress>, bytes: Int, flushed: Bool
    ) -> Result<UploadSummary, SessionError> {
        let facts = reporter.facts
        let latest = newest.viewers.newest?.sequence
        return progress.withValue { progress in
            progress.outcome(
                summary: progress.summary(
                    counters: facts.counters, bytes: bytes, latestSeq: latest, format: facts.format,
                    flushed: flushed, session: id),
                flushed: flushed)
        }
    }

    /// `upload.ended`, once per upload, when its answer is known (on the decode queue), if its
    /// `upload.started` went. `frames` is sent with a summary only: a failed upload's count lives
    /// on the decode queue, and a failure can be answered from another thread (the session closed).
    private func uploadEnded(_ result: Result<UploadSummary, SessionError>, of job: IngestJob) {
        let bytes = job.source.totalBytes
        let events = context.events
        job.announcement.announceEnd(
            {
                events.emitPaid(.uploadEnded) { details in
                    switch result {
                    case .success(let summary):
                        details.result = "ok"
                        details.frames = summary.frames
                    case .failure(let error):
                        details.result = error.code.rawValue
                    }
                    details.bytes = bytes
                }
            }, dropped: { events.countDropped() })
    }

    /// An upload that ended before its body did: recorded (and logged truthfully) as what it is.
    private func stopped(_ stop: IngestStop<SessionError>) -> SessionError {
        switch stop {
        case .clientGone:
            let error = SessionError(.uploadAborted, "the client disconnected before the upload ended")
            reporter.record(error)
            context.metrics.recordUploadStopped(reason: "client_gone")
            return error
        case .serverShutdown:
            context.logger.info("upload stopped: the server is shutting down; nothing more of it is decoded")
            context.metrics.recordUploadStopped(reason: "shutting_down")
            return SessionError(.shuttingDown, "the server is shutting down")
        case .refused(let error):
            // Recorded here, in order with the push's end (a reader of the status after the
            // answer finds it); a body past its limit was counted when the queue refused it
            // (`bodyPassedLimit`). A push taken over is no fault of the stream: its end event
            // and its client's answer say so, not `lastError`.
            if error.code != .pushTakenOver { reporter.record(error) }
            if error.code == .ingest(.spoolFailed) || error.code == .ingest(.spoolFull) {
                context.metrics.recordUploadStopped(reason: error.code == .ingest(.spoolFull) ? "spool_full" : "spool_failed")
            }
            if error.code == .ingest(.bodyTimeout) { context.metrics.recordUploadStopped(reason: "body_timeout") }
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
    /// pictures it decoded. `bytesFrom`: the stream offset of this step's first pushed byte,
    /// for a step of pushed bytes; an access unit that ended before it takes the time of the
    /// bytes that held its end.
    @discardableResult
    private func step(
        receivedAt: UInt64?, bytesFrom: Int? = nil, job: IngestJob,
        _ body: (StreamDecoder, (IndexedAccessUnit) -> Void, StreamDecoder.PictureHandler) -> [DecodeError]
    ) -> (pictures: Int, accessUnitsAssembled: Int, errors: [DecodeError]) {
        var pictures = 0
        var newestOfStep: PublishedFrame?
        let stamp = ReceiveStamp(clock: context.clock, receivedAt: receivedAt)
        let earlier = lastBytesStamp.withValue { $0 }
        if receivedAt != nil { lastBytesStamp.withValue { $0 = stamp } }
        // A step with no bytes of its own (a push's end, a flush) hands on what earlier bytes held.
        func arrival(of unit: IndexedAccessUnit) -> ReceiveStamp {
            guard let earlier else { return stamp }
            guard receivedAt != nil else { return earlier }
            guard let bytesFrom, let last = unit.unit.nalUnits.last, last.streamOffset + last.bytes.count <= bytesFrom
            else { return stamp }
            return earlier
        }
        let newestBefore = newest.viewers.newest?.sequence ?? 0
        let outcome = decoder.withValue { slot -> ([DecodeError], DecoderSnapshot)? in
            guard let stream = slot.stream else { return nil }
            let errors = body(
                stream,
                { unit in
                    let arrived = arrival(of: unit)
                    history.append(unit, receivedAt: arrived.date, receivedUptime: arrived.uptime)
                },
                { frame, number in
                    let published = PublishedFrame(
                        frame: frame, sequence: number, backend: frame.decodedBy, at: context.clock,
                        arrival: frame.accessUnitIndex.flatMap(history.arrival))
                    pictures += 1
                    // A picture libavcodec concealed errors in (an error of this step) never
                    // replaces a good one as the newest, and the newest only ever moves on.
                    if !frame.hasDecodeErrors, number > max(newestBefore, newestOfStep?.sequence ?? 0) {
                        newestOfStep = published
                    }
                    job.deliver(published)
                })
            guard let snapshot = slot.snapshot() else { return nil }
            return (errors, snapshot)
        }
        guard let (errors, snapshot) = outcome else { return (0, 0, []) }
        job.source.accessUnitsAssembled(total: snapshot.counters.accessUnits)
        guard !isClosed else { return (0, snapshot.counters.accessUnits, errors) }
        reporter.stepped(snapshot, errors: errors, pictures: pictures, receivedAt: receivedAt)
        if let newestOfStep { newest.publish(newestOfStep) }
        let now = context.clock.now
        job.progress.withValue { $0.record(frames: pictures, errors: errors, at: now) }
        return (pictures, snapshot.counters.accessUnits, errors)
    }

    /// A new newest picture (decode queue): requests waiting for an on-demand connection's first
    /// picture go on if it is of that connection's bytes.
    private func pictureWasPublished(_ picture: PublishedFrame) {
        connection.picturePublished { picture.frame.accessUnitIndex.flatMap(history.arrival)?.uptime }
    }

    // MARK: - Configuration

    /// `PUT /sessions/{id}`: the decode mode applies at once; a new back end (already opened by
    /// the caller, so an unavailable one failed the request) takes over at the next stream
    /// start, or at once when no stream is under way.
    func configure(
        mode: DecodeMode?, backend choice: DecoderBackendChoice?, codec: VideoCodec?, stream: sending SessionDecoder.Stream?
    ) {
        let previousMode = reporter.configure(mode: mode, backend: choice, codec: codec)
        // The stream was built on the caller's thread (so a back end that cannot open fails
        // the caller's request) and is handed over to the decode queue, which owns it from then on.
        let handover = Mutex(stream)
        decodeQueue.async { [self] in
            let replacement = handover.withLock { $0.take() }
            let replaced = decoder.withValue { slot -> Bool in
                if let mode { slot.setMode(mode) }
                guard let replacement else { return false }
                return slot.replace(with: replacement)
            }
            if let mode, mode != previousMode {
                // Between keyframes and the others, what ingest hands on changes, so the next
                // GOP of the history does not follow the last.
                if previousMode == .keyframes || mode == .keyframes { history.breakContinuity() }
                onDemand.modeChanged(to: mode)
            }
            if replaced { onDemand.backEndReplaced() }
            refreshFacts()
        }
    }

    // MARK: - Close

    /// Refuses every push (their clients are answered `session_not_found` at once, `why` the
    /// session ended), ends multipart answers, and frees the decoder on its queue.
    func close(why: String = "the session was deleted") {
        let jobs = state.withLock { state -> [IngestJob] in
            guard !state.closed else { return [] }
            state.closed = true
            defer { state.jobs = [] }
            return state.jobs
        }
        let gone = SessionError(.sessionNotFound, why)
        context.services.catchUpPool.warmDecoders.discard(owner: warmDecoderOwner)
        onDemand.close()
        connection.close()
        containers.stop()
        for job in jobs {
            if let upload = job.upload, !upload.isProducerDone {
                context.metrics.recordUploadStopped(reason: "session_deleted")
                context.logger.info("upload stopped: \(why); its client is told at once")
            }
            job.upload?.refuse(gone)
            switch job.answer {
            case .pull(let source):
                // At once, not on the decode queue: libavformat's blocking I/O is interrupted now.
                source.stop()
            case .summary:
                job.complete(.failure(gone)) { uploadEnded($0, of: job) }
            case .multipart(let answer):
                if answer.sessionClosed(gone) { uploadEnded(.failure(gone), of: job) }
            }
        }
        decodeQueue.async { [decoder] in
            for job in jobs { job.source.close() }
            decoder.withValue { $0.close() }
        }
    }

    var isClosed: Bool { state.withLock { $0.closed } }

    /// Back end facts can change on the decode queue without a step (a new back end took over).
    private func refreshFacts() {
        if let snapshot = decoder.withValue({ $0.snapshot() }) { reporter.refresh(snapshot) }
    }
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
