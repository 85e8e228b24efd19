import H264

/// An error of the session layer, as a value that carries the HTTP status it maps to.
///
/// The HTTP layer turns it into a problem+json body (`code.rawValue`, `status`, `message`) and
/// adds any headers itself (e.g. `Retry-After` from `retryAfterSeconds`); nothing here knows
/// about libmicrohttpd. Pipeline errors keep their `FrameTapError` code so clients see the
/// same stable strings everywhere.
public struct SessionError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable, Hashable {
        case invalidSessionID
        case sessionNotFound
        case tooManySessions
        case noFrameYet
        /// A second upload while one is in progress on the same session (see `Session.beginUpload`).
        case sessionBusy
        case bodyTooLarge
        /// The client went away before its upload ended.
        case uploadAborted
        case pipeline(FrameTapError.Code)

        public var rawValue: String {
            switch self {
            case .invalidSessionID: "invalid_session_id"
            case .sessionNotFound: "session_not_found"
            case .tooManySessions: "too_many_sessions"
            case .noFrameYet: "no_frame_yet"
            case .sessionBusy: "session_busy"
            case .bodyTooLarge: "body_too_large"
            case .uploadAborted: "upload_aborted"
            case .pipeline(let code): code.rawValue
            }
        }

        /// The HTTP status a response for this error carries.
        public var httpStatus: Int {
            switch self {
            case .invalidSessionID: 400
            case .sessionNotFound, .noFrameYet: 404
            case .sessionBusy: 409
            case .bodyTooLarge: 413
            case .tooManySessions: 503
            // The client's connection is gone; the status only shows up in logs and metrics.
            case .uploadAborted: 400
            case .pipeline(let code):
                switch code {
                case .invalidParameter: 400
                case .nalTooLarge: 413
                case .invalidData, .unsupportedStream, .pictureTooLarge, .noDecodablePicture: 422
                case .decoderUnavailable: 503
                case .allocationFailed, .encodeFailed, .ioError, .decoderFailure: 500
                }
            }
        }
    }

    public let code: Code
    public let message: String
    /// For `.tooManySessions`: when a slot is likely to free (the next idle eviction).
    public let retryAfterSeconds: Int?

    public init(_ code: Code, _ message: String, retryAfterSeconds: Int? = nil) {
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
    }

    public init(_ error: FrameTapError) {
        self.init(.pipeline(error.code), error.message)
    }

    public var httpStatus: Int { code.httpStatus }
    public var description: String { "\(code.rawValue): \(message)" }

    static func notFound(_ id: SessionID) -> SessionError {
        SessionError(.sessionNotFound, "no session '\(id)'")
    }
}
