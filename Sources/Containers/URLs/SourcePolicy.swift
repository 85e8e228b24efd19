#if canImport(Glibc)
    import Glibc
#endif

/// Which sources FrameTap may pull from (`--allow-sources`): a server that connects wherever a
/// client says is a request-forgery risk (internal services, cloud metadata endpoints), so
/// pulling is off unless this names schemes and hosts.
///
/// Entries, comma-separated, each `SCHEME://HOST[:PORT]`:
/// - SCHEME: a pull scheme's name (`PullScheme.all`: `rtsp`, `rtmp`, `srt`, `http`, `https`),
///   or `*` for any of them;
/// - HOST: a name (`camera1.example.com`), a name suffix (`*.cams.example.com`), an address
///   (`192.168.1.20`, `[fd00::20]`), a network (`10.0.0.0/8`, `[fd00::]/8`), or `*` for any host;
/// - PORT: only that port (default: any).
///
/// A URL is allowed when an entry matches its scheme, host and port. An address or network
/// entry also matches a host name whose every address lies inside it (resolved when checked;
/// see README "Pull sources" for what DNS can still do in between).
public struct SourcePolicy: Sendable, Equatable {
    public struct Entry: Sendable, Equatable, CustomStringConvertible {
        public var scheme: PullScheme?
        public var host: HostPattern
        public var port: Int?
        public let description: String
    }

    public enum HostPattern: Sendable, Equatable {
        case any
        case name(String)
        /// `*.example.com`: stored as `.example.com`.
        case suffix(String)
        case network(IPNetwork)
    }

    public let entries: [Entry]

    /// No entries: pulling is off.
    public static let none = SourcePolicy(entries: [])

    public init(entries: [Entry]) {
        self.entries = entries
    }

    public var allowsAnything: Bool { !entries.isEmpty }

    /// Parses `--allow-sources`.
    public init(parsing text: String) throws(ContainerError) {
        var entries: [Entry] = []
        for item in text.split(separator: ",") {
            let entry = item.filter { $0 != " " }
            guard !entry.isEmpty else { continue }
            entries.append(try Self.entry(String(entry)))
        }
        self.entries = entries
    }

    private static func entry(_ text: String) throws(ContainerError) -> Entry {
        func invalid(_ why: String) -> ContainerError {
            ContainerError(.invalidSource, "--allow-sources entry '\(text)': \(why)")
        }
        guard let separator = text.firstRange(of: "://") else { throw invalid("write it SCHEME://HOST[:PORT]") }
        let schemeText = text[..<separator.lowerBound].lowercased()
        var scheme: PullScheme?
        if schemeText != "*" {
            guard let known = PullScheme(named: schemeText) else {
                throw invalid("the scheme must be \(PullScheme.all.map(\.name).joined(separator: ", ")) or *")
            }
            scheme = known
        }
        var rest = Substring(text[separator.upperBound...])
        if rest.hasSuffix("/") && !rest.dropLast().contains("/") { rest = rest.dropLast() }
        var port: Int?
        var hostText: Substring
        var prefixLength: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("an IPv6 address lacks its ']'") }
            hostText = rest[rest.index(after: rest.startIndex)..<close]
            var after = rest[rest.index(after: close)...]
            if after.hasPrefix("/") {
                let end = after.firstIndex(of: ":") ?? after.endIndex
                prefixLength = after[after.index(after: after.startIndex)..<end]
                after = after[end...]
            }
            if after.hasPrefix(":") { port = Int(after.dropFirst()) ?? -1 } else if !after.isEmpty { throw invalid("unexpected '\(after)'") }
        } else {
            // HOST/PREFIX[:PORT]: anything else after a '/' is a URL's path, which an entry has not.
            if let slash = rest.firstIndex(of: "/") {
                let prefix = rest[rest.index(after: slash)...].prefix { $0 != ":" }
                guard !prefix.isEmpty, prefix.allSatisfy(\.isNumber) else {
                    throw invalid("an entry allows a host and a port, not a path: write it SCHEME://HOST[:PORT]")
                }
            }
            if let colon = rest.lastIndex(of: ":") {
                port = Int(rest[rest.index(after: colon)...]) ?? -1
                rest = rest[..<colon]
            }
            if let slash = rest.firstIndex(of: "/") {
                prefixLength = rest[rest.index(after: slash)...]
                rest = rest[..<slash]
            }
            hostText = rest
        }
        if let port, !(1...65535).contains(port) { throw invalid("the port must be 1...65535") }
        guard !hostText.isEmpty else { throw invalid("no host") }
        let host: HostPattern
        if hostText == "*" {
            guard prefixLength == nil else { throw invalid("'*' takes no prefix length") }
            host = .any
        } else if let address = IPAddress(String(hostText)) {
            let bits = address.bytes.count * 8
            var length = bits
            if let prefixLength {
                guard let parsed = Int(prefixLength), (0...bits).contains(parsed) else {
                    throw invalid("the prefix length must be 0...\(bits)")
                }
                length = parsed
            }
            host = .network(IPNetwork(address: address, prefixLength: length))
        } else {
            guard prefixLength == nil else { throw invalid("a prefix length needs an address, not a name") }
            let name = hostText.lowercased()
            if name.hasPrefix("*.") {
                host = .suffix(String(name.dropFirst()))
            } else {
                guard !name.contains("*") else { throw invalid("'*' only as the whole host or before a dot") }
                host = .name(name)
            }
        }
        return Entry(scheme: scheme, host: host, port: port, description: text)
    }

    /// Nil when `url` is allowed; otherwise why not (`source_not_allowed`). `resolve` gives a host
    /// name's addresses, for network entries (only called when one could match).
    public func check(_ url: SourceURL, resolve: (String) -> [IPAddress] = SourcePolicy.resolve) -> ContainerError? {
        guard allowsAnything else {
            return ContainerError(.sourceNotAllowed, "pulling is off: this server allows no sources (--allow-sources)")
        }
        let candidates = entries.filter { entry in
            (entry.scheme == nil || entry.scheme == url.scheme) && (entry.port == nil || entry.port == url.port)
        }
        let literal = IPAddress(url.host)
        var addresses: [IPAddress]?
        for entry in candidates {
            switch entry.host {
            case .any: return nil
            case .name(let name): if literal == nil && url.host == name { return nil }
            case .suffix(let suffix): if literal == nil && url.host.hasSuffix(suffix) { return nil }
            case .network(let network):
                if let literal {
                    if network.contains(literal) { return nil }
                } else {
                    if addresses == nil { addresses = resolve(url.host) }
                    if let addresses, !addresses.isEmpty, addresses.allSatisfy(network.contains) { return nil }
                }
            }
        }
        return ContainerError(
            .sourceNotAllowed,
            "\(url.scheme.name)://\(url.hostInURL):\(url.port) is not among the sources this server may pull from (--allow-sources)")
    }

    /// Whether an entry of `scheme` allows `address` as a host, on any port: for the addresses
    /// a source names for its media (an RTSP camera's `source=`), whose ports are the media's own.
    public func allows(address: IPAddress, for scheme: PullScheme) -> Bool {
        entries.contains { entry in
            guard entry.scheme == nil || entry.scheme == scheme else { return false }
            switch entry.host {
            case .any: return true
            case .name, .suffix: return false
            case .network(let network): return network.contains(address)
            }
        }
    }

    /// The host's addresses from the system resolver (empty when it has none).
    public static func resolve(_ host: String) -> [IPAddress] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &result) == 0 else { return [] }
        defer { freeaddrinfo(result) }
        var addresses: [IPAddress] = []
        var cursor = result
        while let info = cursor {
            if let address = info.pointee.ai_addr {
                if info.pointee.ai_family == AF_INET {
                    address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                        var raw = pointer.pointee.sin_addr
                        addresses.append(IPAddress(bytes: withUnsafeBytes(of: &raw) { Array($0) }))
                    }
                } else if info.pointee.ai_family == AF_INET6 {
                    address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                        var raw = pointer.pointee.sin6_addr
                        addresses.append(IPAddress(bytes: withUnsafeBytes(of: &raw) { Array($0) }))
                    }
                }
            }
            cursor = info.pointee.ai_next
        }
        return addresses
    }
}

/// An IPv4 (4 bytes) or IPv6 (16 bytes) address.
public struct IPAddress: Sendable, Equatable, Hashable {
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// Parses the numeric forms `inet_pton` takes.
    public init?(_ text: String) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
            return
        }
        return nil
    }

    /// The address in its usual numeric form (`inet_ntop`): `10.0.0.1`, `fd00::1`.
    public var text: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let written = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        guard written != nil else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`) as the IPv4 address it maps.
    public var unmapped: IPAddress {
        guard bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF else { return self }
        return IPAddress(bytes: Array(bytes[12...]))
    }
}

/// An address and a prefix length: `10.0.0.0/8`.
public struct IPNetwork: Sendable, Equatable {
    public let address: IPAddress
    public let prefixLength: Int

    public func contains(_ candidate: IPAddress) -> Bool {
        let candidate = candidate.unmapped
        let own = address.unmapped
        guard candidate.bytes.count == own.bytes.count else { return false }
        let length = own.bytes.count == address.bytes.count ? prefixLength : max(0, prefixLength - 96)
        for bit in 0..<length {
            let mask = UInt8(0x80) >> UInt8(bit % 8)
            if candidate.bytes[bit / 8] & mask != own.bytes[bit / 8] & mask { return false }
        }
        return true
    }
}
