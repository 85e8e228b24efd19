import HTTPServer

/// What a route needs from a bearer token. Each route declares it where it is registered
/// (`FrameTapAPI.router()`, `Console.register`): the router takes no route without one. The HTTP
/// server keeps it with the route, unread, and after routing, before any body byte is read,
/// hands it with the request to `AccessControl` (its `RequestAuthorizer`), which turns it into
/// a `Need` for this request and decides.
public enum RoutePermission: Sendable, Equatable {
    /// No token: the answer is the same for everyone and holds no data (/healthz, the console's
    /// files; the console page must load to show its sign-in box).
    case `public`
    /// `view` of the session the parameter names: its status, pictures, MJPEG.
    case view(SessionParameter)
    /// `push` to the session the parameter names, which creates it.
    case push(SessionParameter)
    /// Admin alone: the session list, configuring or deleting a session, /metrics, /system.
    case admin
    /// Admin, unless the request narrows itself to one session with the parameter: then `view`
    /// of that session (`GET /events` is every session's events, `GET /events?session=ID` one's).
    case adminUnlessNarrowed(to: SessionParameter)

    /// Where a request names the session a permission is about.
    public enum SessionParameter: Sendable, Equatable {
        /// A `{name}` segment of the route's pattern.
        case path(String)
        /// A query parameter.
        case query(String)

        func value(in request: HTTPRequest) -> String? {
            switch self {
            case .path(let name): request.pathParameters[name]
            case .query(let name): request.query[name]
            }
        }
    }

    /// What this request needs, or nil when it needs no token. A session parameter that a
    /// view or push request lacks (a pattern without it) needs admin: refused, never opened.
    func need(of request: HTTPRequest) -> AccessControl.Need? {
        switch self {
        case .public: nil
        case .admin: .admin
        case .view(let parameter): parameter.value(in: request).map { .view(session: $0) } ?? .admin
        case .push(let parameter): parameter.value(in: request).map { .push(session: $0) } ?? .admin
        case .adminUnlessNarrowed(let parameter): parameter.value(in: request).map { .view(session: $0) } ?? .admin
        }
    }
}

extension AccessControl {
    /// `tenant(presenting:)` of the bearer token `request` presents.
    public func tenant(of request: HTTPRequest) -> String? {
        guard case .bearer(let token) = PresentedToken(request) else { return nil }
        return tenant(presenting: token)
    }
}

/// Access control as the HTTP server's authorizer: the route's permission, the token the
/// request presents, and the HTTP answer to a refusal.
extension AccessControl: RequestAuthorizer {
    public func authorize(_ request: HTTPRequest, access permission: RoutePermission) -> HTTPError? {
        guard let need = permission.need(of: request) else { return nil }
        let token: String?
        switch PresentedToken(request) {
        case .none:
            if request.query["access_token"] != nil {
                // Only GET and HEAD take a token from the query (see PresentedToken).
                return .unauthorized(
                    invalidToken: false,
                    detail: "A bearer token is required in the Authorization header; access_token in the query is for GET and HEAD only.",
                    realm: Self.realm)
            }
            token = nil
        case .malformed: return .unauthorized(invalidToken: true, detail: "The Authorization header is not 'Bearer <token>'.", realm: Self.realm)
        case .otherScheme(let scheme):
            // No bearer credentials at all: the challenge names no error (RFC 6750 §3.1).
            let named = scheme.isEmpty ? "an Authorization header of no known scheme" : "'\(scheme)' credentials"
            return .unauthorized(
                invalidToken: false,
                detail: "The request carries \(named), not a bearer token: send Authorization: Bearer <token>, "
                    + "or ?access_token=<token> on GET and HEAD (other credentials are ignored then).",
                realm: Self.realm)
        case .ambiguous: return .ambiguousToken(realm: Self.realm)
        case .bearer(let presented): token = presented
        }
        switch decide(token: token, need: need) {
        case .allowed: return nil
        case .missingToken: return .unauthorized(invalidToken: false, realm: Self.realm)
        case .invalidToken(let reason): return .unauthorized(invalidToken: true, detail: "The bearer token is not valid: \(reason).", realm: Self.realm)
        case .forbidden(let reason): return .forbidden("This token does not allow it: \(reason).", realm: Self.realm)
        }
    }
}
