/// Who asked for a session (`GET /sessions/{id}`'s `origin`).
public enum SessionOrigin: String, Sendable, CaseIterable {
    /// The configuration file declares it: only a change of the file removes it (`DELETE` is
    /// refused, the idle timeout passes it by).
    case declared
    /// A client made it: `PUT`, or a push to an id no session had.
    case api
}

/// A session's origin, and whether its definition is kept in `--state-dir` (a session made or
/// changed by `PUT` on a server that has one). A session that nobody declared and nobody kept
/// is removed after the idle timeout; the others stay until they are deleted or undeclared.
public struct SessionStanding: Sendable, Equatable {
    public var origin: SessionOrigin
    public var persisted: Bool

    public init(origin: SessionOrigin = .api, persisted: Bool = false) {
        self.origin = origin
        self.persisted = persisted
    }

    public static let declared = SessionStanding(origin: .declared)

    /// Whether the idle timeout may remove it.
    public var expiresWhenIdle: Bool { origin == .api && !persisted }
}
