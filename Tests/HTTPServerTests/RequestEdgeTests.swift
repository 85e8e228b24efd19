import Foundation
import HTTPServer
import Synchronization
import TestSupport
import Testing

/// Requests HTTP/1.1 says a server must refuse, sent byte for byte over a raw socket: each gets
/// exactly one problem answer, its connection is closed, and nothing after it (a second,
/// smuggled request) is ever answered. No body byte reaches a route's sink before the checks.
@Suite(.serialized, .timeLimit(.minutes(10))) struct RequestEdgeTests {
    /// Sends `raw` and reads until the server closes (or 3 s pass).
    private func exchange(_ port: UInt16, _ raw: String) throws -> (text: String, closed: Bool) {
        let client = try RawClient(port: port)
        try client.send(raw)
        var bytes: [UInt8] = []
        let deadline = ContinuousClock.now + .seconds(3)
        var closed = false
        while ContinuousClock.now < deadline {
            guard let piece = client.read(timeout: .milliseconds(100)) else {
                closed = true
                break
            }
            bytes += piece
        }
        return (String(decoding: bytes, as: UTF8.self), closed)
    }

    private func statusLines(_ text: String) -> [String] {
        text.components(separatedBy: "\r\n").filter { $0.hasPrefix("HTTP/1.") }
    }

    private func withEdgeServer(_ body: (UInt16, Recorder<String>) throws -> Void) throws {
        let reached = Recorder<String>()
        try withServer(routes: { router in
            router.get("/items/{id}", access: .open) { request in
                reached.record("get \(request.pathParameters["id"] ?? "")")
                return .text("item")
            }
            router.delete("/items/{id}", access: .open) { request in
                reached.record("delete \(request.pathParameters["id"] ?? "")")
                return HTTPResponse(status: .noContent)
            }
            router.get("/items/{id}/parts", access: .open) { request in
                reached.record("parts \(request.pathParameters["id"] ?? "")")
                return .text("parts")
            }
            router.addUpload(.post, "/upload", access: .open) { _ in
                reached.record("upload")
                let sink = TestSink(capacity: 1 << 20)
                return (sink, .text("ok"))
            }
        }) { server in try body(server.port, reached) }
    }

    @Test(arguments: [
        // Both framings: read as chunked by libmicrohttpd 0.9.75, with a smuggled request inside.
        ("ambiguous_length", 400,
         "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /items/smuggled HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("invalid_content_length", 400,
         "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcdeGET /items/smuggled HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("invalid_content_length", 400, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\nabc"),
        ("invalid_content_length", 400, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\nabc"),
        ("invalid_content_length", 400,
         "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\nabc"),
        ("unsupported_transfer_encoding", 501,
         "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
        ("unsupported_transfer_encoding", 501, "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\nabc"),
        ("missing_host", 400, "GET /items/a HTTP/1.1\r\n\r\nGET /items/smuggled HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("invalid_host", 400, "GET /items/a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"),
        ("invalid_host", 400, "GET /items/a HTTP/1.1\r\nHost: a b\r\n\r\n"),
        ("invalid_host", 400, "GET /items/a HTTP/1.1\r\nHost:\r\n\r\n"),
        ("invalid_host", 400, "GET /items/a HTTP/1.1\r\nHost: x:80:81\r\n\r\n"),
        ("invalid_host", 400, "GET /items/a HTTP/1.1\r\nHost: x/y\r\n\r\n"),
        // The path is routed as sent: an encoded "/" or NUL never changes the route.
        ("invalid_request_target", 400, "DELETE /items/victim%00/parts HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("invalid_request_target", 400, "GET /items/a%2Fparts HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("invalid_request_target", 400, "GET /items/a%0d%0aX:%20y HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("invalid_request_target", 400, "GET /items//parts HTTP/1.1\r\nHost: x\r\n\r\n"),
        // A dot segment is only a value of a parameter (whose handler validates it), never path structure.
        ("invalid_request_target", 400, "GET /items/a/../../items/b HTTP/1.1\r\nHost: x\r\n\r\n"),
        // A raw NUL in the target would end the target early for anything reading it as a C string.
        ("invalid_request_target", 400, "DELETE /items/victim\0/parts HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("request_target_too_long", 414,
         "GET /items/a?" + String(repeating: "b", count: RequestTarget.maxLength) + " HTTP/1.1\r\nHost: x\r\n\r\n"),
        // N8: obs-fold and whitespace before the colon hide Transfer-Encoding from libmicrohttpd,
        // which then frames the body by Content-Length and runs the request inside the chunks.
        ("invalid_header", 400,
         "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n chunked\r\nContent-Length: 4\r\n\r\n"
            + "0\r\n\r\nGET /items/smuggled HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("invalid_header", 400,
         "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\nContent-Length: 4\r\n\r\n"
            + "0\r\n\r\nGET /items/smuggled HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("invalid_header", 400, "GET /items/a HTTP/1.1\r\nHost: x\r\nX-Note: one\r\n\ttwo\r\n\r\n"),
        ("invalid_header", 400, "GET /items/a HTTP/1.1\r\n Host: x\r\n\r\n"),
        ("invalid_header", 400, "GET /items/a HTTP/1.1\r\nHost: x\r\nX\tNote: a\r\n\r\n"),
        // A NUL cuts the value short for libmicrohttpd; what follows it must not be lost silently.
        ("invalid_header", 400, "GET /items/a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\0junk\r\n\r\n"),
        ("invalid_header", 400, "GET /items/a HTTP/1.1\r\nAuthorization: Bearer t\0junk\r\nHost: x\r\n\r\n"),
        ("invalid_header", 400, "GET /items/a HTTP/1.1\r\nHost: x\r\nX-Note: a\u{01}b\r\n\r\n"),
        ("invalid_header", 400, "GET /items/a HTTP/1.1\r\nHost: x\r\nX-Note: a\u{7F}\r\n\r\n"),
        // N4: libmicrohttpd reads only exactly "chunked" as chunked, and anything else until the close.
        ("unsupported_transfer_encoding", 501,
         "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked \r\n\r\n"
            + "0\r\n\r\nGET /items/smuggled HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("unsupported_transfer_encoding", 501,
         "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\t\r\n\r\n0\r\n\r\n"),
        ("unsupported_transfer_encoding", 501,
         "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        // N3: lengths an Int cannot hold (2^63 and up; 2^64-1 is "unknown" to libmicrohttpd).
        ("body_too_large", 413, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 9223372036854775808\r\n\r\nabc"),
        ("body_too_large", 413, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551615\r\n\r\nabc"),
        ("expectation_failed", 417, "POST /upload HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Length: 3\r\n\r\nabc"),
    ])
    func isRefusedOnceAndClosed(code: String, status: Int, raw: String) throws {
        try withEdgeServer { (port: UInt16, reached: Recorder<String>) throws in
            let (text, closed) = try exchange(port, raw)
            #expect(statusLines(text) == ["HTTP/1.1 \(status) \(HTTPStatus(status).reasonPhrase)"], "\(text)")
            let response = try parseResponse(Array(text.utf8))
            #expect(response.headers["Content-Type"] == "application/problem+json")
            #expect(try jsonObject(response.body)["code"] as? String == code)
            #expect(closed, "the connection is closed after the rejection")
            #expect(reached.all.isEmpty, "no handler ran: \(reached.all)")
        }
    }

    @Test func sameRequestsDoneRightAreServed() throws {
        try withEdgeServer { (port: UInt16, reached: Recorder<String>) throws in
            #expect(try request(port, "GET", "/items/a%20b").text == "item")
            #expect(try request(port, "GET", "/items/a%2Bb/parts").text == "parts")
            for host in ["example.com:8080", "127.0.0.1", "[::1]:8080", "[fe80::1]", "my_host.local"] {
                let (answer, _) = try exchange(port, "GET /items/h HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
                #expect(statusLines(answer) == ["HTTP/1.1 200 OK"], "Host: \(host)")
            }
            // HTTP/1.0 needs no Host.
            let (text, _) = try exchange(port, "GET /items/x HTTP/1.0\r\n\r\n")
            #expect(statusLines(text) == ["HTTP/1.1 200 OK"])
            // Values with tabs, spaces and bytes above 0x7F, empty values, bare LF line ends,
            // chunked in any case, a 100-continue expectation.
            let (fields, _) = try exchange(
                port,
                "GET /items/f HTTP/1.1\nHost: x\nX-Empty:\nX-Tab:\ta\tb \r\nX-Text: caf\u{E9}\r\nConnection: close\r\n\r\n")
            #expect(statusLines(fields) == ["HTTP/1.1 200 OK"], "\(fields)")
            let (upload, _) = try exchange(
                port,
                "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\nExpect: 100-Continue\r\n"
                    + "Connection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
            #expect(statusLines(upload) == ["HTTP/1.1 100 Continue", "HTTP/1.1 200 OK"], "\(upload)")
            #expect(
                reached.all == ["get a b", "parts a+b"] + Array(repeating: "get h", count: 5) + ["get x", "get f", "upload"])
        }
    }

    @Test func aMisplacedDotSegmentIsReportedWhereItIs() throws {
        try withEdgeServer { (port: UInt16, _: Recorder<String>) throws in
            let (text, _) = try exchange(port, "GET /items/a/../../items/b HTTP/1.1\r\nHost: x\r\n\r\n")
            let problem = try jsonObject(try parseResponse(Array(text.utf8)).body)
            #expect(problem["reason"] as? String == "dot_segment")
            #expect((problem["detail"] as? String)?.contains("at byte 9") == true, "\(problem)")
        }
    }

    @Test func aDotSegmentReachesTheHandlerOnlyAsAParameterValue() throws {
        try withEdgeServer { (port: UInt16, reached: Recorder<String>) throws in
            // The route's handler decides (the FrameTap API answers 400 invalid_session_id).
            #expect(try request(port, "DELETE", "/items/..").status == 204)
            #expect(reached.all == ["delete .."])
        }
    }
}
