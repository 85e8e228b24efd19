import ArgumentParser
import FoundationEssentials

#if canImport(Glibc)
    import Glibc
#endif

/// `frametap healthcheck`: GET /healthz on the local server, exit 0 on `200`, 1 otherwise.
///
/// The container image's HEALTHCHECK runs this: the runtime image has no curl or wget, and a
/// `bash -c '... /dev/tcp ...'` check cannot set a timeout on the read or follow the server's
/// FRAMETAP_PORT/FRAMETAP_HOST the way `serve` does. A plain socket with send/receive timeouts
/// needs nothing beyond the binary itself.
struct HealthcheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthcheck",
        abstract: "Ask a running server's /healthz; exit 0 when it answers 200.",
        discussion: """
            The host and port default to FRAMETAP_HOST (0.0.0.0 and :: mean this machine) and \
            FRAMETAP_PORT, like serve. Used by the container image's HEALTHCHECK.
            """
    )

    @Option(help: "Numeric IPv4 address. [FRAMETAP_HOST, default 127.0.0.1]")
    var host: String?

    @Option(help: "TCP port. [FRAMETAP_PORT, default 8080]")
    var port: Int?

    @Option(help: "Seconds to wait for the answer.")
    var timeout: Double = 3

    func run() throws {
        let environment = ProcessInfo.processInfo.environment
        var address = host ?? environment["FRAMETAP_HOST"] ?? "127.0.0.1"
        if address == "0.0.0.0" || address == "::" || address.isEmpty { address = "127.0.0.1" }
        let port = port ?? environment["FRAMETAP_PORT"].flatMap { Int($0.trimmingWhitespace()) } ?? 8080
        guard (1...65535).contains(port), timeout > 0 else { throw ValidationError("bad port or timeout") }
        do {
            let status = try Self.healthStatus(address: address, port: UInt16(port), timeout: timeout)
            guard status == 200 else {
                printError("healthcheck: /healthz answered \(status)")
                throw ExitCode.failure
            }
        } catch let error as HealthcheckError {
            printError("healthcheck: \(error.message)")
            throw ExitCode.failure
        }
    }

    struct HealthcheckError: Error { let message: String }

    /// The status code of `GET /healthz`, read from the status line.
    static func healthStatus(address: String, port: UInt16, timeout: Double) throws -> Int {
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = port.bigEndian
        guard inet_pton(AF_INET, address, &socketAddress.sin_addr) == 1 else {
            throw HealthcheckError(message: "'\(address)' is not a numeric IPv4 address")
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HealthcheckError(message: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            throw HealthcheckError(message: "\(address):\(port): \(String(cString: strerror(errno)))")
        }
        let request = Array("GET /healthz HTTP/1.0\r\nHost: \(address)\r\nConnection: close\r\n\r\n".utf8)
        guard send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else {
            throw HealthcheckError(message: "send: \(String(cString: strerror(errno)))")
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while !answer.contains(0x0A), answer.count < 4096 {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else {
                if count == 0 { break }
                throw HealthcheckError(message: "no answer: \(String(cString: strerror(errno)))")
            }
            answer += buffer[0..<count]
        }
        // "HTTP/1.1 200 OK"
        let line = String(decoding: answer.prefix { $0 != 0x0D && $0 != 0x0A }, as: UTF8.self)
        let fields = line.split(separator: " ")
        guard fields.count >= 2, fields[0].hasPrefix("HTTP/"), let status = Int(fields[1]) else {
            throw HealthcheckError(message: "not an HTTP answer: '\(line.prefix(80))'")
        }
        return status
    }
}
