import ArgumentParser
import Containers
import Decoding
import FoundationEssentials
import FrameTapAPI
import HTTPServer
import Imaging
import Logging
import Sessions
import VideoCoding

#if canImport(Glibc)
    import Glibc
#endif

/// `frametap serve`: the HTTP service. Every option can also come from a `FRAMETAP_*`
/// environment variable (handy in containers); an option given on the command line wins.
struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the HTTP service.",
        discussion: """
            Each option may also be set with the environment variable named in its help \
            (the command line wins). SIGINT or SIGTERM stops the server gracefully (exit 0).
            """
    )

    @Option(help: "Numeric address to listen on. [FRAMETAP_HOST, default 0.0.0.0]")
    var host: String?

    @Option(help: "TCP port. [FRAMETAP_PORT, default 8080]")
    var port: Int?

    @Option(help: "HTTP worker threads. [FRAMETAP_THREADS, default: number of cores, at least 2]")
    var threads: Int?

    private static let httpDefaults = HTTPServerConfiguration()

    @Option(help: "Open connections at most. [FRAMETAP_MAX_CONNECTIONS, default \(httpDefaults.maxConnections)]")
    var maxConnections: Int?

    @Option(
        name: .customLong("max-connections-per-ip"),
        help: "Open connections per client address at most; 0 = no limit (behind a proxy). [FRAMETAP_MAX_CONNECTIONS_PER_IP, default \(httpDefaults.maxConnectionsPerIP)]")
    var maxConnectionsPerIP: Int?

    @Option(help: "Seconds a connection has to send a request's headers, from opening or from its previous answer. [FRAMETAP_HEADER_TIMEOUT, default \(httpDefaults.headerTimeout.components.seconds)]")
    var headerTimeout: Double?

    @Option(help: "Seconds a request body may take to deliver each \(httpDefaults.bodyProgressBytes) bytes, counted while the server reads it; a slower one is answered 408 body_timeout and closed. [FRAMETAP_BODY_TIMEOUT, default \(httpDefaults.bodyTimeout.components.seconds)]")
    var bodyTimeout: Double?

    @Option(help: "libavcodec threads per session (0 = automatic). [FRAMETAP_DECODER_THREADS, default 1]")
    var decoderThreads: Int?

    @Option(help: "auto (NVDEC, then VA-API, then software, per session), cuda or vaapi (required), or software. [FRAMETAP_BACKEND, default auto]")
    var backend: DecoderBackendChoice?

    @Option(
        name: .customLong("hw-devices"),
        help: "Hardware devices sessions may decode on, e.g. cuda:0,cuda:1,/dev/dri/renderD128; new sessions go to the least loaded. [FRAMETAP_HW_DEVICES, default: every CUDA device, then every render node]")
    var hwDevices: String?

    @Option(help: "Most sessions at once. [FRAMETAP_MAX_SESSIONS, default 64]")
    var maxSessions: Int?

    @Option(help: "Largest body of one upload request in bytes, or 'unlimited'. [FRAMETAP_MAX_BODY_BYTES, default unlimited]")
    var maxBodyBytes: String?

    @Option(help: "Largest body a multipart-answer upload may spool to the temporary directory. [FRAMETAP_MAX_SPOOL_BYTES, default 2147483648]")
    var maxSpoolBytes: Int?

    @Option(help: "What every multipart-answer upload may spool together, in bytes; the upload that would pass it is answered 413 spool_full. [FRAMETAP_MAX_SPOOL_TOTAL_BYTES, default 4294967296]")
    var maxSpoolTotalBytes: Int?

    @Option(
        name: .customLong("max-nal-bytes"),
        help: "Largest NAL unit in bytes. [FRAMETAP_MAX_NAL_BYTES, default \(AnnexBSplitter.defaultMaxNALBytes)]")
    var maxNALBytes: Int?

    @Option(help: "Largest picture (width x height) decoded or produced. [FRAMETAP_MAX_PICTURE_PIXELS, default \(PictureSizeLimit.defaultMaxPixels)]")
    var maxPicturePixels: Int?

    @Option(help: "Memory every session's decoder may hold together, in bytes, or 'auto' (half of the container's memory limit, or of the machine's memory). A stream whose decoder would not fit is refused with decoder_memory_exceeded. [FRAMETAP_MAX_DECODER_MEMORY, default auto]")
    var maxDecoderMemory: String?

    @Option(help: "Seconds without upload, viewer or request before a session is removed. [FRAMETAP_SESSION_IDLE_TIMEOUT, default 300]")
    var sessionIdleTimeout: Double?

    @Option(help: "Bytes of a container push kept for its demuxer to seek back in (an MP4 whose moov follows its media data needs all of that data). [FRAMETAP_CONTAINER_SEEK_WINDOW, default 33554432]")
    var containerSeekWindow: Int?

    @Option(help: "Sources pull sessions may pull from, comma-separated SCHEME://HOST[:PORT] entries; HOST is a name, *.suffix, an address, a network (10.0.0.0/8, [fd00::]/8) or *, SCHEME rtsp, rtmp, srt, http, https or *. Pulling is off without it. [FRAMETAP_ALLOW_SOURCES, default none]")
    var allowSources: String?

    @Option(help: "Sessions that pull a source at once, at most. [FRAMETAP_MAX_PULL_SESSIONS, default 16]")
    var maxPullSessions: Int?

    @Option(help: "Seconds a pull has to connect and read its stream's header. [FRAMETAP_SOURCE_CONNECT_TIMEOUT, default 10]")
    var sourceConnectTimeout: Double?

    @Option(help: "Seconds a live pull may send nothing before it is lost and retried. [FRAMETAP_SOURCE_READ_TIMEOUT, default 10]")
    var sourceReadTimeout: Double?

    @Option(help: "Longest wait in seconds between a pull's attempts; the back-off doubles from 0.5 s up to it. [FRAMETAP_SOURCE_RETRY_MAX, default 30]")
    var sourceRetryMax: Double?

    @Option(help: "How sessions that do not say decode: all, keyframes or on-demand (decode only while pictures are asked for). [FRAMETAP_DEFAULT_DECODE, default all]")
    var defaultDecode: DecodeMode?

    @Option(help: "Seconds of compressed history each session keeps, in whole GOPs. [FRAMETAP_HISTORY_SECONDS, default 10]")
    var historySeconds: Double?

    @Option(help: "Bytes of compressed history each session keeps at most, in whole GOPs. [FRAMETAP_HISTORY_BYTES, default 67108864]")
    var historyBytes: Int?

    @Option(help: "Seconds an on-demand session keeps decoding after the last request for a picture, before it releases its decoder. [FRAMETAP_ON_DEMAND_LINGER, default 10]")
    var onDemandLinger: Double?

    @Option(
        name: .customLong("max-catchup-decoders"),
        help: "Catch-up decodes (on-demand wake-ups, pictures from the past) running at once. [FRAMETAP_MAX_CATCHUP_DECODERS, default: number of cores]")
    var maxCatchUpDecoders: Int?

    @Option(
        name: .customLong("max-catchup-queue"),
        help: "Catch-up decodes waiting for a decoder at most; past it a request gets 503 catchup_queue_full. [FRAMETAP_MAX_CATCHUP_QUEUE, default: 8 per catch-up decoder]")
    var maxCatchUpQueue: Int?

    @Option(
        name: .customLong("catchup-decoder-threads"),
        help: "libavcodec threads of a catch-up decoder (0 = automatic). [FRAMETAP_CATCHUP_DECODER_THREADS, default: 2, at most the cores]")
    var catchUpDecoderThreads: Int?

    @Option(help: "The admin bearer token: it may do everything. With it, --jwt-secret or --jwks-file, every route but /healthz and the console needs a token. [FRAMETAP_AUTH_TOKEN, default none]")
    var authToken: String?

    @Option(help: "Accept HS256 JWTs signed with this secret (at least 32 bytes), scoped by their frametap:scope and frametap:sessions claims. [FRAMETAP_JWT_SECRET, default none]")
    var jwtSecret: String?

    @Option(help: "Accept RS256 and ES256 JWTs signed by a key of this JWKS file ({\"keys\": [...]}). [FRAMETAP_JWKS_FILE, default none]")
    var jwksFile: String?

    @Option(help: "Serve HTTPS with this PEM certificate chain (leaf first); needs --tls-key; SIGHUP reloads both. [FRAMETAP_TLS_CERT, default none]")
    var tlsCert: String?

    @Option(help: "The PEM private key of --tls-cert. [FRAMETAP_TLS_KEY, default none]")
    var tlsKey: String?

    @Option(help: "trace, debug, info, notice, warning, error or critical. [FRAMETAP_LOG_LEVEL, default info]")
    var logLevel: String?

    func validate() throws {
        _ = try resolved()
    }

    func run() throws {
        let settings = try resolved()
        FileDescriptorLimit.raiseToMaximum()
        let level = settings.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        LibavLogging.set(level <= .debug ? .warnings : .quiet)
        LibavLogFilter.install()
        let logger = Logger(label: "frametap")
        let hardware = probeHardware(settings.sessions, logger: logger)
        for key in settings.access.skippedKeys {
            logger.notice("JWKS key left out", metadata: ["key": "\(key)"])
        }

        let metrics = FrameTapMetrics()
        metrics.bootstrapGlobalMetricsSystem()
        var http = settings.http
        http.logger = Logger(label: "frametap.http")
        let service = FrameTapService(
            http: http, sessions: settings.sessions, access: settings.access.isEnabled ? settings.access : nil,
            metrics: metrics, hardware: hardware,
            logger: Logger(label: "frametap.sessions"))
        do {
            try service.run()
        } catch {
            logger.critical("cannot start", metadata: ["reason": "\(error)"])
            throw ExitCode.failure
        }
        logger.info("stopped")
    }

    /// The decoding hardware, logged at start-up so an operator sees whether pictures will be
    /// decoded in hardware and why not (the same facts as `GET /system`). Unless sessions decode
    /// in software only, each CUDA device is opened now, into the device pool the sessions share:
    /// a CUDA context takes about a quarter of a second, better paid once here than by the first
    /// session.
    private func probeHardware(_ configuration: ServerConfiguration, logger: Logger) -> HardwareReport {
        let hardware =
            configuration.backend == .software
            ? HardwareProbe.probe() : HardwareProbe.probe(openingWith: configuration.devicePool)
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
        var options = configuration.decoderOptions(backend: configuration.backend, mode: .all)
        options.emulateFFmpegProbe = false
        let devices = configuration.hardwareDevices.map { "\($0)" } ?? "all"
        do throws(DecodeError) {
            let probe = try BackendSupervisor(options: options, factory: LibavDecoderFactory())
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

    /// The admin token and the JWT keys, from options or the environment; a JWKS file is read now,
    /// so that a missing or broken one stops the start, not the first request.
    private func accessControl(_ env: EnvironmentOptions) throws -> AccessControl {
        let token = try authToken ?? env.string("FRAMETAP_AUTH_TOKEN")
        let secret = try jwtSecret ?? env.string("FRAMETAP_JWT_SECRET")
        var jwks: String?
        if let path = try jwksFile ?? env.string("FRAMETAP_JWKS_FILE"), !path.isEmpty {
            guard let bytes = FileManager.default.contents(atPath: path) else {
                throw ValidationError("cannot read the JWKS file \(path)")
            }
            jwks = String(decoding: bytes, as: UTF8.self)
        }
        do {
            return try AccessControl(adminToken: token, jwtSecret: secret, jwks: jwks)
        } catch {
            throw ValidationError("access control: \(error.message)")
        }
    }

    struct Settings {
        var http: HTTPServerConfiguration
        var sessions: ServerConfiguration
        var logLevel: Logger.Level
        /// Who may do what; its `skippedKeys` (JWKS keys of another algorithm) go to the start-up log.
        var access: AccessControl
    }

    /// Command line, then environment, then defaults; every value checked.
    func resolved(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Settings {
        let env = EnvironmentOptions(environment)
        var http = HTTPServerConfiguration()
        http.host = try host ?? env.string("FRAMETAP_HOST") ?? "0.0.0.0"
        http.port = UInt16(
            try env.integer(port, "FRAMETAP_PORT", default: 8080, in: 0...65535, else: "port must be 0...65535"))
        http.threadPoolSize = try env.integer(
            threads, "FRAMETAP_THREADS", default: max(2, ProcessInfo.processInfo.activeProcessorCount), in: 1...256,
            else: "threads must be 1...256")
        http.maxConnections = try env.integer(
            maxConnections, "FRAMETAP_MAX_CONNECTIONS", default: http.maxConnections, in: 1...1_000_000,
            else: "max connections must be 1...1000000")
        http.maxConnectionsPerIP = try env.integer(
            maxConnectionsPerIP, "FRAMETAP_MAX_CONNECTIONS_PER_IP", default: http.maxConnectionsPerIP, in: 0...,
            else: "max connections per IP must be 0 (no limit) or more")
        http.headerTimeout = try env.seconds(
            headerTimeout, "FRAMETAP_HEADER_TIMEOUT", default: Double(http.headerTimeout.components.seconds),
            in: EnvironmentOptions.aboveZero...3600, else: "header timeout must be a positive number of seconds (at most 3600)")
        http.bodyTimeout = try env.seconds(
            bodyTimeout, "FRAMETAP_BODY_TIMEOUT", default: Double(http.bodyTimeout.components.seconds),
            in: EnvironmentOptions.aboveZero...3600, else: "body timeout must be a positive number of seconds (at most 3600)")
        let access = try accessControl(env)
        let certificate = try tlsCert ?? env.string("FRAMETAP_TLS_CERT") ?? ""
        let key = try tlsKey ?? env.string("FRAMETAP_TLS_KEY") ?? ""
        switch (certificate.isEmpty, key.isEmpty) {
        case (true, true): http.tls = nil
        case (false, false): http.tls = TLSFiles(certificatePath: certificate, keyPath: key)
        default: throw ValidationError("--tls-cert and --tls-key go together")
        }

        var sessions = ServerConfiguration()
        sessions.backend = try backend ?? env.parse("FRAMETAP_BACKEND", DecoderBackendChoice.init(rawValue:)) ?? .auto
        if let devices = try hwDevices ?? env.string("FRAMETAP_HW_DEVICES"), !devices.isEmpty {
            do {
                sessions.hardwareDevices = try HardwareDeviceList(parsing: devices)
            } catch {
                throw ValidationError("--hw-devices: \(error.message)")
            }
        }
        sessions.decoderThreads = try decoderThreads ?? env.int("FRAMETAP_DECODER_THREADS") ?? 1
        sessions.maxSessions = try maxSessions ?? env.int("FRAMETAP_MAX_SESSIONS") ?? 64
        let bodyLimit = try maxBodyBytes ?? env.string("FRAMETAP_MAX_BODY_BYTES") ?? "unlimited"
        if bodyLimit == "unlimited" {
            sessions.maxBodyBytes = nil
        } else if let limit = Int(bodyLimit), limit >= 1 {
            sessions.maxBodyBytes = limit
        } else {
            throw ValidationError("max body bytes must be a positive integer or 'unlimited', got '\(bodyLimit)'")
        }
        sessions.maxSpoolBytes = try maxSpoolBytes ?? env.int("FRAMETAP_MAX_SPOOL_BYTES") ?? 2 << 30
        let spoolTotal = try env.integer(
            maxSpoolTotalBytes, "FRAMETAP_MAX_SPOOL_TOTAL_BYTES", default: 4 << 30, in: 1...,
            else: "max spool total bytes must be positive")
        sessions.spoolBudget = SpoolBudget(limit: spoolTotal)
        sessions.maxNALBytes = try maxNALBytes ?? env.int("FRAMETAP_MAX_NAL_BYTES") ?? AnnexBSplitter.defaultMaxNALBytes
        let pixels = try env.integer(
            maxPicturePixels, "FRAMETAP_MAX_PICTURE_PIXELS", default: PictureSizeLimit.defaultMaxPixels, in: 1...,
            else: "max picture pixels must be positive")
        sessions.pictureSizeLimit = PictureSizeLimit(maxPixels: pixels)
        let decoderMemory = try maxDecoderMemory ?? env.string("FRAMETAP_MAX_DECODER_MEMORY") ?? "auto"
        if decoderMemory == "auto" {
            sessions.decoderMemory = DecoderMemoryBudget(limit: DecoderMemoryBudget.defaultLimit())
        } else if let limit = Int(decoderMemory), limit >= 1 << 20 {
            sessions.decoderMemory = DecoderMemoryBudget(limit: limit)
        } else {
            throw ValidationError("max decoder memory must be 'auto' or a number of bytes of at least 1048576, got '\(decoderMemory)'")
        }
        sessions.idleTimeout = try env.seconds(
            sessionIdleTimeout, "FRAMETAP_SESSION_IDLE_TIMEOUT", default: 300, in: EnvironmentOptions.aboveZero...31_536_000,
            else: "session idle timeout must be a positive number of seconds")
        sessions.containerSeekWindow = try containerSeekWindow ?? env.int("FRAMETAP_CONTAINER_SEEK_WINDOW") ?? 32 << 20
        if let allowed = try allowSources ?? env.string("FRAMETAP_ALLOW_SOURCES") {
            do {
                sessions.sourcePolicy = try SourcePolicy(parsing: allowed)
            } catch {
                throw ValidationError(error.message)
            }
        }
        sessions.maxPullSessions = try maxPullSessions ?? env.int("FRAMETAP_MAX_PULL_SESSIONS") ?? 16
        func sourceSeconds(_ option: Double?, _ variable: String, default value: Double, _ what: String) throws -> Duration {
            try env.seconds(option, variable, default: value, in: 0.1...86400, else: "\(what) must be a number of seconds from 0.1 to 86400")
        }
        sessions.sourceConnectTimeout = try sourceSeconds(
            sourceConnectTimeout, "FRAMETAP_SOURCE_CONNECT_TIMEOUT", default: 10, "the source connect timeout")
        sessions.sourceReadTimeout = try sourceSeconds(
            sourceReadTimeout, "FRAMETAP_SOURCE_READ_TIMEOUT", default: 10, "the source read timeout")
        sessions.sourceRetryMax = try sourceSeconds(sourceRetryMax, "FRAMETAP_SOURCE_RETRY_MAX", default: 30, "the source retry maximum")
        sessions.defaultDecode =
            try defaultDecode ?? env.parse("FRAMETAP_DEFAULT_DECODE", DecodeMode.init(rawValue:)) ?? .all
        sessions.historySeconds = try env.seconds(
            historySeconds, "FRAMETAP_HISTORY_SECONDS", default: 10, in: EnvironmentOptions.aboveZero...3600,
            else: "history seconds must be a positive number of seconds (at most 3600)")
        sessions.historyBytes = try historyBytes ?? env.int("FRAMETAP_HISTORY_BYTES") ?? ServerConfiguration.defaultHistoryBytes
        sessions.onDemandLinger = try env.seconds(
            onDemandLinger, "FRAMETAP_ON_DEMAND_LINGER", default: 10, in: 0...86_400,
            else: "on-demand linger must be 0 or more seconds (at most 86400)")
        let catchUps = try env.integer(
            maxCatchUpDecoders, "FRAMETAP_MAX_CATCHUP_DECODERS", default: ServerConfiguration.defaultCatchUpDecoders,
            in: 1...256, else: "max catch-up decoders must be 1...256")
        let catchUpQueue = try env.integer(
            maxCatchUpQueue, "FRAMETAP_MAX_CATCHUP_QUEUE", default: 8 * catchUps, in: 0...100_000,
            else: "max catch-up queue must be 0...100000")
        sessions.catchUpPool = CatchUpPool(slots: catchUps, queueLimit: catchUpQueue)
        sessions.catchUpDecoderThreads = try catchUpDecoderThreads ?? env.int("FRAMETAP_CATCHUP_DECODER_THREADS")
            ?? ServerConfiguration.defaultCatchUpDecoderThreads
        do {
            sessions = try sessions.validated()
        } catch {
            throw ValidationError(error.message)
        }

        let levelName = try logLevel ?? env.string("FRAMETAP_LOG_LEVEL") ?? "info"
        guard let level = Logger.Level(rawValue: levelName.lowercased()) else {
            throw ValidationError("log level must be one of trace, debug, info, notice, warning, error, critical")
        }
        return Settings(http: http, sessions: sessions, logLevel: level, access: access)
    }
}

extension DecodeMode: ExpressibleByArgument {}

/// `FRAMETAP_*` variables; a set but malformed value is an error, never silently ignored.
struct EnvironmentOptions {
    let environment: [String: String]
    init(_ environment: [String: String]) { self.environment = environment }

    func string(_ name: String) throws -> String? { environment[name] }

    func int(_ name: String) throws -> Int? { try parse(name) { Int($0) } }

    func parse<T>(_ name: String, _ make: (String) -> T?) throws -> T? {
        guard let text = environment[name] else { return nil }
        guard let value = make(text.trimmingWhitespace()) else {
            throw ValidationError("\(name)='\(text)' is not a valid value")
        }
        return value
    }

    /// The command line's `option`, else the variable, else `value`; one outside `valid` is
    /// refused with `complaint`.
    func integer(
        _ option: Int?, _ variable: String, default value: Int, in valid: some RangeExpression<Int>, else complaint: String
    ) throws -> Int {
        let number = try option ?? int(variable) ?? value
        guard valid.contains(number) else { throw ValidationError(complaint) }
        return number
    }

    /// Seconds as `integer` resolves them (a range never holds NaN or infinity), kept to the
    /// millisecond.
    func seconds(
        _ option: Double?, _ variable: String, default value: Double, in valid: ClosedRange<Double>, else complaint: String
    ) throws -> Duration {
        let seconds = try option ?? parse(variable, Double.init) ?? value
        guard valid.contains(seconds) else { throw ValidationError(complaint) }
        return .milliseconds(Int64(seconds * 1000))
    }

    /// The lower end of a range of seconds that must be positive: the smallest Double above 0.
    static let aboveZero = Double.leastNonzeroMagnitude
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
