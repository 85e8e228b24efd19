import Containers
import Ingest
import Logging
import Sessions
import Synchronization

/// Which sessions exist by whose word, beside those pushes make: the ones the configuration
/// file declares (created at start, changed by each new reading of the file through a
/// `DeclarationPlan`) and the ones made by `PUT` (kept in `--state-dir`, when the server has
/// one, and made again at the next start). Every change of a definition (a `PUT`, a `DELETE`, a
/// reading of the file, the start's restore) goes through here, one at a time, so the registry,
/// the declarations and the state file agree; a change to the state file is on disk before the
/// request that made it is answered.
public final class SessionCatalog: Sendable {
    public let registry: SessionRegistry
    public let store: SessionStateStore?
    private let logger: Logger
    private let definitions: Mutex<Definitions>

    private struct Definitions {
        /// The file's sessions as last applied, in its order.
        var declared: [SessionDeclaration] = []
        /// What `PUT` defined for each session it made or changed (kept in `store`).
        var persisted: [SessionID: SessionOptions] = [:]

        func declaration(of id: SessionID) -> SessionDeclaration? { declared.first { $0.id == id } }
    }

    /// `saved`: what `store` held at start (see `restore`).
    public init(
        registry: SessionRegistry, store: SessionStateStore? = nil, saved: [SessionID: SessionOptions] = [:],
        logger: Logger = Logger(label: "frametap.sessions")
    ) {
        self.registry = registry
        self.store = store
        self.logger = logger
        definitions = Mutex(Definitions(persisted: store == nil ? [:] : saved))
    }

    /// Sessions the file declares now.
    public var declaredCount: Int { definitions.withLock { $0.declared.count } }
    /// Sessions whose definitions `--state-dir` keeps.
    public var persistedCount: Int { definitions.withLock { $0.persisted.count } }

    // MARK: - PUT and DELETE

    /// `PUT /sessions/{id}`: creates the session (`created`) or changes it, then, on a server
    /// with `--state-dir`, saves its definition (this `PUT` merged over the earlier ones) before
    /// returning. A declared session may only be told what the file says (a `PUT` of its own
    /// definition changes nothing); anything else is `declared_session`.
    public func put(_ id: SessionID, _ options: SessionOptions) throws(SessionError) -> (session: Session, created: Bool) {
        try definitions.withLock { definitions throws(SessionError) in
            if let declaration = definitions.declaration(of: id) {
                guard options.restates(declaration.options), let session = registry.find(id) else {
                    throw Self.declaredRefusal(declaration, doing: "changed")
                }
                return (session, false)
            }
            let (session, created) = try apply(options, to: id, standing: SessionStanding(origin: .api))
            guard let store else { return (session, created) }
            let previous = definitions.persisted[id]
            let standing = session.standing
            definitions.persisted[id] = (previous ?? SessionOptions()).merging(options)
            // Kept from now on, so the idle timeout cannot take it between here and the answer.
            session.standing = SessionStanding(origin: .api, persisted: true)
            do {
                try store.save(definitions.persisted)
            } catch {
                definitions.persisted[id] = previous
                session.standing = standing
                logger.error("session definition not saved", metadata: ["session": "\(id)", "reason": "\(error)"])
                throw SessionError(
                    .stateNotSaved, "the change holds now but was not saved, so a restart would lose it: \(error)")
            }
            return (session, created)
        }
    }

    /// `DELETE /sessions/{id}`: removes the session and, when `--state-dir` keeps its
    /// definition, removes that before returning. A declared session is `declared_session`.
    public func delete(_ id: SessionID) throws(SessionError) {
        try definitions.withLock { definitions throws(SessionError) in
            if let declaration = definitions.declaration(of: id) { throw Self.declaredRefusal(declaration, doing: "deleted") }
            let previous = definitions.persisted.removeValue(forKey: id)
            do throws(SessionError) {
                try registry.delete(id)
            } catch where error.code == .sessionNotFound && previous != nil {
                // Kept but not running (its restore failed): deleting it forgets it.
            }
            guard let previous, let store else { return }
            do {
                try store.save(definitions.persisted)
            } catch {
                definitions.persisted[id] = previous
                logger.error("session deletion not saved", metadata: ["session": "\(id)", "reason": "\(error)"])
                throw SessionError(
                    .stateNotSaved, "the session is gone now but was not forgotten, so a restart would bring it back: \(error)")
            }
        }
    }

    /// The session a push goes to, made when there is none. An id the file declares whose
    /// session could not be made at its reading (the session limit, a pull that did not start)
    /// is made now as the file declares it: the file's session, kept from the idle timeout, with
    /// its codec and options. Any other id is a client's session.
    /// `tenant`: whose push it is (`SessionRegistry.openSession`); a declared session has none.
    public func openForPush(_ id: SessionID, tenant: String? = nil) throws(SessionError) -> (session: Session, created: Bool) {
        if let session = registry.find(id) { return (session, false) }
        // A client's id is made outside the lock: new pushes wait neither for each other nor
        // for a reading of the file. A reading that declares the id meanwhile takes it over.
        guard definitions.withLock({ $0.declaration(of: id) }) != nil else { return try registry.openSession(id, tenant: tenant) }
        return try definitions.withLock { definitions throws(SessionError) in
            guard let declaration = definitions.declaration(of: id) else { return try registry.openSession(id, tenant: tenant) }
            let policy = declaration.options.pulled.map { registry.limits.current.sourcePolicy.admitting($0.url) }
            do throws(SessionError) {
                return try apply(declaration.options, to: id, standing: .declared, policy: policy)
            } catch {
                registry.remove(id, reason: "failed")
                throw error
            }
        }
    }

    private static func declaredRefusal(_ declaration: SessionDeclaration, doing: String) -> SessionError {
        let place = declaration.place.map { " (\($0))" } ?? ""
        return SessionError(
            .declaredSession,
            "session '\(declaration.id)' is declared in the configuration file\(place), so it is \(doing) there: "
                + "edit the file and reload it (SIGHUP, or it is read again when it changes)")
    }

    // MARK: - The configuration file

    /// Applies a reading of the configuration file's sessions: the plan from the declarations in
    /// force to `declarations`, then sessions removed, restarted, updated in place and created.
    /// A declared id that a client's session holds is taken over by the file (that session is
    /// closed and forgotten by `--state-dir`). A declaration whose session cannot be made is
    /// reported in `failed` and tried again at the next reading. Declared pulls are not checked
    /// against `--allow-sources`: the file names them with the authority that sets the list
    /// (their redirects and other hosts still need it).
    public func declare(_ declarations: [SessionDeclaration]) -> DeclarationOutcome {
        definitions.withLock { definitions in
            let plan = DeclarationPlan(from: definitions.declared, to: declarations)
            var outcome = DeclarationOutcome(plan: plan)
            for id in plan.remove {
                registry.remove(id, reason: "undeclared")
            }
            for declaration in plan.restart {
                registry.remove(declaration.id, reason: "restarted")
                if let failure = create(declaration, taking: &definitions) { outcome.failed.append(failure) }
            }
            for declaration in plan.update {
                guard let session = registry.find(declaration.id), session.standing.origin == .declared else {
                    if let failure = create(declaration, taking: &definitions) { outcome.failed.append(failure) }
                    continue
                }
                do throws(SessionError) {
                    try session.configure(inPlace(declaration.options))
                } catch {
                    outcome.failed.append(DeclarationOutcome.Failure(id: declaration.id, error: error))
                }
            }
            for id in plan.unchanged where registry.find(id)?.standing.origin != .declared {
                // Its session could not be made at an earlier reading (or a client's took its id): again.
                guard let declaration = declarations.first(where: { $0.id == id }) else { continue }
                if let failure = create(declaration, taking: &definitions) {
                    outcome.failed.append(failure)
                } else {
                    outcome.recreated.append(id)
                }
            }
            for declaration in plan.create {
                if let failure = create(declaration, taking: &definitions) { outcome.failed.append(failure) }
            }
            definitions.declared = declarations
            for failure in outcome.failed {
                logger.error(
                    "declared session not made",
                    metadata: [
                        "session": "\(failure.id)", "code": "\(failure.error.code.rawValue)",
                        "reason": "\(failure.error.message)",
                    ])
            }
            return outcome
        }
    }

    /// Makes a declared session: a client's session of that id is closed first (and no longer
    /// kept), then the session is made as a `PUT` of the declaration would, and removed again
    /// when its pull cannot start (so the next reading tries it anew).
    private func create(_ declaration: SessionDeclaration, taking definitions: inout Definitions) -> DeclarationOutcome.Failure? {
        let id = declaration.id
        if registry.remove(id, reason: "declared") {
            logger.notice("session taken over by the configuration file", metadata: ["session": "\(id)"])
        }
        if definitions.persisted.removeValue(forKey: id) != nil, let store {
            do {
                try store.save(definitions.persisted)
            } catch {
                logger.error("session definition not forgotten", metadata: ["session": "\(id)", "reason": "\(error)"])
            }
        }
        let policy = declaration.options.pulled.map { registry.limits.current.sourcePolicy.admitting($0.url) }
        do throws(SessionError) {
            _ = try apply(declaration.options, to: id, standing: .declared, policy: policy)
            return nil
        } catch {
            registry.remove(id, reason: "failed")
            return DeclarationOutcome.Failure(id: id, error: error)
        }
    }

    /// A changed declaration's options as a change in place: a member it no longer says goes back
    /// to the server's default.
    private func inPlace(_ options: SessionOptions) -> SessionOptions {
        var change = options
        change.source = nil
        change.decode = options.decode ?? registry.configuration.defaultDecode
        change.quality = options.quality ?? registry.configuration.defaultQuality
        return change
    }

    // MARK: - Start

    /// Makes the sessions `--state-dir` kept (call after the first `declare`: a session the file
    /// now declares is the file's, and forgotten here). Pulls connect again, push sessions wait
    /// for their pushers. One that cannot be made is logged and stays kept (a `DELETE` forgets it).
    public func restore() -> RestoreOutcome {
        definitions.withLock { definitions in
            var outcome = RestoreOutcome()
            let declared = Set(definitions.declared.map(\.id))
            for id in definitions.persisted.keys.sorted() {
                guard let definition = definitions.persisted[id] else { continue }
                if declared.contains(id) {
                    definitions.persisted[id] = nil
                    outcome.declaredNow.append(id)
                    continue
                }
                do throws(SessionError) {
                    let (session, _) = try apply(definition, to: id, standing: SessionStanding(origin: .api, persisted: true))
                    session.standing = SessionStanding(origin: .api, persisted: true)
                    outcome.restored.append(id)
                } catch {
                    // The session may exist without its pull (the source is no longer allowed, the pull limit).
                    registry.find(id)?.standing = SessionStanding(origin: .api, persisted: true)
                    outcome.failed.append(DeclarationOutcome.Failure(id: id, error: error))
                    logger.error(
                        "kept session not made again",
                        metadata: ["session": "\(id)", "code": "\(error.code.rawValue)", "reason": "\(error.message)"])
                }
            }
            if !outcome.declaredNow.isEmpty, let store {
                do {
                    try store.save(definitions.persisted)
                } catch {
                    logger.error("kept sessions not saved", metadata: ["reason": "\(error)"])
                }
            }
            return outcome
        }
    }

    // MARK: - Applying a definition

    /// What `PUT` does to the registry: the pull admitted before anything is made (`policy`, or
    /// `--allow-sources`), the session made or changed, the pull started, replaced or stopped.
    private func apply(
        _ options: SessionOptions, to id: SessionID, standing: SessionStanding, policy: SourcePolicy? = nil
    ) throws(SessionError) -> (session: Session, created: Bool) {
        if let spec = options.pulled { try registry.admitPull(spec, for: id, policy: policy) }
        let (session, created) = try registry.openSession(id, options: options, standing: standing)
        if !created {
            try session.configure(options)
            if standing.origin == .declared { session.standing = standing }
        }
        switch options.source {
        case .some(.some(let spec)): try registry.startPull(spec, on: session, policy: policy)
        case .some(.none): registry.stopPull(on: session)
        case .none: break
        }
        return (session, created)
    }
}

/// What `SessionCatalog.declare` did.
public struct DeclarationOutcome: Sendable {
    public struct Failure: Sendable {
        public let id: SessionID
        public let error: SessionError
    }

    public let plan: DeclarationPlan
    /// Unchanged declarations whose sessions were missing and were made again.
    public var recreated: [SessionID] = []
    public var failed: [Failure] = []

    /// Session ids by what happened to them (`created`, `removed`, `updated`, `restarted`,
    /// `failed`), for the `config.applied` event and `/system`; kinds with none are left out.
    public var changes: [String: [String]] {
        let failedIDs = Set(failed.map(\.id))
        let kinds: [(String, [SessionID])] = [
            ("created", (plan.create.map(\.id) + recreated).filter { !failedIDs.contains($0) }),
            ("removed", plan.remove),
            ("updated", plan.update.map(\.id).filter { !failedIDs.contains($0) }),
            ("restarted", plan.restart.map(\.id).filter { !failedIDs.contains($0) }),
            ("failed", failed.map(\.id)),
        ]
        return Dictionary(uniqueKeysWithValues: kinds.filter { !$0.1.isEmpty }.map { ($0.0, $0.1.map(\.rawValue)) })
    }
}

/// What `SessionCatalog.restore` did.
public struct RestoreOutcome: Sendable {
    public var restored: [SessionID] = []
    /// Kept sessions the file declares now: the file's, no longer kept.
    public var declaredNow: [SessionID] = []
    public var failed: [DeclarationOutcome.Failure] = []
}

extension SessionOptions {
    /// Whether every member this `PUT` gives that shapes the session is what `definition` says
    /// (so it changes nothing). The `owner` is not among them: the file keeps a declared session
    /// whoever says they do, so `frametap sync`'s restating `PUT`, which names its owner, is
    /// answered as any other.
    func restates(_ definition: SessionOptions) -> Bool {
        (backend == nil || backend == definition.backend) && (codec == nil || codec == definition.codec)
            && (decode == nil || decode == definition.decode) && (quality == nil || quality == definition.quality)
            && (source == nil || (source ?? nil) == definition.pulled)
    }

    /// These options with `change`'s members over them (`source: null` removes the source).
    func merging(_ change: SessionOptions) -> SessionOptions {
        var merged = self
        if let backend = change.backend { merged.backend = backend }
        if let codec = change.codec { merged.codec = codec }
        if let decode = change.decode { merged.decode = decode }
        if let quality = change.quality { merged.quality = quality }
        if let source = change.source { merged.source = source == nil ? nil : source }
        if let owner = change.owner { merged.owner = owner }
        return merged
    }
}

extension SourcePolicy {
    /// This policy, and the scheme, host and port of `url` itself.
    func admitting(_ url: SourceURL) -> SourcePolicy {
        let host = url.host.contains(":") ? "[\(url.host)]" : url.host
        guard let own = try? SourcePolicy(parsing: "\(url.scheme.name)://\(host):\(url.port)") else { return self }
        return SourcePolicy(entries: entries + own.entries)
    }
}
