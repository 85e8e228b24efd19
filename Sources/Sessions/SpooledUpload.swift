import Decoding
import Dispatch
import Foundation
import H264
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

public enum MultipartPoll: Sendable {
    /// The next part: one picture output while handling this request, in output order.
    case part(ServedPicture)
    /// Not produced yet: suspend, then call `notifyWhenReady`.
    case wait
    /// No more parts. `.success` carries the request summary (e.g. for a closing JSON part);
    /// `.failure` means the session was deleted or the spool could not be read.
    case finished(Result<UploadSummary, SessionError>)
}

/// A `POST /sessions/{id}/nalus` whose answer is `multipart/mixed` with one part per picture.
///
/// libmicrohttpd cannot answer before the upload ends, and decoding while uploading would have
/// to hold every picture until then. So the compressed body is spooled to a temporary file
/// while it arrives (bounded memory for any length), and decoding happens afterwards, pulled
/// by the answer: the next part is decoded and encoded only when the client has taken the
/// previous one. The file is unlinked as soon as it is created, so it vanishes with its
/// descriptor however the request ends.
///
/// HTTP layer: `append` each upload chunk (written at once, never blocks on the decoder),
/// `endUpload(flush:)` when the body is complete, then from the content reader `poll()`
/// (`.wait` → suspend, `notifyWhenReady { resume }`), and `cancel()` when the request is
/// freed (harmless after the end). The session's upload slot is held from `beginSpooledUpload`
/// until the last part was produced or `cancel`.
public final class SpooledUpload: Sendable {
    public let session: Session
    public let request: PictureRequest
    let writerID: UInt64
    private let file: SpoolFile
    private let worker: SpoolWorker
    private let state = Mutex(SpoolState())

    private struct SpoolState {
        var bytes = 0
        var uploadEnded = false
        var flush = false
        var failure: SessionError?
        var ready: ServedPicture?
        var producing = false
        var finished: Result<UploadSummary, SessionError>?
        var callback: (@Sendable () -> Void)?
        var cancelled = false
    }

    init(session: Session, writerID: UInt64, request: PictureRequest, file: SpoolFile) {
        self.session = session
        self.writerID = writerID
        self.request = request
        self.file = file
        worker = SpoolWorker()
    }

    /// Writes the chunk to the spool. Throws `.bodyTooLarge` past `maxBodyBytes` (the answer
    /// then finishes with that error) and `.spoolFailed` when the disk refuses.
    public func append(_ bytes: UnsafeRawBufferPointer) throws(SessionError) {
        let configuration = session.configuration
        let maxBody = min(configuration.maxBodyBytes ?? .max, configuration.maxSpoolBytes)
        let verdict = state.withLock { state -> SessionError? in
            if let failure = state.failure { return failure }
            guard !state.uploadEnded, !state.cancelled else {
                return SessionError(.invalidParameter, "this upload has already ended")
            }
            if state.bytes + bytes.count > maxBody {
                let which = maxBody == configuration.maxBodyBytes ? "" : " (the limit for multipart answers, which spool the body)"
                state.failure = SessionError(.bodyTooLarge, "request body exceeds \(maxBody) bytes\(which)")
                return state.failure
            }
            state.bytes += bytes.count
            return nil
        }
        if let verdict { throw verdict }
        do {
            try file.write(bytes)
        } catch {
            state.withLock { $0.failure = error }
            session.recordError(error)
            throw error
        }
    }

    public func append(_ bytes: [UInt8]) throws(SessionError) {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(SessionError) in try append(buffer) }
        }.get()
    }

    /// The body is complete. With `flush`, the stream ends after the spooled bytes (every
    /// delayed picture becomes a part) and the next upload starts a fresh stream.
    public func endUpload(flush: Bool) {
        state.withLock { state in
            state.uploadEnded = true
            state.flush = flush
        }
    }

    public func poll() -> MultipartPoll {
        enum Step {
            case answer(MultipartPoll)
            case produce
        }
        let step = state.withLock { state -> Step in
            if let ready = state.ready {
                state.ready = nil
                return .answer(.part(ready))
            }
            if let finished = state.finished { return .answer(.finished(finished)) }
            if let failure = state.failure { return .answer(.finished(.failure(failure))) }
            guard state.uploadEnded, !state.producing else { return .answer(.wait) }
            state.producing = true
            return .produce
        }
        switch step {
        case .answer(let answer):
            if case .finished = answer { release() }
            return answer
        case .produce:
            session.decodeQueue.async { [self] in produce() }
            return .wait
        }
    }

    /// Calls `callback` once when `poll` has a part or the end, immediately on this thread when
    /// it already has. Call it after suspending.
    public func notifyWhenReady(_ callback: @escaping @Sendable () -> Void) {
        let callNow = state.withLock { state -> Bool in
            if state.ready != nil || state.finished != nil || state.failure != nil || state.cancelled { return true }
            state.callback = callback
            return false
        }
        if callNow { callback() }
    }

    /// The request is over (finished or the client left): frees the spool and the upload slot.
    /// A client leaving before the end is counted as an aborted upload.
    public func cancel() {
        let early = state.withLock { state -> Bool in
            guard !state.cancelled else { return false }
            state.cancelled = true
            state.callback = nil
            return state.finished == nil && state.failure?.code != .bodyTooLarge
        }
        if early { session.recordError(SessionError(.uploadAborted, "the client disconnected before the answer ended")) }
        release()
    }

    private func release() {
        session.releaseSpool(self)
        session.decodeQueue.async { [file] in file.close() }
    }

    /// Called by `Session.close`.
    func sessionClosed() {
        let callback = state.withLock { state -> (@Sendable () -> Void)? in
            if state.finished == nil { state.finished = .failure(.notFound(session.id)) }
            defer { state.callback = nil }
            return state.callback
        }
        callback?()
    }

    /// Decode worker: decode spooled bytes until at least one picture is out (or the spool
    /// ends), then encode the oldest pending picture; the next one waits for the next poll.
    private func produce() {
        dispatchPrecondition(condition: .onQueue(session.decodeQueue))
        worker.progress.begin(counters: session.currentCounters())
        guard decodeUntilAPictureIsPending() else { return }
        guard !worker.pending.isEmpty else {
            let (bytes, flush) = state.withLock { ($0.bytes, $0.flush) }
            let snapshot = session.state.withLock { ($0.counters, $0.latest?.sequence, $0.format) }
            finish(
                .success(
                    worker.progress.summary(
                        session: session.id, counters: snapshot.0, bytes: bytes, latestSeq: snapshot.1,
                        format: snapshot.2, flushed: flush)))
            return
        }
        let next = worker.pending.removeFirst()
        let quality = session.state.withLock { request.effectiveQuality(sessionDefault: $0.quality) }
        // Decode one picture ahead while this one is encoded on the encode worker, so decoding
        // and encoding overlap (two cores) instead of alternating; at most the pictures of one
        // decoder step wait, so memory stays bounded.
        if worker.pending.isEmpty && !worker.ended {
            session.decodeQueue.async { [self] in _ = decodeUntilAPictureIsPending() }
        }
        session.servedPicture(next, request: request, quality: quality) { [self] result in
            switch result {
            case .success(let served):
                let callback = state.withLock { state -> (@Sendable () -> Void)? in
                    state.producing = false
                    state.ready = served
                    defer { state.callback = nil }
                    return state.callback
                }
                callback?()
            case .failure(let error):
                if error.code == .sessionNotFound {
                    finish(.failure(error))
                } else {
                    // This picture cannot be encoded (already recorded); go on with the next.
                    session.decodeQueue.async { [self] in produce() }
                }
            }
        }
    }

    /// Reads and decodes spooled bytes until a picture is pending or the spool has ended.
    /// Returns false when the answer is over (read failure, cancelled, session closed).
    private func decodeUntilAPictureIsPending() -> Bool {
        dispatchPrecondition(condition: .onQueue(session.decodeQueue))
        let flush = state.withLock { $0.flush }
        while worker.pending.isEmpty, !worker.ended {
            guard !session.isClosed, !state.withLock({ $0.cancelled }) else { return false }
            let chunk: [UInt8]
            do {
                chunk = try file.read(at: worker.offset, count: SpoolWorker.readSize)
            } catch {
                session.recordError(error)
                finish(.failure(error))
                return false
            }
            worker.offset += chunk.count
            if chunk.isEmpty {
                worker.ended = true
                if flush {
                    worker.pending += session.runDecoderStep(receivedAt: nil, progress: worker.progress) { $0.finish() }
                    session.decoding.streamEnded()
                    session.refreshDecoderFacts()
                }
            } else {
                worker.pending += session.runDecoderStep(receivedAt: Session.uptime(), progress: worker.progress) {
                    $0.push(chunk)
                }
            }
        }
        return true
    }

    private func finish(_ result: Result<UploadSummary, SessionError>) {
        let callback = state.withLock { state -> (@Sendable () -> Void)? in
            state.producing = false
            if state.finished == nil { state.finished = result }
            defer { state.callback = nil }
            return state.callback
        }
        session.releaseSpool(self)
        callback?()
    }
}

/// Decode-worker-only progress of one spooled answer.
private final class SpoolWorker: @unchecked Sendable {
    // @unchecked: touched only on the session's decode queue.
    /// Small reads bound how many pictures one decoder step can produce (and hold) at once.
    static let readSize = 4096
    var offset = 0
    var ended = false
    var pending: [PublishedFrame] = []
    let progress = UploadProgress()
}

/// An unlinked temporary file: written by the uploading thread, read and closed on the decode
/// worker (MHD never runs two callbacks of one connection at once, so they do not overlap).
final class SpoolFile: @unchecked Sendable {
    private let descriptor = Atomic<Int32>(-1)
    private var writeOffset = 0

    init(directory: String) throws(SessionError) {
        var template = Array((directory + "/frametap-spool-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw SessionError(.spoolFailed, "cannot create a spool file in \(directory): errno \(errno)")
        }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        descriptor.store(fd, ordering: .releasing)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(SessionError) {
        let fd = descriptor.load(ordering: .acquiring)
        var done = 0
        while done < bytes.count {
            let written = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(writeOffset + done))
            if written < 0 {
                if errno == EINTR { continue }
                throw SessionError(.spoolFailed, "writing the spool file failed: errno \(errno)")
            }
            done += written
        }
        writeOffset += done
    }

    func read(at offset: Int, count: Int) throws(SessionError) -> [UInt8] {
        let fd = descriptor.load(ordering: .acquiring)
        guard fd >= 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: count)
        while true {
            let got = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, count, off_t(offset)) }
            if got >= 0 {
                buffer.removeSubrange(got...)
                return buffer
            }
            if errno != EINTR { throw SessionError(.spoolFailed, "reading the spool file failed: errno \(errno)") }
        }
    }

    func close() {
        let fd = descriptor.exchange(-1, ordering: .acquiringAndReleasing)
        if fd >= 0 { _ = Glibc.close(fd) }
    }

    deinit { close() }
}

extension Session {
    /// Starts a multipart-answer upload. Throws `.sessionBusy` like `beginUpload`, and
    /// `.spoolFailed` when no spool file can be created.
    public func beginSpooledUpload(_ request: PictureRequest) throws(SessionError) -> SpooledUpload {
        let request = try request.validated()
        let file = try SpoolFile(directory: configuration.spoolDirectory)
        let upload = try state.withLock { state throws(SessionError) -> SpooledUpload in
            guard !state.closed else { throw .notFound(id) }
            guard state.writer == nil else {
                throw SessionError(.sessionBusy, "another upload to session '\(id)' is in progress")
            }
            let writerID = state.nextWriterID
            state.nextWriterID += 1
            state.writer = Writer(id: writerID)
            let upload = SpooledUpload(session: self, writerID: writerID, request: request, file: file)
            state.spool = upload
            return upload
        }
        logger.debug("multipart upload started")
        return upload
    }

    func releaseSpool(_ upload: SpooledUpload) {
        state.withLock { state in
            if state.writer?.id == upload.writerID { state.writer = nil }
            if state.spool === upload { state.spool = nil }
        }
    }
}
