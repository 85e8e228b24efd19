import Dispatch
import Sessions
import Synchronization

/// The HTTP layer's bounded request-body queue as the session's pull source: the session's
/// decode worker takes bytes when it is ready for them, and the client is paused (its
/// connection suspended) while both bounded queues are full.
final class RequestBodyUploadSource: UploadBodySource {
    private let body: RequestBodyStream

    init(_ body: RequestBodyStream) { self.body = body }

    func nextUploadEvent() -> UploadBodyEvent? {
        guard let event = body.next() else { return nil }
        switch event {
        case .bytes(let bytes): return .bytes(bytes)
        case .end: return .end
        case .aborted(.tooLarge(let limit)): return .tooLarge(limit: limit)
        case .aborted(.clientGone), .aborted(.serverShutdown): return .clientGone
        }
    }

    func setUploadReadyHandler(_ handler: @escaping @Sendable () -> Void) {
        body.setReadyHandler(handler)
    }

    func discardRemainingUpload() {
        body.discardRemaining()
    }
}

/// Moves a multipart-answer upload from the request-body queue into the session's spool file.
/// Disk writes never run on a libmicrohttpd thread: the pump runs on its own serial queue,
/// woken by the body queue. When the body is complete the answer (a stream of parts) is
/// handed to the waiting request.
final class SpoolPump: Sendable {
    private let body: RequestBodyStream
    private let spool: SpooledUpload
    private let flush: Bool
    private let handoff: AnswerHandoff
    private let makeAnswer: @Sendable () -> HTTPResponse
    private let queue = DispatchQueue(label: "frametap.http.spool")
    private let done = Atomic<Bool>(false)

    init(
        body: RequestBodyStream, spool: SpooledUpload, flush: Bool, handoff: AnswerHandoff,
        makeAnswer: @escaping @Sendable () -> HTTPResponse
    ) {
        self.body = body
        self.spool = spool
        self.flush = flush
        self.handoff = handoff
        self.makeAnswer = makeAnswer
    }

    func start() {
        body.setReadyHandler { [self] in queue.async { self.run() } }
        queue.async { self.run() }
    }

    private func run() {
        while !done.load(ordering: .acquiring), let event = body.next() {
            switch event {
            case .bytes(let bytes):
                do {
                    try spool.append(bytes)
                } catch {
                    finish()
                    body.discardRemaining()
                    spool.cancel()
                    handoff.complete(.problem(HTTPError(error)))
                }
            case .end:
                finish()
                spool.endUpload(flush: flush)
                handoff.complete(makeAnswer())
            case .aborted:
                // The server already answers (413) or the client is gone: nothing to send.
                finish()
                spool.cancel()
            }
        }
    }

    private func finish() { done.store(true, ordering: .releasing) }
}
