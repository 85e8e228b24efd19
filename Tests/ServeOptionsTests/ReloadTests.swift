import FoundationEssentials
import Logging
import SessionCatalog
import Sessions
import SessionsTestSupport
import Synchronization
import Testing
import TestSupport
import Timekeeping

@testable import ServeOptions

#if canImport(Glibc)
    import Glibc
#endif

/// A reading of the configuration file applied to a running registry: the options a running
/// server takes, the rest reported as needing a restart, the declared sessions through the plan;
/// a file that does not parse or validate changes nothing.
@Suite("Reloading the configuration file", .timeLimit(.minutes(10)))
struct ReloadTests {
    private let quiet = Logger(label: "reload-tests") { _ in SwiftLogNoOpLogHandler() }

    /// The pieces `frametap serve` wires together, on the file at `path`.
    private struct Server {
        let registry: SessionRegistry
        let catalog: SessionCatalog
        let status: ConfigurationStatus
        let reloader: ConfigurationReloader
        let logLevels: LogLevels

        func session(_ id: String) -> Session? { registry.find(try! SessionID(id)) }
    }

    private func start(_ path: String, _ arguments: [String] = []) throws -> Server {
        let commandLine = try CommandLineOptions(["--config", path] + arguments)
        let started = try ServeConfiguration(commandLine: commandLine, environment: [:])
        var server = started.server
        server.backend = .software
        let metrics = FrameTapMetrics()
        let registry = SessionRegistry(
            configuration: server, services: SessionServices.forTests(server), metrics: metrics, logger: quiet)
        let catalog = SessionCatalog(registry: registry, logger: quiet)
        let status = ConfigurationStatus(file: path, events: registry.events, metrics: metrics, clock: SystemClock(), logger: quiet)
        let levels = LogLevels()
        let reloader = ConfigurationReloader(
            commandLine: commandLine, environment: [:], started: started, catalog: catalog, status: status, logger: quiet,
            setLogLevel: { level in levels.set.withLock { $0.append(level) } })
        reloader.applyAtStart()
        return Server(registry: registry, catalog: catalog, status: status, reloader: reloader, logLevels: levels)
    }

    @Test func aReadingAppliesWhatChangedAndNamesWhatNeedsARestart() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write(
            "frametap.yaml",
            """
            serve:
              max-sessions: 8
              port: 8080
            sessions:
              kept: {}
              gone: {}
              tuned:
                quality: 80
            """)
        let server = try start(path)
        let kept = try #require(server.session("kept"))
        #expect(kept.standing == .declared)
        #expect(server.status.snapshot.lastReading?.changes == ["created": ["kept", "gone", "tuned"]])

        try folder.write(
            "frametap.yaml",
            """
            serve:
              max-sessions: 20
              session-idle-timeout: 60
              log-level: debug
              allow-sources: rtsp://cams.example
              port: 9000
              threads: 3
            sessions:
              kept: {}
              tuned:
                quality: 50
              added:
                decode: keyframes
            """)
        guard case .applied(let outcome, let changed, let restartNeeded) = server.reloader.reloadNow(.signal) else {
            Issue.record("the reading was refused")
            return
        }
        #expect(outcome.changes == ["created": ["added"], "removed": ["gone"], "updated": ["tuned"]])
        #expect(Set(changed) == ["max-sessions", "session-idle-timeout", "log-level", "allow-sources"])
        #expect(restartNeeded == ["port", "threads"])
        let limits = server.registry.limits.current
        #expect(limits.maxSessions == 20 && limits.idleTimeout == .seconds(60))
        #expect(limits.sourcePolicy.allowsAnything)
        #expect(server.logLevels.set.withLock { $0 }.last == .debug)
        #expect(server.session("kept") === kept, "the unchanged session is the same session")
        #expect(server.session("gone") == nil)
        #expect(server.session("tuned")?.status().quality == 50)
        #expect(server.session("added")?.status().decode == .keyframes)
        let reading = try #require(server.status.snapshot.lastReading)
        #expect(reading.trigger == .signal && reading.rejection == nil && reading.restartNeeded == ["port", "threads"])

        // Until the restart, every reading says so, though the options did not change again.
        guard case .applied(_, let changedAgain, let stillNeeded) = server.reloader.reloadNow(.file) else {
            Issue.record("the second reading was refused")
            return
        }
        #expect(changedAgain.isEmpty && stillNeeded == ["port", "threads"])
    }

    /// The command line wins over the file, so a file's change of an option the command line gives
    /// changes nothing and needs no restart.
    @Test func optionsTheCommandLineGivesAreNotTheFiles() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write("f.yaml", "serve:\n  max-sessions: 8\n  port: 8080\n")
        let server = try start(path, ["--port", "7000", "--max-sessions", "5"])
        try folder.write("f.yaml", "serve:\n  max-sessions: 9\n  port: 8081\n")
        guard case .applied(_, let changed, let restartNeeded) = server.reloader.reloadNow(.signal) else {
            Issue.record("the reading was refused")
            return
        }
        #expect(changed.isEmpty && restartNeeded.isEmpty)
        #expect(server.registry.limits.current.maxSessions == 5)
    }

    @Test(arguments: [
        ("serve:\n  max-sessions: 8\nsessions:\n  cam: {}\n  typo:\n    qualty: 3\n", 6, "unknown option"),
        ("serve:\n  max-sessions: 8\n  port: eighty\n", 3, "port"),
        ("serve:\n  max-sessions: 8\nsessions:\n  cam: {}\n  broken: [\n", 6, "YAML"),
        ("serve:\n  max-sessions: 1\nsessions:\n  cam: {}\n  second: {}\n", 5, "more than max-sessions"),
    ])
    func aFileThatDoesNotValidateChangesNothing(text: String, line: Int, says: String) throws {
        let folder = try TemporaryFolder()
        let path = try folder.write("f.yaml", "serve:\n  max-sessions: 4\nsessions:\n  cam:\n    quality: 60\n")
        let server = try start(path)
        let cam = try #require(server.session("cam"))
        let reader = server.registry.events.newestID
        try folder.write("f.yaml", text)
        guard case .rejected(let error) = server.reloader.reloadNow(.signal) else {
            Issue.record("a broken file was applied")
            return
        }
        #expect(error.description.contains(says), "\(error)")
        guard case .file(_, let errorLine, _) = error.origin else {
            Issue.record("the error names no line: \(error)")
            return
        }
        #expect(errorLine == line)
        #expect(server.session("cam") === cam && cam.status().quality == 60)
        #expect(server.registry.count == 1 && server.registry.limits.current.maxSessions == 4)
        let snapshot = server.status.snapshot
        #expect(snapshot.rejected == 1 && snapshot.applied == 1)
        #expect(snapshot.lastReading?.rejection?.line == line)
        guard case .events(let events, _) = server.registry.events.read(after: reader) else {
            Issue.record("the events were missed")
            return
        }
        #expect(events.map(\.kind) == [.configRejected])
        #expect(events.first?.details.line == line && events.first?.session == nil)
    }

    /// A file gone (deleted, a volume unmounted) is a rejected reading of that file: `/system`
    /// and the event name it, though no line is at fault.
    @Test func aFileThatCannotBeReadIsNamed() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write("f.yaml", "serve:\n  max-sessions: 4\n")
        let server = try start(path)
        try FileManager.default.removeItem(atPath: path)
        guard case .rejected = server.reloader.reloadNow(.signal) else {
            Issue.record("a missing file was applied")
            return
        }
        let rejection = try #require(server.status.snapshot.lastReading?.rejection)
        #expect(rejection.file == path && rejection.line == nil && rejection.message.contains("cannot read"))
    }

    @Test func declaredSessionsMustFitTheLimits() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write(
            "f.yaml",
            "serve:\n  max-pull-sessions: 1\nsessions:\n  a:\n    source:\n      url: rtsp://cam.example/a\n  b:\n    source:\n      url: rtsp://cam.example/b\n")
        #expect(
            throws: ServeConfigurationError(
                "the file declares 2 sessions that pull, more than max-pull-sessions (1)",
                origin: .file(path: path, line: 7, column: 3), key: "sessions.b")
        ) {
            try ServeConfiguration(arguments: ["--config", path], environment: [:])
        }
    }

    /// An editor's save (a new file renamed over the old one) and a Kubernetes ConfigMap update (a
    /// `..data` link swapped to a new directory) are both seen; a write of the same bytes is not.
    @Test func theWatcherSeesAnEditAndAConfigMapSwap() async throws {
        let folder = try TemporaryFolder()
        let manager = FileManager.default
        try manager.createDirectory(atPath: folder.path + "/..2026_01", withIntermediateDirectories: true)
        try folder.write("..2026_01/frametap.yaml", "sessions:\n  a: {}\n")
        try manager.createSymbolicLink(atPath: folder.path + "/..data", withDestinationPath: "..2026_01")
        try manager.createSymbolicLink(atPath: folder.path + "/frametap.yaml", withDestinationPath: "..data/frametap.yaml")
        let changes = Mutex(0)
        let changed = Signal()
        let watcher = try #require(
            ConfigurationWatcher(path: folder.path + "/frametap.yaml", quiet: .milliseconds(50), logger: quiet) {
                changes.withLock { $0 += 1 }
                changed.signal()
            })
        defer { watcher.stop() }

        // The ConfigMap's swap: a new directory, a new link, renamed over `..data` at once.
        try manager.createDirectory(atPath: folder.path + "/..2026_02", withIntermediateDirectories: true)
        try folder.write("..2026_02/frametap.yaml", "sessions:\n  b: {}\n")
        try manager.createSymbolicLink(atPath: folder.path + "/..data_tmp", withDestinationPath: "..2026_02")
        #expect(rename(folder.path + "/..data_tmp", folder.path + "/..data") == 0)
        try manager.removeItem(atPath: folder.path + "/..2026_01")
        try await changed.wait(for: "the watcher to see the ConfigMap's swap")
        #expect(changes.withLock { $0 } == 1)

        // The same bytes again: no reading.
        try folder.write("..2026_02/frametap.yaml", "sessions:\n  b: {}\n")
        try await Task.sleep(for: .milliseconds(400))
        #expect(changes.withLock { $0 } == 1)

        // An editor's save of the file the link leads to now.
        try folder.write("..2026_02/frametap.yaml.swp", "sessions:\n  c: {}\n")
        #expect(rename(folder.path + "/..2026_02/frametap.yaml.swp", folder.path + "/..2026_02/frametap.yaml") == 0)
        try await changed.wait(for: "the watcher to see the edit")
        #expect(changes.withLock { $0 } == 2)
    }

    @Test func theWatcherSeesAPlainFileRewritten() async throws {
        let folder = try TemporaryFolder()
        let path = try folder.write("frametap.yaml", "sessions:\n  a: {}\n")
        let changed = Signal()
        let watcher = try #require(ConfigurationWatcher(path: path, quiet: .milliseconds(50), logger: quiet) { changed.signal() })
        defer { watcher.stop() }
        try folder.write("frametap.yaml", "sessions:\n  a: {}\n  b: {}\n")
        try await changed.wait(for: "the watcher to see the file written again")
    }
}

/// The log levels a reloader set, in order.
private final class LogLevels: Sendable {
    let set = Mutex<[Logger.Level]>([])
}
