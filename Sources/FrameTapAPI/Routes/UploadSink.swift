import HTTPServer
import Ingest
import Sessions

/// An upload's queue as the HTTP server's body sink. It passes bytes and ends through, and
/// turns the session layer's refusal into the HTTP answer the client gets at once.
final class UploadSink: RequestBodySink {
    private let queue: UploadQueue<SessionError>

    init(_ queue: UploadQueue<SessionError>) { self.queue = queue }

    func write(_ bytes: UnsafeRawBufferPointer) -> RequestBodyWrite {
        switch queue.offer(bytes) {
        case .accepted(let taken): .accepted(taken)
        case .refused(let error) where error.code == .ingest(.bodyTooLarge) && queue.maxBytes != nil:
            // The same problem as for a body announced too large up front.
            .refused(.bodyTooLarge(limit: queue.maxBytes!))
        case .refused(let error): .refused(HTTPError(error))
        }
    }

    func finish() { queue.finish() }

    func abort(_ reason: RequestBodyAbort) {
        switch reason {
        case .clientGone: queue.abort(.clientGone)
        case .serverShutdown: queue.abort(.serverShutdown)
        case .tooLarge(let limit):
            queue.abort(.refused(SessionError(IngestError(.bodyTooLarge, "request body exceeds \(limit) bytes"))))
        case .malformedChunk:
            queue.abort(
                .refused(SessionError(IngestError(.invalidChunkedEncoding, "the upload's chunked encoding broke; nothing after the fault was read"))))
        case .bodyTimeout:
            queue.abort(
                .refused(SessionError(IngestError(.bodyTimeout, "the server cut the upload off: its body went too slowly (--body-timeout); what came before was taken"))))
        case .answeredEarly: queue.abort(.answered)
        }
    }

    func setWake(_ wake: @escaping @Sendable () -> Void) { queue.setProducerWake(wake) }
}
