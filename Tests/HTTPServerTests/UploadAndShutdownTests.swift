import TestSupport
import Foundation
import Synchronization
import Testing
import Timekeeping

@testable import HTTPServer

/// A worker that drains an upload on its own thread, slowly, and answers with what it saw.
/// A wait for the body that times out is recorded as an event (and answered 500), which the
/// tests' expectations on `events` then show.
final class SlowConsumer: Sendable {
    let events = Recorder<String>()

    func start(_ sink: TestSink, promise: ResponsePromise, delayMicroseconds: UInt32) {
        Thread.detachNewThread { [self] in
            var total = 0
            var checksum: UInt64 = 0
            while let event = Self.next(sink, promise: promise, events: events) {
                switch event {
                case .bytes(let bytes):
                    total += bytes.count
                    checksum = bytes.reduce(checksum) { $0 &+ UInt64($1) }
                    if delayMicroseconds > 0 { usleep(delayMicroseconds) }
                case .end:
                    events.record("end")
                    promise.succeed(.text("\(total) \(checksum)"))
                    return
                case .aborted(let reason):
                    events.record("aborted \(reason)")
                    return
                }
            }
        }
    }

    private static func next(_ sink: TestSink, promise: ResponsePromise, events: Recorder<String>) -> TestSink.Event? {
        do {
            return try sink.next()
        } catch {
            events.record("\(error)")
            promise.succeed(.text("\(error)", status: .internalServerError))
            return nil
        }
    }
}

/// An upload route whose body goes to a fresh `TestSink` drained by `consumer`.
func uploadRoute(
    _ router: inout Router<TestAccess>, maxBodyBytes: Int? = nil, capacity: Int = 1 << 20, consumer: SlowConsumer,
    delayMicroseconds: UInt32 = 0, sinks: Recorder<TestSink>? = nil
) {
    router.addUpload(.post, "/upload", access: .open, maxBodyBytes: maxBodyBytes) { _ in
        let sink = TestSink(capacity: capacity)
        sinks?.record(sink)
        return (sink, .deferred { promise in consumer.start(sink, promise: promise, delayMicroseconds: delayMicroseconds) })
    }
}

func chunkedUpload(_ client: RawClient, path: String, totalBytes: Int, chunkSize: Int = 64 * 1024) throws -> UInt64 {
    try client.send("POST \(path) HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    // One precomputed pattern keeps the client fast, so the consumer is the bottleneck.
    let pattern = (0..<chunkSize).map { UInt8(truncatingIfNeeded: $0 % 251) }
    let patternSum = pattern.reduce(UInt64(0)) { $0 &+ UInt64($1) }
    let fullChunk = Array("\(String(chunkSize, radix: 16))\r\n".utf8) + pattern + [13, 10]
    var sent = 0
    var checksum: UInt64 = 0
    while sent < totalBytes {
        let count = min(chunkSize, totalBytes - sent)
        if count == chunkSize {
            try client.send(fullChunk)
            checksum &+= patternSum
        } else {
            let part = Array(pattern[0..<count])
            checksum = part.reduce(checksum) { $0 &+ UInt64($1) }
            try client.send(Array("\(String(count, radix: 16))\r\n".utf8) + part + [13, 10])
        }
        sent += count
    }
    try client.send("0\r\n\r\n")
    return checksum
}

@Suite(.serialized, .timeLimit(.minutes(10))) struct UploadTests {
    @Test func largeChunkedUploadThroughSlowConsumerStaysWithinTheSinkBound() throws {
        let consumer = SlowConsumer()
        let sinks = Recorder<TestSink>()
        let capacity = 256 * 1024
        try withServer(routes: { router in
            uploadRoute(&router, capacity: capacity, consumer: consumer, delayMicroseconds: 300, sinks: sinks)
        }) { (server: HTTPServer) throws in
            let total = 20 * 1024 * 1024
            let client = try RawClient(port: server.port)
            let checksum = try chunkedUpload(client, path: "/upload", totalBytes: total)
            let response = try parseResponse(client.readToEnd(timeout: .seconds(60)))
            #expect(response.status == 200)
            #expect(response.text == "\(total) \(checksum)")
            #expect(consumer.events.all == ["end"])
            let highest = try #require(sinks.all.first).highestQueued
            // The sink did fill up (backpressure engaged) but the server never held more.
            #expect(highest > capacity / 2)
            #expect(highest <= capacity)
        }
    }

    @Test func clientAbortMidUploadIsReportedToTheSink() throws {
        let consumer = SlowConsumer()
        let sinks = Recorder<TestSink>()
        try withServer(routes: { router in uploadRoute(&router, consumer: consumer, sinks: sinks) }) {
            (server: HTTPServer) throws in
            let client = try RawClient(port: server.port)
            try client.send("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            try client.send(Array("8000\r\n".utf8) + Array(repeating: 1, count: 0x8000) + [13, 10])
            // The upload is under way (body bytes reached the sink) when the client leaves.
            #expect(eventually { sinks.all.first?.hasReceivedBytes == true })
            client.close()
            #expect(eventually { consumer.events.all == ["aborted clientGone"] })
            #expect(eventually { server.activeRequestCount == 0 })
        }
    }

    @Test func announcedBodyAboveTheLimitIsRefusedUpFront() throws {
        let handlerRuns = Atomic<Int>(0)
        try withServer(routes: { router in
            router.addUpload(.post, "/upload", access: .open, maxBodyBytes: 1000) { _ in
                handlerRuns.add(1, ordering: .relaxed)
                return (TestSink(capacity: 1), HTTPResponse(status: .accepted))
            }
            router.post("/small", access: .open, maxBodyBytes: 10) { _ in .text("fits") }
        }) { (server: HTTPServer) throws in
            let response = try request(server.port, "POST", "/upload", body: Array(repeating: 0, count: 5000))
            #expect(response.status == 413)
            let problem = try jsonObject(response.body)
            #expect(problem["code"] as? String == "body_too_large")
            #expect(problem["max_body_bytes"] as? Int == 1000)
            #expect(handlerRuns.load(ordering: .relaxed) == 0)
            #expect(try request(server.port, "POST", "/small", body: Array(repeating: 0, count: 11)).status == 413)
            #expect(try request(server.port, "POST", "/small", body: Array(repeating: 0, count: 10)).text == "fits")
        }
    }

    /// Sends chunked zeros until the server answers or closes; returns the answer's bytes, how
    /// much was sent after the answer arrived, and whether the server closed the connection.
    private func pushUntilAnswered(
        _ client: RawClient, path: String = "/upload", during: Duration = .seconds(10), afterHead: () -> Void = {}
    ) throws -> (answer: [UInt8], closed: Bool, elapsed: Duration) {
        try client.send("POST \(path) HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        afterHead()
        let chunk = Array("4000\r\n".utf8) + [UInt8](repeating: 0, count: 0x4000) + [13, 10]
        var answer: [UInt8] = []
        let started = ContinuousClock.now
        var answeredAt: ContinuousClock.Instant?
        while ContinuousClock.now - started < during {
            if let bytes = client.read(timeout: .milliseconds(1)) {
                if !bytes.isEmpty, answeredAt == nil { answeredAt = .now }
                answer += bytes
            } else {
                return (answer, true, (answeredAt ?? .now) - started)
            }
            if (try? client.send(chunk)) == nil {
                return (answer + client.readToEnd(timeout: .seconds(1)), true, (answeredAt ?? .now) - started)
            }
        }
        return (answer, false, (answeredAt ?? .now) - started)
    }

    @Test func chunkedBodyPassingTheLimitIsAnswered413AtOnceThenClosed() throws {
        let consumer = SlowConsumer()
        try withServer(
            configure: { $0.maxDiscardBytes = 256 * 1024 },
            routes: { router in uploadRoute(&router, maxBodyBytes: 100_000, consumer: consumer) }
        ) { (server: HTTPServer) throws in
            let client = try RawClient(port: server.port)
            let (answer, closed, _) = try pushUntilAnswered(client)
            let response = try parseResponse(answer)
            #expect(response.problem == Problem(413, "body_too_large"))
            #expect(response.headers["Connection"] == "close")
            #expect(closed, "the server closes after dropping at most maxDiscardBytes more")
            #expect(eventually { consumer.events.all == ["aborted tooLarge(limit: 100000)"] })
        }
    }

    @Test func aSinkThatStopsListeningIsAnsweredAtOnceThenClosed() throws {
        let consumer = SlowConsumer()
        let sinks = Recorder<TestSink>()
        try withServer(
            configure: {
                $0.maxDiscardBytes = 1 << 30
                $0.maxDiscardDuration = .milliseconds(500)
            },
            routes: { router in uploadRoute(&router, capacity: 64 * 1024, consumer: consumer, sinks: sinks) }
        ) { (server: HTTPServer) throws in
            let client = try RawClient(port: server.port)
            let refuser = Thread {
                // Refused while the body streams in.
                _ = eventually { sinks.all.first?.hasReceivedBytes == true }
                sinks.all.first?.refuse(HTTPError(status: .notFound, code: "gone", detail: "the consumer left"))
            }
            refuser.start()
            let (answer, closed, elapsed) = try pushUntilAnswered(client)
            #expect(try parseResponse(answer).problem == Problem(404, "gone"))
            // Answered right after the refusal, not when the (endless) body ends.
            #expect(elapsed < .seconds(2))
            #expect(closed, "closed after maxDiscardDuration")
            #expect(eventually { server.activeRequestCount == 0 })
        }
    }
}

@Suite(.serialized, .timeLimit(.minutes(10))) struct ShutdownTests {
    @Test func stopEndsSuspendedRequestsAndReturnsPromptly() throws {
        let broadcast = TestBroadcast()
        broadcast.publish(StreamChunk(bytes: Array("first\n".utf8)))
        let abandoned = Atomic<Int>(0)
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.shutdownGracePeriod = .seconds(5)
        var router = Router<TestAccess>()
        router.get("/forever", access: .open) { _ in
            .deferred { promise in promise.onCancel { abandoned.add(1, ordering: .relaxed) } }
        }
        router.get("/poll", access: .open) { _ in
            .deferred(timeout: .seconds(30), onTimeout: { HTTPResponse(status: .notModified) }) { _ in }
        }
        router.get("/live", access: .open) { _ in HTTPResponse(body: .stream(broadcast.makeSource())) }
        let server = HTTPServer(configuration: configuration, router: router, clock: SystemClock())
        try server.start()
        defer { server.stop() }

        let waiting = try RawClient(port: server.port)
        try waiting.send("GET /forever HTTP/1.1\r\nHost: x\r\n\r\n")
        let polling = try RawClient(port: server.port)
        try polling.send("GET /poll HTTP/1.1\r\nHost: x\r\n\r\n")
        let viewer = try RawClient(port: server.port)
        try viewer.send("GET /live HTTP/1.1\r\nHost: x\r\n\r\n")
        let streamStart = viewer.read(until: { find(Array("first\n".utf8), in: $0) != nil })
        #expect(eventually { server.activeRequestCount == 3 })

        let started = ContinuousClock.now
        server.stop()
        #expect(ContinuousClock.now - started < .seconds(3))

        #expect(try parseResponse(waiting.readToEnd()).problem == Problem(503, "shutting_down"))
        #expect(abandoned.load(ordering: .relaxed) == 1)
        // A long poll too, not its timeout answer: a 304 would tell a client that has no
        // picture at all that its copy is current.
        let poll = try parseResponse(polling.readToEnd())
        #expect(poll.problem == Problem(503, "shutting_down") && poll.headers["Retry-After"] == "1")
        let stream = try parseResponse(streamStart + viewer.readToEnd())
        #expect(stream.chunkedComplete)
        #expect(broadcast.viewerCount == 0)
        // The port is closed.
        #expect(throws: (any Error).self) { _ = try request(server.port, "GET", "/live") }
    }

    @Test func stopAnswersAnUploadInProgress503WithoutWaitingForTheGracePeriod() throws {
        let consumer = SlowConsumer()
        let sinks = Recorder<TestSink>()
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.shutdownGracePeriod = .seconds(10)
        var router = Router<TestAccess>()
        uploadRoute(&router, capacity: 64 * 1024, consumer: consumer, delayMicroseconds: 1000, sinks: sinks)
        let server = HTTPServer(configuration: configuration, router: router, clock: SystemClock())
        try server.start()
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        try client.send("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        let chunk = Array("4000\r\n".utf8) + [UInt8](repeating: 0, count: 0x4000) + [13, 10]
        let pushing = Atomic<Bool>(true)
        let pusher = Thread {
            while pushing.load(ordering: .relaxed), (try? client.send(chunk)) != nil { usleep(2000) }
        }
        pusher.start()
        // Stopped while the body streams in.
        #expect(eventually { sinks.all.first?.hasReceivedBytes == true })
        let started = ContinuousClock.now
        server.stop()
        // The grace period is 10 s; the upload is answered long before (margin for a loaded host).
        #expect(ContinuousClock.now - started < .seconds(5))
        let answer = client.readToEnd(timeout: .seconds(5))
        pushing.store(false, ordering: .relaxed)
        let response = try parseResponse(answer)
        #expect(response.problem == Problem(503, "shutting_down"))
        #expect(response.headers["Retry-After"] == "1")
        #expect(eventually { consumer.events.all == ["aborted serverShutdown"] })
    }

    /// The grace period runs on the server's clock: an answer still going out keeps `stop()`
    /// waiting until the clock passes it, not a moment less.
    @Test func stopWaitsForAnAnswerInProgressUntilTheGracePeriodEnds() throws {
        let clock = ManualClock()
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        // A minute: far longer than the test waits in real time for the stop.
        configuration.shutdownGracePeriod = .seconds(60)
        var router = Router<TestAccess>()
        // More than the socket buffers hold, for a client that reads none of it.
        router.get("/large", access: .open) { _ in HTTPResponse(body: .bytes([UInt8](repeating: 7, count: 64 << 20))) }
        let server = HTTPServer(configuration: configuration, router: router, clock: clock)
        try server.start()
        let client = try RawClient(port: server.port)
        try client.send("GET /large HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(eventually { server.activeRequestCount == 1 })

        let stopped = Atomic<Bool>(false)
        Thread {
            server.stop()
            stopped.store(true, ordering: .releasing)
        }.start()
        #expect(!eventually(timeout: .milliseconds(300)) { stopped.load(ordering: .acquiring) }, "stopped at once")
        #expect(eventually {
            clock.advance(by: .seconds(10))
            return stopped.load(ordering: .acquiring)
        })
        #expect(server.activeRequestCount == 0)
        client.close()
    }
}
