import Dispatch
import Imaging
import Logging
import Sessions
import Synchronization

/// One MJPEG viewer as a pull source: each pull takes the newest picture the session has for
/// this viewer (a slow client skips pictures, nothing queues), and the session repeats the
/// last picture when nothing new came, which also lets a vanished client be noticed.
final class MJPEGSource: StreamSource {
    private let subscriber: FrameSubscriber
    private let boundary: String
    /// Set once the closing delimiter was handed out (the session ended).
    private let ended = Atomic<Bool>(false)

    init(subscriber: FrameSubscriber, boundary: String) {
        self.subscriber = subscriber
        self.boundary = boundary
    }

    func next(waker: StreamWaker, idle: Bool) -> StreamPoll {
        if ended.load(ordering: .acquiring) { return .end }
        switch subscriber.poll() {
        case .picture(let served, _):
            return .chunk(
                Multipart.part(
                    boundary: boundary, contentType: served.picture.contentType, payload: served.picture,
                    sequence: served.sequence))
        case .wait:
            // A wake-up that comes before the server suspends is remembered by the server.
            subscriber.notifyWhenReady { waker.wake() }
            return .pending
        case .ended:
            ended.store(true, ordering: .releasing)
            return .chunk(StreamChunk(bytes: Multipart.closingDelimiter(boundary: boundary)))
        }
    }

    func close(_ reason: StreamCloseReason) {
        subscriber.cancel()
    }
}

/// The `multipart/mixed` answer of a `POST .../nalus`: the spooled body is decoded as the
/// client takes the parts (pull model: a part is produced only after the previous one was
/// handed over, and none is ever dropped), then the closing delimiter ends the body.
final class MultipartAnswerSource: StreamSource {
    private let spool: SpooledUpload
    private let boundary: String
    private let logger: Logger
    private let ended = Atomic<Bool>(false)

    init(spool: SpooledUpload, boundary: String, logger: Logger) {
        self.spool = spool
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
                    sequence: served.sequence, extraHeaders: PictureResponses.partHeaders(served)))
        case .wait:
            spool.notifyWhenReady { waker.wake() }
            return .pending
        case .finished(.success):
            ended.store(true, ordering: .releasing)
            return .chunk(StreamChunk(bytes: Multipart.closingDelimiter(boundary: boundary)))
        case .finished(.failure(let error)):
            // The status line is long gone; a body cut off without its closing delimiter is
            // how the client learns the answer is incomplete (the error is in the session status).
            logger.warning(
                "multipart answer ended early",
                metadata: [
                    "session": "\(spool.session.id)", "code": "\(error.code.rawValue)", "message": "\(error.message)",
                ])
            return .failure
        }
    }

    func close(_ reason: StreamCloseReason) {
        spool.cancel()
    }
}
