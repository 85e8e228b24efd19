import Decoding
import TestSupport
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import FrameTapAPI
import HTTPServer
import Logging
import Sessions
import SessionsTestSupport
import Timekeeping

#if canImport(Glibc)
    import Glibc
#endif

/// Starts the same composition `frametap serve` runs (FrameTapService) on an ephemeral
/// loopback port, runs `body`, always stops it. `clock` is the service's one clock (the
/// sessions', and the HTTP edge's).
func withService<T>(
    sessions configureSessions: (inout ServerConfiguration) -> Void = { _ in },
    http configureHTTP: (inout HTTPServerConfiguration) -> Void = { _ in },
    clock: any ServiceClock = SystemClock(),
    devicePool: HardwareDevicePool = .shared,
    access: AccessControl? = nil,
    logger: Logger = Logger(label: "frametap"),
    _ body: (FrameTapService) throws -> T
) throws -> T {
    var http = HTTPServerConfiguration()
    http.host = "127.0.0.1"
    http.port = 0
    http.threadPoolSize = 2
    http.shutdownGracePeriod = .seconds(2)
    configureHTTP(&http)
    var sessions = ServerConfiguration()
    configureSessions(&sessions)
    let configuration = try sessions.validated()
    let service = FrameTapService(
        http: http, sessions: configuration, services: SessionServices.forTests(configuration, clock: clock, devicePool: devicePool), access: access,
        logger: logger)
    try service.start()
    defer { service.stop() }
    return try body(service)
}

/// A POST with a chunked body cut into the given pieces (each piece one HTTP chunk).
func chunkedPost(
    _ port: UInt16, _ target: String, pieces: [[UInt8]], headers: [(String, String)] = []
) throws -> TestResponse {
    let client = try RawClient(port: port)
    var head = "POST \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n"
    for (name, value) in headers { head += "\(name): \(value)\r\n" }
    try client.send(head + "\r\n")
    for piece in pieces where !piece.isEmpty {
        try client.send(Array("\(String(piece.count, radix: 16))\r\n".utf8) + piece + [13, 10])
    }
    try client.send("0\r\n\r\n")
    return try parseResponse(client.readToEnd(timeout: .seconds(30)))
}

func post(_ port: UInt16, _ target: String, _ body: [UInt8], headers: [(String, String)] = []) throws -> TestResponse {
    try request(port, "POST", target, headers: headers, body: body)
}

/// Width and height from a JPEG's start-of-frame marker (baseline or progressive); nil when
/// the bytes are not a JPEG.
func jpegSize(_ bytes: [UInt8]) -> (width: Int, height: Int)? {
    guard bytes.count > 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return nil }
    var index = 2
    while index + 9 < bytes.count {
        guard bytes[index] == 0xFF else { return nil }
        let marker = bytes[index + 1]
        let length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
        if (0xC0...0xC3).contains(marker) {
            let height = Int(bytes[index + 5]) << 8 | Int(bytes[index + 6])
            let width = Int(bytes[index + 7]) << 8 | Int(bytes[index + 8])
            return (width, height)
        }
        index += 2 + length
    }
    return nil
}

/// The JPEG ends with EOI.
func endsWithEOI(_ bytes: [UInt8]) -> Bool {
    bytes.count >= 2 && bytes[bytes.count - 2] == 0xFF && bytes[bytes.count - 1] == 0xD9
}

struct MultipartPart {
    var headers: HTTPHeaders
    var body: [UInt8]
}
/// Pushes a fixture in two chunked pieces, answered as multipart/mixed raw pictures, and checks
/// the answer against the manifest's reference decode (ffmpeg ... -f rawvideo at fixture
/// creation): as many parts as pictures, the MD5 of their bodies one after another the
/// reference's. Returns the parts for the caller's own checks.
func rawPartsOfAPush(_ port: UInt16, fixture name: String) throws -> [MultipartPart] {
    let entry = try Fixtures.entry(name)
    let bytes = try Fixtures.bytes(name)
    let response = try chunkedPost(
        port, "/sessions/mp/nalus?flush=true&format=yuv", pieces: [Array(bytes[..<777]), Array(bytes[777...])],
        headers: [("Accept", "multipart/mixed")])
    #expect(response.status == 200)
    #expect(response.chunkedComplete)
    let contentType = response.headers["Content-Type"]
    #expect(contentType?.hasPrefix("multipart/mixed;boundary=") == true)
    let (parts, closed) = try parseMultipart(response.body, boundary: boundary(of: contentType))
    #expect(closed)
    #expect(parts.count == entry.frames)
    #expect(MD5.hex(parts.flatMap(\.body)) == entry.yuvMD5, "\(name)")
    return parts
}


/// Parses a multipart body strictly: every part `--boundary CRLF headers CRLF CRLF bytes CRLF`
/// with a Content-Length; `closed` tells whether the closing delimiter followed.
func parseMultipart(_ raw: [UInt8], boundary: String) throws -> (parts: [MultipartPart], closed: Bool) {
    let opening = Array("--\(boundary)\r\n".utf8)
    let closing = Array("--\(boundary)--\r\n".utf8)
    var parts: [MultipartPart] = []
    var position = 0
    while position < raw.count {
        if raw.count - position >= closing.count, Array(raw[position..<(position + closing.count)]) == closing {
            return (parts, true)
        }
        guard raw.count - position >= opening.count, Array(raw[position..<(position + opening.count)]) == opening
        else {
            // A stream read up to some point may stop inside a part.
            return (parts, false)
        }
        guard let headerEnd = find([13, 10, 13, 10], in: raw, from: position) else { return (parts, false) }
        let head = String(decoding: raw[(position + opening.count)..<headerEnd], as: UTF8.self)
        var headers = HTTPHeaders()
        for line in head.components(separatedBy: "\r\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.add(
                String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
        }
        guard let length = headers["Content-Length"].flatMap({ Int($0) }) else {
            throw TestFailure("part without Content-Length")
        }
        let start = headerEnd + 4
        guard raw.count >= start + length + 2 else { return (parts, false) }
        guard raw[start + length] == 13, raw[start + length + 1] == 10 else { throw TestFailure("part not followed by CRLF") }
        parts.append(MultipartPart(headers: headers, body: Array(raw[start..<(start + length)])))
        position = start + length + 2
    }
    return (parts, false)
}

func boundary(of contentType: String?) throws -> String {
    guard let contentType, let range = contentType.range(of: "boundary=") else {
        throw TestFailure("no boundary in \(contentType ?? "nil")")
    }
    return String(contentType[range.upperBound...]).trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
}

/// The value of one Prometheus sample (`name{labels} value`), summed over label sets that
/// contain every given label.
func metricValue(_ exposition: String, _ name: String, labels: [String] = []) -> Double {
    var total = 0.0
    for line in exposition.split(separator: "\n") where line.hasPrefix(name) && !line.hasPrefix("#") {
        let text = String(line)
        let series = text.split(separator: " ").first.map(String.init) ?? ""
        guard series == name || series.hasPrefix(name + "{") else { continue }
        guard labels.allSatisfy({ series.contains($0) }) else { continue }
        total += Double(text.split(separator: " ").last ?? "") ?? 0
    }
    return total
}

/// Offsets of every 3-byte start code (a 4-byte one is found at its last three bytes).
func startCodeOffsets(_ bytes: [UInt8]) -> [Int] {
    var offsets: [Int] = []
    var index = 0
    while index + 2 < bytes.count {
        if bytes[index] == 0, bytes[index + 1] == 0, bytes[index + 2] == 1 {
            offsets.append(index)
            index += 3
        } else {
            index += 1
        }
    }
    return offsets
}

/// A request sent on a thread of its own (a long poll), so that the test can go on to make
/// happen what it waits for.
final class BackgroundRequest: Sendable {
    private let answer = Mutex<(response: TestResponse?, elapsed: Duration)?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(_ port: UInt16, _ method: String, _ target: String) {
        Thread.detachNewThread { [self] in
            let started = ContinuousClock.now
            let response = try? request(port, method, target)
            answer.withLock { $0 = (response, ContinuousClock.now - started) }
            done.signal()
        }
    }

    /// The response (nil if the request failed) and how long it took; throws `WaitTimeout`
    /// naming `what` when it did not finish within `timeout`.
    func wait(for what: String, timeout: Duration = .seconds(10)) throws -> (response: TestResponse?, elapsed: Duration) {
        try done.wait(for: what, timeout: timeout)
        return answer.withLock { $0! }
    }
}
