import HTTPServer
import Imaging
import Logging
import Sessions
import Synchronization

/// One MJPEG viewer as a pull source: each pull takes the newest picture the session has for
/// this viewer (a slow client skips pictures, nothing queues), and the session repeats the
/// last picture when nothing new came, which also lets a vanished client be noticed.
final class MJPEGSource: StreamSource {
    private let viewer: Viewer
    private let boundary: String
    /// Set once the closing delimiter was handed out (the session ended).
    private let ended = Atomic<Bool>(false)

    init(viewer: Viewer, boundary: String) {
        self.viewer = viewer
        self.boundary = boundary
    }

    var newestWins: Bool { true }

    func next(waker: StreamWaker, idle: Bool) -> StreamPoll {
        if ended.load(ordering: .acquiring) { return .end }
        switch viewer.poll() {
        case .picture(let served, _):
            return .chunk(
                Multipart.part(
                    boundary: boundary, contentType: served.picture.contentType, payload: served.picture,
                    headers: [("X-Frame-Seq", String(served.sequence))]))
        case .wait:
            // A wake-up that comes before the server suspends is remembered by the server.
            viewer.notifyWhenReady { waker.wake() }
            return .pending
        case .ended:
            ended.store(true, ordering: .releasing)
            return .chunk(StreamChunk(bytes: Multipart.closingDelimiter(boundary: boundary)))
        }
    }

    func lastChunkBeforeShutdown() -> StreamChunk? {
        ended.store(true, ordering: .releasing)
        return StreamChunk(bytes: Multipart.closingDelimiter(boundary: boundary))
    }

    func close(_ reason: StreamCloseReason) {
        viewer.cancel()
    }
}

/// The `multipart/mixed` answer of a `POST .../nalus`: the spooled body is decoded as the
/// client takes the parts (pull model: a part is produced only after the previous one was
/// handed over, and none is ever dropped), then the closing delimiter ends the body.
///
/// A push that failed (no decodable picture, a picture over the size limit, the session
/// deleted, the spool unreadable) ends with one `application/problem+json` part before the
/// closing delimiter, the same problem a JSON push gets, so a client can tell "failed" from
/// "no pictures". The status line (200) went out before the failure was known.
final class MultipartAnswerSource: StreamSource {
    private let spool: SpooledUpload
    private let session: Session
    private let boundary: String
    private let logger: Logger
    private let ended = Atomic<Bool>(false)

    init(spool: SpooledUpload, session: Session, boundary: String, logger: Logger) {
        self.spool = spool
        self.session = session
        self.boundary = boundary
        self.logger = logger
    }

    func next(waker: StreamWaker, idle: Bool) -> StreamPoll {
        if ended.load(ordering: .acquiring) { return .end }
        switch spool.poll() {
        case .part(let served):
            return .chunk(
                Multipart.part(
                    boundary: boundary, contentType: served.picture.contentType, payload: served.picture,
                    headers: PictureResponses.partHeaders(served)))
        case .wait:
            spool.notifyWhenReady { waker.wake() }
            return .pending
        case .finished(.success):
            ended.store(true, ordering: .releasing)
            return .chunk(StreamChunk(bytes: Multipart.closingDelimiter(boundary: boundary)))
        case .finished(.failure(let error)):
            ended.store(true, ordering: .releasing)
            logger.warning(
                "multipart push failed",
                metadata: ["session": "\(session.id)", "code": "\(error.code.rawValue)", "message": "\(error.message)"])
            return .chunk(problemEnding(error))
        }
    }

    /// The answer is cut short: it ends with a `shutting_down` problem part, so the client
    /// knows the parts it got are not all.
    func lastChunkBeforeShutdown() -> StreamChunk? {
        guard !ended.exchange(true, ordering: .acquiringAndReleasing) else { return nil }
        return problemEnding(SessionError(.shuttingDown, "the server is shutting down; the answer is incomplete"))
    }

    private func problemEnding(_ error: SessionError) -> StreamChunk {
        let problem = HTTPError(error)
        var chunk = Multipart.part(
            boundary: boundary, contentType: "application/problem+json", bytes: problem.problemJSON(typePrefix: FrameTapAPI.problemTypePrefix),
            headers: [("X-Problem-Status", String(problem.status.code))])
        chunk.segments.append(.bytes(Multipart.closingDelimiter(boundary: boundary)))
        return chunk
    }

    func close(_ reason: StreamCloseReason) {
        spool.cancel(serverShutdown: reason == .serverShutdown)
    }
}
