import ArgumentParser
import Containers
import Decoding
import FoundationEssentials
import FrameTapAPI
import HTTPServer
import Imaging
import Ingest
import Logging
import ServeOptions
import ServiceLog
import SessionCatalog
import Sessions
import Synchronization
import Timekeeping
import VideoCoding

#if canImport(Glibc)
    import Glibc
#endif

/// `frametap serve`: the HTTP service. Its options are `ServeOptions`' table, read from the
/// command line, the environment and the configuration file; ArgumentParser hands them over
/// unparsed, since its options are declared one property each and the table is data.
struct ServeCommand: ParsableCommand {
    static let usage = "frametap serve [--<option> <value> ...]"

    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the HTTP service.",
        // Given in the discussion, above the options it introduces (ArgumentParser would put it below).
        usage: "",
        discussion: """
            USAGE: \(usage)

            \(OptionDocumentation.precedence)

            OPTIONS:
            \(OptionDocumentation.helpList())
            """,
        // -h and --help reach the table's reader, which answers with the same text.
        helpNames: []
    )

    @Argument(parsing: .captureForPassthrough, help: .hidden)
    var arguments: [String] = []

    func validate() throws {
        if try commandLine().helpRequested {
            throw CleanExit.message(FrameTapCommand.helpMessage(for: ServeCommand.self, columns: 80))
        }
    }

    private func commandLine() throws -> CommandLineOptions {
        do throws(ServeConfigurationError) {
            return try CommandLineOptions(arguments)
        } catch {
            throw usageError(error)
        }
    }

    /// Bad usage as ArgumentParser reports its own: the error, the usage, where the help is
    /// (not for a mistake in the configuration file, whose line says it all); exit 64. Asked
    /// for JSON lines, one JSON line instead, so that a log shipper reads why the start failed.
    private func usageError(_ error: ServeConfigurationError) -> ExitCode {
        if LogFormat.requested(arguments: arguments, environment: ProcessInfo.processInfo.environment) == .json {
            let line = JSONLogLine.make(
                at: Date(), level: .critical, logger: "frametap", source: "frametap", message: "cannot start",
                metadata: ["reason": "\(error)", "help": "frametap serve --help"])
            printError(String(line.dropLast()))
        } else if case .file = error.origin {
            printError("Error: \(error)")
        } else {
            printError("Error: \(error)\nUsage: \(Self.usage)\n  See 'frametap serve --help' for more information.")
        }
        return .validationFailure
    }

    func run() throws {
        let commandLine = try commandLine()
        let settings: ServeConfiguration
        do throws(ServeConfigurationError) {
            settings = try ServeConfiguration(commandLine: commandLine, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw usageError(error)
        }
        if settings.printConfiguration {
            print(settings.printed, terminator: "")
            return
        }
        FileDescriptorLimit.raiseToMaximum()
        // The one real clock of the process starts here, and every part reads it from here on.
        let clock = SystemClock()
        let level = LogLevelSwitch(settings.logLevel)
        let budget = LogLineBudget(clock: clock)
        let format = settings.logFormat
        LoggingSystem.bootstrap { label in
            let lines = { (label: String) -> any LogHandler in
                switch format {
                case .text: StreamLogHandler.standardError(label: label)
                case .json: JSONLineLogHandler(label: label)
                }
            }
            return ServiceLogHandler(
                wrapping: lines(label), notes: lines(ServiceLogHandler.notesLabel), level: { level.current }, budget: budget,
                unbudgetedSources: [PulledSourceLog.source])
        }
        // libav's own lines go through the same handler (printable, budgeted, text or JSON).
        let libav = Logger(label: "libav")
        LibavLogFilter.install { line, isError in
            // By bytes: "\r\n" is one Character, which `hasSuffix("\n")` would not see.
            let text = line.utf8.last == 0x0A ? String(decoding: line.utf8.dropLast(), as: UTF8.self) : line
            libav.log(level: isError ? .error : .warning, "\(text)", source: "libav")
        }
        let logger = Logger(label: "frametap")
        // Which build runs with what, first in the log, for whoever reads it after an incident.
        logger.notice(
            "starting",
            metadata: [
                "version": "\(SystemInfo.version)", "pid": "\(getpid())",
                "options": "\(settings.givenOptions.isEmpty ? "all defaults" : settings.givenOptions)",
            ])
        for message in settings.unknownVariableMessages { logger.warning("\(message)") }
        // What the sessions share at run time, built once.
        let services = SessionServices(
            configuration: settings.server, clock: clock,
            devicePool: HardwareDevicePool(cudaContextsPerDevice: settings.server.cudaContextsPerDevice, clock: clock),
            frameDownloads: .shared, decoderFactory: LibavDecoderFactory(), encoderFactory: PictureEncoders.standard(settings.encoder))
        let hardware = probeHardware(settings.server, services: services, logger: logger)
        for key in settings.access.skippedKeys {
            logger.notice("JWKS key left out", metadata: ["key": "\(key)"])
        }

        var state: (store: SessionStateStore, saved: [SessionID: SessionOptions])?
        if let directory = settings.stateDirectory {
            do throws(SessionStateStore.Failure) {
                state = try SessionStateStore.open(directory: directory)
            } catch {
                logger.critical("cannot start", metadata: ["reason": "\(error)"])
                throw ExitCode.failure
            }
            logger.info("state directory", metadata: ["directory": "\(directory)", "sessions": "\(state?.saved.count ?? 0)"])
        }

        let metrics = FrameTapMetrics()
        metrics.bootstrapGlobalMetricsSystem()
        budget.countLeftOut { metrics.recordLogLinesLeftOut($0) }
        var http = settings.http
        http.logger = Logger(label: "frametap.http")
        let service = FrameTapService(
            http: http, sessions: settings.server, services: services,
            access: settings.access.isEnabled ? AccessControl(settings.access, clock: clock) : nil,
            metrics: metrics, hardware: hardware, state: state, configurationFile: settings.configurationFile,
            logger: Logger(label: "frametap.sessions"))
        let reloader = ConfigurationReloader(
            commandLine: commandLine, environment: ProcessInfo.processInfo.environment, started: settings,
            catalog: service.catalog, status: service.configuration, logger: Logger(label: "frametap.configuration"),
            setLogLevel: { level.set($0) })
        reloader.applyAtStart()
        if state != nil {
            let restored = service.catalog.restore()
            logger.info(
                "kept sessions made again",
                metadata: [
                    "restored": "\(restored.restored.count)", "failed": "\(restored.failed.count)",
                    "declaredNow": "\(restored.declaredNow.count)",
                ])
        }
        let watcher = settings.configurationFile.flatMap { file in
            ConfigurationWatcher(path: file, logger: Logger(label: "frametap.configuration")) { reloader.reload(.file) }
        }
        defer { watcher?.stop() }
        do {
            // Without a file there is nothing to read again (SIGHUP still reloads the TLS files).
            var onHangup: (@Sendable () -> Void)?
            if settings.configurationFile != nil {
                onHangup = { reloader.reload(.signal) }
            }
            try service.run(onHangup: onHangup)
        } catch {
            logger.critical("cannot start", metadata: ["reason": "\(error)"])
            throw ExitCode.failure
        }
        logger.notice("stopped")
    }

    /// The decoding hardware, logged at start-up so an operator sees whether pictures will be
    /// decoded in hardware and why not (the same facts as `GET /system`). Unless sessions decode
    /// in software only, each CUDA device is opened now, into the device pool the sessions share:
    /// a CUDA context takes about a quarter of a second, better paid once here than by the first
    /// session.
    private func probeHardware(
        _ configuration: ServerConfiguration, services: SessionServices, logger: Logger
    ) -> HardwareReport {
        let hardware =
            configuration.backend == .software
            ? HardwareProbe.probe() : HardwareProbe.probe(openingWith: services.devicePool)
        if let error = hardware.cuda.error {
            logger.info("no CUDA device", metadata: ["reason": "\(error)"])
        }
        for device in hardware.cuda.devices {
            var metadata: Logger.Metadata = [
                "device": "\(device.device)", "name": "\(device.name ?? "?")",
                "memoryMiB": "\(device.totalMemoryBytes.map { String($0 >> 20) } ?? "?")",
                "driver": "\(hardware.cuda.driverVersion ?? "?")", "nvdec": "\(hardware.cuda.libavcodecNVDEC)",
                "opened": "\(device.opened.map(String.init(describing:)) ?? "not tried")",
            ]
            if let error = device.error {
                metadata["reason"] = "\(error)"
                logger.warning("CUDA device unusable", metadata: metadata)
            } else {
                logger.info("CUDA device", metadata: metadata)
            }
        }
        for node in hardware.renderNodes {
            if let error = node.error {
                logger.warning("render node unusable", metadata: ["node": "\(node.path)", "reason": "\(error)"])
            } else {
                logger.info(
                    "render node",
                    metadata: [
                        "node": "\(node.path)", "vendor": "\(node.vendor ?? "?")",
                        "vaapi": "\(node.vaapiVersion ?? "?")",
                        "h264Profiles": "\(node.h264Profiles.isEmpty ? "none" : node.h264Profiles.joined(separator: ","))",
                        "hevcProfiles": "\(node.hevcProfiles.isEmpty ? "none" : node.hevcProfiles.joined(separator: ","))",
                    ])
            }
        }
        var options = services.decoderOptions(configuration, backend: configuration.backend, mode: .all)
        options.emulateFFmpegProbe = false
        let devices = configuration.hardwareDevices.map { "\($0)" } ?? "all"
        do throws(DecodeError) {
            let probe = try BackendSupervisor(options: options, factory: services.decoderFactory)
            logger.info(
                "hardware decoding",
                metadata: [
                    "devices": "\(devices)", "backendDefault": "\(configuration.backend.rawValue)",
                    "backend": "\(probe.backend.rawValue)", "reason": "\(probe.backendReason)",
                ])
        } catch {
            // The server still runs: session creation answers 503 decoder_unavailable.
            logger.warning(
                "hardware decoding unavailable",
                metadata: [
                    "devices": "\(devices)", "backendDefault": "\(configuration.backend.rawValue)",
                    "code": "\(error.code.rawValue)", "reason": "\(error.message)",
                ])
        }
        return hardware
    }
}

/// Every connection is a file descriptor; the soft limit is often 1024, below the server's
/// connection limit, so the process takes what the hard limit allows.
enum FileDescriptorLimit {
    static func raiseToMaximum() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}

/// `--log-level`, which a reading of the configuration file may change while the server runs:
/// every log handler reads it at each line (and libavcodec's own logging follows it).
final class LogLevelSwitch: Sendable {
    private let level: Mutex<Logger.Level>

    init(_ level: Logger.Level) {
        self.level = Mutex(level)
        LibavLogging.set(level <= .debug ? .warnings : .quiet)
    }

    var current: Logger.Level { level.withLock { $0 } }

    func set(_ new: Logger.Level) {
        let old = level.withLock { level in
            defer { level = new }
            return level
        }
        guard old != new else { return }
        LibavLogging.set(new <= .debug ? .warnings : .quiet)
        Logger(label: "frametap").notice("log level changed", metadata: ["from": "\(old)", "to": "\(new)"])
    }
}
