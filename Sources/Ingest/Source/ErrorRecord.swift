import FoundationEssentials

/// An error remembered for a status page (a session's, a pull's): its stable code, its message,
/// and when it happened.
public struct ErrorRecord: Sendable, Equatable {
    public var code: String
    public var message: String
    public var at: Date

    public init(code: String, message: String, at: Date) {
        self.code = code
        self.message = message
        self.at = at
    }
}
