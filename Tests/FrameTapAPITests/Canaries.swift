import Foundation
import Logging
import Synchronization
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// UDP sockets on two neighbouring ports of a loopback address (an RTP port and its RTCP port),
/// counting the datagrams anything sends there: on an address a pull must not reach, a canary
/// that must stay silent; on a camera's own, proof the media went where it should. It stops
/// when the test lets go of it.
final class UDPCanary: Sendable {
    let host: String
    /// The even port (RTP); RTCP is the next one.
    let port: UInt16
    private let counter: DatagramCounter

    init(host: String) throws {
        self.host = host
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            let base = UInt16(20000 + 2 * Int.random(in: 0..<10000, using: &generator))
            guard let first = Self.bind(host, base) else { continue }
            guard let second = Self.bind(host, base + 1) else {
                close(first)
                continue
            }
            port = base
            counter = DatagramCounter(sockets: [first, second])
            return
        }
        throw TestFailure("no free UDP port pair on \(host)")
    }

    deinit { counter.stop() }

    var received: Int { counter.received }

    private static func bind(_ host: String, _ port: UInt16) -> Int32? {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        address.sin_port = port.bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            close(socket)
            return nil
        }
        return socket
    }
}

/// The sockets' threads and their count (what the threads hold, so the canary can go).
private final class DatagramCounter: Sendable {
    private let state = Mutex((received: 0, stopped: false))

    init(sockets: [Int32]) {
        for socket in sockets { Thread.detachNewThread { [self] in count(socket) } }
    }

    var received: Int { state.withLock { $0.received } }

    func stop() {
        state.withLock { $0.stopped = true }
    }

    private func count(_ socket: Int32) {
        defer { close(socket) }
        var buffer = [UInt8](repeating: 0, count: 2048)
        while !state.withLock({ $0.stopped }) {
            var readable = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&readable, 1, 100) > 0 else { continue }
            let got = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if got < 0 { return }
            state.withLock { $0.received += 1 }
        }
    }
}

/// A fake RTSP camera's answers for `SourceServer`'s `.rtsp`: an H.264 track, and SETUP answered
/// with `transport` (its `client_port` taken from the request).
func rtspCamera(transport: @escaping @Sendable (_ clientPorts: String) -> String) -> @Sendable (String, String) -> String? {
    { method, head in
        switch method {
        case "OPTIONS":
            return "RTSP/1.0 200 OK\r\nPublic: OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN, GET_PARAMETER\r\n\r\n"
        case "DESCRIBE":
            let sdp =
                "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=camera\r\nc=IN IP4 0.0.0.0\r\nt=0 0\r\n"
                + "m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\na=control:track1\r\n"
            return "RTSP/1.0 200 OK\r\nContent-Type: application/sdp\r\nContent-Length: \(sdp.utf8.count)\r\n\r\n\(sdp)"
        case "SETUP":
            let clientPorts = head.split(separator: ";").first { $0.hasPrefix("client_port=") }?
                .dropFirst("client_port=".count).prefix { $0.isNumber || $0 == "-" } ?? "0-1"
            return "RTSP/1.0 200 OK\r\nSession: 12345678;timeout=60\r\nTransport: \(transport(String(clientPorts)))\r\n\r\n"
        default:
            return "RTSP/1.0 200 OK\r\nSession: 12345678\r\n\r\n"
        }
    }
}

/// `rtspCamera` whose SETUP answer names `media`'s two ports as where its RTP and RTCP come from.
func rtspCamera(mediaFrom media: UDPCanary) -> @Sendable (String, String) -> String? {
    rtspCamera { clients in "RTP/AVP;unicast;client_port=\(clients);server_port=\(media.port)-\(media.port + 1)" }
}

/// Every line a service logged, for tests that look for what must never be written (and how often).
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])

    var all: [String] { lines.withLock { $0 } }

    func append(_ line: String) { lines.withLock { $0.append(line) } }

    /// A logger whose every line lands here.
    var logger: Logger {
        Logger(label: "frametap") { _ in CapturingLogHandler(sink: self) }
    }
}

struct CapturingLogHandler: LogHandler {
    let sink: LogLines
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        sink.append("\(event.level) \(event.message) \(all.sorted { $0.key < $1.key }.map { "\($0)=\($1)" }.joined(separator: " "))")
    }
}
