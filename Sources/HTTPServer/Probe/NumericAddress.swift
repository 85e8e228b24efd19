#if canImport(Glibc)
    import Glibc
#endif

/// Numeric IP addresses, the only kind the server binds to and the health probe connects to:
/// a name such as `localhost` would need a resolver, and could name several addresses.
public enum NumericAddress {
    /// Whether `text` is a numeric IPv4 (`127.0.0.1`) or IPv6 (`::1`) address.
    public static func isValid(_ text: String) -> Bool {
        socketAddress(text, port: 0) != nil
    }

    /// The address family and the `sockaddr_in` or `sockaddr_in6` bytes for `text` and `port`;
    /// nil when `text` is neither numeric form.
    static func socketAddress(_ text: String, port: UInt16) -> (family: Int32, bytes: [UInt8])? {
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, text, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port.bigEndian
            return (AF_INET, withUnsafeBytes(of: &v4) { Array($0) })
        }
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET6, text, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port.bigEndian
            return (AF_INET6, withUnsafeBytes(of: &v6) { Array($0) })
        }
        return nil
    }
}
