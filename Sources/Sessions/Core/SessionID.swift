/// A validated session name: 1 to 128 characters from `[A-Za-z0-9._~-]` (RFC 3986 unreserved),
/// but not `.` or `..`,
/// so it is safe in a URL path, a log line and a metric label without escaping.
public struct SessionID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public static let maxLength = 128
    public let rawValue: String

    public init(_ text: some StringProtocol) throws(SessionError) {
        let utf8 = text.utf8
        guard !utf8.isEmpty, utf8.count <= Self.maxLength, utf8.allSatisfy(Self.isAllowed) else {
            throw SessionError(
                .invalidSessionID,
                "session id must be 1...\(Self.maxLength) characters from A-Z a-z 0-9 . _ ~ -")
        }
        // Path segments clients and proxies normalise away: such a session could not be reached.
        guard text != ".", text != ".." else {
            throw SessionError(.invalidSessionID, "session id must not be '.' or '..'")
        }
        rawValue = String(text)
    }

    static func isAllowed(_ byte: UInt8) -> Bool {
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
