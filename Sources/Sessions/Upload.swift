import Decoding
import Dispatch
import Foundation
import H264
import Logging

/// One `POST /sessions/{id}/nalus` request feeding the session's stream.
///
/// Bytes go through a bounded queue to the session's decode worker, so an uploader faster
/// than the decoder pauses instead of growing memory. The HTTP layer's loop (MHD's upload
/// callback) is:
///
///     let taken = try upload.append(chunk)          // copies what fits, never blocks
///     if taken < chunk.count {                      // queue full: leave the rest unconsumed,
///         suspend the connection                    // then ask to be woken:
///         upload.notifyWhenRoom { resume the connection }
///     }
///     ... at the end of the body:
///     upload.finish(flush: flush) { result in queue the answer and resume }
///     ... if the client goes away before the end:
///     upload.abort()
public final class Upload: Sendable {
    public let session: Session
    let writerID: UInt64
    let progress: UploadProgress

    init(session: Session, writerID: UInt64, progress: UploadProgress) {
        self.session = session
        self.writerID = writerID
        self.progress = progress
    }

    /// Queues as much of `bytes` as the session's upload queue has room for and returns how
    /// many bytes it took (0 when full). The bytes are copied; the buffer may be reused at once.
    /// Throws `.bodyTooLarge` when this request passes `maxBodyBytes` (bytes before the limit
    /// are decoded; the request's `finish` then fails with the same error), and
    /// `.sessionNotFound` once the session was deleted.
    public func append(_ bytes: UnsafeRawBufferPointer) throws(SessionError) -> Int {
        try session.enqueue(bytes, writerID: writerID, progress: progress)
    }

    public func append(_ bytes: [UInt8]) throws(SessionError) -> Int {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(SessionError) -> Int in try append(buffer) }
        }.get()
    }

    /// Calls `callback` once when the queue has room again (at most half full), when the
    /// session closes, or right away, on this thread, when that is already so. Call it after
    /// suspending, so the wake-up cannot come before the suspension.
    public func notifyWhenRoom(_ callback: @escaping @Sendable () -> Void) {
        session.notifyWhenRoom(writerID: writerID, callback)
    }

    /// Ends the request. With `flush` the stream ends: every picture still inside the decoder
    /// comes out before `completion` runs, and the next upload starts a fresh stream. Without,
    /// the stream simply continues with the next request. `completion` runs once, on the
    /// decode worker, after every byte of this request was decoded: `.failure` for
    /// `body_too_large`, `session_not_found`, or a flushed request that had errors and no
    /// picture at all (its first error, e.g. 422 `invalid_data`).
    public func finish(flush: Bool, completion: @escaping @Sendable (Result<UploadSummary, SessionError>) -> Void) {
        session.finishUpload(writerID: writerID, flush: flush, progress: progress, completion: completion)
    }

    /// The client went away before the end: the bytes already received are still decoded
    /// (they are valid stream bytes), the error is counted and shown, and the session keeps
    /// serving its last good picture. Harmless after `finish`.
    public func abort() {
        session.abortUpload(writerID: writerID, progress: progress)
    }
}

/// What one request did, accumulated on the decode worker only.
final class UploadProgress: @unchecked Sendable {
    // @unchecked: after init, read and written only on the session's decode queue.
    private var countersAtBegin: SessionCounters?
    private(set) var frames = 0
    private(set) var errors = 0
    private(set) var firstError: ErrorRecord?
    private var loggedCodes: Set<DecodeError.Code> = []

    func begin(counters: SessionCounters) {
        if countersAtBegin == nil { countersAtBegin = counters }
    }

    /// Logs each error code once per request: a garbage upload is one warning, not thousands.
    func record(frames: Int, errors: [DecodeError], at date: Date, logger: Logger) {
        self.frames += frames
        self.errors += errors.count
        for error in errors {
            if firstError == nil { firstError = ErrorRecord(code: error.code.rawValue, message: error.message, at: date) }
            if loggedCodes.insert(error.code).inserted {
                logger.warning(
                    "decode error", metadata: ["code": "\(error.code.rawValue)", "message": "\(error.message)"])
            }
        }
    }

    func summary(
        session: SessionID, counters: SessionCounters, bytes: Int, latestSeq: UInt64?, format: VideoFormat?,
        flushed: Bool
    ) -> UploadSummary {
        let start = countersAtBegin ?? SessionCounters()
        var nalUnits: [String: Int] = [:]
        for (name, count) in counters.nalUnits {
            let delta = count - (start.nalUnits[name] ?? 0)
            if delta > 0 { nalUnits[name] = delta }
        }
        return UploadSummary(
            session: session, bytes: bytes, nalUnits: nalUnits, frames: frames, latestSeq: latestSeq, format: format,
            decodeErrors: errors, error: firstError, flushed: flushed)
    }
}

extension Session {
    /// Starts an upload. Throws `.sessionBusy` (409) while another upload to this session is
    /// in progress: one stream has one byte order, and two writers interleaving chunks cut
    /// anywhere would corrupt it; queueing the second would hold its connection for an
    /// unbounded time and still give no meaningful order. Sequential requests (the normal
    /// case, including a camera reconnecting after `abort`) are never refused.
    public func beginUpload() throws(SessionError) -> Upload {
        let progress = UploadProgress()
        let writerID = try state.withLock { state throws(SessionError) -> UInt64 in
            guard !state.closed else { throw .notFound(id) }
            guard state.writer == nil else {
                throw SessionError(.sessionBusy, "another upload to session '\(id)' is in progress")
            }
            let writerID = state.nextWriterID
            state.nextWriterID += 1
            state.writer = Writer(id: writerID)
            state.queue.append(.begin(progress))
            return writerID
        }
        // The begin marker snapshots the counters only once earlier uploads are decoded.
        scheduleDrain()
        logger.debug("upload started")
        return Upload(session: self, writerID: writerID, progress: progress)
    }

    func enqueue(_ bytes: UnsafeRawBufferPointer, writerID: UInt64, progress: UploadProgress) throws(SessionError)
        -> Int
    {
        guard !bytes.isEmpty else { return 0 }
        let capacity = configuration.uploadQueueBytes
        let maxBody = configuration.maxBodyBytes
        let receivedAt = Self.uptime()
        var newlyTooLarge = false
        let result = state.withLock { state -> Result<(taken: Int, startDrain: Bool), SessionError> in
            guard !state.closed else { return .failure(.notFound(id)) }
            guard var writer = state.writer, writer.id == writerID else {
                return .failure(SessionError(.invalidParameter, "this upload has already ended"))
            }
            if let failure = writer.failure { return .failure(failure) }
            if let maxBody, writer.bytes + bytes.count > maxBody {
                let failure = SessionError(.bodyTooLarge, "request body exceeds \(maxBody) bytes")
                writer.failure = failure
                state.writer = writer
                newlyTooLarge = true
                return .failure(failure)
            }
            let taken = min(bytes.count, capacity - state.queuedBytes)
            guard taken > 0 else { return .success((0, false)) }
            let chunk = [UInt8](UnsafeRawBufferPointer(rebasing: bytes[..<taken]))
            state.queue.append(.bytes(chunk, receivedAt: receivedAt, progress))
            state.queuedBytes += taken
            writer.bytes += taken
            state.writer = writer
            state.lastActivityUptime = receivedAt
            let startDrain = !state.draining
            state.draining = true
            return .success((taken, startDrain))
        }
        switch result {
        case .success(let outcome):
            if outcome.startDrain { decodeQueue.async { [self] in drainQueue() } }
            return outcome.taken
        case .failure(let error):
            // Counted once per request; later appends of the same request just throw again.
            if newlyTooLarge { recordError(error) }
            throw error
        }
    }

    func notifyWhenRoom(writerID: UInt64, _ callback: @escaping @Sendable () -> Void) {
        let threshold = configuration.uploadQueueBytes / 2
        let callNow = state.withLock { state -> Bool in
            guard !state.closed, state.writer?.id == writerID, state.queuedBytes > threshold else { return true }
            state.roomCallback = callback
            return false
        }
        if callNow { callback() }
    }

    func finishUpload(writerID: UInt64, flush: Bool, progress: UploadProgress, completion: @escaping UploadCompletion) {
        let outcome = state.withLock { state -> Result<Bool, SessionError> in
            guard !state.closed else { return .failure(.notFound(id)) }
            guard let writer = state.writer, writer.id == writerID else {
                return .failure(SessionError(.invalidParameter, "this upload has already ended"))
            }
            // The next request may start now; its bytes queue up behind this finish.
            state.writer = nil
            state.queue.append(
                .finish(flush: flush, bytes: writer.bytes, failure: writer.failure, progress, completion))
            let startDrain = !state.draining
            state.draining = true
            return .success(startDrain)
        }
        switch outcome {
        case .success(let startDrain):
            if startDrain { decodeQueue.async { [self] in drainQueue() } }
        case .failure(let error):
            completion(.failure(error))
        }
    }

    func abortUpload(writerID: UInt64, progress: UploadProgress) {
        let startDrain = state.withLock { state -> Bool? in
            guard !state.closed, state.writer?.id == writerID else { return nil }
            state.writer = nil
            // The connection is gone: resuming it would touch a dead connection.
            state.roomCallback = nil
            state.queue.append(.abort(progress))
            let start = !state.draining
            state.draining = true
            return start
        }
        if startDrain == true { decodeQueue.async { [self] in drainQueue() } }
    }

    func scheduleDrain() {
        let start = state.withLock { state -> Bool in
            guard !state.draining, !state.queue.isEmpty else { return false }
            state.draining = true
            return true
        }
        if start { decodeQueue.async { [self] in drainQueue() } }
    }

    /// The decode worker's loop: takes queued items in order until the queue is empty.
    func drainQueue() {
        let threshold = configuration.uploadQueueBytes / 2
        while true {
            let (item, wake) = state.withLock { state -> (IngestItem?, (@Sendable () -> Void)?) in
                guard !state.closed, !state.queue.isEmpty else {
                    state.draining = false
                    return (nil, nil)
                }
                let item = state.queue.removeFirst()
                if case .bytes(let chunk, _, _) = item { state.queuedBytes -= chunk.count }
                var wake: (@Sendable () -> Void)?
                if state.queuedBytes <= threshold {
                    wake = state.roomCallback
                    state.roomCallback = nil
                }
                return (item, wake)
            }
            wake?()
            guard let item else { return }
            process(item)
        }
    }

    private func process(_ item: IngestItem) {
        switch item {
        case .begin(let progress):
            progress.begin(counters: currentCounters())
        case .bytes(let chunk, let receivedAt, let progress):
            runDecoderStep(receivedAt: receivedAt, progress: progress) { $0.push(chunk) }
        case .finish(let flush, let bytes, let failure, let progress, let completion):
            if flush {
                runDecoderStep(receivedAt: nil, progress: progress) { $0.finish() }
                decoding.streamEnded()
                refreshDecoderFacts()
                logger.info("stream flushed", metadata: ["frames": "\(progress.frames)"])
            }
            let (counters, latest, format) = state.withLock { ($0.counters, $0.latest?.sequence, $0.format) }
            let summary = progress.summary(
                session: id, counters: counters, bytes: bytes, latestSeq: latest, format: format, flushed: flush)
            logger.debug("upload finished", metadata: ["bytes": "\(bytes)", "frames": "\(summary.frames)"])
            if let failure {
                completion(.failure(failure))
            } else if flush, summary.frames == 0, let first = progress.firstError,
                let code = DecodeError.Code(rawValue: first.code)
            {
                completion(.failure(SessionError(DecodeError(code, first.message))))
            } else {
                completion(.success(summary))
            }
        case .abort:
            decoding.pipeline?.abandonIncompleteUnit()
            recordError(SessionError(.uploadAborted, "the client disconnected before the upload ended"))
        }
    }

    func currentCounters() -> SessionCounters {
        state.withLock { $0.counters }
    }
}

/// A pull source of upload bytes, such as the HTTP layer's bounded request-body queue. The
/// session's decode worker pulls from it when it is ready for more, so the bytes wait in
/// the source's queue only (its bound is the memory bound) and no second queue is needed.
public protocol UploadBodySource: AnyObject, Sendable {
    /// The next event without waiting, or nil when nothing is queued yet.
    func nextUploadEvent() -> UploadBodyEvent?
    /// `handler` runs (on any thread) whenever something arrives after `nextUploadEvent()`
    /// returned nil, and right away if something is already queued.
    func setUploadReadyHandler(_ handler: @escaping @Sendable () -> Void)
    /// The consumer needs no more bytes (the session was deleted): drop the rest.
    func discardRemainingUpload()
}

public enum UploadBodyEvent: Sendable, Equatable {
    case bytes([UInt8])
    /// The whole body arrived.
    case end
    /// The client went away; nothing more follows.
    case clientGone
    /// The body passed the HTTP layer's byte limit; nothing more follows.
    case tooLarge(limit: Int)
}

extension Session {
    /// Starts an upload fed from `source` instead of `Upload.append` (see `UploadBodySource`).
    /// Throws like `beginUpload`. `completion` runs once on the decode worker, as for
    /// `Upload.finish`: after `.end` (with `flush` applied), or with `.uploadAborted` /
    /// `.bodyTooLarge` after those events (the bytes before them are kept and decoded).
    /// The returned upload lets the caller `abort()` it at once when it learns first that the
    /// request is over (the pump learns it a little later, on the decode worker).
    @discardableResult
    public func ingest(
        from source: some UploadBodySource, flush: Bool,
        completion: @escaping @Sendable (Result<UploadSummary, SessionError>) -> Void
    ) throws(SessionError) -> Upload {
        let upload = try beginUpload()
        let pump = UploadPump(upload: upload, source: source, flush: flush, completion: completion)
        source.setUploadReadyHandler { [decodeQueue] in decodeQueue.async { pump.run() } }
        decodeQueue.async { pump.run() }
        return upload
    }
}

/// Moves events from a pull source into an upload, on the decode worker. It only pulls while
/// the session's own queue has room, and waits for room otherwise, so together the two queues
/// hold at most the source's bound plus the session's.
private final class UploadPump: @unchecked Sendable {
    // @unchecked: `run` executes on the session's serial decode queue only.
    let upload: Upload
    let source: any UploadBodySource
    let flush: Bool
    let completion: UploadCompletion
    private var leftover: [UInt8] = []
    private var waitingForRoom = false
    private var done = false

    init(upload: Upload, source: any UploadBodySource, flush: Bool, completion: @escaping UploadCompletion) {
        self.upload = upload
        self.source = source
        self.flush = flush
        self.completion = completion
    }

    func run() {
        guard !done, !waitingForRoom else { return }
        do {
            while true {
                if !leftover.isEmpty {
                    let taken = try upload.append(leftover)
                    leftover.removeFirst(taken)
                    if !leftover.isEmpty {
                        waitingForRoom = true
                        upload.notifyWhenRoom { [self, queue = upload.session.decodeQueue] in
                            queue.async {
                                self.waitingForRoom = false
                                self.run()
                            }
                        }
                        return
                    }
                }
                guard let event = source.nextUploadEvent() else { return }
                switch event {
                case .bytes(let bytes):
                    leftover = bytes
                case .end:
                    done = true
                    upload.finish(flush: flush, completion: completion)
                    return
                case .clientGone:
                    done = true
                    upload.abort()
                    completion(.failure(SessionError(.uploadAborted, "the client disconnected before the upload ended")))
                    return
                case .tooLarge(let limit):
                    done = true
                    let error = SessionError(.bodyTooLarge, "request body exceeds \(limit) bytes")
                    upload.session.recordError(error)
                    upload.finish(flush: false) { _ in }
                    completion(.failure(error))
                    return
                }
            }
        } catch {
            done = true
            source.discardRemainingUpload()
            upload.finish(flush: false) { _ in }
            completion(.failure(error))
        }
    }
}
