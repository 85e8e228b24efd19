import HTTPServer
import ServiceLog
import Sessions
import Testing

@testable import ServeOptions

@Suite("The command line of serve", .timeLimit(.minutes(10)))
struct CommandLineTests {
    @Test func bothSpellingsOfAValue() throws {
        let line = try CommandLineOptions(["--port", "9000", "--max-sessions=12", "--print-config"])
        #expect(line.given.map(\.option.name) == ["port", "max-sessions", "print-config"])
        #expect(line.given.map(\.text) == ["9000", "12", ""])
        #expect(!line.helpRequested)
    }

    @Test func theLastOfTwoWins() throws {
        let configuration = try ServeConfiguration(arguments: ["--port", "9000", "--port=9001"], environment: [:])
        #expect(configuration.http.port == 9001)
    }

    @Test func negativeNumbersAreValuesAndAreCheckedLikeAnyOther() {
        #expect(throws: ServeConfigurationError("must be seconds, 0...86400, not '-1'", origin: .commandLine("--on-demand-linger"))) {
            try ServeConfiguration(arguments: ["--on-demand-linger", "-1"], environment: [:])
        }
    }

    @Test func engineCapacitiesAreReadAndChecked() throws {
        let configuration = try ServeConfiguration(
            arguments: ["--engine-capacity", "cuda:0:h264=900,cpu:h265=300"], environment: [:])
        #expect(configuration.server.engineCapacities.description == "cpu:h265=300.0,cuda:0:h264=900.0")
        #expect(throws: ServeConfigurationError.self) {
            try ServeConfiguration(arguments: ["--engine-capacity", "cpu:vp9=3"], environment: [:])
        }
    }

    @Test func helpIsAskedWithEitherName() throws {
        #expect(try CommandLineOptions(["-h"]).helpRequested)
        #expect(try CommandLineOptions(["--port", "1", "--help"]).helpRequested)
    }

    @Test func badUsageSaysWhat() {
        #expect(throws: ServeConfigurationError("unknown option '--prot'", suggestion: "--port")) {
            try CommandLineOptions(["--prot", "1"])
        }
        #expect(throws: ServeConfigurationError("unknown option '--max-sesions'", suggestion: "--max-sessions")) {
            try CommandLineOptions(["--max-sesions=3"])
        }
        #expect(throws: ServeConfigurationError("unknown option '--verbose'")) { try CommandLineOptions(["--verbose"]) }
        #expect(throws: ServeConfigurationError("missing value for '--port <port>'")) { try CommandLineOptions(["--port"]) }
        #expect(throws: ServeConfigurationError("missing value for '--host <address>'")) {
            try CommandLineOptions(["--host", "--port", "1"])
        }
        #expect(throws: ServeConfigurationError("unexpected argument 'extra' (serve takes options only)")) {
            try CommandLineOptions(["extra"])
        }
        #expect(throws: ServeConfigurationError("--print-config takes no value")) { try CommandLineOptions(["--print-config=yes"]) }
    }

    @Test func valuesAreCheckedWithTheirName() {
        #expect(throws: ServeConfigurationError("must be a whole number, 0...65535, not 'abc'", origin: .commandLine("--port"))) {
            try ServeConfiguration(arguments: ["--port", "abc"], environment: [:])
        }
        #expect(throws: ServeConfigurationError("must be 0...65535, not '70000'", origin: .commandLine("--port"))) {
            try ServeConfiguration(arguments: ["--port=70000"], environment: [:])
        }
        #expect(throws: ServeConfigurationError("must be auto, cuda, vaapi or software, not 'gpu'", origin: .commandLine("--backend"))) {
            try ServeConfiguration(arguments: ["--backend", "gpu"], environment: [:])
        }
        // A secret is never repeated in a message.
        #expect(
            throws: ServeConfigurationError(
                "the JWT secret must be at least 32 bytes for HS256, it has 5", origin: .commandLine("--jwt-secret"))
        ) {
            try ServeConfiguration(arguments: ["--jwt-secret", "short"], environment: [:])
        }
        // Also where a place of higher precedence overrides it.
        #expect(
            throws: ServeConfigurationError(
                "the JWT secret must be at least 32 bytes for HS256, it has 5", origin: .environment("FRAMETAP_JWT_SECRET"))
        ) {
            try ServeConfiguration(
                arguments: ["--jwt-secret", String(repeating: "s", count: 32)], environment: ["FRAMETAP_JWT_SECRET": "short"])
        }
        #expect(throws: ServeConfigurationError("--tls-cert and --tls-key go together", origin: .commandLine("--tls-cert"))) {
            try ServeConfiguration(arguments: ["--tls-cert", "/tmp/c.pem"], environment: [:])
        }
        // An empty value (a template's unset variable) is refused, never "none": it would turn
        // access control, TLS or the kept sessions off under a file that sets them.
        for variable in ["FRAMETAP_AUTH_TOKEN", "FRAMETAP_JWT_SECRET", "FRAMETAP_JWKS_FILE", "FRAMETAP_TLS_CERT", "FRAMETAP_STATE_DIR"] {
            #expect(throws: ServeConfigurationError("is empty: leave the option out for none", origin: .environment(variable))) {
                try ServeConfiguration(arguments: [], environment: [variable: ""])
            }
        }
        #expect(throws: ServeConfigurationError("is empty: leave the option out for none", origin: .commandLine("--auth-token"))) {
            try ServeConfiguration(arguments: ["--auth-token", " "], environment: [:])
        }
    }

    /// What would stop the start anyway is refused with the rest of bad usage (exit 64), not by
    /// the server failing to start (exit 1): a host name, TLS files that cannot be read.
    @Test func whatTheServerCannotStartWithIsBadUsage() throws {
        #expect(
            throws: ServeConfigurationError(
                "the host must be a numeric IPv4 or IPv6 address, not 'localhost' (this machine only: 127.0.0.1 or ::1; every address: 0.0.0.0 or ::)",
                origin: .environment("FRAMETAP_HOST"))
        ) {
            try ServeConfiguration(arguments: [], environment: ["FRAMETAP_HOST": "localhost"])
        }
        for host in ["::1", "::", "0.0.0.0", "127.0.0.1", "fe80::1"] {
            #expect(try ServeConfiguration(arguments: ["--host", host], environment: [:]).http.host == host)
        }
        let folder = try TemporaryFolder()
        let certificate = try folder.write("server.pem", "certificate")
        #expect(throws: ServeConfigurationError("cannot read the TLS key file /nonexistent/key.pem", origin: .commandLine("--tls-key"))) {
            try ServeConfiguration(arguments: ["--tls-cert", certificate, "--tls-key", "/nonexistent/key.pem"], environment: [:])
        }
        #expect(throws: ServeConfigurationError("cannot read the TLS certificate file /nonexistent/c.pem", origin: .commandLine("--tls-cert"))) {
            try ServeConfiguration(arguments: ["--tls-cert", "/nonexistent/c.pem", "--tls-key", certificate], environment: [:])
        }
    }
}

@Suite("Where a value comes from", .timeLimit(.minutes(10)))
struct PrecedenceTests {
    /// The same option from each place, each place taken away in turn.
    @Test func commandLineThenEnvironmentThenFileThenDefault() throws {
        let folder = try TemporaryFolder()
        let file = try folder.write("frametap.yaml", "serve:\n  max-sessions: 30\n")
        let environment = ["FRAMETAP_CONFIG": file, "FRAMETAP_MAX_SESSIONS": "20"]

        func resolved(_ arguments: [String], _ environment: [String: String]) throws -> (Int, OptionOrigin) {
            let configuration = try ServeConfiguration(arguments: arguments, environment: environment)
            let entry = try #require(configuration.resolved.first { $0.option.name == "max-sessions" })
            return (configuration.server.maxSessions, entry.origin)
        }
        #expect(try resolved(["--max-sessions", "10"], environment) == (10, .commandLine("--max-sessions")))
        #expect(try resolved([], environment) == (20, .environment("FRAMETAP_MAX_SESSIONS")))
        #expect(try resolved([], ["FRAMETAP_CONFIG": file]) == (30, .file(path: file, line: 2, column: 3)))
        #expect(try resolved(["--config", file], [:]) == (30, .file(path: file, line: 2, column: 3)))
        #expect(try resolved([], [:]) == (ServerConfiguration().maxSessions, .defaultValue))
    }

    /// A misspelt variable is not silently ignored: the start says so, with the option's own.
    @Test func aVariableNoOptionReadsIsNamedWithTheNearestOne() throws {
        let configuration = try ServeConfiguration(
            arguments: [], environment: ["FRAMETAP_MAX_SESION": "3", "FRAMETAP_WHATEVER": "1", "FRAMETAP_PORT": "9", "PATH": "/bin"])
        #expect(configuration.server.maxSessions != 3)
        #expect(
            configuration.unknownVariableMessages == [
                "FRAMETAP_MAX_SESION is not the variable of any option and is ignored (did you mean FRAMETAP_MAX_SESSIONS?)",
                "FRAMETAP_WHATEVER is not the variable of any option and is ignored",
            ])
        #expect(configuration.printed.hasPrefix(
            "# frametap serve: each option as resolved (command line, environment, file, default)\n# FRAMETAP_MAX_SESION is not"))
    }

    @Test func anOverriddenValueIsStillChecked() throws {
        let folder = try TemporaryFolder()
        let file = try folder.write("frametap.yaml", "serve:\n  port: 99999\n")
        #expect(throws: ServeConfigurationError("must be 0...65535, not '99999'", origin: .file(path: file, line: 2, column: 3), key: "serve.port")) {
            try ServeConfiguration(arguments: ["--config", file, "--port", "8081"], environment: [:])
        }
        #expect(throws: ServeConfigurationError("must be a whole number, 0...65535, not 'x'", origin: .environment("FRAMETAP_PORT"))) {
            try ServeConfiguration(arguments: ["--port", "8081"], environment: ["FRAMETAP_PORT": "x"])
        }
    }

    /// The defaults are the configuration types' own, apart from those serve documents as its own.
    @Test func theDefaultsAreTheConfigurationTypes() throws {
        let configuration = try ServeConfiguration(arguments: [], environment: [:])
        let server = ServerConfiguration()
        let http = HTTPServerConfiguration()
        #expect(configuration.server.maxSessions == server.maxSessions)
        #expect(configuration.server.maxSpoolBytes == server.maxSpoolBytes)
        #expect(configuration.server.maxSpoolTotalBytes == server.maxSpoolTotalBytes)
        #expect(configuration.server.historyBytes == server.historyBytes)
        #expect(configuration.server.sourceRetryMax == server.sourceRetryMax)
        #expect(configuration.server.maxBodyBytes == nil)
        #expect(configuration.server.catchUpDecoders == server.catchUpDecoders)
        #expect(configuration.server.catchUpQueueLimit == server.catchUpQueueLimit)
        #expect(configuration.http.maxConnections == http.maxConnections)
        #expect(configuration.http.headerTimeout == http.headerTimeout)
        #expect(configuration.http.host == "0.0.0.0")
        #expect(configuration.http.threadPoolSize >= 2)
        #expect(configuration.logLevel == .info)
        #expect(configuration.logFormat == .text)
        #expect(!configuration.access.isEnabled)
        #expect(configuration.declaredSessions.isEmpty)
    }

    @Test func theCatchUpQueueFollowsTheDecoders() throws {
        let configuration = try ServeConfiguration(arguments: ["--max-catchup-decoders", "3"], environment: [:])
        #expect(configuration.server.catchUpDecoders == 3)
        #expect(configuration.server.catchUpQueueLimit == ServerConfiguration.defaultCatchUpQueue(slots: 3))
        let explicit = try ServeConfiguration(
            arguments: ["--max-catchup-decoders", "3"], environment: ["FRAMETAP_MAX_CATCHUP_QUEUE": "5"])
        #expect(explicit.server.catchUpQueueLimit == 5)
    }

    @Test func wordsForNoLimitAndForAutomatic() throws {
        let limited = try ServeConfiguration(
            arguments: ["--max-body-bytes", "4000", "--max-decoder-memory", "\(1 << 30)"], environment: [:])
        #expect(limited.server.maxBodyBytes == 4000)
        #expect(limited.server.decoderMemoryLimit == 1 << 30)
        let unlimited = try ServeConfiguration(
            arguments: ["--max-body-bytes", "unlimited", "--max-decoder-memory", "auto"], environment: [:])
        #expect(unlimited.server.maxBodyBytes == nil)
        #expect(unlimited.server.decoderMemoryLimit == ServerConfiguration().decoderMemoryLimit)
        #expect(throws: ServeConfigurationError("must be a positive integer or 'unlimited', not '0'", origin: .commandLine("--max-body-bytes"))) {
            try ServeConfiguration(arguments: ["--max-body-bytes", "0"], environment: [:])
        }
    }

    @Test func environmentNumbersMayCarrySpaces() throws {
        let configuration = try ServeConfiguration(
            arguments: [], environment: ["FRAMETAP_PORT": " 9000 ", "FRAMETAP_LOG_LEVEL": "DEBUG", "FRAMETAP_BACKEND": "software"])
        #expect(configuration.http.port == 9000)
        #expect(configuration.logLevel == .debug)
        #expect(configuration.server.backend == .software)
    }

    @Test func theLogFormat() throws {
        #expect(try ServeConfiguration(arguments: ["--log-format", "json"], environment: [:]).logFormat == .json)
        #expect(try ServeConfiguration(arguments: [], environment: ["FRAMETAP_LOG_FORMAT": "JSON"]).logFormat == .json)
        #expect(throws: ServeConfigurationError("must be text or json, not 'xml'", origin: .commandLine("--log-format"))) {
            try ServeConfiguration(arguments: ["--log-format", "xml"], environment: [:])
        }
    }

    @Test func theStartLineNamesTheGivenOptionsButNoSecret() throws {
        let given = try ServeConfiguration(
            arguments: ["--port", "9000", "--backend", "software"],
            environment: ["FRAMETAP_AUTH_TOKEN": "a-token-nobody-may-read-0123", "FRAMETAP_MAX_SESSIONS": "8"])
        #expect(given.givenOptions.contains("port=9000 (--port)"))
        #expect(given.givenOptions.contains("backend=software (--backend)"))
        #expect(given.givenOptions.contains("max-sessions=8 (FRAMETAP_MAX_SESSIONS)"))
        #expect(given.givenOptions.contains("auth-token=<not shown> (FRAMETAP_AUTH_TOKEN)"))
        #expect(!given.givenOptions.contains("a-token-nobody-may-read"))
        #expect(try ServeConfiguration(arguments: [], environment: [:]).givenOptions.isEmpty)
    }
}
