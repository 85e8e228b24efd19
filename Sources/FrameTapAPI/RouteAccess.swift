import HTTPServer

/// What each route needs from a token, and the HTTP answer to a refusal: access control as the
/// HTTP server's `RequestAuthorizer`. Decided after routing, before any body byte is read.
/// Routes registered with `requiresAuth: false` (/healthz, the console's files) never get here.
extension AccessControl: RequestAuthorizer {
    public func authorize(_ request: HTTPRequest) -> HTTPError? {
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
        case .bearer(let presented): token = presented
        }
        switch decide(token: token, need: Self.need(of: request)) {
        case .allowed: return nil
        case .missingToken: return .unauthorized(invalidToken: false, realm: Self.realm)
        case .invalidToken(let reason): return .unauthorized(invalidToken: true, detail: "The bearer token is not valid: \(reason).", realm: Self.realm)
        case .forbidden(let reason): return .forbidden("This token does not allow it: \(reason).", realm: Self.realm)
        }
    }

    /// Pushing to a session needs `push` on it; reading one session (pictures, MJPEG, status, its
    /// events) needs `view` on it; everything else (the list, configuring or deleting a session,
    /// /metrics, /system, every session's events) is `admin`.
    static func need(of request: HTTPRequest) -> Need {
        let route = request.route ?? request.path
        if let session = request.pathParameters["id"] {
            if route.hasSuffix("/nalus") { return .push(session: session) }
            if request.method == .get || request.method == .head { return .view(session: session) }
            return .admin
        }
        if route == "/events", let session = request.query["session"] { return .view(session: session) }
        return .admin
    }
}
