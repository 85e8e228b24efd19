/// Decides whether a request may go on, after routing and before any body byte is read, from
/// what its route was registered to need (`Router`'s `Access`). Returns nil to let it through,
/// or the problem to answer (401 `unauthorized` with a `WWW-Authenticate` challenge, 403
/// `forbidden`).
public protocol RequestAuthorizer<Access>: Sendable {
    associatedtype Access: Sendable
    func authorize(_ request: HTTPRequest, access: Access) -> HTTPError?
}

/// The bearer token a request carries (RFC 6750): the `Authorization: Bearer` header, or, on
/// GET and HEAD only, the `access_token` query parameter. Browsers cannot add a header to
/// `<img src>` or to an EventSource, hence the query; it puts the token in URLs (logs,
/// history), which is why it is limited to read-only methods.
public enum PresentedToken: Sendable, Equatable {
    case none
    /// An Authorization header of the Bearer scheme without a token.
    case malformed
    /// Only credentials of another scheme (`Basic`, which tools that know only user and
    /// password send with every request): not a bearer token, neither counted as one nor
    /// standing in the way of `access_token`.
    case otherScheme(String)
    /// More than one token: two Authorization headers, two `access_token` parameters, or one of
    /// each. RFC 6750 §2 allows one way per request; which one a server took would depend on
    /// the order, which a proxy in between may change or add to.
    case ambiguous
    case bearer(String)

    public init(_ request: HTTPRequest) {
        let readsQuery = request.method == .get || request.method == .head
        // Scheme and credentials are split at the first space or tab; a value that starts with
        // "bearer" is taken for a bearer credential whatever follows (never for another scheme).
        let headers = request.headers.values("Authorization").map {
            $0.split(maxSplits: 1, omittingEmptySubsequences: true, whereSeparator: { $0 == " " || $0 == "\t" })
        }
        let bearerHeaders = headers.filter { $0.first?.lowercased().hasPrefix("bearer") == true }
        let queryTokens = readsQuery ? request.query.values("access_token") : []
        if bearerHeaders.count + queryTokens.count > 1 {
            self = .ambiguous
        } else if let header = bearerHeaders.first {
            let token = header.count == 2 && header[0].lowercased() == "bearer" ? String(header[1]).trimmingSpaces() : ""
            self = token.isEmpty ? .malformed : .bearer(token)
        } else if let token = queryTokens.first {
            self = .bearer(token)
        } else if let other = headers.first {
            // Only a plain scheme name is kept (it is shown back): never a credential.
            let scheme = other.first.map(String.init) ?? ""
            let plain = scheme.count <= 16 && scheme.allSatisfy { $0.isASCII && ($0.isLetter || $0 == "-") }
            self = .otherScheme(plain ? scheme : "")
        } else {
            self = .none
        }
    }
}

extension HTTPError {
    /// 401. `invalidToken` distinguishes "no credentials" from "wrong credentials" in the
    /// WWW-Authenticate challenge (RFC 6750 section 3); `detail` says what was wrong; `realm`
    /// names the protected space (the service's name, say).
    public static func unauthorized(invalidToken: Bool, detail: String? = nil, realm: String) -> HTTPError {
        let challenge = invalidToken
            ? #"Bearer realm="\#(realm)", error="invalid_token""# : #"Bearer realm="\#(realm)""#
        return HTTPError(
            status: .unauthorized, code: "unauthorized",
            detail: detail ?? (invalidToken ? "The bearer token is not valid." : "A bearer token is required."),
            headers: ["WWW-Authenticate": challenge])
    }

    /// 400 `invalid_parameter` (RFC 6750's `invalid_request`): the request presents more than
    /// one token (`PresentedToken.ambiguous`).
    public static func ambiguousToken(realm: String) -> HTTPError {
        HTTPError(
            status: .badRequest, code: "invalid_parameter",
            detail: "The request carries more than one bearer token (Authorization headers, access_token parameters): send one.",
            headers: ["WWW-Authenticate": #"Bearer realm="\#(realm)", error="invalid_request""#])
    }

    /// 403: the token is valid but does not allow this request.
    public static func forbidden(_ detail: String, realm: String) -> HTTPError {
        HTTPError(
            status: .forbidden, code: "forbidden", detail: detail,
            headers: ["WWW-Authenticate": #"Bearer realm="\#(realm)", error="insufficient_scope""#])
    }
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        var view = Substring(self)
        while view.first == " " || view.first == "\t" { view = view.dropFirst() }
        while view.last == " " || view.last == "\t" { view = view.dropLast() }
        return String(view)
    }
}
