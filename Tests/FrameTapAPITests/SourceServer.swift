import Foundation
import Synchronization
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A tiny HTTP/1.1 (or RTSP) server on a loopback address for the pull tests: each request's
/// path picks what it does (serve bytes, redirect, stall, never answer, speak RTSP), and it
/// records the connections it accepted and when each was closed by the other side. It stops
/// when the test lets go of it: its threads hold only the `SourceServerCore`.
final class SourceServer: Sendable {
    typealias Behaviour = SourceServerCore.Behaviour

    private let core: SourceServerCore

    init(host: String = "127.0.0.1", port: UInt16 = 0, routes: @escaping @Sendable (String) -> Behaviour) throws {
        core = try SourceServerCore(host: host, port: port, routes: routes)
    }

    /// A server of another protocol: `converse` has each connection as it is accepted (nothing
    /// read from it yet) and speaks first or not, as its protocol does.
    init(host: String = "127.0.0.1", converse: @escaping @Sendable (_ connection: Int32) -> Void) throws {
        core = try SourceServerCore(host: host, port: 0, routes: { _ in .silent }, converse: converse)
    }

    deinit { core.stop() }

    var host: String { core.host }
    var port: UInt16 { core.port }
    var accepted: Int { core.accepted }
    var requests: [String] { core.requests }
    var closedByPeer: Int { core.closedByPeer }
    var listenerIsClosed: Bool { core.listenerIsClosed }
    func url(_ path: String) -> String { core.url(path) }
    func stop() { core.stop() }
}

final class SourceServerCore: @unchecked Sendable {
    // @unchecked: `listener` is written once in init; everything else is behind `state`.
    enum Behaviour: Sendable {
        /// 200 with these bytes and Content-Type (nil: none), in pieces of `pieceSize` with
        /// `pause` between them; `stallAfter`: stop sending (but keep the connection) after so many bytes.
        case serve([UInt8], contentType: String?, pieceSize: Int = 1 << 16, pause: Duration = .zero, stallAfter: Int? = nil)
        /// 200 with `fastBytes` of these bytes at once, then one byte every `pause`: a source
        /// that keeps sending, too slowly to make a whole packet in time.
        case trickle([UInt8], contentType: String?, fastBytes: Int, pause: Duration)
        /// These bytes as they are (status line, headers and all), then the connection held.
        case raw([UInt8])
        case redirect(String)
        case status(Int)
        /// Reads the request and never answers.
        case silent
        /// Speaks RTSP: every request on the connection is answered 302 to this location.
        case rtspRedirect(String)
        /// Speaks RTSP: each request on the connection (its method and whole head) is answered
        /// with what this returns (a status line, headers and a body, without the CSeq, which is
        /// added); nil closes the connection.
        case rtsp(@Sendable (_ method: String, _ head: String) -> String?)
        /// `.rtsp`, and once PLAY is answered, what `afterPlay` returns, again and again (interleaved
        /// RTP frames, `$` and all) until it returns nil or the client leaves.
        case rtspStreaming(@Sendable (_ method: String, _ head: String) -> String?, afterPlay: @Sendable () -> [UInt8]?)
    }

    let host: String
    private(set) var port: UInt16 = 0
    private let listener: Int32
    private let routes: @Sendable (String) -> Behaviour
    private let converse: (@Sendable (_ connection: Int32) -> Void)?
    private let state = Mutex(State())

    private struct State {
        var accepted = 0
        var requests: [String] = []
        var closedByPeer = 0
        var stopped = false
        /// The accept thread ended and closed the listening socket: its number is not ours any more.
        var listenerClosed = false
        var sockets: [Int32] = []
    }

    /// `port` 0: any free port (a test that brings a source back on the port it had names it).
    init(
        host: String = "127.0.0.1", port requestedPort: UInt16 = 0, routes: @escaping @Sendable (String) -> Behaviour,
        converse: (@Sendable (_ connection: Int32) -> Void)? = nil
    ) throws {
        self.host = host
        self.routes = routes
        self.converse = converse
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var reuse: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr(host)
        address.sin_port = requestedPort.bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 16) == 0 else {
            let error = errno
            close(listener)
            throw TestFailure("cannot listen on \(host): errno \(error)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = UInt16(bigEndian: address.sin_port)
        self.listener = listener
        // The accept thread owns the listening socket and closes it when it ends: were `stop()`
        // to close it, the number could be reused (by the next test's server, say) before this
        // thread reached `accept`, which would then take that server's connections.
        Thread.detachNewThread { [self] in
            defer {
                state.withLock { state in
                    state.listenerClosed = true
                    close(listener)
                }
            }
            while true {
                let connection = accept(listener, nil, nil)
                if connection < 0 {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    return
                }
                let admitted = state.withLock { state -> Bool in
                    guard !state.stopped else { return false }
                    state.accepted += 1
                    state.sockets.append(connection)
                    return true
                }
                guard admitted else {
                    close(connection)
                    return
                }
                Thread.detachNewThread { [self] in serve(connection) }
            }
        }
    }

    /// Wakes the accept thread (which then closes the listening socket) and every connection's
    /// thread. Sockets are shut down under the lock their threads close them under, so a number
    /// already closed and reused elsewhere is never shut down.
    func stop() {
        state.withLock { state in
            guard !state.stopped else { return }
            state.stopped = true
            if !state.listenerClosed { shutdown(listener, Int32(SHUT_RDWR)) }
            for socket in state.sockets { shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    var accepted: Int { state.withLock { $0.accepted } }
    /// The listening socket is closed: its port refuses connections and may be bound again.
    var listenerIsClosed: Bool { state.withLock { $0.listenerClosed } }
    var requests: [String] { state.withLock { $0.requests } }
    var closedByPeer: Int { state.withLock { $0.closedByPeer } }

    func url(_ path: String) -> String { "http://\(host):\(port)\(path)" }

    private func serve(_ connection: Int32) {
        defer {
            state.withLock { state in
                state.sockets.removeAll { $0 == connection }
                close(connection)
            }
        }
        if let converse { return converse(connection) }
        var head: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while find([13, 10, 13, 10], in: head) == nil {
            let got = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress!, $0.count, 0) }
            if got <= 0 { return }
            head += buffer.prefix(got)
        }
        let line = String(decoding: head.prefix { $0 != 13 }, as: UTF8.self)
        let path = line.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
        state.withLock { $0.requests.append(path) }
        var behaviour = routes(path)
        if case .rtspRedirect(let location) = behaviour {
            behaviour = .rtsp { _, _ in "RTSP/1.0 302 Moved Temporarily\r\nLocation: \(location)\r\n\r\n" }
        }
        var afterPlay: (@Sendable () -> [UInt8]?)?
        if case .rtspStreaming(let answer, let frames) = behaviour {
            behaviour = .rtsp(answer)
            afterPlay = frames
        }
        switch behaviour {
        case .rtspRedirect, .rtspStreaming:
            return
        case .rtsp(let answer):
            // Every request on one connection (OPTIONS, DESCRIBE, SETUP, PLAY, ...); interleaved
            // RTCP ($ frames) the client sends in between is skipped.
            var request = head
            var first = true
            while true {
                while request.first == UInt8(ascii: "$") {
                    guard request.count >= 4 else { break }
                    let length = Int(request[2]) << 8 | Int(request[3])
                    guard request.count >= 4 + length else { break }
                    request.removeFirst(4 + length)
                }
                guard let end = find([13, 10, 13, 10], in: request) else {
                    let got = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress!, $0.count, 0) }
                    if got <= 0 { return }
                    request += buffer.prefix(got)
                    continue
                }
                let text = String(decoding: request.prefix(end), as: UTF8.self)
                request.removeFirst(end + 4)
                let method = String(text.prefix { $0 != " " })
                // The first request's target is recorded already.
                if !first { state.withLock { $0.requests.append(String(text.prefix { $0 != "\r" })) } }
                first = false
                let cseq = text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("cseq:") }?
                    .split(separator: ":").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "1"
                guard let reply = answer(method, text), let statusEnd = reply.range(of: "\r\n") else { return }
                let withSequence = reply[..<statusEnd.upperBound] + "CSeq: \(cseq)\r\n" + reply[statusEnd.upperBound...]
                guard send(connection, String(withSequence)) else { return }
                if method == "PLAY", let afterPlay {
                    while let frames = afterPlay() {
                        guard send(connection, frames) else { return }
                    }
                    return
                }
            }
        case .redirect(let location):
            send(connection, "HTTP/1.1 302 Found\r\nLocation: \(location)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        case .status(let code):
            send(connection, "HTTP/1.1 \(code) Nope\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        case .silent:
            waitForPeerClose(connection)
        case .serve(let bytes, let contentType, let pieceSize, let pause, let stallAfter):
            var headers = "HTTP/1.1 200 OK\r\nConnection: close\r\n"
            if let contentType { headers += "Content-Type: \(contentType)\r\n" }
            if stallAfter == nil { headers += "Content-Length: \(bytes.count)\r\n" }
            guard send(connection, headers + "\r\n") else { return }
            var offset = 0
            let limit = min(bytes.count, stallAfter ?? bytes.count)
            while offset < limit {
                let end = min(limit, offset + pieceSize)
                guard send(connection, Array(bytes[offset..<end])) else { return }
                offset = end
                if pause > .zero { Thread.sleep(forTimeInterval: Double(pause.nanoseconds) / 1e9) }
            }
            if stallAfter != nil { waitForPeerClose(connection) }
        case .raw(let bytes):
            guard send(connection, bytes) else { return }
            waitForPeerClose(connection)
        case .trickle(let bytes, let contentType, let fastBytes, let pause):
            var headers = "HTTP/1.1 200 OK\r\nConnection: close\r\n"
            if let contentType { headers += "Content-Type: \(contentType)\r\n" }
            guard send(connection, headers + "\r\n"), send(connection, Array(bytes.prefix(fastBytes))) else { return }
            for byte in bytes.dropFirst(fastBytes) {
                if state.withLock({ $0.stopped }) { return }
                Thread.sleep(forTimeInterval: Double(pause.nanoseconds) / 1e9)
                guard send(connection, [byte]) else { return }
            }
        }
    }

    /// Holds the connection until the client closes it (counted) or the server stops.
    private func waitForPeerClose(_ connection: Int32) {
        var byte: UInt8 = 0
        while true {
            let got = recv(connection, &byte, 1, 0)
            if got == 0 { state.withLock { $0.closedByPeer += 1 } }
            if got <= 0 { return }
        }
    }

    @discardableResult
    private func send(_ connection: Int32, _ text: String) -> Bool { send(connection, Array(text.utf8)) }

    @discardableResult
    private func send(_ connection: Int32, _ bytes: [UInt8]) -> Bool { Self.sendAll(connection, bytes) }

    /// Exactly `count` bytes from `connection`, or nil when it ends first.
    static func receive(_ connection: Int32, exactly count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = bytes.withUnsafeMutableBytes { recv(connection, $0.baseAddress! + got, count - got, 0) }
            if n <= 0 { return nil }
            got += n
        }
        return bytes
    }

    /// All of `bytes` to `connection`; false when it fails first.
    static func sendAll(_ connection: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(connection, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            sent += n
        }
        return true
    }
}
