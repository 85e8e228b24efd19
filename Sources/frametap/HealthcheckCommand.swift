import ArgumentParser
import FoundationEssentials
import HTTPServer
import ServeOptions

/// `frametap healthcheck`: GET /healthz on the local server, exit 0 on `200`, 1 otherwise.
///
/// It finds the server the way `serve` configures it (the environment, then the configuration
/// file), so the container image's HEALTHCHECK follows FRAMETAP_PORT, FRAMETAP_CONFIG and a
/// server that serves HTTPS without being told.
struct HealthcheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthcheck",
        abstract: "Ask a running server's /healthz; exit 0 when it answers 200.",
        discussion: """
            The address, the port and whether to speak TLS come from what serve reads without a \
            command line: FRAMETAP_HOST (0.0.0.0 and :: mean this machine's 127.0.0.1 and ::1), FRAMETAP_PORT and \
            FRAMETAP_TLS_CERT, then the serve: section of FRAMETAP_CONFIG's file. \
            The options below override them. Over TLS the certificate is not verified: the probe \
            asks only whether the server answers. Used by the container image's HEALTHCHECK.
            """
    )

    @Option(help: "Numeric IPv4 or IPv6 address. [default: serve's --host; 0.0.0.0 asks 127.0.0.1, :: asks ::1]")
    var host: String?

    @Option(help: "TCP port. [default: serve's --port, 8080]")
    var port: Int?

    @Flag(inversion: .prefixedNo, help: "Speak TLS. [default: when serve has --tls-cert]")
    var tls: Bool?

    @Option(help: "Seconds to wait for the answer.")
    var timeout: Double = 3

    func run() throws {
        let served = Self.servedAddress(environment: ProcessInfo.processInfo.environment)
        var address = host ?? served.host
        // A server listening on every address is asked on this machine's loopback of that family
        // (one bound to :: takes IPv6 only).
        if address == "0.0.0.0" || address.isEmpty { address = "127.0.0.1" }
        if address == "::" || address == "[::]" { address = "::1" }
        let port = port ?? served.port
        guard (1...65535).contains(port) else { throw ValidationError("the port must be 1...65535") }
        guard timeout > 0, timeout <= 3600 else { throw ValidationError("the timeout must be more than 0 and at most 3600 seconds") }
        do {
            let status = try HealthProbe.status(
                address: address, port: UInt16(port), tls: tls ?? served.tls, timeout: timeout)
            guard status == 200 else {
                printError("healthcheck: /healthz answered \(status)")
                throw ExitCode.failure
            }
        } catch let error as HealthProbe.Failure {
            printError("healthcheck: \(error)")
            throw ExitCode.failure
        }
    }

    /// Where `serve` listens when started with no command line in this environment: its host,
    /// port and TLS certificate from the environment, then from the file's `serve:` section, as
    /// serve takes them. The file's sessions are not read: a camera's unset secret is serve's
    /// business and must not send the probe to the wrong port.
    static func servedAddress(environment: [String: String]) -> (host: String, port: Int, tls: Bool) {
        var file: ConfigurationFile?
        if let path = ServeOption.named("config")?.environmentVariable.flatMap({ environment[$0] }), !path.isEmpty {
            do throws(ServeConfigurationError) {
                file = try ConfigurationFile(path: path, environment: environment, includingSessions: false)
            } catch {
                printError("healthcheck: \(error); using the environment alone")
            }
        }
        func value(_ name: String) -> String? {
            let option = ServeOption.named(name)
            return option?.environmentVariable.flatMap { environment[$0] }
                ?? file?.options.first { $0.option.name == name }?.text
        }
        return (
            value("host") ?? "127.0.0.1",
            value("port").flatMap { Int($0.trimmingWhitespace()) } ?? 8080,
            !(value("tls-cert") ?? "").isEmpty
        )
    }
}
