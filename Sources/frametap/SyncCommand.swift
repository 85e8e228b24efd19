import ArgumentParser
import Decoding
import FoundationEssentials
import Logging
import ServiceLog
import SessionSync
import Sessions
import Timekeeping

#if canImport(Glibc)
    import Glibc
#endif

/// `frametap sync`: the sessions of a configuration file, kept in place across the instances
/// behind a gateway (see `SessionSyncer`), pass after pass until stopped.
struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Keep the sessions a configuration file declares in place through a gateway.",
        discussion: """
            Every --interval seconds: reads the file's sessions: (the format of serve --config), \
            PUTs each through the gateway (an unchanged one answers 200 and is not touched; one \
            whose instance died is created on the instance the gateway routes it to now), then \
            lists every instance (--instances, else the gateway) and deletes the sessions it \
            created that the file no longer declares, and second copies of declared ones. It \
            recognises its sessions by their owner (--owner) and keeps no state of its own. A \
            failing request is logged and retried next pass. Exit codes: 0 (--once: every \
            request succeeded), 1 (--once: something failed), 64 bad usage or a broken file at start.
            """
    )

    @Option(help: "The configuration file whose sessions: are kept. [FRAMETAP_CONFIG]")
    var config: String?

    @Option(help: "The gateway that routes by session id, http://HOST:PORT or https://HOST:PORT.")
    var url: String

    @Option(help: "Bearer token with the admin scope. [FRAMETAP_AUTH_TOKEN]")
    var token: String?

    @Option(help: "Read the token from this file (its trailing line break dropped).")
    var tokenFile: String?

    @Option(help: "Seconds from the start of one pass to the start of the next.")
    var interval: Double = 10

    @Option(
        help: """
            The instances behind the gateway, asked directly to find and delete sessions: a comma-separated \
            list of http://HOST:PORT; a HOST that is a name stands for every address it resolves to, each \
            pass (a Kubernetes headless Service). Without it, through the gateway (one instance only).
            """)
    var instances: String?

    @Option(help: "The owner this syncer marks its sessions with, and deletes only sessions of.")
    var owner: String = "frametap-sync"

    @Option(help: "Seconds each request may take, from connecting to the answer's last byte.")
    var timeout: Double = 5

    @Flag(help: "Run one pass and exit: 0 when every request succeeded, 1 otherwise.")
    var once = false

    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    func validate() throws {
        guard interval >= 0.5, interval <= 86400 else { throw ValidationError("--interval must be 0.5...86400 seconds") }
        guard timeout >= 0.1, timeout <= 300 else { throw ValidationError("--timeout must be 0.1...300 seconds") }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard token == nil || tokenFile == nil else { throw ValidationError("give --token or --token-file, not both") }
        _ = try settings(environment: [:], checkFile: false)
    }

    /// Everything the options say, checked (the file too, unless `checkFile` is false).
    private func settings(environment: [String: String], checkFile: Bool) throws -> SessionSyncer.Settings {
        do throws(SyncError) {
            let path = config ?? environment["FRAMETAP_CONFIG"] ?? ""
            if checkFile, path.isEmpty { throw SyncError("--config: give the configuration file (or FRAMETAP_CONFIG)") }
            let secret: String?
            if let tokenFile {
                guard let bytes = FileManager.default.contents(atPath: tokenFile) else {
                    throw SyncError("--token-file: cannot read \(tokenFile)")
                }
                secret = String(decoding: bytes, as: UTF8.self).trimmingSuffix { $0 == "\n" || $0 == "\r" }
            } else {
                secret = token ?? environment["FRAMETAP_AUTH_TOKEN"]
            }
            // It goes into a header line as it is: a line break would end the line and add others.
            if let secret, secret.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                throw SyncError("the token holds a control character (a line break?); a bearer token is one line of text")
            }
            let owner: SessionOwner
            do {
                owner = try SessionOwner(self.owner)
            } catch {
                throw SyncError("--owner: \(error.message)")
            }
            let settings = SessionSyncer.Settings(
                configurationPath: path, environment: environment, gateway: try HTTPEndpoint(parsing: url),
                instances: try instances.map { list throws(SyncError) in try InstanceDiscovery(parsing: list) }, owner: owner,
                client: SyncClient(token: secret.flatMap { $0.isEmpty ? nil : $0 }, timeout: .milliseconds(Int64(timeout * 1000)), clock: SystemClock()))
            return settings
        } catch {
            throw ValidationError(error.message)
        }
    }

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        let settings = try settings(environment: environment, checkFile: true)
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            ServiceLogHandler(
                wrapping: StreamLogHandler.standardError(label: label),
                notes: StreamLogHandler.standardError(label: ServiceLogHandler.notesLabel), level: { level }, budget: nil)
        }
        // libavformat's own lines (a refused connection) would repeat what the pass logs.
        LibavLogging.set(level <= .debug ? .warnings : .quiet)
        let logger = Logger(label: "frametap.sync")
        let syncer = SessionSyncer(settings: settings, logger: logger)
        // A file that is broken at start is a mistake to fix now; later, a broken edit is
        // logged and the pass skipped.
        let declared: Int
        do {
            declared = try syncer.declaredSessions().count
        } catch {
            printError("Error: \(error.message)")
            throw ExitCode.validationFailure
        }
        // As a container's first process, the default action of SIGTERM would be to ignore it.
        signal(SIGTERM) { _ in _exit(0) }
        signal(SIGINT) { _ in _exit(0) }
        logger.info(
            "sync started",
            metadata: [
                "file": "\(settings.configurationPath)", "declared": "\(declared)", "gateway": "\(settings.gateway)",
                "instances": "\(settings.instances.map { $0.entries.map(\.description).joined(separator: ",") } ?? "through the gateway")",
                "owner": "\(settings.owner)", "interval": "\(interval)",
            ])
        let clock = SystemClock()
        while true {
            let started = clock.uptime
            let report = syncer.runPass()
            if once { throw report.succeeded ? ExitCode.success : ExitCode.failure }
            let elapsed = Double(clock.uptime &- started) / 1e9
            let rest = max(0, interval - elapsed)
            var pause = timespec(tv_sec: Int(rest), tv_nsec: Int((rest - rest.rounded(.down)) * 1e9))
            var left = timespec()
            while nanosleep(&pause, &left) != 0 && errno == EINTR { pause = left }
        }
    }
}

extension String {
    fileprivate func trimmingSuffix(while predicate: (Character) -> Bool) -> String {
        var text = self
        while let last = text.last, predicate(last) { text.removeLast() }
        return text
    }
}
