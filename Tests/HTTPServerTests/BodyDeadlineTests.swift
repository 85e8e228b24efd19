import Foundation
import Synchronization
import TestSupport
import Testing

@testable import HTTPServer

/// N6: a request body must keep delivering (`bodyProgressBytes` every `bodyTimeout`), or it is
/// answered 408 `body_timeout` and its connection closed; a body the server itself holds back
/// is not. All on a manual clock: a body is cut exactly when the test moves time past its
/// deadline, never before.
@Suite(.serialized, .timeLimit(.minutes(10))) struct BodyDeadlineTests {
    /// Promises of `/held` uploads, whose sinks nobody drains until the test does.
    private final class Held: Sendable {
        let sinks = Recorder<TestSink>()
        let promises = Recorder<ResponsePromise>()
    }

    private func withDeadlineServer(
        capacity: Int = 1 << 20, _ body: (HTTPServer, ManualClock, Held, Recorder<ConnectionEvent>) throws -> Void
    ) throws {
        let clock = ManualClock()
        let held = Held()
        let events = Recorder<ConnectionEvent>()
        try withServer(clock: clock, configure: {
            $0.bodyTimeout = .seconds(5)
            $0.bodyProgressBytes = 1000
            $0.headerTimeout = .seconds(3600)
            $0.shutdownGracePeriod = .zero
            $0.connectionObserver = { events.record($0) }
        }) { router in
            uploadRoute(&router, capacity: capacity, consumer: SlowConsumer())
            router.addUpload(.post, "/held", access: .open) { _ in
                let sink = TestSink(capacity: capacity)
                held.sinks.record(sink)
                return (sink, .deferred { promise in held.promises.record(promise) })
            }
            router.add(.put, "/buffered", access: .open, maxBodyBytes: 64 << 10) { request in .text("\(request.body.count)") }
        } _: { server in
            try body(server, clock, held, events)
        }
    }

    @Test(arguments: ["POST /held", "PUT /buffered"])
    func aTrickledBodyIsAnswered408AtItsDeadline(_ request: String) throws {
        try withDeadlineServer { server, clock, held, events in
            let client = try RawClient(port: server.port)
            try client.send("\(request) HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n")
            // The body's deadline runs from when the server starts reading it, after the head.
            #expect(eventually { server.core.deadlines.bodiesBeingRead == 1 }, "the server reading the body")
            // A byte every second: each resets libmicrohttpd's own idle timeout, never this deadline.
            for _ in 0..<4 {
                try client.send("x")
                clock.advance(by: .seconds(1))
            }
            #expect(client.read(timeout: .milliseconds(300)) == [], "answered before the deadline")
            // Past the deadline, even had the server taken the head a whole second late.
            clock.advance(by: .milliseconds(2100))
            let answer = client.read(until: { find([13, 10, 13, 10], in: $0) != nil }, timeout: .seconds(5))
            let response = try parseResponse(answer + (client.read(timeout: .milliseconds(500)) ?? []))
            #expect(response.problem == Problem(408, "body_timeout"))
            #expect(response.headers["Connection"] == "close")
            #expect(events.all == [.bodyTimeout])
            if request == "POST /held", let sink = held.sinks.all.first {
                // The consumer learns the server cut it off, not that the client left.
                var last: TestSink.Event?
                while let event = try sink.next(timeout: .seconds(5)) {
                    last = event
                    if case .aborted = event { break }
                }
                #expect(last == .aborted(.bodyTimeout))
            }
            // The rest of the body is not waited for: the connection closes at the discard limit.
            clock.advance(by: .seconds(3))
            #expect(client.readToEnd(timeout: .seconds(5)).isEmpty)
        }
    }

    @Test func aBodyThatKeepsDeliveringIsNeverCut() throws {
        try withDeadlineServer { server, clock, held, events in
            let client = try RawClient(port: server.port)
            try client.send("POST /held HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\nConnection: close\r\n\r\n")
            #expect(eventually { held.sinks.all.count == 1 }, "the head arrived")
            let sink = try #require(held.sinks.all.first)
            for round in 1...10 {
                try client.send([UInt8](repeating: 65, count: 2000))  // 2000 bytes every 4 s: slow, but on time
                #expect(eventually { sink.highestQueued == round * 2000 }, "the server read round \(round)")
                clock.advance(by: .seconds(4))
            }
            #expect(events.all.isEmpty)
            let promise = try #require(held.promises.all.first)
            _ = promise.succeed(.text("\(sink.highestQueued)"))
            let response = try parseResponse(client.readToEnd(timeout: .seconds(5)))
            #expect(response.status == 200)
            #expect(response.text == "20000")
        }
    }

    /// While the server's consumer is full the client is held back, and that is no fault of its.
    @Test func aBodyTheServerHoldsBackHasNoDeadline() throws {
        try withDeadlineServer(capacity: 64 << 10) { server, clock, held, events in
            let client = try RawClient(port: server.port)
            let total = 1 << 20
            try client.send("POST /held HTTP/1.1\r\nHost: x\r\nContent-Length: \(total)\r\nConnection: close\r\n\r\n")
            Thread.detachNewThread { try? client.send([UInt8](repeating: 7, count: total)) }
            #expect(eventually { held.sinks.all.first?.highestQueued == 64 << 10 }, "the sink filled up")
            clock.advance(by: .seconds(60))
            #expect(client.read(timeout: .milliseconds(300)) == [], "cut while held back")
            let sink = try #require(held.sinks.all.first)
            let promise = try #require(held.promises.all.first)
            Thread.detachNewThread {
                var received = 0
                do {
                    while let event = try sink.next() {
                        switch event {
                        case .bytes(let bytes): received += bytes.count
                        case .end: _ = promise.succeed(.text("\(received)"))
                        case .aborted: _ = promise.succeed(.text("aborted"))
                        }
                    }
                } catch {
                    _ = promise.succeed(.text("\(error)", status: .internalServerError))
                }
            }
            let response = try parseResponse(client.readToEnd(timeout: .seconds(10)))
            #expect(response.status == 200)
            #expect(response.text == "\(total)")
            #expect(events.all.isEmpty)
        }
    }
}
