import Decoding
import Dispatch
import Ingest
import Synchronization

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

/// A `POST /sessions/{id}/nalus` answered with `multipart/mixed`, one part per picture: the
/// answer's own state, nothing of decoding. The body is spooled and replayed to the session's
/// decode loop by a `SpoolReplay`; the loop hands this answer the pictures it decodes and, at
/// the end, the upload's outcome. This answer encodes the pictures one at a time, as the client
/// takes them, and wants the next picture decoded only when none is waiting, so one picture is
/// decoded ahead while the previous one is encoded. The session's upload slot is held until
/// the answer ended.
///
/// HTTP side: feed the body to `queue`; `onUploadEnd` says when the answer may start (or that
/// the upload failed); then the content reader calls `poll()` (`.wait` → suspend,
/// `notifyWhenReady { resume }`), and `cancel()` when the request is freed.
public final class SpooledUpload: Sendable {
    public let queue: UploadQueue<SessionError>
    public let request: PictureRequest
    private let pictures: PictureCache
    /// Strong: the loop holds this upload's job until the answer ended (or the session
    /// closed), which is when this reference stops mattering.
    private let loop: DecodeLoop
    private let state = Mutex(AnswerState())

    private struct AnswerState {
        var uploadEndHandler: (@Sendable (Result<Void, SessionError>) -> Void)?
        var uploadResult: Result<Void, SessionError>?
        /// Decoded, not yet encoded, in output order.
        var pending: [PublishedFrame] = []
        var encoding = false
        var ready: ServedPicture?
        /// The upload's outcome once the decode loop reached its end; the answer ends with it
        /// after the pending pictures.
        var outcome: Result<UploadSummary, SessionError>?
        var finished: Result<UploadSummary, SessionError>?
        var callback: (@Sendable () -> Void)?
        var cancelled = false
        /// Cancelled while the body was still on its way (`.serverShutdown` or `.clientGone`):
        /// if the body's end was already queued, the abort changed nothing and the body's end
        /// ends the job instead.
        var cancelledBeforeTheBodyEnded: IngestStop<SessionError>?
        /// The reader has asked for a part: nothing is decoded before (the client may never read).
        var pulling = false

        var isOver: Bool { finished != nil || cancelled }

        /// The body is spooled and the reader has yet to start pulling.
        var readerMayStartPulling: Bool {
            guard !pulling, case .success = uploadResult else { return false }
            return true
        }

        /// The reader can make progress now (start pulling, a part, the end, or an encode to start).
        var readerCanProceed: Bool {
            readerMayStartPulling || ready != nil || isOver || (!encoding && (!pending.isEmpty || outcome != nil))
        }

        mutating func takeCallback() -> (@Sendable () -> Void)? {
            defer { callback = nil }
            return callback
        }
    }

    init(queue: UploadQueue<SessionError>, request: PictureRequest, loop: DecodeLoop, pictures: PictureCache) {
        self.queue = queue
        self.request = request
        self.loop = loop
        self.pictures = pictures
    }

    /// True once the answer ended or was cancelled: the session may take another upload.
    var isOver: Bool { state.withLock { $0.isOver } }

    /// Whether the decode loop should decode on: the body is spooled, the reader is pulling
    /// and no picture is waiting to be encoded.
    var wantsPictures: Bool {
        state.withLock { state in
            guard case .success = state.uploadResult else { return false }
            return state.pulling && state.pending.isEmpty && state.outcome == nil && !state.isOver
        }
    }

    // MARK: - From the decode loop

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

    func uploadEnded(_ result: Result<Void, SessionError>) {
        let (handler, reader, cancelledEarly) = state.withLock { state in
            guard state.uploadResult == nil else {
                return ((@Sendable (Result<Void, SessionError>) -> Void)?.none, (@Sendable () -> Void)?.none, IngestStop<SessionError>?.none)
            }
            state.uploadResult = result
            defer { state.uploadEndHandler = nil }
            let cancelledEarly = if case .success = result { state.cancelledBeforeTheBodyEnded } else { IngestStop<SessionError>?.none }
            return (state.uploadEndHandler, state.takeCallback(), cancelledEarly)
        }
        if let cancelledEarly {
            // The answer was cancelled after its body was finished but before the decode loop took
            // that end, so the queue's abort came too late to end the push: end the job now, off
            // the decode loop's own call into this answer.
            DispatchQueue.global().async { [self] in
                loop.multipartAnswerCancelled(self, beforeItsEnd: true, serverShutdown: cancelledEarly == .serverShutdown)
            }
            return
        }
        handler?(result)
        // A reader that polled before the body ended can go on now.
        reader?()
    }

    /// A picture the decode loop decoded while replaying this upload.
    func add(_ published: PublishedFrame) {
        let reader = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.isOver else { return nil }
            state.pending.append(published)
            return state.readerCanProceed ? state.takeCallback() : nil
        }
        reader?()
    }

    /// The decode loop reached the upload's end (or it failed): the answer ends with this after
    /// the pictures still waiting. A failure drops them, unless `keepingPictures`: a push
    /// refused from some point on still answers with what it decoded before.
    func conclude(_ outcome: Result<UploadSummary, SessionError>, keepingPictures: Bool = false) {
        let reader = state.withLock { state -> (@Sendable () -> Void)? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            if case .failure = outcome, !keepingPictures { state.pending = [] }
            return state.readerCanProceed ? state.takeCallback() : nil
        }
        reader?()
    }

    // MARK: - The answer

    public func poll() -> MultipartPoll {
        enum Step {
            case answer(MultipartPoll)
            case encode(PublishedFrame, wantsMore: Bool)
            case end(Result<UploadSummary, SessionError>)
            case startPulling
        }
        let step = state.withLock { state -> Step in
            if state.readerMayStartPulling {
                state.pulling = true
                return .startPulling
            }
            if let ready = state.ready {
                state.ready = nil
                return .answer(.part(ready))
            }
            if let finished = state.finished { return .answer(.finished(finished)) }
            guard !state.encoding, !state.cancelled else { return .answer(.wait) }
            if !state.pending.isEmpty {
                state.encoding = true
                let next = state.pending.removeFirst()
                return .encode(next, wantsMore: state.pending.isEmpty && state.outcome == nil)
            }
            if let outcome = state.outcome {
                state.finished = outcome
                return .end(outcome)
            }
            return .answer(.wait)
        }
        switch step {
        case .answer(let answer):
            return answer
        case .startPulling:
            loop.answerWantsPictures()
            return .wait
        case .encode(let picture, let wantsMore):
            // The next picture is decoded while this one is encoded (two cores), not after it.
            if wantsMore { loop.answerWantsPictures() }
            encode(picture)
            return .wait
        case .end(let outcome):
            loop.multipartAnswerEnded(self, outcome)
            return .finished(outcome)
        }
    }

    /// Calls `callback` once when `poll` can make progress, at once on this thread when it
    /// already can. Call it after suspending.
    public func notifyWhenReady(_ callback: @escaping @Sendable () -> Void) {
        let callNow = state.withLock { state -> Bool in
            if state.readerCanProceed { return true }
            state.callback = callback
            return false
        }
        if callNow { callback() }
    }

    private func encode(_ picture: PublishedFrame) {
        pictures.serve(picture, request) { [self] result in
            let reader = state.withLock { state -> (@Sendable () -> Void)? in
                state.encoding = false
                switch result {
                case .success(let served):
                    state.ready = served
                case .failure(let error) where error.code == .sessionNotFound:
                    state.pending = []
                    if state.outcome == nil { state.outcome = .failure(error) }
                case .failure:
                    break  // this picture cannot be encoded (the cache recorded why); on with the next
                }
                return state.takeCallback()
            }
            reader?()
        }
    }

    /// The request is over (answered, the client left, the server stops): frees the spool and
    /// the upload slot. A client that leaves before the answer ended is counted as an aborted
    /// upload; one the server stops is not.
    public func cancel(serverShutdown: Bool = false) {
        let (early, bodyEnded) = state.withLock { state -> (Bool, Bool) in
            guard !state.cancelled else { return (false, false) }
            state.cancelled = true
            state.callback = nil
            // Its closure holds the request; nothing will call it any more.
            state.uploadEndHandler = nil
            state.pending = []
            let bodyEnded = state.uploadResult != nil
            if !bodyEnded { state.cancelledBeforeTheBodyEnded = serverShutdown ? .serverShutdown : .clientGone }
            return (state.finished == nil && bodyEnded, bodyEnded)
        }
        guard bodyEnded else {
            // The body is still arriving: the queue's stop event, which the decode loop has yet
            // to take, ends the push (and counts why), so the next upload waits until it has.
            // Should the body's end be queued already, `uploadEnded` ends the job instead.
            queue.abort(serverShutdown ? .serverShutdown : .clientGone)
            return
        }
        loop.multipartAnswerCancelled(self, beforeItsEnd: early, serverShutdown: serverShutdown)
    }

    /// The session closed. Returns true when the answer had not ended yet (it ends now, with
    /// `error`).
    func sessionClosed(_ error: SessionError) -> Bool {
        uploadEnded(.failure(error))
        let (reader, endedNow) = state.withLock { state -> ((@Sendable () -> Void)?, Bool) in
            state.pending = []
            let endedNow = !state.isOver
            if state.finished == nil { state.finished = .failure(error) }
            return (state.takeCallback(), endedNow)
        }
        reader?()
        return endedNow
    }
}
