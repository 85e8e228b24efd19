import Foundation
import Synchronization
import Testing

@testable import HTTPServer

/// A worker that drains an upload on its own thread, slowly, and answers with what it saw.
final class SlowConsumer: Sendable {
    let events = Recorder<String>()
    let highWaterMark = Atomic<Int>(0)
    let capacity = Atomic<Int>(0)

    func start(_ body: RequestBodyStream, promise: ResponsePromise, delayMicroseconds: UInt32) {
        capacity.store(body.capacity, ordering: .relaxed)
        Thread.detachNewThread { [self] in
            var total = 0
            var checksum: UInt64 = 0
            while let event = body.waitForNext() {
                switch event {
                case .bytes(let bytes):
                    total += bytes.count
                    checksum = bytes.withUnsafeBytes { raw in
                        raw.reduce(checksum) { $0 &+ UInt64($1) }
                    }
                    if delayMicroseconds > 0 { usleep(delayMicroseconds) }
                case .end:
                    highWaterMark.store(body.highWaterMark, ordering: .relaxed)
                    events.record("end")
                    promise.succeed(.text("\(total) \(checksum)"))
                    return
                case .aborted(let reason):
                    highWaterMark.store(body.highWaterMark, ordering: .relaxed)
                    events.record("aborted \(reason)")
                    return
                }
            }
        }
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

@Suite(.serialized) struct UploadTests {
    @Test func largeChunkedUploadThroughSlowConsumerStaysWithinTheQueueBound() throws {
        let consumer = SlowConsumer()
        let capacity = 256 * 1024
        try withServer(routes: { router in
            router.addUpload(.post, "/upload", queueCapacity: capacity) { _, body in
                .deferred { promise in consumer.start(body, promise: promise, delayMicroseconds: 300) }
            }
        }) { (server: HTTPServer) throws in
            let total = 20 * 1024 * 1024
            let client = try RawClient(port: server.port)
            let checksum = try chunkedUpload(client, path: "/upload", totalBytes: total)
            let response = try parseResponse(client.readToEnd(timeout: .seconds(60)))
            #expect(response.status == 200)
            #expect(response.text == "\(total) \(checksum)")
            #expect(consumer.events.all == ["end"])
            let highWaterMark = consumer.highWaterMark.load(ordering: .relaxed)
            // The queue did fill up (backpressure engaged) but never beyond its bound.
            #expect(highWaterMark > capacity / 2)
            #expect(highWaterMark <= capacity)
        }
    }

    @Test func clientAbortMidUploadIsReportedToTheConsumer() throws {
        let consumer = SlowConsumer()
        try withServer(routes: { router in
            router.addUpload(.post, "/upload", queueCapacity: 1 << 20) { _, body in
                .deferred { promise in consumer.start(body, promise: promise, delayMicroseconds: 0) }
            }
        }) { (server: HTTPServer) throws in
            let client = try RawClient(port: server.port)
            try client.send("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            try client.send(Array("8000\r\n".utf8) + Array(repeating: 1, count: 0x8000) + [13, 10])
            usleep(100_000)
            client.close()
            #expect(eventually { consumer.events.all == ["aborted clientGone"] })
            #expect(eventually { server.activeRequestCount == 0 })
        }
    }

    @Test func announcedBodyAboveTheLimitIsRefusedUpFront() throws {
        let handlerRuns = Atomic<Int>(0)
        try withServer(routes: { router in
            router.addUpload(.post, "/upload", maxBodyBytes: 1000) { _, _ in
                handlerRuns.add(1, ordering: .relaxed)
                return HTTPResponse(status: .accepted)
            }
            router.post("/small", maxBodyBytes: 10) { _ in .text("fits") }
        }) { (server: HTTPServer) throws in
            let response = try request(server.port, "POST", "/upload", body: Array(repeating: 0, count: 5000))
            #expect(response.status == 413)
            let problem = try jsonObject(response.body)
            #expect(problem["code"] as? String == "body_too_large")
            #expect(problem["max_body_bytes"] as? String == "1000")
            #expect(handlerRuns.load(ordering: .relaxed) == 0)
            #expect(try request(server.port, "POST", "/small", body: Array(repeating: 0, count: 11)).status == 413)
            #expect(try request(server.port, "POST", "/small", body: Array(repeating: 0, count: 10)).text == "fits")
        }
    }

    @Test func chunkedBodyPassingTheLimitGets413AfterTheBody() throws {
        let consumer = SlowConsumer()
        try withServer(routes: { router in
            router.addUpload(.post, "/upload", maxBodyBytes: 100_000) { _, body in
                .deferred { promise in consumer.start(body, promise: promise, delayMicroseconds: 0) }
            }
        }) { (server: HTTPServer) throws in
            let client = try RawClient(port: server.port)
            _ = try chunkedUpload(client, path: "/upload", totalBytes: 300_000, chunkSize: 16 * 1024)
            let response = try parseResponse(client.readToEnd())
            #expect(response.status == 413)
            #expect(try jsonObject(response.body)["code"] as? String == "body_too_large")
            #expect(eventually { consumer.events.all == ["aborted tooLarge(limit: 100000)"] })
        }
    }
}

@Suite(.serialized) struct ShutdownTests {
    @Test func stopEndsSuspendedRequestsAndReturnsPromptly() throws {
        let broadcast = NewestChunkBroadcast()
        broadcast.publish(StreamChunk(bytes: Array("first\n".utf8)))
        let abandoned = Atomic<Int>(0)
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.shutdownGracePeriod = .seconds(5)
        var router = Router()
        router.get("/forever") { _ in
            .deferred { promise in promise.onCancel { abandoned.add(1, ordering: .relaxed) } }
        }
        router.get("/poll") { _ in
            .deferred(timeout: .seconds(30), onTimeout: { HTTPResponse(status: .notModified) }) { _ in }
        }
        router.get("/live") { _ in HTTPResponse(body: .stream(broadcast.makeSource())) }
        let server = HTTPServer(configuration: configuration, router: router)
        try server.start()

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

        let waitingResponse = try parseResponse(waiting.readToEnd())
        #expect(waitingResponse.status == 503)
        #expect(try jsonObject(waitingResponse.body)["code"] as? String == "shutting_down")
        #expect(abandoned.load(ordering: .relaxed) == 1)
        // A long poll gets its own timeout answer: to the client that means "nothing new".
        #expect(try parseResponse(polling.readToEnd()).status == 304)
        let stream = try parseResponse(streamStart + viewer.readToEnd())
        #expect(stream.chunkedComplete)
        #expect(broadcast.viewerCount == 0)
        // The port is closed.
        #expect(throws: (any Error).self) { _ = try request(server.port, "GET", "/live") }
    }
}

@Suite struct ConstantTimeTests {
    @Test func comparesWholeTokens() {
        let token = Array("abcdef".utf8)
        #expect(BearerTokenAuth.constantTimeEquals(token, token))
        #expect(!BearerTokenAuth.constantTimeEquals(Array("abcdeg".utf8), token))
        #expect(!BearerTokenAuth.constantTimeEquals(Array("abc".utf8), token))
        #expect(!BearerTokenAuth.constantTimeEquals(Array("abcdefg".utf8), token))
        #expect(!BearerTokenAuth.constantTimeEquals([], token))
        // 256 extra bytes must not wrap the length difference to zero.
        #expect(!BearerTokenAuth.constantTimeEquals(token + Array(repeating: 0, count: 256), token))
    }
}

/// A consumer usually holds its body stream and is captured by the stream's ready handler:
/// once the terminal event is taken, the stream lets the handler go, so neither outlives the
/// request (a per-request leak of the whole connection context before).
@Suite struct RequestBodyLifetimeTests {
    final class Consumer: Sendable {
        let body: RequestBodyStream
        init(body: RequestBodyStream) { self.body = body }
    }

    @Test func theReadyHandlerIsReleasedAfterTheTerminalEvent() {
        weak var released: Consumer?
        do {
            let body = RequestBodyStream(capacity: 1024, resumeProducer: {})
            let consumer = Consumer(body: body)
            released = consumer
            body.setReadyHandler { _ = consumer.body.queuedBytes }
            _ = [UInt8](repeating: 7, count: 10).withUnsafeBytes { body.offer($0) }
            body.terminate(.end)
            #expect(body.next() == .bytes([UInt8](repeating: 7, count: 10)))
            #expect(body.next() == .end)
            body.setReadyHandler { _ = consumer }  // too late: ignored, nothing follows
        }
        #expect(released == nil)
    }
}
