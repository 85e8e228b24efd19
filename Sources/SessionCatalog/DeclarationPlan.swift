import Ingest
import Sessions

/// What a new reading of the configuration file changes among the declared sessions: computed
/// from the declarations in force and the ones just read, touching nothing, and applied by
/// `SessionCatalog.declare`.
///
/// A session whose source, codec or back end changed is another stream: it is restarted (closed
/// and made anew under its id). A change of anything else (decode mode, quality) is made in
/// place: its decoder, counters and viewers carry on. An unchanged declaration is not touched.
public struct DeclarationPlan: Sendable, Equatable {
    /// Declared now and not before, in the file's order.
    public var create: [SessionDeclaration] = []
    /// Declared before and not now.
    public var remove: [SessionID] = []
    /// Declared before and now, changed in place (the new declarations).
    public var update: [SessionDeclaration] = []
    /// Declared before and now as another stream (the new declarations).
    public var restart: [SessionDeclaration] = []
    /// Declared the same before and now.
    public var unchanged: [SessionID] = []

    public init(from old: [SessionDeclaration], to new: [SessionDeclaration]) {
        let before = Dictionary(old.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        let now = Set(new.map(\.id))
        for declaration in new {
            guard let previous = before[declaration.id] else {
                create.append(declaration)
                continue
            }
            if previous.options == declaration.options {
                unchanged.append(declaration.id)
            } else if Self.isSameStream(previous.options, declaration.options) {
                update.append(declaration)
            } else {
                restart.append(declaration)
            }
        }
        remove = old.map(\.id).filter { !now.contains($0) }
    }

    /// Whether nothing changes.
    public var isEmpty: Bool { create.isEmpty && remove.isEmpty && update.isEmpty && restart.isEmpty }

    /// The same source, codec and back end: what else differs can change while the stream runs.
    static func isSameStream(_ old: SessionOptions, _ new: SessionOptions) -> Bool {
        old.pulled == new.pulled && old.codec == new.codec && old.backend == new.backend
    }
}

extension SessionOptions {
    /// The source it pulls: none when `source` is missing or null.
    var pulled: PullSourceSpec? { source ?? nil }
}
