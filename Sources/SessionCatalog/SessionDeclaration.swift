import Sessions

/// A session the configuration file declares: its id, what `PUT /sessions/{id}` with the same
/// object would ask for, and where the file says so (for messages).
public struct SessionDeclaration: Sendable, Equatable {
    public let id: SessionID
    public let options: SessionOptions
    /// `file:line:column` of its id, or nil.
    public let place: String?

    public init(id: SessionID, options: SessionOptions, place: String? = nil) {
        self.id = id
        self.options = options
        self.place = place
    }

    /// The same id and options: where the file says so is no part of what it declares.
    public static func == (lhs: SessionDeclaration, rhs: SessionDeclaration) -> Bool {
        lhs.id == rhs.id && lhs.options == rhs.options
    }
}
