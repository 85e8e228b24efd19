import Foundation
import HTTPServer
import Synchronization
import TestSupport
import Testing

/// N2: heads libmicrohttpd refuses or chokes on before the server sees them (too many query
/// parameters for its memory pool, too many or too long headers, a target longer than its
/// buffer) each get an answer or a close, and leave nothing behind: no request stays alive, so
/// nothing grows with their number and a stop does not wait for them.
@Suite(.serialized, .timeLimit(.minutes(10))) struct HeadFloodTests {
    private struct Flood {
        let name: String
        let raw: [UInt8]
        /// The status line expected, or nil for "closed without an answer".
        let status: String?

        /// A GET of `target` with `Host` and then `headers`, each line ending in CRLF.
        init(name: String, target: String, headers: String = "", status: String?) {
            self.name = name
            raw = Array("GET \(target) HTTP/1.1\r\nHost: x\r\n\(headers)\r\n".utf8)
            self.status = status
        }
    }

    private let floods: [Flood] = [
        // 1900 query parameters: more than libmicrohttpd's pool holds as argument records, which
        // it then neither answers nor reports completed. The server parses the query itself.
        Flood(
            name: "1900 query parameters",
            target: "/items?" + String(repeating: "a=1&", count: 1900),
            status: "HTTP/1.1 200 OK"),
        // The same behind a NUL: libmicrohttpd still parses the parameters after it.
        Flood(
            name: "parameters after a NUL",
            target: "/items\0?" + String(repeating: "a=1&", count: 1900),
            status: nil),
        Flood(
            name: "a 9000-byte target",
            target: "/items?" + String(repeating: "a", count: 9000),
            status: "HTTP/1.1 414 URI Too Long"),
        // libmicrohttpd's own answers, before the server can see the request.
        Flood(
            name: "a 100 KB target",
            target: "/items?" + String(repeating: "a", count: 100_000),
            status: "HTTP/1.1 414 URI Too Long"),
        Flood(
            name: "3000 headers",
            target: "/items", headers: String(repeating: "X-A: 1\r\n", count: 3000),
            status: "HTTP/1.1 431 Request Header Fields Too Large"),
        Flood(
            name: "a 60 KB header",
            target: "/items", headers: "X-A: " + String(repeating: "a", count: 60_000) + "\r\n",
            status: "HTTP/1.1 431 Request Header Fields Too Large"),
    ]

    /// Sends `raw` and returns the first status line (nil: none within `wait`).
    private func firstStatusLine(_ port: UInt16, _ raw: [UInt8], wait: Duration) throws -> String? {
        let client = try RawClient(port: port)
        try? client.send(raw)
        let answer = client.read(until: { find([13, 10], in: $0) != nil }, timeout: wait)
        guard let end = find([13, 10], in: answer) else { return nil }
        return String(decoding: answer[..<end], as: UTF8.self)
    }

    @Test func floodsOfOversizedHeadsLeaveNoRequestBehind() throws {
        let clock = ManualClock()
        try withServer(clock: clock, configure: {
            $0.headerTimeout = .seconds(10)
            // On a clock nobody moves: a stop that waited for a request would never end.
            $0.shutdownGracePeriod = .seconds(3600)
        }) { router in
            router.get("/items", access: .open) { _ in .text("items") }
        } _: { (server: HTTPServer) throws in
            for flood in floods {
                let status = try firstStatusLine(
                    server.port, flood.raw, wait: flood.status == nil ? .milliseconds(300) : .seconds(5))
                #expect(status == flood.status, "\(flood.name)")
            }
            for _ in 0..<20 {
                for flood in floods {
                    let client = try RawClient(port: server.port)
                    try? client.send(flood.raw)
                    _ = client.read(timeout: .milliseconds(flood.status == nil ? 1 : 2000))
                }
            }
            // The heads libmicrohttpd never finished are cut at the header deadline.
            clock.advance(by: .seconds(11))
            #expect(
                eventually(timeout: .seconds(10)) { server.activeRequestCount == 0 },
                "\(server.activeRequestCount) requests outlived their connections")

            let stopped = Atomic<Bool>(false)
            Thread.detachNewThread {
                server.stop()
                stopped.store(true, ordering: .releasing)
            }
            #expect(eventually(timeout: .seconds(10)) { stopped.load(ordering: .acquiring) }, "the stop waited for requests")
            if !stopped.load(ordering: .acquiring) {
                clock.advance(by: .seconds(3600))  // let the stop end, for the test to end
                _ = eventually(timeout: .seconds(10)) { stopped.load(ordering: .acquiring) }
            }
        }
    }
}
