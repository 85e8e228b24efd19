import Foundation
import HTTPServer
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Starts a real server on an ephemeral loopback port, runs `body`, always stops it.
func withServer<T>(
    configure: (inout HTTPServerConfiguration) -> Void = { _ in },
    routes: (inout Router) -> Void,
    _ body: (HTTPServer) throws -> T
) throws -> T {
    var configuration = HTTPServerConfiguration()
    configuration.host = "127.0.0.1"
    configuration.port = 0
    configuration.shutdownGracePeriod = .seconds(2)
    configure(&configuration)
    var router = Router()
    routes(&router)
    let server = HTTPServer(configuration: configuration, router: router)
    try server.start()
    defer { server.stop() }
    return try body(server)
}

/// A raw HTTP/1.1 client over a blocking POSIX socket, so tests control exactly what goes on
/// the wire (chunked uploads, aborts, reading a stream part by part).
final class RawClient {
    private var fd: Int32

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            Glibc.close(fd)
            throw TestFailure("connect failed: errno \(errno)")
        }
    }

    deinit { close() }

    func close() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    /// Blocks while the server applies backpressure (the kernel buffers are full).
    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { throw TestFailure("send failed: errno \(errno)") }
            sent += n
        }
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// One read: bytes, [] on timeout, nil at end of stream.
    func read(timeout: Duration = .seconds(5)) -> [UInt8]? {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&descriptor, 1, milliseconds) > 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
        if n <= 0 { return nil }
        return Array(buffer[0..<n])
    }

    /// Reads until `done` says the collected bytes suffice, the peer closes, or time runs out.
    func read(until done: ([UInt8]) -> Bool, timeout: Duration = .seconds(10)) -> [UInt8] {
        var collected: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        while !done(collected), ContinuousClock.now < deadline {
            guard let bytes = read(timeout: .milliseconds(200)) else { break }
            collected += bytes
        }
        return collected
    }

    func readToEnd(timeout: Duration = .seconds(10)) -> [UInt8] {
        var closed = false
        var collected: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        while !closed, ContinuousClock.now < deadline {
            if let bytes = read(timeout: .milliseconds(200)) { collected += bytes } else { closed = true }
        }
        return collected
    }
}

struct TestResponse {
    var status: Int
    var headers: HTTPHeaders
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }
    /// Whether a chunked body ended with its terminating zero-size chunk.
    var chunkedComplete = false
}

/// Parses one response (status line, headers, fixed-length or chunked body) from raw bytes.
func parseResponse(_ raw: [UInt8]) throws -> TestResponse {
    guard let headerEnd = find([13, 10, 13, 10], in: raw) else { throw TestFailure("no header end in \(raw.count) bytes") }
    let head = String(decoding: raw[0..<headerEnd], as: UTF8.self)
    var lines = head.components(separatedBy: "\r\n")
    let statusLine = lines.removeFirst().split(separator: " ")
    guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw TestFailure("bad status line") }
    var headers = HTTPHeaders()
    for line in lines {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers.add(String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
    }
    var rest = Array(raw[(headerEnd + 4)...])
    var response = TestResponse(status: status, headers: headers, body: [])
    if headers["Transfer-Encoding"]?.lowercased() == "chunked" {
        var body: [UInt8] = []
        while let lineEnd = find([13, 10], in: rest) {
            let sizeText = String(decoding: rest[0..<lineEnd], as: UTF8.self)
            guard let size = Int(sizeText, radix: 16) else { break }
            if size == 0 {
                response.chunkedComplete = true
                break
            }
            guard rest.count >= lineEnd + 2 + size + 2 else { break }
            body += rest[(lineEnd + 2)..<(lineEnd + 2 + size)]
            rest = Array(rest[(lineEnd + 2 + size + 2)...])
        }
        response.body = body
    } else if let length = headers["Content-Length"].flatMap({ Int($0) }) {
        response.body = Array(rest.prefix(length))
    } else {
        response.body = rest
    }
    return response
}

func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int = 0) -> Int? {
    guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
    for index in start...(haystack.count - needle.count) where haystack[index] == needle[0] {
        if Array(haystack[index..<(index + needle.count)]) == needle { return index }
    }
    return nil
}

/// One request on a fresh connection (Connection: close), read to the end.
func request(
    _ port: UInt16, _ method: String = "GET", _ target: String, headers: [(String, String)] = [],
    body: [UInt8]? = nil
) throws -> TestResponse {
    let client = try RawClient(port: port)
    var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    for (name, value) in headers { head += "\(name): \(value)\r\n" }
    if let body { head += "Content-Length: \(body.count)\r\n" }
    head += "\r\n"
    try client.send(Array(head.utf8) + (body ?? []))
    return try parseResponse(client.readToEnd())
}

/// Parses a JSON object body.
func jsonObject(_ body: [UInt8]) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
        throw TestFailure("not a JSON object")
    }
    return object
}

/// Polls `condition` until true or the timeout passes.
func eventually(timeout: Duration = .seconds(5), _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

/// A thread-safe box for values tests collect from server threads.
final class Recorder<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    func record(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
}

/// Byte storage that counts its live instances, to prove zero-copy responses release it.
final class CountedBytes: ByteStorage, @unchecked Sendable {
    static let live = Atomic<Int>(0)
    let storage: SharedBytes
    var bytes: UnsafeRawBufferPointer { storage.bytes }
    init(_ array: [UInt8]) {
        storage = SharedBytes(array)
        Self.live.add(1, ordering: .relaxed)
    }
    deinit { Self.live.subtract(1, ordering: .relaxed) }
}
