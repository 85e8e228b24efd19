import Decoding
import Dispatch
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// What the reader of a multipart answer gets next.
public enum MultipartPoll: Sendable {
    /// The next part: one picture output while handling this upload, in output order.
    case part(ServedPicture)
    /// Not produced yet: suspend, then call `notifyWhenReady`.
    case wait
    /// No more parts. `.failure` says why the answer is incomplete or the push failed (the
    /// session was deleted, the spool could not be read, or the stream had no decodable
    /// picture), so the answer can end with a machine-readable error instead of looking like
    /// "no pictures".
    case finished(Result<UploadSummary, SessionError>)
}

/// A `POST /sessions/{id}/nalus` answered with `multipart/mixed`, one part per picture.
///
/// libmicrohttpd cannot answer before the upload ends, and decoding while uploading would have
/// to hold every picture until then. So the body goes, through the upload's queue, into an
/// unlinked temporary file as it arrives (bounded memory for any length), and decoding happens
/// afterwards, pulled by the answer: the next part is decoded and encoded only once the client
/// took the previous one. The session's upload slot is held until the answer ended.
///
/// HTTP side: feed the body to `queue`; `onUploadEnd` says when the answer may start (or that
/// the upload failed); then the content reader calls `poll()` (`.wait` → suspend,
/// `notifyWhenReady { resume }`), and `cancel()` when the request is freed.
public final class SpooledUpload: Sendable {
    public let queue: UploadQueue
    public let request: PictureRequest
    let flush: Bool
    private let file: SpoolFile
    private let progress: QueueBound<UploadProgress>
    private let reader: QueueBound<SpoolReader>
    /// Strong: the worker holds this upload's job until the job ends (or the session closes),
    /// which is when this reference stops mattering.
    private let worker: IngestWorker
    private let pictures: PictureCache
    private let state = Mutex(AnswerState())

    private struct AnswerState {
        var uploadEnded = false
        var uploadEndHandler: (@Sendable (Result<Void, SessionError>) -> Void)?
        var uploadResult: Result<Void, SessionError>?
        var ready: ServedPicture?
        var producing = false
        var finished: Result<UploadSummary, SessionError>?
        var callback: (@Sendable () -> Void)?
        var cancelled = false
    }

    /// Decode-queue state of the answer: how far the spool was read, and pictures decoded but
    /// not yet handed out.
    private struct SpoolReader {
        /// Small reads bound how many pictures one decoder step can produce (and hold) at once.
        static let readSize = 4096
        var offset = 0
        var ended = false
        var pending: [PublishedFrame] = []
    }

    init(
        queue: UploadQueue, progress: QueueBound<UploadProgress>, request: PictureRequest, flush: Bool,
        file: SpoolFile, worker: IngestWorker, pictures: PictureCache
    ) {
        self.queue = queue
        self.progress = progress
        self.request = request
        self.flush = flush
        self.file = file
        self.worker = worker
        self.pictures = pictures
        reader = QueueBound(SpoolReader(), queue: worker.decodeQueue)
    }

    /// True once the answer ended or was cancelled: the session may take another upload.
    var isOver: Bool { state.withLock { $0.finished != nil || $0.cancelled } }

    // MARK: - The upload (decode queue)

    /// Runs `handler` once: `.success` when the whole body is spooled (send the answer's head
    /// and start pulling parts), `.failure` when the upload ended without its body.
    public func onUploadEnd(_ handler: @escaping @Sendable (Result<Void, SessionError>) -> Void) {
        let result = state.withLock { state -> Result<Void, SessionError>? in
            if let result = state.uploadResult { return result }
            state.uploadEndHandler = handler
            return nil
        }
        if let result { handler(result) }
    }

    private func uploadEnded(_ result: Result<Void, SessionError>) {
        let (handler, reader) = state.withLock { state in
            guard state.uploadResult == nil else {
                return ((@Sendable (Result<Void, SessionError>) -> Void)?.none, (@Sendable () -> Void)?.none)
            }
            state.uploadResult = result
            if case .success = result { state.uploadEnded = true }
            defer {
                state.uploadEndHandler = nil
                state.callback = nil
            }
            return (state.uploadEndHandler, state.callback)
        }
        handler?(result)
        // A reader that polled before the body ended can go on now.
        reader?()
    }

    /// One event of the upload's queue. Returns true when the job is over.
    func handle(_ event: UploadQueue.Event) -> Bool {
        switch event {
        case .bytes(let bytes, _):
            let written = bytes.withUnsafeBytes { buffer in
                Result { () throws(SessionError) in try file.write(buffer) }
            }
            if case .failure(let error) = written {
                worker.record(error)
                // The client is told at once; the queue's stop event ends the job.
                queue.refuse(error)
            }
            return false
        case .end:
            uploadEnded(.success(()))
            // The job goes on: the answer decodes the spool and ends it (`finish`, `cancel`).
            return false
        case .stopped(let stop):
            let error = worker.stopped(stop)
            uploadEnded(.failure(error))
            finish(.failure(error), endJob: false)
            worker.decodeQueue.async { [file] in file.close() }
            return true
        }
    }

    // MARK: - The answer

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
            guard state.uploadEnded, !state.producing, !state.cancelled else { return .answer(.wait) }
            state.producing = true
            return .produce
        }
        switch step {
        case .answer(let answer):
            return answer
        case .produce:
            worker.decodeQueue.async { [self] in produce() }
            return .wait
        }
    }

    /// Calls `callback` once when `poll` has a part or the end, at once on this thread when it
    /// already has. Call it after suspending.
    public func notifyWhenReady(_ callback: @escaping @Sendable () -> Void) {
        let callNow = state.withLock { state -> Bool in
            if state.ready != nil || state.finished != nil || state.cancelled { return true }
            state.callback = callback
            return false
        }
        if callNow { callback() }
    }

    /// The request is over (answered, the client left, the server stops): frees the spool and
    /// the upload slot. A client that leaves before the answer ended is counted as an aborted
    /// upload; one the server stops is not.
    public func cancel(serverShutdown: Bool = false) {
        let error = serverShutdown
            ? SessionError(.shuttingDown, "the server is shutting down")
            : SessionError(.uploadAborted, "the client disconnected before the answer ended")
        let (early, bodyEnded) = state.withLock { state -> (Bool, Bool) in
            guard !state.cancelled else { return (false, false) }
            state.cancelled = true
            state.callback = nil
            // Its closure holds the request; nothing will call it any more.
            state.uploadEndHandler = nil
            let early = state.finished == nil && state.uploadEnded
            // A decode in flight that ends later must not announce the upload's end again.
            if early { state.finished = .failure(error) }
            return (early, state.uploadEnded)
        }
        if early {
            if !serverShutdown { worker.record(error) }
            // No `finish` follows a cancelled answer: the upload's end is announced here.
            worker.uploadEnded(.failure(error), bytes: queue.totalBytes)
        }
        guard bodyEnded else {
            // The body is still arriving: the queue's stop event, which the decode queue has yet
            // to take, ends the job (and counts why), so the next upload waits until it has.
            queue.abort(serverShutdown ? .serverShutdown : .clientGone)
            return
        }
        release()
    }

    /// The session closed.
    func sessionClosed(_ error: SessionError) {
        uploadEnded(.failure(error))
        finish(.failure(error), endJob: false)
        release()
    }

    private func release() {
        worker.endJob(spooled: self)
        worker.decodeQueue.async { [file] in file.close() }
    }

    /// Decode queue: decode spooled bytes until a picture is pending (or the spool ended), then
    /// encode the oldest pending picture; the next one waits for the next poll.
    private func produce() {
        guard decodeUntilAPictureIsPending() else { return }
        let next = reader.withValue { reader -> PublishedFrame? in
            reader.pending.isEmpty ? nil : reader.pending.removeFirst()
        }
        guard let next else {
            finish(worker.summary(of: progress, bytes: queue.totalBytes, flushed: flush), endJob: true)
            return
        }
        // Decode one picture ahead while this one is encoded on the encode queue, so decoding
        // and encoding overlap (two cores) instead of alternating; at most the pictures of one
        // decoder step wait, so memory stays bounded.
        if reader.withValue({ $0.pending.isEmpty && !$0.ended }) {
            worker.decodeQueue.async { [self] in _ = decodeUntilAPictureIsPending() }
        }
        pictures.serve(next, request) { [self] result in
            switch result {
            case .success(let served):
                let callback = state.withLock { state -> (@Sendable () -> Void)? in
                    state.producing = false
                    state.ready = served
                    defer { state.callback = nil }
                    return state.callback
                }
                callback?()
            case .failure(let error) where error.code == .sessionNotFound:
                finish(.failure(error), endJob: true)
            case .failure:
                // This picture cannot be encoded (the cache recorded why); go on with the next.
                worker.decodeQueue.async { [self] in produce() }
            }
        }
    }

    /// Reads and decodes spooled bytes until a picture is pending or the spool has ended.
    /// Returns false when the answer is over (read failure, cancelled, session closed).
    private func decodeUntilAPictureIsPending() -> Bool {
        while reader.withValue({ $0.pending.isEmpty && !$0.ended }) {
            guard !worker.isClosed, !state.withLock({ $0.cancelled }) else { return false }
            let offset = reader.withValue { $0.offset }
            let chunk: [UInt8]
            do {
                chunk = try file.read(at: offset, count: SpoolReader.readSize)
            } catch {
                worker.record(error)
                finish(.failure(error), endJob: true)
                return false
            }
            if chunk.isEmpty {
                reader.withValue { $0.ended = true }
                if flush {
                    let published = worker.step(receivedAt: nil, progress: progress) { $0.finish() }
                    reader.withValue { $0.pending += published }
                    worker.withDecoder { $0.streamEnded() }
                }
            } else {
                let published = worker.step(receivedAt: worker.clock.uptime, progress: progress) { $0.push(chunk) }
                reader.withValue {
                    $0.offset += chunk.count
                    $0.pending += published
                }
            }
        }
        return true
    }

    private func finish(_ result: Result<UploadSummary, SessionError>, endJob: Bool) {
        let (callback, first) = state.withLock { state -> ((@Sendable () -> Void)?, Bool) in
            state.producing = false
            let first = state.finished == nil
            if first { state.finished = result }
            defer { state.callback = nil }
            return (state.callback, first)
        }
        if first { worker.uploadEnded(result, bytes: queue.totalBytes) }
        if endJob { worker.endJob(spooled: self) }
        callback?()
    }
}

/// An unlinked temporary file: written and read on the session's decode queue, closed there or
/// when freed.
final class SpoolFile: Sendable {
    private let descriptor = Atomic<Int32>(-1)
    private let writeOffset = Atomic<Int>(0)

    init(directory: String) throws(SessionError) {
        var template = Array((directory + "/frametap-spool-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            throw SessionError(.spoolFailed, "cannot create a spool file in \(directory): \(String(cString: strerror(errno)))")
        }
        // Unlinked at once: the file vanishes with its descriptor however the request ends.
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        descriptor.store(fd, ordering: .releasing)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(SessionError) {
        let fd = descriptor.load(ordering: .acquiring)
        let start = writeOffset.load(ordering: .relaxed)
        var done = 0
        while done < bytes.count {
            let written = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(start + done))
            if written < 0 {
                if errno == EINTR { continue }
                throw SessionError(.spoolFailed, "writing the spool file failed: \(String(cString: strerror(errno)))")
            }
            done += written
        }
        writeOffset.store(start + done, ordering: .relaxed)
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
            if errno != EINTR {
                throw SessionError(.spoolFailed, "reading the spool file failed: \(String(cString: strerror(errno)))")
            }
        }
    }

    func close() {
        let fd = descriptor.exchange(-1, ordering: .acquiringAndReleasing)
        if fd >= 0 { _ = Glibc.close(fd) }
    }

    deinit { close() }
}
