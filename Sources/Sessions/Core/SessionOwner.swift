/// Who keeps a session: a name its creator gives it in `PUT /sessions/{id}` (`"owner"`) and reads
/// back in its status, so that a tool reconciling sessions against a list (`frametap sync`)
/// recognises its own among everyone's and removes only those. The server gives it no meaning.
/// 1 to 64 characters from `[A-Za-z0-9._~-]`, like a session id.
public struct SessionOwner: Hashable, Sendable, CustomStringConvertible {
    public static let maxLength = 64
    public let rawValue: String

    public init(_ text: some StringProtocol) throws(SessionError) {
        if let broken = SessionID.unreservedNameRule(text, maxLength: Self.maxLength, naming: "owner") {
            throw SessionError(.invalidParameter, broken)
        }
        rawValue = String(text)
    }

    public var description: String { rawValue }
}
