/// A URL FrameTap is asked to pull from: its parts as the allow list judges them, and the form
/// that may be shown anywhere (status, events, logs, metrics) with its credentials left out.
public struct SourceURL: Sendable, Equatable, CustomStringConvertible {
    public enum Scheme: String, Sendable, CaseIterable {
        case rtsp, rtmp, srt, http, https
    }

    /// The URL as given (with any credentials): for libavformat only, never for display.
    public let text: String
    public let scheme: Scheme
    /// Lower case; an IPv6 address without its brackets.
    public let host: String
    /// The port the URL names, or the scheme's default (SRT has none: the URL must say).
    public let port: Int
    /// Path and query as given (`/` when empty).
    public let pathAndQuery: String
    public let hasCredentials: Bool
    /// `user:password` as the URL gives them (percent-encoded); for HTTP Basic, never for display.
    let userInfo: String?

    /// Query parameters whose values are credentials (SRT's passphrase, tokens in signed URLs).
    static let secretParameters: Set<String> = [
        "passphrase", "password", "pass", "pwd", "token", "access_token", "auth", "key", "secret", "sig", "signature",
        "streamid",
    ]

    public init(_ text: String) throws(ContainerError) {
        self.text = text
        guard text.utf8.count <= 4096 else { throw ContainerError(.invalidSource, "the URL is longer than 4096 bytes") }
        guard !text.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) else {
            throw ContainerError(.invalidSource, "the URL has spaces, control or non-ASCII characters (percent-encode them)")
        }
        guard let separator = text.firstRange(of: "://") else {
            throw ContainerError(.invalidSource, "the URL has no scheme (rtsp://, rtmp://, srt://, http://, https://)")
        }
        let schemeText = text[..<separator.lowerBound].lowercased()
        guard let scheme = Scheme(rawValue: schemeText) else {
            throw ContainerError(
                .invalidSource, "FrameTap pulls rtsp, rtmp, srt, http and https URLs, not \(schemeText.prefix(32))")
        }
        self.scheme = scheme
        let rest = text[separator.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        let path = String(rest[authorityEnd...].prefix { $0 != "#" })
        pathAndQuery = path.isEmpty ? "/" : (path.hasPrefix("?") ? "/" + path : path)
        if let at = authority.lastIndex(of: "@") {
            hasCredentials = true
            userInfo = String(authority[..<at])
            authority = authority[authority.index(after: at)...]
        } else {
            hasCredentials = false
            userInfo = nil
        }
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw ContainerError(.invalidSource, "an IPv6 host lacks its ']'") }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw ContainerError(.invalidSource, "unexpected text after the IPv6 host") }
                portText = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty else { throw ContainerError(.invalidSource, "the URL has no host") }
        guard host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":" || $0 == "_" || $0 == "%" })
        else { throw ContainerError(.invalidSource, "the host has characters no host name has") }
        self.host = host.lowercased()
        if let portText {
            guard let port = Int(portText), (1...65535).contains(port) else {
                throw ContainerError(.invalidSource, "the port must be 1...65535")
            }
            self.port = port
        } else {
            switch scheme {
            case .rtsp: port = 554
            case .rtmp: port = 1935
            case .http: port = 80
            case .https: port = 443
            case .srt: throw ContainerError(.invalidSource, "an srt:// URL must name its port")
            }
        }
    }

    /// The URL with its user name and password replaced by `***`, and the values of query
    /// parameters that carry secrets too.
    public var redacted: String {
        var query = ""
        var path = pathAndQuery
        if let mark = path.firstIndex(of: "?") {
            let parameters = path[path.index(after: mark)...].split(separator: "&", omittingEmptySubsequences: false)
            query = "?" + parameters.map { parameter -> String in
                guard let equals = parameter.firstIndex(of: "=") else { return String(parameter) }
                let name = parameter[..<equals].lowercased()
                return Self.secretParameters.contains(name) ? "\(parameter[..<equals])=***" : String(parameter)
            }.joined(separator: "&")
            path = String(path[..<mark])
        }
        let hostPart = host.contains(":") ? "[\(host)]" : host
        return "\(scheme.rawValue)://\(hasCredentials ? "***@" : "")\(hostPart):\(port)\(path)\(query)"
    }

    public var description: String { redacted }

    /// Resolves `reference` (a redirect's Location) against this URL.
    public func resolving(_ reference: String) throws(ContainerError) -> SourceURL {
        if reference.firstRange(of: "://") != nil { return try SourceURL(reference) }
        let hostPart = host.contains(":") ? "[\(host)]" : host
        let origin = "\(scheme.rawValue)://\(hostPart):\(port)"
        if reference.hasPrefix("//") { return try SourceURL("\(scheme.rawValue):\(reference)") }
        if reference.hasPrefix("/") { return try SourceURL(origin + reference) }
        let base = pathAndQuery.prefix { $0 != "?" }
        let directory = base.lastIndex(of: "/").map { base[...$0] } ?? "/"
        return try SourceURL(origin + directory + reference)
    }
}
