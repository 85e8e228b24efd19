/// An HTTP method as the client sent it (upper case for the standard ones).
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static let get = HTTPMethod("GET")
    public static let head = HTTPMethod("HEAD")
    public static let post = HTTPMethod("POST")
    public static let put = HTTPMethod("PUT")
    public static let patch = HTTPMethod("PATCH")
    public static let delete = HTTPMethod("DELETE")
    public static let options = HTTPMethod("OPTIONS")
}

/// A response status code. Integer literals work: `let status: HTTPStatus = 204`.
public struct HTTPStatus: RawRepresentable, Hashable, Sendable, ExpressibleByIntegerLiteral,
    CustomStringConvertible
{
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public init(_ code: Int) { self.rawValue = code }
    public init(integerLiteral value: Int) { self.rawValue = value }
    public var code: Int { rawValue }
    public var description: String { String(rawValue) }

    public static let ok: HTTPStatus = 200
    public static let created: HTTPStatus = 201
    public static let accepted: HTTPStatus = 202
    public static let noContent: HTTPStatus = 204
    public static let notModified: HTTPStatus = 304
    public static let badRequest: HTTPStatus = 400
    public static let unauthorized: HTTPStatus = 401
    public static let forbidden: HTTPStatus = 403
    public static let notFound: HTTPStatus = 404
    public static let methodNotAllowed: HTTPStatus = 405
    public static let conflict: HTTPStatus = 409
    public static let contentTooLarge: HTTPStatus = 413
    public static let unsupportedMediaType: HTTPStatus = 415
    public static let unprocessableContent: HTTPStatus = 422
    public static let tooManyRequests: HTTPStatus = 429
    public static let internalServerError: HTTPStatus = 500
    public static let serviceUnavailable: HTTPStatus = 503
    public static let gatewayTimeout: HTTPStatus = 504

    /// The standard reason phrase, used as the default problem title.
    public var reasonPhrase: String {
        switch rawValue {
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 415: "Unsupported Media Type"
        case 417: "Expectation Failed"
        case 422: "Unprocessable Content"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status \(rawValue)"
        }
    }
}

/// Header fields in arrival order. Lookup ignores ASCII case, as HTTP requires.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var fields: [(name: String, value: String)] = []

    public init() {}
    public init(_ fields: [(String, String)]) {
        self.fields = fields.map { (name: $0.0, value: $0.1) }
    }
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The first value of `name`, or nil.
    public subscript(name: String) -> String? {
        fields.first { Self.namesEqual($0.name, name) }?.value
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { Self.namesEqual($0.name, name) }.map(\.value)
    }

    public func contains(_ name: String) -> Bool { self[name] != nil }

    public mutating func add(_ name: String, _ value: String) {
        fields.append((name: name, value: value))
    }

    /// Replaces every value of `name` with one.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        add(name, value)
    }

    public mutating func remove(_ name: String) {
        fields.removeAll { Self.namesEqual($0.name, name) }
    }

    public var isEmpty: Bool { fields.isEmpty }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    static func namesEqual(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a.lowercased() == b.lowercased()
    }
}

/// Decoded query parameters (libmicrohttpd already percent-decodes and turns '+' into ' ').
public struct QueryParameters: Sendable, Sequence {
    public private(set) var pairs: [(name: String, value: String)]

    public init(_ pairs: [(String, String)] = []) {
        self.pairs = pairs.map { (name: $0.0, value: $0.1) }
    }

    /// The first value of `name` (names are case-sensitive), or nil.
    public subscript(name: String) -> String? { pairs.first { $0.name == name }?.value }

    public func values(_ name: String) -> [String] { pairs.filter { $0.name == name }.map(\.value) }

    public var isEmpty: Bool { pairs.isEmpty }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        pairs.makeIterator()
    }
}

/// One request as a handler sees it.
public struct HTTPRequest: Sendable {
    public let method: HTTPMethod
    /// The path's segments, each percent-decoded on its own (so a `/` inside one stays there).
    public let segments: [String]
    /// The segments joined with `/`, for messages and logs; routing uses `segments`.
    public var path: String { "/" + segments.joined(separator: "/") }
    public let query: QueryParameters
    public let headers: HTTPHeaders
    /// `HTTP/1.1`, `HTTP/1.0`.
    public let version: String
    /// Values of the `{name}` segments of the matched route pattern.
    public internal(set) var pathParameters: [String: String] = [:]
    /// The matched route pattern (e.g. "/sessions/{id}"), nil when no route matched.
    public internal(set) var route: String?
    /// The whole body for routes with a buffered body; empty for streamed uploads.
    public internal(set) var body: [UInt8] = []

    public init(
        method: HTTPMethod, segments: [String], query: QueryParameters = QueryParameters(),
        headers: HTTPHeaders = HTTPHeaders(), version: String = "HTTP/1.1"
    ) {
        self.method = method
        self.segments = segments
        self.query = query
        self.headers = headers
        self.version = version
    }

    /// A request for `target` (a path with an optional query), parsed as the server parses one.
    public init(method: HTTPMethod, target: String, headers: HTTPHeaders = HTTPHeaders()) throws(RequestTargetError) {
        let parsed = try RequestTarget.parse(target)
        self.init(method: method, segments: parsed.segments, query: parsed.query, headers: headers)
    }

    /// The route pattern that matched, with the values of its `{name}` segments.
    mutating func take(route pattern: String, parameters: [String: String]) {
        route = pattern
        pathParameters = parameters
    }

    /// The Content-Length the client announced, if any.
    public var contentLength: Int? { headers["Content-Length"].flatMap { Int($0) } }

    /// True when a body follows the headers (a positive Content-Length or chunked encoding).
    public var hasBody: Bool {
        if let contentLength { return contentLength > 0 }
        return headers["Transfer-Encoding"]?.lowercased().contains("chunked") ?? false
    }
}
