/// A URL FrameTap is asked to pull from, parsed once into the parts the allow list judges
/// (scheme, host, port) and the rest (credentials, path, query). What is opened is rebuilt from
/// these parts (`openedText`), never the text the client sent, so the host and port that were
/// checked are the ones connected to: a host may not hold a colon unless it is a bracketed IPv6
/// address, a port is digits only, and nothing is left for another parser to read differently
/// (the differential fuzz target `source-url` holds this against libavformat's `av_url_split`).
///
/// Shown anywhere (status, events, logs, metrics, errors), a URL is `redacted`.
public struct SourceURL: Sendable, Equatable, CustomStringConvertible {
    public let scheme: PullScheme
    /// Lower case; an IPv6 address without its brackets.
    public let host: String
    /// The port the URL names, or the scheme's default.
    public let port: Int
    /// The path, `/` when the URL has none; as given (percent escapes kept).
    public let path: String
    /// What follows the `?`, as given; nil without one.
    public let query: String?
    /// `user:password` as the URL gives them (percent-encoded); for the protocol's
    /// authentication only, never for display.
    let userInfo: String?

    public var hasCredentials: Bool { userInfo != nil }

    /// Path and query (`/` when both are empty).
    public var pathAndQuery: String { query.map { "\(path)?\($0)" } ?? path }

    /// DNS names are at most 253 bytes; libavformat keeps at most 255 of a host (its RTMP
    /// protocol) and would connect to a cut one.
    static let maxHostBytes = 253

    /// The longest URL, as given and as opened (which adds the default port, a `/` before a
    /// query, or brackets).
    static let maxBytes = 4096

    public init(_ text: String) throws(ContainerError) {
        guard text.utf8.count <= Self.maxBytes else {
            throw ContainerError(.invalidSource, "the URL is longer than \(Self.maxBytes) bytes")
        }
        guard !text.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) else {
            throw ContainerError(.invalidSource, "the URL has spaces, control or non-ASCII characters (percent-encode them)")
        }
        guard let separator = text.firstRange(of: "://") else {
            throw ContainerError(.invalidSource, "the URL has no scheme (\(PullScheme.all.map { "\($0.name)://" }.joined(separator: ", ")))")
        }
        let schemeText = text[..<separator.lowerBound]
        guard let scheme = PullScheme(named: schemeText) else {
            throw ContainerError(.invalidSource, "FrameTap pulls \(PullScheme.names) URLs, not \(schemeText.lowercased().prefix(32))")
        }
        let rest = text[separator.upperBound...]
        // The authority ends where libavformat's ends: at the first '/', '?' or '#'.
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        var userInfo: String?
        if let at = authority.lastIndex(of: "@") {
            // An empty one is none (libavformat sends nothing for it).
            if at > authority.startIndex { userInfo = String(authority[..<at]) }
            authority = authority[authority.index(after: at)...]
        }
        let hostText: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw ContainerError(.invalidSource, "an IPv6 host lacks its ']'") }
            hostText = authority[authority.index(after: authority.startIndex)..<close]
            guard let address = IPAddress(String(hostText)), address.bytes.count == 16 else {
                throw ContainerError(.invalidSource, "between '[' and ']' only an IPv6 address may stand")
            }
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw ContainerError(.invalidSource, "unexpected text after the IPv6 host") }
                portText = after.dropFirst()
            }
        } else {
            let colon = authority.firstIndex(of: ":")
            hostText = authority[..<(colon ?? authority.endIndex)]
            if let colon { portText = authority[authority.index(after: colon)...] }
            // A second colon would be read as part of the host by one parser and as the port's
            // separator by another: only a bracketed IPv6 address holds colons.
            guard portText?.contains(":") != true else {
                throw ContainerError(.invalidSource, "the host holds a colon: only a bracketed IPv6 address ([::1]) may")
            }
            guard !hostText.isEmpty else { throw ContainerError(.invalidSource, "the URL has no host") }
            guard hostText.utf8.count <= Self.maxHostBytes else {
                throw ContainerError(.invalidSource, "the host is longer than \(Self.maxHostBytes) bytes")
            }
            guard hostText.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_") }) else {
                throw ContainerError(.invalidSource, "the host has characters no host name has")
            }
        }
        let port: Int
        if let portText {
            guard (1...5).contains(portText.count), portText.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Int(portText),
                (1...65535).contains(number)
            else { throw ContainerError(.invalidSource, "the port must be 1...65535, in digits") }
            port = number
        } else {
            guard let defaultPort = scheme.defaultPort else {
                throw ContainerError(.invalidSource, "an \(scheme.name):// URL must name its port")
            }
            port = defaultPort
        }
        // A fragment is the client's own business: it is never sent.
        let tail = rest[authorityEnd...].prefix { $0 != "#" }
        let query = tail.firstIndex(of: "?").map { String(tail[tail.index(after: $0)...]) }
        let path = String(tail.prefix { $0 != "?" })
        try self.init(
            scheme: scheme, host: hostText.lowercased(), port: port, path: path.isEmpty ? "/" : path, query: query,
            userInfo: userInfo)
    }

    private init(
        scheme: PullScheme, host: String, port: Int, path: String, query: String?, userInfo: String?
    ) throws(ContainerError) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = path
        self.query = query
        self.userInfo = userInfo
        // What is opened, saved and read back must be accepted again.
        guard openedText().utf8.count <= Self.maxBytes else {
            throw ContainerError(
                .invalidSource, "the URL is longer than \(Self.maxBytes) bytes once its port and path are written out")
        }
        try scheme.check(self)
    }

    /// The host as a URL writes it: an IPv6 address in brackets.
    var hostInURL: String { host.contains(":") ? "[\(host)]" : host }

    /// The URL libavformat opens, built from the checked parts (with the credentials, which it
    /// sends to authenticate: for libavformat, a saved definition and `frametap sync`'s `PUT`,
    /// never for display; it reads back as this URL); `host` and `port`
    /// replace the URL's own when FrameTap connects libavformat somewhere else first (the RTSP
    /// relay).
    public func openedText(host: String? = nil, port: Int? = nil) -> String {
        let hostPart = host.map { $0.contains(":") ? "[\($0)]" : $0 } ?? hostInURL
        return "\(scheme.name)://\(userInfo.map { "\($0)@" } ?? "")\(hostPart):\(port ?? self.port)\(pathAndQuery)"
    }

    /// The URL with its credentials replaced by `***`: the user name and password, and the
    /// values of secret parameters in the path, the query and `;` parameters (`URLRedaction`).
    public var redacted: String {
        URLRedaction.redact(openedText(), secretParameters: scheme.secretParameters)
    }

    public var description: String { redacted }

    /// The query's `name=value` pairs, in order (a name without `=` has an empty value).
    var queryParameters: [(name: String, value: String)] {
        guard let query else { return [] }
        return query.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }
    }

    /// Resolves `reference` (a redirect's Location) against this URL.
    public func resolving(_ reference: String) throws(ContainerError) -> SourceURL {
        if reference.firstRange(of: "://") != nil { return try SourceURL(reference) }
        let origin = "\(scheme.name)://\(hostInURL):\(port)"
        if reference.hasPrefix("//") { return try SourceURL("\(scheme.name):\(reference)") }
        if reference.hasPrefix("/") { return try SourceURL(origin + reference) }
        let directory = path.lastIndex(of: "/").map { path[...$0] } ?? "/"
        return try SourceURL(origin + directory + reference)
    }
}
