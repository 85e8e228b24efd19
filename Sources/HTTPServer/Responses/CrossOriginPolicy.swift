/// Which pages of other origins may read the server's answers (CORS, the Fetch standard): any
/// origin, or a list. A browser sends `Origin` with a cross-origin `fetch` or `EventSource`;
/// an answer to an allowed origin names it in `Access-Control-Allow-Origin` and exposes every
/// header (a page can read `ETag` and `X-Frame-Seq`), and a preflight `OPTIONS` is answered
/// 204 before routing and access control, as the standard requires (it carries no token).
/// Credentials (cookies) are never allowed: tokens go in `Authorization` or `access_token`.
public struct CrossOriginPolicy: Sendable, Equatable {
    /// `*`: every origin.
    public let allowsEveryOrigin: Bool
    /// Serialized origins (`https://dash.example.com`, `http://localhost:3000`), lower case.
    public let origins: Set<String>
    /// Origins of every subdomain of a host: `https://*.example.com` is `https://` and
    /// `.example.com` (any port written after it must match too).
    public let subdomainPatterns: [SubdomainPattern]

    public struct SubdomainPattern: Sendable, Equatable {
        let scheme: String
        let suffix: String
        let port: String
    }

    /// How long a browser may keep a preflight's answer.
    static let preflightMaxAgeSeconds = 600

    /// `list`: `*`, or origins separated by commas (`scheme://host[:port]`, scheme `http` or
    /// `https`, nothing after the authority). Throws a message naming the entry that is not one.
    public init(parsing list: String) throws(CrossOriginPolicyError) {
        let entries = list.split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty }
        guard !entries.isEmpty else { throw CrossOriginPolicyError("no origin listed") }
        var every = false
        var origins: Set<String> = []
        var patterns: [SubdomainPattern] = []
        for entry in entries {
            if entry == "*" {
                every = true
                continue
            }
            if let origin = Self.origin(entry), let star = origin.firstRange(of: "://*.") {
                let scheme = String(origin[..<star.lowerBound])
                let rest = origin[star.upperBound...]
                let host = rest.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
                let port = rest.contains(":") ? ":" + (rest.split(separator: ":", maxSplits: 1).last.map(String.init) ?? "") : ""
                guard !host.isEmpty, !host.contains("*") else { throw CrossOriginPolicyError("'\(entry)': a * stands only for subdomains, as https://*.example.com") }
                patterns.append(SubdomainPattern(scheme: scheme, suffix: "." + host, port: port))
                continue
            }
            guard let origin = Self.origin(entry), !origin.contains("*") else {
                let which = entries.count > 1 ? " ('\(entry)' is not)" : ""
                throw CrossOriginPolicyError(
                    "every entry must be * or an origin, scheme://host[:port] (http or https, no path)\(which)")
            }
            origins.insert(origin)
        }
        allowsEveryOrigin = every
        self.origins = every ? [] : origins
        subdomainPatterns = every ? [] : patterns
    }

    /// A list of header names as browsers send it (tokens, commas, spaces), and short: only
    /// such a value is echoed back.
    static func isHeaderNameList(_ value: String) -> Bool {
        guard !value.isEmpty, value.utf8.count <= 1024 else { return false }
        return value.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || "-_.!#$%&'*+^`|~, ".utf8.contains(byte)
        }
    }

    /// `entry` as the browser serializes an origin (lower case, no default port), or nil.
    private static func origin(_ entry: String) -> String? {
        let lower = entry.lowercased()
        let scheme: String
        if lower.hasPrefix("http://") {
            scheme = "http"
        } else if lower.hasPrefix("https://") {
            scheme = "https"
        } else {
            return nil
        }
        var authority = String(lower.dropFirst(scheme.count + 3))
        if authority.hasSuffix("/") { authority.removeLast() }
        guard !authority.isEmpty, !authority.contains(where: { "/?#@ ".contains($0) }) else { return nil }
        let defaultPort = scheme == "http" ? ":80" : ":443"
        if authority.hasSuffix(defaultPort) { authority.removeLast(defaultPort.count) }
        return "\(scheme)://\(authority)"
    }

    /// The request's `Origin` when this policy lets its page read the answer.
    func allowedOrigin(of request: HTTPRequest?) -> String? {
        guard let origin = request?.headers["Origin"] else { return nil }
        // `null` (a sandboxed frame, a file) is any origin's, never a listed one.
        if allowsEveryOrigin { return origin }
        let lower = origin.lowercased()
        if origin != "null", origins.contains(lower) || subdomainPatterns.contains(where: { $0.matches(lower) }) { return origin }
        return nil
    }

    /// Adds what lets an allowed origin's page read `headers`' answer. With `*` every answer
    /// says so, with or without `Origin`, so a cached answer to a plain request serves a page
    /// too; with a list, the answer depends on `Origin`, which `Vary` tells caches.
    func decorate(_ headers: inout HTTPHeaders, for request: HTTPRequest?) {
        if allowsEveryOrigin {
            headers.set("Access-Control-Allow-Origin", "*")
            headers.set("Access-Control-Expose-Headers", "*")
            return
        }
        headers.add("Vary", "Origin")
        guard let origin = allowedOrigin(of: request) else { return }
        headers.set("Access-Control-Allow-Origin", origin)
        headers.set("Access-Control-Expose-Headers", "*")
    }

    /// The answer to a preflight: an `OPTIONS` from an allowed origin asking for one of the
    /// route's methods. Nil for any other request (it is answered as it would be without CORS).
    func preflight(_ request: HTTPRequest, allowed: [HTTPMethod]) -> HTTPResponse? {
        guard request.method == .options, allowedOrigin(of: request) != nil,
            let asked = request.headers["Access-Control-Request-Method"], allowed.contains(HTTPMethod(asked))
        else { return nil }
        var headers = HTTPHeaders()
        headers.set("Access-Control-Allow-Methods", allowed.map(\.rawValue).joined(separator: ", "))
        // The request headers a page may send: what it asks for, as the standard lets a server
        // answer (the route's own checks still apply to the request itself).
        if let askedHeaders = request.headers["Access-Control-Request-Headers"], Self.isHeaderNameList(askedHeaders) {
            headers.set("Access-Control-Allow-Headers", askedHeaders)
        }
        headers.set("Access-Control-Max-Age", String(Self.preflightMaxAgeSeconds))
        headers.set("Cache-Control", "no-store")
        return HTTPResponse(status: .noContent, headers: headers)
    }
}

extension CrossOriginPolicy.SubdomainPattern {
    /// `origin` (lower case) is this scheme, a host name below the suffix (letters, digits,
    /// `-`, `_` and `.` only: `https://evil.com/.example.com` is no origin), and the same port.
    func matches(_ origin: String) -> Bool {
        guard origin.hasPrefix(scheme + "://") else { return false }
        let rest = origin.dropFirst(scheme.count + 3)
        let (host, originPort): (Substring, Substring) =
            if let colon = rest.lastIndex(of: ":"), !rest.hasPrefix("[") { (rest[..<colon], rest[colon...]) } else { (rest, "") }
        let isHostName = host.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x61...0x7A).contains(byte) || "-_.".utf8.contains(byte)
        }
        return isHostName && originPort == port && host.hasSuffix(suffix) && host.count > suffix.count
    }
}

public struct CrossOriginPolicyError: Error, Sendable {
    public let message: String
    init(_ message: String) { self.message = message }
}

extension Substring {
    fileprivate func trimmingSpaces() -> String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
