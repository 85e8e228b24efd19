#if canImport(Glibc)
    import Glibc
#endif

/// The instances `frametap sync` lists and cleans up directly (`--instances`): each entry is an
/// `http://HOST:PORT`, and a HOST that is a name stands for every address it resolves to, looked
/// up again each pass. A Kubernetes headless Service's name resolves to the address of every
/// ready pod behind it, so one entry follows the pods as they come and go.
public struct InstanceDiscovery: Sendable {
    public let entries: [HTTPEndpoint]

    public init(entries: [HTTPEndpoint]) {
        self.entries = entries
    }

    /// `a,b,c`: each an `http://HOST:PORT` (or `https://`).
    public init(parsing list: String) throws(SyncError) {
        var entries: [HTTPEndpoint] = []
        for item in list.split(separator: ",") {
            let text = item.trimmingCharacters(in: " \t")
            guard !text.isEmpty else { continue }
            entries.append(try HTTPEndpoint(parsing: text))
        }
        guard !entries.isEmpty else { throw SyncError("--instances names no instance") }
        self.entries = entries
    }

    /// Every instance now, each address once; and the entries whose name did not resolve (their
    /// instances are left out of this pass).
    public func resolve() -> (instances: [HTTPEndpoint], failures: [SyncError]) {
        var instances: [HTTPEndpoint] = []
        var failures: [SyncError] = []
        for entry in entries {
            switch Self.addresses(of: entry.host, port: entry.port) {
            case .success(let addresses):
                for address in addresses where !instances.contains(entry.at(address)) {
                    instances.append(entry.at(address))
                }
            case .failure(let error):
                failures.append(error)
            }
        }
        return (instances, failures)
    }

    /// The numeric addresses of `host` (itself when it is one), IPv4 and IPv6, in the resolver's
    /// order. The C library's resolver bounds the wait (resolv.conf's timeout and attempts).
    static func addresses(of host: String, port: Int) -> Result<[String], SyncError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0 else {
            return .failure(SyncError("\(host): \(String(cString: gai_strerror(status)))"))
        }
        defer { freeaddrinfo(list) }
        var addresses: [String] = []
        var node = list
        while let current = node {
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(
                current.pointee.ai_addr, current.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0
            {
                let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if !addresses.contains(address) { addresses.append(address) }
            }
            node = current.pointee.ai_next
        }
        return addresses.isEmpty ? .failure(SyncError("\(host): no address")) : .success(addresses)
    }
}

extension Substring {
    fileprivate func trimmingCharacters(in set: String) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }
}
