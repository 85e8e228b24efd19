/// Answers a request whose body (if any) was collected in memory (`request.body`).
public typealias RequestHandler = @Sendable (HTTPRequest) throws(HTTPError) -> HTTPResponse

/// Answers a streamed upload. Runs as soon as the headers arrived, before the body: return the
/// sink the body goes to and the answer to send once the upload ended, usually
/// `.deferred { promise in ... }` completed by the sink's consumer. Throwing rejects the
/// upload before it starts (the client gets the problem and the connection is closed).
public typealias UploadHandler =
    @Sendable (HTTPRequest) throws(HTTPError) -> (sink: any RequestBodySink, answer: HTTPResponse)

/// Routes by method and path pattern, on the request's raw segments (each decoded on its own,
/// so an encoded `/` never splits one). Patterns are literal segments and `{name}` segments
/// that match one non-empty segment: "/sessions/{id}/frames.mjpeg". GET routes also answer
/// HEAD. Unknown paths get a 404 problem, known paths with another method a 405 with Allow.
/// A `.` or `..` segment may only be the value of a `{name}` segment (whose handler validates
/// it); anywhere else it is a 400, since a client or proxy that normalises paths means another one.
public struct Router: Sendable {
    public struct Route: Sendable {
        public let method: HTTPMethod
        public let pattern: String
        /// Exempt routes (e.g. /healthz) skip the bearer-token check.
        public let requiresAuth: Bool
        /// Largest accepted body; nil = unlimited (streamed routes only).
        public let maxBodyBytes: Int?
        let segments: [Segment]
        let action: Action
    }

    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    enum Action: Sendable {
        case buffered(RequestHandler)
        case streamed(UploadHandler)
    }

    enum Match {
        case found(Route, [String: String])
        case methodNotAllowed([HTTPMethod])
        case notFound
        case misplacedDotSegment
    }

    public private(set) var routes: [Route] = []

    public init() {}

    /// `maxBodyBytes` bounds the in-memory body (requests above it get 413 body_too_large).
    public mutating func add(
        _ method: HTTPMethod, _ pattern: String, maxBodyBytes: Int = 1 << 20, requiresAuth: Bool = true,
        _ handler: @escaping RequestHandler
    ) {
        routes.append(
            Route(
                method: method, pattern: pattern, requiresAuth: requiresAuth, maxBodyBytes: maxBodyBytes,
                segments: Self.parse(pattern), action: .buffered(handler)))
    }

    /// A route whose body is streamed, piece by piece as it arrives, to the sink its handler
    /// returns. `maxBodyBytes` is checked against an announced Content-Length before the body
    /// and against the bytes received while it arrives (413, sent at once).
    public mutating func addUpload(
        _ method: HTTPMethod, _ pattern: String, maxBodyBytes: Int? = nil, requiresAuth: Bool = true,
        _ handler: @escaping UploadHandler
    ) {
        routes.append(
            Route(
                method: method, pattern: pattern, requiresAuth: requiresAuth, maxBodyBytes: maxBodyBytes,
                segments: Self.parse(pattern), action: .streamed(handler)))
    }

    public mutating func get(_ pattern: String, requiresAuth: Bool = true, _ handler: @escaping RequestHandler) {
        add(.get, pattern, maxBodyBytes: 0, requiresAuth: requiresAuth, handler)
    }

    public mutating func post(
        _ pattern: String, maxBodyBytes: Int = 1 << 20, requiresAuth: Bool = true,
        _ handler: @escaping RequestHandler
    ) {
        add(.post, pattern, maxBodyBytes: maxBodyBytes, requiresAuth: requiresAuth, handler)
    }

    public mutating func delete(_ pattern: String, requiresAuth: Bool = true, _ handler: @escaping RequestHandler) {
        add(.delete, pattern, maxBodyBytes: 0, requiresAuth: requiresAuth, handler)
    }

    func match(method: HTTPMethod, segments parts: [String]) -> Match {
        var allowed: [HTTPMethod] = []
        for route in routes {
            guard let parameters = Self.bind(route.segments, to: parts) else { continue }
            if route.method == method || (method == .head && route.method == .get) {
                return .found(route, parameters)
            }
            allowed.append(route.method)
            if route.method == .get { allowed.append(.head) }
        }
        if allowed.isEmpty { return parts.contains(where: Self.isDotSegment) ? .misplacedDotSegment : .notFound }
        var unique: [HTTPMethod] = []
        for method in allowed where !unique.contains(method) { unique.append(method) }
        return .methodNotAllowed(unique)
    }

    private static func parse(_ pattern: String) -> [Segment] {
        split(pattern).map { part in
            if part.hasPrefix("{") && part.hasSuffix("}") && part.count > 2 {
                return .parameter(String(part.dropFirst().dropLast()))
            }
            return .literal(part)
        }
    }

    private static func split(_ path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    private static func bind(_ segments: [Segment], to parts: [String]) -> [String: String]? {
        guard segments.count == parts.count else { return nil }
        var parameters: [String: String] = [:]
        for (segment, part) in zip(segments, parts) {
            switch segment {
            case .literal(let literal): if literal != part { return nil }
            case .parameter(let name): parameters[name] = part
            }
        }
        return parameters
    }

    private static func isDotSegment(_ part: String) -> Bool { part == "." || part == ".." }
}
