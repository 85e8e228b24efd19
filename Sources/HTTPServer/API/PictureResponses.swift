import Foundation
import Synchronization
import Imaging
import Sessions

#if canImport(Glibc)
    import Glibc
#endif

// An encoded picture already keeps its bytes at a fixed address for its whole life, which is
// exactly what a zero-copy response needs: libmicrohttpd sends straight from the cache.
extension EncodedPicture: ByteStorage {}

/// Response headers and bodies for served pictures.
enum PictureResponses {
    /// 200 with the cached bytes themselves as the body (`.shared`: no copy, no encode here).
    static func picture(_ served: ServedPicture) -> HTTPResponse {
        let picture = served.picture
        var headers = HTTPHeaders()
        headers.add("Content-Type", picture.contentType)
        headers.add("ETag", served.etag)
        headers.add("Cache-Control", "no-cache")
        headers.add("Last-Modified", HTTPDate.string(served.decodedAt))
        headers.add("X-Frame-Seq", String(served.sequence))
        if let pts = served.pts { headers.add("X-Frame-PTS", String(pts)) }
        headers.add("X-Frame-Age-Ms", String(served.ageMilliseconds))
        headers.add("X-Frame-Keyframe", served.isKeyframe ? "true" : "false")
        headers.add("X-Frame-Width", String(picture.width))
        headers.add("X-Frame-Height", String(picture.height))
        if let pixelFormat = picture.pixelFormatName { headers.add("X-Frame-Pix-Fmt", pixelFormat) }
        headers.add("X-Decoder-Backend", served.backend.rawValue)
        return HTTPResponse(status: .ok, headers: headers, body: .shared(picture))
    }

    static func notModified(etag: String?) -> HTTPResponse {
        var headers = HTTPHeaders()
        if let etag { headers.add("ETag", etag) }
        headers.add("Cache-Control", "no-cache")
        return HTTPResponse(status: .notModified, headers: headers)
    }

    static func answer(_ result: Result<PictureAnswer, SessionError>) -> HTTPResponse {
        switch result {
        case .success(.picture(let served)): picture(served)
        case .success(.notModified(let etag)): notModified(etag: etag)
        case .failure(let error): .problem(HTTPError(error))
        }
    }

    /// Headers of one multipart/mixed part (the `POST .../nalus` answer), after Content-Type
    /// and Content-Length, which `Multipart.part` writes itself along with X-Frame-Seq.
    static func partHeaders(_ served: ServedPicture) -> [(String, String)] {
        let picture = served.picture
        var headers: [(String, String)] = [
            ("X-Frame-Width", String(picture.width)), ("X-Frame-Height", String(picture.height)),
        ]
        if let pixelFormat = picture.pixelFormatName { headers.append(("X-Frame-Pix-Fmt", pixelFormat)) }
        if let pts = served.pts { headers.append(("X-Frame-PTS", String(pts))) }
        headers.append(("X-Frame-Keyframe", served.isKeyframe ? "true" : "false"))
        return headers
    }
}

/// RFC 9110 IMF-fixdate, formatted by hand: no locale, no formatter object per request.
enum HTTPDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    static func string(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : String(value) }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
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
