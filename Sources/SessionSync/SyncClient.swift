import Containers
import Timekeeping

/// Where `frametap sync` sends requests: `http://` or `https://`, a host and a port.
public struct HTTPEndpoint: Hashable, Sendable, CustomStringConvertible {
    public let secure: Bool
    /// A name or an address (an IPv6 address without its brackets).
    public let host: String
    public let port: Int

    public init(secure: Bool, host: String, port: Int) {
        self.secure = secure
        self.host = host
        self.port = port
    }

    /// `http://host:port` (a path, query or credentials in it are refused: the token goes in
    /// `--token`, and the API's paths are FrameTap's own).
    public init(parsing text: String) throws(SyncError) {
        let url: SourceURL
        do {
            url = try SourceURL(text)
        } catch {
            throw SyncError("\(text): \(error.message)")
        }
        guard url.scheme == .http || url.scheme == .https else {
            throw SyncError("\(url.redacted): the URL must be http:// or https://")
        }
        guard !url.hasCredentials else { throw SyncError("\(url.redacted): give the token with --token, not in the URL") }
        guard url.pathAndQuery == "/" else { throw SyncError("\(url.redacted): give the URL without a path") }
        self.init(secure: url.scheme == .https, host: url.host, port: url.port)
    }

    /// The same scheme and port on another host (an address the endpoint's name resolved to).
    public func at(_ host: String) -> HTTPEndpoint { HTTPEndpoint(secure: secure, host: host, port: port) }

    var hostHeader: String {
        let host = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? host : "\(host):\(port)"
    }

    public var description: String { "\(secure ? "https" : "http")://\(hostHeader)" }
}

/// Why a request or a pass of `frametap sync` failed, in words for its log.
public struct SyncError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The requests of `frametap sync`: one connection each (`Connection: close`), over
/// `HTTPConnection`, and every one ends by its deadline, `timeout` from its start: a gateway or
/// instance that does not answer costs a pass that much, and the pass goes on.
public struct SyncClient: Sendable {
    public struct Answer: Sendable {
        public let status: Int
        public let body: [UInt8]
    }

    /// The bearer token every request carries (the admin token, or a JWT with the admin scope).
    let token: String?
    let timeout: Duration
    let clock: any ServiceClock
    /// The largest answer read (`GET /sessions` of a full instance is far smaller).
    static let maxAnswerBytes = 32 << 20

    public init(token: String?, timeout: Duration, clock: any ServiceClock) {
        self.token = token
        self.timeout = timeout
        self.clock = clock
    }

    public func send(_ method: String, _ path: String, to endpoint: HTTPEndpoint, json body: [UInt8]? = nil) throws(SyncError)
        -> Answer
    {
        let interrupt = DemuxInterrupt(clock: clock)
        interrupt.setTimeout(timeout)
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(endpoint.hostHeader)\r\nUser-Agent: frametap-sync\r\n"
        head += "Accept: application/json\r\nConnection: close\r\n"
        if let token { head += "Authorization: Bearer \(token)\r\n" }
        if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n" }
        head += "\r\n"
        do {
            let connection = try HTTPConnection(
                host: endpoint.host, port: endpoint.port, secure: endpoint.secure, interrupt: interrupt,
                name: endpoint.description)
            defer { connection.close() }
            try connection.send(Array(head.utf8) + (body ?? []))
            let answer = try connection.readHead()
            return Answer(status: answer.status, body: try connection.readBody(limit: Self.maxAnswerBytes))
        } catch {
            throw SyncError("\(method) \(endpoint)\(path): \(error.message)")
        }
    }
}
