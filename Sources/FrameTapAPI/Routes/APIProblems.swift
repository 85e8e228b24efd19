import HTTPServer
import Sessions

extension HTTPError {
    /// The problem for a session-layer error: its stable code, its status, its message, and
    /// `Retry-After` when the session layer knows when to come back.
    init(_ error: SessionError) {
        var headers: [String: String] = [:]
        if let seconds = error.retryAfterSeconds { headers["Retry-After"] = String(seconds) }
        if error.code == .shuttingDown { headers["Retry-After"] = "1" }
        self.init(
            status: Self.status(of: error.code), code: error.code.rawValue, detail: error.message, headers: headers,
            extensions: error.facts.mapValues { fact in
                switch fact {
                case .text(let text): .text(text)
                case .number(let number): .integer(Int64(clamping: number))
                }
            })
    }

    /// The one place a service error code meets its HTTP status.
    static func status(of code: SessionError.Code) -> HTTPStatus {
        switch code {
        case .invalidSessionID, .invalidParameter: .badRequest
        case .sessionNotFound, .noFrameYet, .notInHistory: .notFound
        case .sessionBusy, .pushTakenOver, .notPulling, .declaredSession: .conflict
        // Applied, but not kept: the operator must look at the state directory.
        case .stateNotSaved: .internalServerError
        case .tooManySessions, .shuttingDown, .catchUpQueueFull, .sourceNotReady: .serviceUnavailable
        // The client's connection is gone; the status only shows up in logs and metrics.
        case .uploadAborted: .badRequest
        case .tooManyPullSessions: .serviceUnavailable
        case .ingest(let code):
            switch code {
            case .bodyTooLarge, .spoolFull: .contentTooLarge
            case .spoolFailed: .internalServerError
            case .uploadEnded, .invalidChunkedEncoding: .badRequest
            case .contentTypeMismatch: .unsupportedMediaType
            case .bodyTimeout: HTTPStatus(408)
            }
        case .container(let code):
            switch code {
            case .unsupportedCodec: .unsupportedMediaType
            case .noVideoTrack, .invalidContainer, .containerNeedsSeeking: .unprocessableContent
            case .sourceNotAllowed: .forbidden
            case .invalidSource: .badRequest
            // What a pulled source did: shown in its status, never the answer to a request.
            case .sourceUnreachable, .sourceTimeout, .sourceUnauthorized, .sourceNotFound, .sourceFailed, .sourceEnded: 502
            }
        case .decoding(let code):
            switch code {
            case .invalidOptions: .badRequest
            case .nalTooLarge: .contentTooLarge
            case .invalidData, .unsupportedStream, .pictureTooLarge, .noDecodablePicture, .unknownCodec, .lengthPrefixedUnits:
                .unprocessableContent
            case .codecMismatch: .unsupportedMediaType
            // The budget is shared: the stream may fit once other sessions end.
            case .decoderUnavailable, .decoderMemoryExceeded: .serviceUnavailable
            case .allocationFailed, .decoderFailure: .internalServerError
            }
        case .imaging(let code):
            switch code {
            case .invalidOptions: .badRequest
            case .encodeFailed, .allocationFailed: .internalServerError
            }
        }
    }

    static func invalidParameter(_ detail: String) -> HTTPError {
        HTTPError(status: .badRequest, code: SessionError.Code.invalidParameter.rawValue, detail: detail)
    }
}

extension SessionID {
    /// The `{id}` path segment as a session id, or 400 invalid_session_id.
    static func fromPath(_ request: HTTPRequest) throws(HTTPError) -> SessionID {
        do {
            return try SessionID(request.pathParameters["id"] ?? "")
        } catch {
            throw HTTPError(error)
        }
    }
}

/// Typed access to query parameters; a present but malformed value is a 400
/// `invalid_parameter` naming the parameter, never silently ignored.
struct QueryReader {
    let query: QueryParameters

    init(_ request: HTTPRequest) { query = request.query }

    /// The parameter's one value, or nil when absent. A parameter FrameTap reads may appear
    /// once: two values (`?width=160&width=200`) are refused rather than one silently chosen.
    /// Parameters FrameTap does not read are ignored, so that a client may add its own (a
    /// cache buster, the console's `attempt`).
    func text(_ name: String) throws(HTTPError) -> String? {
        let values = query.values(name)
        guard values.count <= 1 else {
            throw .invalidParameter("\(name) is given \(values.count) times; give it once")
        }
        return values.first
    }

    func int(_ name: String, in range: ClosedRange<Int>) throws(HTTPError) -> Int? {
        guard let text = try text(name) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw .invalidParameter(
                "\(name) must be an integer \(range.lowerBound)...\(range.upperBound), got '\(text)'\(Self.spaceHint(text))")
        }
        return value
    }

    func unsigned(_ name: String) throws(HTTPError) -> UInt64? {
        guard let text = try text(name) else { return nil }
        guard let value = UInt64(text) else {
            throw .invalidParameter("\(name) must be a non-negative integer, got '\(text)'\(Self.spaceHint(text))")
        }
        return value
    }

    func double(_ name: String, in range: ClosedRange<Double>) throws(HTTPError) -> Double? {
        guard let text = try text(name) else { return nil }
        guard let value = Double(text), value.isFinite, range.contains(value) else {
            throw .invalidParameter(
                "\(name) must be a number \(range.lowerBound)...\(range.upperBound), got '\(text)'\(Self.spaceHint(text))")
        }
        return value
    }

    /// A number with a space in it most likely had a `+` (a space in a query) or an encoded one.
    private static func spaceHint(_ text: String) -> String {
        text.contains(" ") ? " (a '+' in a query is a space: write the number without a sign)" : ""
    }

    /// `true`/`1`/`yes` or `false`/`0`/`no`; a bare `?flush` means true.
    func bool(_ name: String) throws(HTTPError) -> Bool? {
        guard let text = try text(name) else { return nil }
        switch text.lowercased() {
        case "", "true", "1", "yes": return true
        case "false", "0", "no": return false
        default: throw .invalidParameter("\(name) must be true or false (or 1 or 0, yes or no), got '\(text)'")
        }
    }

    func oneOf<T: RawRepresentable>(_ name: String, _ type: T.Type) throws(HTTPError) -> T?
    where T.RawValue == String, T: CaseIterable {
        guard let text = try text(name) else { return nil }
        guard let value = T(rawValue: text) ?? T(rawValue: text.lowercased()) else {
            let allowed = T.allCases.map(\.rawValue).joined(separator: ", ")
            throw .invalidParameter("\(name) must be one of \(allowed), got '\(text)'")
        }
        return value
    }
}
