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
///
/// Every route is registered with an `Access` value that says what it needs from a client, and
/// there is no default: a route cannot be added without saying it. The server does not look
/// inside: after routing, before any body byte is read, it hands the value with the request to
/// the `RequestAuthorizer` it was started with (with none, every route is open). What the values
/// mean (no token, a scope, which parameter names the resource) is the application's, so this
/// stays HTTP only; a router whose routes need nothing of anyone can use `Void`.
public struct Router<Access: Sendable>: Sendable {
    public struct Route: Sendable {
        public let method: HTTPMethod
        public let pattern: String
        /// What the route needs, for the authorizer.
        public let access: Access
        /// Largest accepted body; nil = unlimited (streamed routes only).
        public let maxBodyBytes: Int?
        let segments: [RoutePatternSegment]
        let action: RouteAction
    }

    enum Match {
        case found(Route, [String: String])
        /// The path is a route's (`pattern`, the first that takes it), but not for this method.
        case methodNotAllowed([HTTPMethod], pattern: String)
        case notFound
        case misplacedDotSegment
    }

    public private(set) var routes: [Route] = []

    public init() {}

    /// `maxBodyBytes` bounds the in-memory body (requests above it get 413 body_too_large).
    public mutating func add(
        _ method: HTTPMethod, _ pattern: String, access: Access, maxBodyBytes: Int = 1 << 20,
        _ handler: @escaping RequestHandler
    ) {
        routes.append(
            Route(
                method: method, pattern: pattern, access: access, maxBodyBytes: maxBodyBytes,
                segments: Self.parse(pattern), action: .buffered(handler)))
    }

    /// A route whose body is streamed, piece by piece as it arrives, to the sink its handler
    /// returns. `maxBodyBytes` is checked against an announced Content-Length before the body
    /// and against the bytes received while it arrives (413, sent at once).
    public mutating func addUpload(
        _ method: HTTPMethod, _ pattern: String, access: Access, maxBodyBytes: Int? = nil,
        _ handler: @escaping UploadHandler
    ) {
        routes.append(
            Route(
                method: method, pattern: pattern, access: access, maxBodyBytes: maxBodyBytes,
                segments: Self.parse(pattern), action: .streamed(handler)))
    }

    public mutating func get(_ pattern: String, access: Access, _ handler: @escaping RequestHandler) {
        add(.get, pattern, access: access, maxBodyBytes: 0, handler)
    }

    public mutating func post(
        _ pattern: String, access: Access, maxBodyBytes: Int = 1 << 20, _ handler: @escaping RequestHandler
    ) {
        add(.post, pattern, access: access, maxBodyBytes: maxBodyBytes, handler)
    }

    public mutating func delete(_ pattern: String, access: Access, _ handler: @escaping RequestHandler) {
        add(.delete, pattern, access: access, maxBodyBytes: 0, handler)
    }

    /// The same routes with each access value replaced (the server binds them to its authorizer).
    func mapAccess<Other: Sendable>(_ transform: (Access) -> Other) -> Router<Other> {
        var mapped = Router<Other>()
        mapped.routes = routes.map { route in
            Router<Other>.Route(
                method: route.method, pattern: route.pattern, access: transform(route.access),
                maxBodyBytes: route.maxBodyBytes, segments: route.segments, action: route.action)
        }
        return mapped
    }

    func match(method: HTTPMethod, segments parts: [String]) -> Match {
        var allowed: [HTTPMethod] = []
        var pattern: String?
        for route in routes {
            guard let parameters = Self.bind(route.segments, to: parts) else { continue }
            if route.method == method || (method == .head && route.method == .get) {
                return .found(route, parameters)
            }
            if pattern == nil { pattern = route.pattern }
            allowed.append(route.method)
            if route.method == .get { allowed.append(.head) }
        }
        guard let pattern else { return parts.contains(where: Self.isDotSegment) ? .misplacedDotSegment : .notFound }
        var unique: [HTTPMethod] = []
        for method in allowed where !unique.contains(method) { unique.append(method) }
        return .methodNotAllowed(unique, pattern: pattern)
    }

    /// The route `request` takes, and the request as that route's authorizer and handler see it
    /// (its pattern and `{name}` values filled in); nil when no route takes it. What the server
    /// does before it authorizes, for an application that checks its routes without a socket.
    public func routed(_ request: HTTPRequest) -> (route: Route, request: HTTPRequest)? {
        guard case .found(let route, let parameters) = match(method: request.method, segments: request.segments) else {
            return nil
        }
        var routed = request
        routed.take(route: route.pattern, parameters: parameters)
        return (route, routed)
    }

    private static func parse(_ pattern: String) -> [RoutePatternSegment] {
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

    private static func bind(_ segments: [RoutePatternSegment], to parts: [String]) -> [String: String]? {
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

/// One segment of a route pattern (outside `Router`, which is generic over what its routes need).
enum RoutePatternSegment: Sendable, Equatable {
    case literal(String)
    case parameter(String)
}

/// What a route does with its request: answer it once its body is in memory, or stream the body.
enum RouteAction: Sendable {
    case buffered(RequestHandler)
    case streamed(UploadHandler)
}
