/// A validated session name: 1 to 128 characters from `[A-Za-z0-9._~-]` (RFC 3986 unreserved),
/// but not `.` or `..`,
/// so it is safe in a URL path, a log line and a metric label without escaping.
public struct SessionID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public static let maxLength = 128
    public let rawValue: String

    public init(_ text: some StringProtocol) throws(SessionError) {
        if let broken = Self.unreservedNameRule(text, maxLength: Self.maxLength, naming: "session id") {
            throw SessionError(.invalidSessionID, broken)
        }
        // Path segments clients and proxies normalise away: such a session could not be reached.
        guard text != ".", text != ".." else {
            throw SessionError(.invalidSessionID, "session id must not be '.' or '..'")
        }
        rawValue = String(text)
    }

    /// The rule session ids and owners share: 1 to `maxLength` characters from
    /// `[A-Za-z0-9._~-]`. Nil when `text` keeps it; else the message, naming what broke it.
    static func unreservedNameRule(_ text: some StringProtocol, maxLength: Int, naming what: String) -> String? {
        let utf8 = text.utf8
        if !utf8.isEmpty, utf8.count <= maxLength, utf8.allSatisfy(isAllowed) { return nil }
        return "\(what) must be 1...\(maxLength) characters from A-Z a-z 0-9 . _ ~ -"
    }

    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
            UInt8(ascii: "-"):
            true
        default:
            false
        }
    }

    public var description: String { rawValue }
    public static func < (lhs: SessionID, rhs: SessionID) -> Bool { lhs.rawValue < rhs.rawValue }
}
