import FoundationEssentials
import FrameTapAPI
import HTTPServer
import Imaging
import Logging
import ServiceLog
import Sessions

/// What `frametap serve` runs with: every option resolved (the command line, then the
/// environment, then the configuration file, then the default) and checked, mapped onto the
/// configuration types, and the sessions the file declares.
public struct ServeConfiguration: Sendable {
    /// One option's value and where it came from.
    public struct Resolved: Sendable {
        public let option: ServeOption
        /// nil: the default.
        public let text: String?
        public let origin: OptionOrigin
    }

    public var http: HTTPServerConfiguration
    public var server: ServerConfiguration
    /// Who may do what; its `skippedKeys` (JWKS keys of another algorithm) go to the start-up log.
    public var access: AccessControl.Credentials
    public var logLevel: Logger.Level
    public var logFormat: LogFormat
    /// The file's `sessions:`, in its order (none without a file).
    public var declaredSessions: [DeclaredSession]
    /// `--config`: the file, or nil.
    public var configurationFile: String?
    /// `--state-dir`: where the sessions made by `PUT` are kept, or nil.
    public var stateDirectory: String?
    /// `--print-config`: print `printed` and exit instead of serving.
    public var printConfiguration: Bool
    /// `--encoder`: how pictures are encoded (`PictureEncoders.standard`).
    public var encoder: PictureEncoderChoice
    /// Every option of the table, in its order.
    public let resolved: [Resolved]
    /// `FRAMETAP_*` variables of the environment that no option reads, each with what it may be a
    /// misspelling of: said at start (and by `--print-config`), not refused, since other tools may
    /// use the prefix too.
    public private(set) var unknownVariables: [(variable: String, suggestion: String?)] = []

    public init(arguments: [String], environment: [String: String]) throws(ServeConfigurationError) {
        try self.init(commandLine: CommandLineOptions(arguments), environment: environment)
    }

    /// Every value given anywhere is checked, also one that a source of higher precedence
    /// overrides: a mistake never waits for the day the override is taken away.
    public init(commandLine: CommandLineOptions, environment: [String: String]) throws(ServeConfigurationError) {
        let configOption = ServeOption.named("config")!
        let file = try Self.configurationFile(
            path: commandLine.value(of: configOption) ?? configOption.environmentVariable.flatMap { environment[$0] },
            environment: environment)
        var settings = ServeSettings.defaults
        var scratch = ServeSettings.defaults
        var resolved: [Resolved] = []
        for option in ServeOption.all {
            var given: [(text: String, origin: OptionOrigin)] = []
            if let text = commandLine.value(of: option) { given.append((text, .commandLine(option.commandLineName))) }
            if let variable = option.environmentVariable, let text = environment[variable] {
                given.append((text, .environment(variable)))
            }
            if let entry = file?.options.first(where: { $0.option.name == option.name }) {
                given.append((entry.text, entry.origin))
            }
            for (text, origin) in given.dropFirst() {
                try Self.apply(option, text, from: origin, to: &scratch)
            }
            if let (text, origin) = given.first {
                try Self.apply(option, text, from: origin, to: &settings)
                resolved.append(Resolved(option: option, text: text, origin: origin))
            } else {
                resolved.append(Resolved(option: option, text: nil, origin: .defaultValue))
            }
        }
        try self.init(settings, resolved: resolved, declaredSessions: file?.sessions ?? [])
        let known = ServeOption.all.compactMap(\.environmentVariable)
        unknownVariables = environment.keys.filter { $0.hasPrefix(ServeOption.environmentPrefix) && !known.contains($0) }.sorted()
            .map { ($0, nearestName(to: $0, among: known)) }
    }

    /// The start-up log's line for each of `unknownVariables`.
    public var unknownVariableMessages: [String] {
        unknownVariables.map { variable, suggestion in
            "\(variable) is not the variable of any option and is ignored" + (suggestion.map { " (did you mean \($0)?)" } ?? "")
        }
    }

    /// The text `option` resolved to, wherever it came from; nil for its default.
    public func resolvedText(of option: ServeOption) -> String? {
        resolved.first { $0.option.name == option.name }?.text
    }

    private init(_ settings: ServeSettings, resolved: [Resolved], declaredSessions: [DeclaredSession]) throws(ServeConfigurationError) {
        func origin(_ name: String) -> OptionOrigin? {
            resolved.first { $0.option.name == name && $0.text != nil }?.origin
        }
        var http = settings.http
        // Checked here, not when the server starts: a start that cannot work is bad usage (64).
        guard NumericAddress.isValid(http.host) else {
            throw ServeConfigurationError(
                "the host must be a numeric IPv4 or IPv6 address, not '\(http.host)' (this machine only: 127.0.0.1 or ::1; every address: 0.0.0.0 or ::)",
                origin: origin("host"))
        }
        switch (settings.tlsCertificate ?? "", settings.tlsKey ?? "") {
        case ("", ""): http.tls = nil
        case (let certificate, let key) where !certificate.isEmpty && !key.isEmpty:
            for (path, name, what) in [(certificate, "tls-cert", "certificate"), (key, "tls-key", "key")]
            where FileManager.default.contents(atPath: path) == nil {
                throw ServeConfigurationError("cannot read the TLS \(what) file \(path)", origin: origin(name))
            }
            http.tls = TLSFiles(certificatePath: certificate, keyPath: key)
        case (let certificate, _):
            throw ServeConfigurationError(
                "--tls-cert and --tls-key go together", origin: origin(certificate.isEmpty ? "tls-key" : "tls-cert"))
        }
        var jwks: String?
        if let path = settings.jwksFile, !path.isEmpty {
            guard let bytes = FileManager.default.contents(atPath: path) else {
                throw ServeConfigurationError("cannot read the JWKS file \(path)", origin: origin("jwks-file"))
            }
            jwks = String(decoding: bytes, as: UTF8.self)
        }
        do {
            access = try AccessControl.Credentials(adminToken: settings.authToken, jwtSecret: settings.jwtSecret, jwks: jwks)
        } catch {
            throw ServeConfigurationError("access control: \(error.message)")
        }
        let server: ServerConfiguration
        do {
            server = try settings.server.validated()
        } catch {
            throw ServeConfigurationError(error.message)
        }
        // The file's sessions must fit the limits, or some would be refused at every start.
        for (limit, name, counted) in [
            (server.maxSessions, "max-sessions", declaredSessions),
            (server.maxPullSessions, "max-pull-sessions", declaredSessions.filter { $0.options.source.map { $0 != nil } ?? false }),
        ] where counted.count > limit {
            let first = counted[limit]
            throw ServeConfigurationError(
                "the file declares \(counted.count) sessions\(name == "max-pull-sessions" ? " that pull" : ""), more than \(name) (\(limit))",
                origin: first.origin, key: "sessions.\(first.id)")
        }
        self.http = http
        self.server = server
        self.logLevel = settings.logLevel
        logFormat = settings.logFormat
        self.printConfiguration = settings.printConfiguration
        encoder = settings.encoder
        self.declaredSessions = declaredSessions
        configurationFile = settings.configurationFile.flatMap { $0.isEmpty ? nil : $0 }
        stateDirectory = settings.stateDirectory.flatMap { $0.isEmpty ? nil : $0 }
        self.resolved = resolved
    }

    private static func apply(
        _ option: ServeOption, _ text: String, from origin: OptionOrigin, to settings: inout ServeSettings
    ) throws(ServeConfigurationError) {
        do {
            try option.apply(text, &settings)
        } catch {
            let shown = option.isSecret || text.isEmpty ? "" : ", not '\(text)'"
            throw ServeConfigurationError(
                error.message + shown, origin: origin, key: origin.isFile ? "serve." + option.name : nil)
        }
    }

    private static func configurationFile(
        path: String?, environment: [String: String]
    ) throws(ServeConfigurationError) -> ConfigurationFile? {
        guard let path, !path.isEmpty else { return nil }
        return try ConfigurationFile(path: path, environment: environment)
    }
}

extension OptionOrigin {
    var isFile: Bool {
        if case .file = self { return true }
        return false
    }
}
