import Foundation
import HTTPServer
import TestSupport
import Testing

/// D6: one address trickling request heads byte by byte on 1,100 connections (more than the
/// server's 1,024-connection limit) must not lock anybody else out, and is cut off at the
/// header deadline however slowly it keeps trickling. The deadline is on a manual clock, so the
/// tricklers are cut off exactly when the test moves time past it, never before.
@Suite(.serialized, .timeLimit(.minutes(10))) struct ConnectionLimitTests {
    @Test func tricklingConnectionsFromOneAddressLockNobodyOut() throws {
        raiseOpenFileLimit()
        let clock = ManualClock()
        try withServer(clock: clock, configure: {
            $0.maxConnections = 1024
            $0.maxConnectionsPerIP = 256
            $0.headerTimeout = .seconds(2)
            $0.shutdownGracePeriod = .zero  // the manual clock would never end a grace period
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
            let trickler = Trickler(tricklers, sending: "-", everyMilliseconds: 200)
            defer { trickler.stop() }

            // Another client is served, request after request, while the tricklers hold their
            // slots (a lock-out would leave these unanswered: nothing else would free a slot).
            for _ in 0..<5 {
                #expect(try request(server.port, "GET", "/healthz").status == 200)
            }
            // The address got its share of slots only: the rest were closed at once.
            func open() -> Int { tricklers.filter { $0.read(timeout: .milliseconds(1)) != nil }.count }
            #expect(eventually { open() <= 256 }, "\(1100 - open()) of 1100 closed at once")
            let admitted = open()
            #expect(admitted > 0)
            // Not before the header deadline...
            clock.advance(by: .milliseconds(1900))
            #expect(open() == admitted, "cut off before the header deadline")
            // ...but past it every trickler is cut off, however busy it keeps.
            clock.advance(by: .milliseconds(200))
            #expect(eventually { open() == 0 }, "trickling connections outlived the header deadline")
            // And that address is served again at once.
            let again = try RawClient(port: server.port, source: "127.0.0.2")
            try again.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(try parseResponse(again.readToEnd(timeout: .seconds(2))).status == 200)
        }
    }

    /// N6: slow clients from five addresses, more of them than the server has slots, half
    /// trickling a head, half a PUT body a byte at a time. Deadlines are out of the picture
    /// (an hour, on a clock nobody moves): only the tier kept for clients that behave lets a
    /// sixth address in, request after request.
    @Test func slowClientsFromManyAddressesLeaveRoomForOneThatBehaves() throws {
        raiseOpenFileLimit()
        let clock = ManualClock()
        let events = Recorder<ConnectionEvent>()
        try withServer(clock: clock, configure: {
            $0.maxConnections = 32
            $0.maxConnectionsPerIP = 8
            $0.threadPoolSize = 2
            $0.headerTimeout = .seconds(3600)
            $0.bodyTimeout = .seconds(3600)
            $0.shutdownGracePeriod = .zero
            $0.connectionObserver = { events.record($0) }
        }) { router in
            router.get("/healthz", access: .open) { _ in .text("ok") }
            router.add(.put, "/sessions/{id}", access: .open, maxBodyBytes: 64 << 10) { _ in .text("put") }
        } _: { (server: HTTPServer) throws in
            var attackers: [RawClient] = []
            for address in 2...6 {
                for index in 0..<8 {
                    guard let client = try? RawClient(port: server.port, source: "127.0.0.\(address)") else { continue }
                    try? client.send(
                        index % 2 == 0
                            ? "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "
                            : "PUT /sessions/x HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\nx")
                    attackers.append(client)
                }
            }
            let trickler = Trickler(attackers, sending: "x", everyMilliseconds: 100)
            defer { trickler.stop() }

            for attempt in 1...12 {
                let client = try RawClient(port: server.port, source: "127.0.0.7")
                try client.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                let response = try? parseResponse(client.readToEnd(timeout: .seconds(5)))
                #expect(response?.status == 200, "request \(attempt) of the client that behaves")
            }
            #expect(events.all.contains(.evicted))
            #expect(!events.all.contains(.headerTimeout) && !events.all.contains(.bodyTimeout) && !events.all.contains(.idle))
        }
    }

    /// A connection closed at the header deadline having sent nothing since it opened, or since
    /// its last answer, is `idle` (a proxy's kept-alive connection): counted apart from
    /// `headerTimeout`, which stays for a head begun and not finished, however early its bytes
    /// came (a slowloris sends them with the connection).
    @Test func aConnectionThatSendsNothingIsClosedAsIdle() throws {
        let clock = ManualClock()
        let events = Recorder<ConnectionEvent>()
        try withServer(clock: clock, configure: {
            $0.headerTimeout = .seconds(10)
            $0.shutdownGracePeriod = .zero
            $0.connectionObserver = { events.record($0) }
        }) { router in
            router.get("/healthz", access: .open) { _ in .text("ok") }
        } _: { (server: HTTPServer) throws in
            let eager = try RawClient(port: server.port)
            try eager.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            let silent = try RawClient(port: server.port)
            let keptAlive = try RawClient(port: server.port)
            try keptAlive.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            let answer = keptAlive.read(until: { find(Array("ok".utf8), in: $0) != nil })
            #expect(find(Array("ok".utf8), in: answer) != nil)
            let late = try RawClient(port: server.port)
            #expect(eventually { server.openConnectionCount == 4 }, "\(server.openConnectionCount) connections accepted")
            // The kept-alive connection's request has ended, its wait for a next head begun: the
            // eager one's (its request line is in) is the only request left.
            #expect(eventually { server.activeRequestCount == 1 })
            try late.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            // The late bytes are in the server's socket (the kernel counts them on arrival).
            Thread.sleep(forTimeInterval: 0.1)
            clock.advance(by: .seconds(11))
            #expect(eventually { events.all.count == 4 }, "\(events.all)")
            #expect(events.all.filter { $0 == .idle }.count == 2, "\(events.all)")
            #expect(events.all.filter { $0 == .headerTimeout }.count == 2, "\(events.all)")
            _ = (silent, eager)
        }
    }
}
