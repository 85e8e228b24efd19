import FoundationEssentials
import HTTPServer
import Imaging
import Sessions
import Synchronization

// An encoded picture already keeps its bytes at a fixed address for its whole life, which is
// exactly what a zero-copy response needs: libmicrohttpd sends straight from the cache.
extension EncodedPicture: ByteStorage {}

/// Response headers and bodies for served pictures.
enum PictureResponses {
    /// 200 with the cached bytes themselves as the body (`.shared`: no copy, no encode here).
    /// `now` is the session clock's uptime, for the picture's age.
    static func picture(_ served: ServedPicture, now: UInt64) -> HTTPResponse {
        let picture = served.picture
        var headers = HTTPHeaders()
        headers.add("Content-Type", picture.contentType)
        headers.add("ETag", served.etag)
        headers.add("Cache-Control", "no-cache")
        headers.add("Last-Modified", HTTPDate.string(secondsSince1970: Int(served.decodedAt.timeIntervalSince1970)))
        headers.add("X-Frame-Seq", String(served.sequence))
        if let receivedAt = served.receivedAt { headers.add("X-Frame-Received-At", WireJSON.timestamp(receivedAt)) }
        if let pts = served.pts { headers.add("X-Frame-PTS", String(pts)) }
        headers.add("X-Frame-Age-Ms", String(served.ageMilliseconds(now: now)))
        headers.add("X-Frame-Keyframe", served.isKeyframe ? "true" : "false")
        headers.add("X-Frame-Width", String(picture.width))
        headers.add("X-Frame-Height", String(picture.height))
        if let pixelFormat = picture.pixelFormatName { headers.add("X-Frame-Pix-Fmt", pixelFormat) }
        if let colors = picture.colors {
            headers.add("X-Frame-Color-Range", colors.range.rawValue)
            headers.add("X-Frame-Color-Matrix", colors.matrix.rawValue)
        }
        headers.add("X-Decoder-Backend", served.backend.rawValue)
        return HTTPResponse(status: .ok, headers: headers, body: .shared(picture))
    }

    static func notModified(etag: String?) -> HTTPResponse {
        var headers = HTTPHeaders()
        if let etag { headers.add("ETag", etag) }
        headers.add("Cache-Control", "no-cache")
        return HTTPResponse(status: .notModified, headers: headers)
    }

    static func answer(_ result: Result<PictureAnswer, SessionError>, now: UInt64) -> HTTPResponse {
        switch result {
        case .success(.picture(let served)): picture(served, now: now)
        case .success(.notModified(let etag)): notModified(etag: etag)
        case .failure(let error): .problem(HTTPError(error))
        }
    }

    /// Headers of one multipart/mixed part (the `POST .../nalus` answer), after Content-Type
    /// and Content-Length, which `Multipart.part` writes itself.
    static func partHeaders(_ served: ServedPicture) -> [(String, String)] {
        let picture = served.picture
        var headers: [(String, String)] = [
            ("X-Frame-Seq", String(served.sequence)),
            ("X-Frame-Width", String(picture.width)), ("X-Frame-Height", String(picture.height)),
        ]
        if let pixelFormat = picture.pixelFormatName { headers.append(("X-Frame-Pix-Fmt", pixelFormat)) }
        if let colors = picture.colors {
            headers.append(("X-Frame-Color-Range", colors.range.rawValue))
            headers.append(("X-Frame-Color-Matrix", colors.matrix.rawValue))
        }
        if let pts = served.pts { headers.append(("X-Frame-PTS", String(pts))) }
        headers.append(("X-Frame-Keyframe", served.isKeyframe ? "true" : "false"))
        return headers
    }
}

/// Joins an answer that may arrive before or after libmicrohttpd hands over the promise of a
/// deferred response: whichever comes second sends it.
final class AnswerHandoff: Sendable {
    private struct State {
        var answer: HTTPResponse?
        var promise: ResponsePromise?
    }

    private let state = Mutex(State())

    func complete(_ answer: HTTPResponse) {
        let promise = state.withLock { state -> ResponsePromise? in
            guard state.answer == nil else { return nil }
            state.answer = answer
            return state.promise
        }
        promise?.succeed(answer)
    }

    func attach(_ promise: ResponsePromise) {
        let answer = state.withLock { state -> HTTPResponse? in
            state.promise = promise
            return state.answer
        }
        if let answer { promise.succeed(answer) }
    }

    /// The answer if it is already known (completed synchronously).
    var immediateAnswer: HTTPResponse? { state.withLock { $0.answer } }

    /// The answer now when known, otherwise a deferred response that sends it when it comes.
    func response(timeout: Duration? = nil, onTimeout: (@Sendable () -> HTTPResponse)? = nil) -> HTTPResponse {
        if let answer = immediateAnswer { return answer }
        if let onTimeout {
            return .deferred(timeout: timeout, onTimeout: onTimeout) { [self] promise in attach(promise) }
        }
        return .deferred(timeout: timeout) { [self] promise in attach(promise) }
    }
}
