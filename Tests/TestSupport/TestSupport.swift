import Foundation
import Synchronization
import Timekeeping

#if canImport(Glibc)
    import Glibc
#endif

// What several test targets need: a raw HTTP client that controls exactly what goes on the
// wire, a response parser, MD5. Only the test targets depend on this target.

public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A raw HTTP/1.1 client over a blocking POSIX socket, so tests control exactly what goes on
/// the wire (chunked uploads, aborts, reading a stream part by part).
/// `@unchecked`: a socket is safe to send on from one thread while another reads it, which
/// is all the tests do across threads.
public final class RawClient: @unchecked Sendable {
    private var fd: Int32

    /// `source` binds the local end to that address first (e.g. 127.0.0.2, to be another client);
    /// `receiveBuffer` sets the socket's receive buffer (a client that holds little unread).
    public init(port: UInt16, host: String = "127.0.0.1", source: String? = nil, receiveBuffer: Int? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket failed: errno \(errno)") }
        if let receiveBuffer {
            var size = Int32(receiveBuffer)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        // Bounds connect and every send: a server that stops reading fails the send instead of
        // blocking the test for good.
        var limit = timeval(tv_sec: Int(Self.sendLimit.components.seconds), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        if let source {
            let bound = Self.withAddress(source, port: 0) { bind(fd, $0, $1) }
            guard bound == 0 else {
                let error = errno
                // Through `close()`, which forgets the descriptor: a class whose init throws once
                // it is whole is deinitialised, and a second close of the number would close
                // whatever another thread opened under it since.
                close()
                throw TestFailure("bind \(source) failed: errno \(error)")
            }
        }
        let result = Self.withAddress(host, port: port) { connect(fd, $0, $1) }
        guard result == 0 else {
            let error = errno
            close()
            if error == EINPROGRESS { throw WaitTimeout(waitingFor: "a connection to \(host):\(port)", limit: Self.sendLimit) }
            throw TestFailure("connect failed: errno \(error)")
        }
    }

    /// Calls `body` with an IPv4 socket address (port 0: any) as bind and connect take it.
    private static func withAddress(
        _ host: String, port: UInt16, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32
    ) -> Int32 {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr(host)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    deinit { close() }

    public func close() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    /// How long connecting, or a send the server takes no byte of, may block.
    public static let sendLimit: Duration = .seconds(30)

    /// Blocks while the server applies backpressure (the kernel buffers are full), at most
    /// `sendLimit` without progress.
    public func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                throw WaitTimeout(waitingFor: "the server to take more of the request (\(sent) of \(bytes.count) bytes sent)", limit: Self.sendLimit)
            }
            if n <= 0 { throw TestFailure("send failed: errno \(errno)") }
            sent += n
        }
    }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// One read: bytes, [] on timeout, nil at end of stream.
    public func read(timeout: Duration = .seconds(5)) -> [UInt8]? {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(clamping: timeout.nanoseconds / 1_000_000)
        guard poll(&descriptor, 1, milliseconds) > 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
        if n <= 0 { return nil }
        return Array(buffer[0..<n])
    }

    /// Reads until `done` says the collected bytes suffice, the peer closes, or time runs out.
    public func read(until done: ([UInt8]) -> Bool, timeout: Duration = .seconds(10)) -> [UInt8] {
        var collected: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        while !done(collected), ContinuousClock.now < deadline {
            guard let bytes = read(timeout: .milliseconds(200)) else { break }
            collected += bytes
        }
        return collected
    }

    public func readToEnd(timeout: Duration = .seconds(10)) -> [UInt8] {
        var closed = false
        var collected: [UInt8] = []
        let deadline = ContinuousClock.now + timeout
        while !closed, ContinuousClock.now < deadline {
            if let bytes = read(timeout: .milliseconds(200)) { collected += bytes } else { closed = true }
        }
        return collected
    }
}

public struct TestResponse: Sendable {
    public var status: Int
    public var headers: ResponseHeaders
    public var body: [UInt8]
    public var text: String { String(decoding: body, as: UTF8.self) }
    /// Whether a chunked body ended with its terminating zero-size chunk.
    public var chunkedComplete = false
}

/// Response header fields in arrival order; lookup ignores ASCII case.
public struct ResponseHeaders: Sendable {
    public private(set) var fields: [(name: String, value: String)] = []
    public init() {}
    public mutating func add(_ name: String, _ value: String) { fields.append((name, value)) }
    public subscript(name: String) -> String? { fields.first { $0.name.lowercased() == name.lowercased() }?.value }
    public func values(_ name: String) -> [String] { fields.filter { $0.name.lowercased() == name.lowercased() }.map(\.value) }
}

/// Parses one response (status line, headers, fixed-length or chunked body) from raw bytes.
public func parseResponse(_ raw: [UInt8]) throws -> TestResponse {
    guard let headerEnd = find([13, 10, 13, 10], in: raw) else { throw TestFailure("no header end in \(raw.count) bytes") }
    let head = String(decoding: raw[0..<headerEnd], as: UTF8.self)
    var lines = head.components(separatedBy: "\r\n")
    let statusLine = lines.removeFirst().split(separator: " ")
    guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw TestFailure("bad status line") }
    var headers = ResponseHeaders()
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

public func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int = 0) -> Int? {
    guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
    for index in start...(haystack.count - needle.count) where haystack[index] == needle[0] {
        if Array(haystack[index..<(index + needle.count)]) == needle { return index }
    }
    return nil
}

/// One request on a fresh connection (Connection: close), read to the end.
public func request(
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
public func jsonObject(_ body: [UInt8]) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
        throw TestFailure("not a JSON object")
    }
    return object
}

/// An answer's status with the `code` of its problem+json body, compared in one `#expect`
/// that shows both when they differ.
public struct Problem: Equatable, CustomStringConvertible {
    public var status: Int
    /// nil: the body is not a JSON object with a string `code`.
    public var code: String?

    public init(_ status: Int, _ code: String?) {
        self.status = status
        self.code = code
    }

    public var description: String { "\(status) \(code.map { "code \($0)" } ?? "without a code")" }
}

extension TestResponse {
    /// The status and the problem+json `code` of this answer.
    public var problem: Problem { Problem(status, (try? jsonObject(body))?["code"] as? String) }

    /// The `detail` of this answer's problem+json body; empty when it has none.
    public var problemDetail: String { (try? jsonObject(body))?["detail"] as? String ?? "" }
}

/// Raises this process's open-file limit to its hard limit (tests that open many sockets).
public func raiseOpenFileLimit() {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    limit.rlim_cur = limit.rlim_max
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}

/// A flag set from a callback on any thread, counting how often it was set.
public final class Flag: Sendable {
    private let value = Atomic<Int>(0)
    public init() {}
    public func set() { value.add(1, ordering: .relaxed) }
    public var count: Int { value.load(ordering: .relaxed) }
}
