/// An error that knows its HTTP answer. Thrown by handlers (and produced by the server for
/// routing, auth and body-limit failures); always sent as `application/problem+json`
/// (RFC 9457) with a stable machine-readable `code`.
public struct HTTPError: Error, Sendable, Equatable, CustomStringConvertible {
    public var status: HTTPStatus
    /// Stable snake_case code clients match on; never change an existing one.
    public var code: String
    public var title: String
    public var detail: String?
    /// Extra response headers, e.g. Allow, Retry-After, WWW-Authenticate.
    public var headers: [String: String]
    /// Extra members merged into the problem object, e.g. ["max_body_bytes": .integer(1048576)].
    public var extensions: [String: ProblemMember]

    public init(
        status: HTTPStatus, code: String, title: String? = nil, detail: String? = nil,
        headers: [String: String] = [:], extensions: [String: ProblemMember] = [:]
    ) {
        self.status = status
        self.code = code
        self.title = title ?? status.reasonPhrase
        self.detail = detail
        self.headers = headers
        self.extensions = extensions
    }

    public var description: String { "\(status.code) \(code)" + (detail.map { ": \($0)" } ?? "") }

    public static func notFound(_ detail: String? = nil) -> HTTPError {
        HTTPError(status: .notFound, code: "not_found", detail: detail)
    }

    public static func methodNotAllowed(allowed: [HTTPMethod]) -> HTTPError {
        let allow = allowed.map(\.rawValue).joined(separator: ", ")
        return HTTPError(
            status: .methodNotAllowed, code: "method_not_allowed",
            detail: "Allowed methods: \(allow)", headers: ["Allow": allow])
    }

    public static func badRequest(_ detail: String, code: String = "bad_request") -> HTTPError {
        HTTPError(status: .badRequest, code: code, detail: detail)
    }

    public static func bodyTooLarge(limit: Int) -> HTTPError {
        HTTPError(
            status: .contentTooLarge, code: "body_too_large",
            detail: "The request body exceeds \(limit) bytes.",
            extensions: ["max_body_bytes": .integer(Int64(limit))])
    }

    /// A body that went too slowly: less than `minimumBytes` arrived within `within`.
    public static func bodyTimeout(minimumBytes: Int, within: Duration) -> HTTPError {
        HTTPError(
            status: HTTPStatus(408), code: "body_timeout",
            detail: "The request body delivered less than \(minimumBytes) bytes in \(within.components.seconds) s.",
            headers: ["Connection": "close"])
    }

    public static func shuttingDown() -> HTTPError {
        HTTPError(
            status: .serviceUnavailable, code: "shutting_down",
            detail: "The server is shutting down.", headers: ["Retry-After": "1", "Connection": "close"])
    }

    public static func internalError(_ detail: String? = nil) -> HTTPError {
        HTTPError(status: .internalServerError, code: "internal_error", detail: detail)
    }

    /// The problem+json body. Hand-written so member order is stable and no Foundation
    /// encoder runs on an MHD thread. `type` (RFC 9457) is `typePrefix` followed by the code,
    /// e.g. "urn:example:problem:not_found"; without a prefix it is left out, which RFC 9457
    /// reads as "about:blank" (the status says it all; `code` still tells problems apart).
    public func problemJSON(typePrefix: String?) -> [UInt8] {
        var members: [(String, String)] = []
        if let typePrefix { members.append(("type", JSONString.quoted(typePrefix + code))) }
        members += [("title", JSONString.quoted(title)), ("status", String(status.code))]
        if let detail { members.append(("detail", JSONString.quoted(detail))) }
        members.append(("code", JSONString.quoted(code)))
        for key in extensions.keys.sorted() where !["type", "title", "status", "detail", "code"].contains(key) {
            members.append((key, extensions[key]?.json ?? "null"))
        }
        let body = members.map { "\(JSONString.quoted($0.0)):\($0.1)" }.joined(separator: ",")
        return Array("{\(body)}\n".utf8)
    }
}

/// A member a problem adds to the standard ones (RFC 9457 §3.2): text, or a whole number, which
/// is written as a JSON number so that a client reads it as it reads the same fact elsewhere.
public enum ProblemMember: Sendable, Equatable, ExpressibleByStringLiteral, CustomStringConvertible {
    case text(String)
    case integer(Int64)

    public init(stringLiteral value: String) {
        self = .text(value)
    }

    public var description: String {
        switch self {
        case .text(let text): text
        case .integer(let number): String(number)
        }
    }

    var json: String {
        switch self {
        case .text(let text): JSONString.quoted(text)
        case .integer(let number): String(number)
        }
    }
}

/// Minimal JSON string quoting (RFC 8259 section 7). What it writes is also a YAML
/// double-quoted scalar of the same text: YAML 1.2 reads JSON's escapes alike (§5.7).
public enum JSONString {
    public static func quoted(_ string: String) -> String {
        var out = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let s where s.value < 0x20:
                let hex = String(s.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
