import Dispatch
import Logging
import SessionCatalog
import Sessions
import Synchronization

/// Reads the configuration file again (on `SIGHUP`, or when it changed on disk) and applies
/// what changed, one reading at a time: the options a running server takes
/// (`ServeOption.changesWithoutRestart`) and the declared sessions, through the catalog's plan.
/// A file that does not parse or validate is refused whole and the running configuration stays;
/// an option that takes effect only at a restart is reported as needing one, and the rest is
/// applied. Each reading is told through `ConfigurationStatus`.
public final class ConfigurationReloader: Sendable {
    /// What a reading did.
    public enum Result: Sendable {
        case applied(DeclarationOutcome, changedOptions: [String], restartNeeded: [String])
        case rejected(ServeConfigurationError)
    }

    private let commandLine: CommandLineOptions
    private let environment: [String: String]
    /// What the server started with: the options a restart would change are compared with it.
    private let started: ServeConfiguration
    /// The last configuration applied.
    private let applied: Mutex<ServeConfiguration>
    private let catalog: SessionCatalog
    private let status: ConfigurationStatus
    private let setLogLevel: @Sendable (Logger.Level) -> Void
    private let queue = DispatchQueue(label: "frametap.configuration")
    private let logger: Logger

    /// `setLogLevel` is how `--log-level` reaches the process's log handlers.
    public init(
        commandLine: CommandLineOptions, environment: [String: String], started: ServeConfiguration,
        catalog: SessionCatalog, status: ConfigurationStatus, logger: Logger,
        setLogLevel: @escaping @Sendable (Logger.Level) -> Void
    ) {
        self.commandLine = commandLine
        self.environment = environment
        self.started = started
        applied = Mutex(started)
        self.catalog = catalog
        self.status = status
        self.logger = logger
        self.setLogLevel = setLogLevel
    }

    /// Makes the sessions the file declared at start (a server without a file has none, and no reading to tell).
    @discardableResult
    public func applyAtStart() -> DeclarationOutcome {
        queue.sync {
            let outcome = catalog.declare(started.declarations)
            if started.configurationFile != nil {
                status.recordApplied(.start, changes: outcome.changes, restartNeeded: [])
            }
            return outcome
        }
    }

    /// Reads the file again after the readings already asked for; returns at once.
    public func reload(_ trigger: ConfigurationStatus.Trigger) {
        queue.async { [self] in _ = read(trigger) }
    }

    /// Reads the file again now (after any reading under way) and returns what it did.
    @discardableResult
    public func reloadNow(_ trigger: ConfigurationStatus.Trigger) -> Result {
        queue.sync { read(trigger) }
    }

    private func read(_ trigger: ConfigurationStatus.Trigger) -> Result {
        let new: ServeConfiguration
        do {
            new = try ServeConfiguration(commandLine: commandLine, environment: environment)
        } catch {
            status.recordRejected(trigger, ConfigurationStatus.Rejection(error))
            return .rejected(error)
        }
        let previous = applied.withLock { $0 }
        var changed: [String] = []
        var restartNeeded: [String] = []
        for option in ServeOption.all where option.isInFile {
            let text = new.resolvedText(of: option)
            if option.changesWithoutRestart {
                if text != previous.resolvedText(of: option) { changed.append(option.name) }
            } else if text != started.resolvedText(of: option) {
                restartNeeded.append(option.name)
            }
        }
        catalog.registry.limits.update { limits in
            limits.maxSessions = new.server.maxSessions
            limits.maxPullSessions = new.server.maxPullSessions
            limits.idleTimeout = new.server.idleTimeout
            limits.sourcePolicy = new.server.sourcePolicy
        }
        setLogLevel(new.logLevel)
        if !changed.isEmpty {
            logger.notice("configuration options applied", metadata: ["options": "\(changed.joined(separator: ","))"])
        }
        let outcome = catalog.declare(new.declarations)
        applied.withLock { $0 = new }
        status.recordApplied(trigger, changes: outcome.changes, restartNeeded: restartNeeded)
        return .applied(outcome, changedOptions: changed, restartNeeded: restartNeeded)
    }
}

extension ServeConfiguration {
    /// The file's sessions as the catalog takes them.
    public var declarations: [SessionDeclaration] {
        declaredSessions.map { SessionDeclaration(id: $0.id, options: $0.options, place: $0.origin.description) }
    }
}

extension ConfigurationStatus.Rejection {
    /// The error's whole text, and its place in the file when it has one.
    init(_ error: ServeConfigurationError) {
        if case .file(let path, let line, let column) = error.origin {
            self.init(message: error.description, file: path, line: line, column: column)
        } else {
            self.init(message: error.description)
        }
    }
}
