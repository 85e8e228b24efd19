import Foundation
import HTTPServer
import Synchronization
import TestSupport
import Testing

/// D6: one address trickling request heads byte by byte on 1,100 connections (more than the
/// server's 1,024-connection limit) must not lock anybody else out, and is cut off at the
/// header deadline however slowly it keeps trickling.
@Suite(.serialized) struct ConnectionLimitTests {
    @Test func tricklingConnectionsFromOneAddressLockNobodyOut() throws {
        raiseOpenFileLimit()
        try withServer(configure: {
            $0.maxConnections = 1024
            $0.maxConnectionsPerIP = 256
            $0.headerTimeout = .seconds(2)
        }) { router in
            router.get("/healthz", access: .open) { _ in .text("ok") }
        } _: { (server: HTTPServer) throws in
            var tricklers: [RawClient] = []
            for _ in 0..<1100 {
                let client = try RawClient(port: server.port, source: "127.0.0.2")
                try? client.send("GET /healthz HTTP/1.1\r\nX")
                tricklers.append(client)
            }
            // Keep trickling: a byte per connection every 200 ms, which resets any idle timeout.
            let trickling = Atomic<Bool>(true)
            let all = tricklers
            let trickler = Thread {
                while trickling.load(ordering: .relaxed) {
                    for client in all { try? client.send("-") }
                    usleep(200_000)
                }
            }
            trickler.start()
            defer { trickling.store(false, ordering: .relaxed) }

            // Another client is served at once, request after request: well before the tricklers
            // reach their header deadline (a loaded CI host gets a generous margin).
            for _ in 0..<5 {
                let started = ContinuousClock.now
                let response = try request(server.port, "GET", "/healthz")
                let elapsed = ContinuousClock.now - started
                #expect(response.status == 200)
                #expect(elapsed < .seconds(1), "healthz took \(elapsed)")
            }
            // The address got its share of slots only: the rest were closed at once.
            let refused = tricklers.filter { $0.read(timeout: .milliseconds(1)) == nil }.count
            #expect(refused >= 1100 - 256, "\(refused) of 1100 closed at once")
            // Past the header deadline every trickler is cut off, however busy it keeps.
            usleep(2_600_000)
            let stillOpen = tricklers.filter { $0.read(timeout: .milliseconds(1)) != nil }.count
            #expect(stillOpen == 0, "\(stillOpen) trickling connections outlived the header deadline")
            // And that address is served again at once.
            let again = try RawClient(port: server.port, source: "127.0.0.2")
            try again.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(try parseResponse(again.readToEnd(timeout: .seconds(2))).status == 200)
        }
    }
}
