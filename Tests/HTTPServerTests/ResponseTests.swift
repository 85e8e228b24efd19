import TestSupport
import Foundation
import Synchronization
import Testing

@testable import HTTPServer

@Suite(.serialized, .timeLimit(.minutes(10))) struct ResponseTests {
    /// libmicrohttpd's lines for a client that left are not warnings; a real send error is.
    @Test func aClientLeavingIsNotAWarning() {
        for line in [
            "Failed to send the chunked response body for the request for `/sessions/a/frames.mjpeg'. Error: The socket is no longer available for sending",
            "Failed to send the response body for the request for `/events'. Error: The connection was forcibly closed by remote peer",
            "Failed to send data in request for /sessions/a/frame/latest.jpg.",
            "Connection was closed by remote side with incomplete request.",
        ] {
            #expect(ServerCore.isClientDeparture(line), "\(line)")
        }
        #expect(!ServerCore.isClientDeparture("Failed to send the response headers for the request for `/x'. Error: Out of memory"))
        #expect(!ServerCore.isClientDeparture("Closing connection (application error generating response)."))
    }

    @Test func sharedBufferIsServedToManyRequestsAndReleased() throws {
        let before = CountedBytes.live.load(ordering: .relaxed)
        let payload = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        do {
            let picture = CountedBytes(payload)
            let reusable = try ReusableResponse(headers: ["Content-Type": "image/jpeg"], body: picture)
            try withServer(routes: { router in
                router.get("/shared", access: .open) { _ in
                    HTTPResponse(headers: ["Content-Type": "image/jpeg"], body: .shared(picture))
                }
                router.get("/reused", access: .open) { _ in .reusing(reusable) }
            }) { (server: HTTPServer) throws in
                let group = DispatchGroup()
                let failures = Atomic<Int>(0)
                for index in 0..<24 {
                    DispatchQueue.global().async(group: group) {
                        let path = index.isMultiple(of: 2) ? "/shared" : "/reused"
                        let response = try? request(server.port, "GET", path)
                        if response?.status != 200 || response?.body != payload
                            || response?.headers["Content-Type"] != "image/jpeg"
                        {
                            failures.add(1, ordering: .relaxed)
                        }
                    }
                }
                try group.wait(for: "24 concurrent requests for a shared picture")
                #expect(failures.load(ordering: .relaxed) == 0)
            }
        }
        // Every retain taken for a response was released by its free callback.
        #expect(eventually { CountedBytes.live.load(ordering: .relaxed) == before })
    }

    @Test func deferredAnswerFromAnotherThread() throws {
        try withServer(routes: { router in
            router.get("/later", access: .open) { request in
                let name = request.query["name"] ?? "?"
                return .deferred { promise in
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(150)) {
                        promise.succeed(.text("hello \(name)"))
                    }
                }
            }
        }) { (server: HTTPServer) throws in
            let started = ContinuousClock.now
            let response = try request(server.port, "GET", "/later?name=bob")
            #expect(response.status == 200)
            #expect(response.text == "hello bob")
            #expect(ContinuousClock.now - started >= .milliseconds(150))
        }
    }

    @Test func deferredAnsweredSynchronouslyInsideStart() throws {
        try withServer(routes: { router in
            router.get("/now", access: .open) { _ in .deferred { promise in promise.succeed(.text("immediate")) } }
        }) { (server: HTTPServer) throws in
            #expect(try request(server.port, "GET", "/now").text == "immediate")
        }
    }

    /// The timeout runs on the server's clock: nothing but moving it answers the long poll.
    @Test func longPollTimeoutLetsTheHandlerAnswer304() throws {
        let clock = ManualClock()
        let waiting = Atomic<Int>(0)
        let cancelled = Atomic<Int>(0)
        try withServer(
            clock: clock,
            configure: {
                $0.shutdownGracePeriod = .zero  // the manual clock would never end a grace period
            },
            routes: { router in
                router.get("/poll", access: .open) { request in
                    let wait = Int(request.query["wait"] ?? "0") ?? 0
                    return .deferred(
                        timeout: .milliseconds(min(wait, 30_000)),
                        onTimeout: { HTTPResponse(status: .notModified, headers: ["X-Waited": "\(wait)"]) }
                    ) { promise in
                        promise.onCancel { cancelled.add(1, ordering: .relaxed) }
                        // Nobody publishes: the timeout decides.
                        waiting.add(1, ordering: .relaxed)
                    }
                }
            }
        ) { (server: HTTPServer) throws in
            let client = try RawClient(port: server.port)
            // 30 s: far longer than the test waits in real time for the answer.
            try client.send("GET /poll?wait=30000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(eventually { waiting.load(ordering: .relaxed) == 1 })
            clock.advance(by: .milliseconds(29_999))
            #expect(client.read(timeout: .milliseconds(100)) == [], "answered before its timeout")
            clock.advance(by: .milliseconds(1))
            let response = try parseResponse(client.readToEnd())
            #expect(response.status == 304)
            #expect(response.headers["X-Waited"] == "30000")
            #expect(cancelled.load(ordering: .relaxed) == 1)
        }
    }

    /// A request's duration, as the observer gets it, is read from the server's clock.
    @Test func requestDurationIsTimedOnTheServersClock() throws {
        let clock = ManualClock()
        let records = Recorder<RequestRecord>()
        let held = Mutex<ResponsePromise?>(nil)
        try withServer(
            clock: clock,
            configure: {
                $0.shutdownGracePeriod = .zero
                $0.requestObserver = { records.record($0) }
            },
            routes: { router in
                router.get("/held", access: .open) { _ in .deferred { promise in held.withLock { $0 = promise } } }
            }
        ) { (server: HTTPServer) throws in
            let client = try RawClient(port: server.port)
            try client.send("GET /held HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(eventually { held.withLock { $0 != nil } })
            clock.advance(by: .milliseconds(250))
            held.withLock { $0 }?.succeed(.text("done"))
            #expect(try parseResponse(client.readToEnd()).text == "done")
            #expect(eventually { records.all.count == 1 })
            #expect(records.all.first?.duration == .milliseconds(250))
        }
    }

    @Test func mjpegStreamSendsNewestFramesAndDisconnectFreesTheViewer() throws {
        let broadcast = TestBroadcast()
        let boundary = "frametapboundary"
        try withServer(
            configure: { $0.heartbeatInterval = .milliseconds(200) },
            routes: { router in
                router.get("/frames.mjpeg", access: .open) { _ in
                    HTTPResponse(
                        headers: ["Content-Type": Multipart.mixedReplaceContentType(boundary: boundary)],
                        body: .stream(broadcast.makeSource()))
                }
            }
        ) { (server: HTTPServer) throws in
            let publishing = Atomic<Bool>(true)
            let publisher = Thread {
                var sequence: UInt64 = 0
                while publishing.load(ordering: .relaxed) {
                    sequence += 1
                    let jpeg = SharedBytes([0xFF, 0xD8] + Array(repeating: UInt8(sequence % 200), count: 5000) + [0xFF, 0xD9])
                    broadcast.publish(
                        Multipart.part(
                            boundary: boundary, contentType: "image/jpeg", payload: jpeg,
                            headers: [("X-Frame-Seq", String(sequence))]))
                    usleep(20_000)
                }
            }
            publisher.start()
            defer { publishing.store(false, ordering: .relaxed) }

            let client = try RawClient(port: server.port)
            try client.send("GET /frames.mjpeg HTTP/1.1\r\nHost: x\r\n\r\n")
            let marker = Array("--\(boundary)\r\n".utf8)
            let raw = client.read(until: { bytes in
                var count = 0
                var index = 0
                while let found = find(marker, in: bytes, from: index) {
                    count += 1
                    index = found + 1
                }
                return count >= 4
            })
            let response = try parseResponse(raw)
            #expect(response.status == 200)
            #expect(response.headers["Content-Type"] == "multipart/x-mixed-replace;boundary=\(boundary)")
            // Check the framing of the first complete part byte for byte.
            let body = response.body
            let first = try #require(find(marker, in: body))
            let headerEnd = try #require(find([13, 10, 13, 10], in: body, from: first))
            let header = String(decoding: body[first..<headerEnd], as: UTF8.self)
            #expect(header.hasPrefix("--\(boundary)\r\nContent-Type: image/jpeg\r\nContent-Length: 5004\r\nX-Frame-Seq: "))
            let payloadStart = headerEnd + 4
            #expect(Array(body[payloadStart..<(payloadStart + 2)]) == [0xFF, 0xD8])
            #expect(Array(body[(payloadStart + 5002)..<(payloadStart + 5006)]) == [0xFF, 0xD9, 13, 10])
            #expect(broadcast.viewerCount == 1)

            client.close()
            #expect(eventually { broadcast.viewerCount == 0 })
            #expect(eventually { server.activeRequestCount == 0 })
        }
    }

    @Test func idleStreamRepeatsLastChunkAndNoticesDeadClient() throws {
        // No new frames: the heartbeat makes the source resend its last chunk, which is how
        // a vanished client is noticed on a suspended connection. The heartbeat runs on the
        // server's clock, so each repeat comes when the test moves it, and only then.
        let clock = ManualClock()
        let broadcast = TestBroadcast()
        broadcast.publish(StreamChunk(bytes: Array("frame\n".utf8)))
        try withServer(
            clock: clock,
            configure: {
                // 30 s: far longer than the test waits in real time for any repeat.
                $0.heartbeatInterval = .seconds(30)
                $0.shutdownGracePeriod = .zero
            },
            routes: { router in router.get("/live", access: .open) { _ in HTTPResponse(body: .stream(broadcast.makeSource())) } }
        ) { (server: HTTPServer) throws in
            let client = try RawClient(port: server.port)
            try client.send("GET /live HTTP/1.1\r\nHost: x\r\n\r\n")
            func frames(_ bytes: [UInt8]) -> Int {
                String(decoding: bytes, as: UTF8.self).components(separatedBy: "frame\n").count - 1
            }
            var raw = client.read(until: { frames($0) == 1 })
            #expect(frames(raw) == 1)
            #expect(client.read(timeout: .milliseconds(300)) == [], "a repeat before the heartbeat")
            for repeats in 1...3 {
                clock.advance(by: .seconds(30))
                raw += client.read(until: { frames(raw + $0) > repeats })
                #expect(frames(raw) == repeats + 1)
            }
            client.close()
            #expect(eventually {
                clock.advance(by: .seconds(30))
                return broadcast.viewerCount == 0
            })
        }
    }

    @Test func finishedStreamEndsWithClosingDelimiter() throws {
        let broadcast = TestBroadcast()
        try withServer(routes: { router in
            router.get("/all", access: .open) { _ in
                HTTPResponse(
                    headers: ["Content-Type": Multipart.mixedContentType(boundary: "b")],
                    body: .stream(broadcast.makeSource()))
            }
        }) { (server: HTTPServer) throws in
            let client = try RawClient(port: server.port)
            try client.send("GET /all HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(eventually { broadcast.viewerCount == 1 })
            broadcast.publish(Multipart.part(boundary: "b", contentType: "text/plain", payload: SharedBytes("one")))
            // The part went out before the stream is finished (finishing first would drop it).
            let head = client.read(until: { find(Array("one\r\n".utf8), in: $0) != nil })
            broadcast.finish(trailer: StreamChunk(bytes: Multipart.closingDelimiter(boundary: "b")))
            let response = try parseResponse(head + client.readToEnd())
            #expect(response.chunkedComplete)
            #expect(response.text == "--b\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\none\r\n--b--\r\n")
            #expect(eventually { broadcast.viewerCount == 0 })
        }
    }
    /// A newest-wins source (a live view) is not pulled while the socket holds more than its last
    /// chunk unsent: a client that stops reading costs a few chunks, not the kernel's megabytes;
    /// an ordinary source is pulled until the send buffer is full.
    @Test(arguments: [true, false]) func aSourceThatKeepsOnlyTheNewestWaitsForItsClient(newestWins: Bool) throws {
        let source = EndlessSource(newestWins: newestWins)
        try withServer(routes: { router in router.get("/live", access: .open) { _ in HTTPResponse(body: .stream(source)) } }) {
            server in
            let client = try RawClient(port: server.port, receiveBuffer: 16 << 10)
            try client.send("GET /live HTTP/1.1\r\nHost: x\r\n\r\n")
            Thread.sleep(forTimeInterval: 1)
            let pulledWhileUnread = source.pulls
            if newestWins {
                #expect(pulledWhileUnread <= 8, "\(pulledWhileUnread) chunks of 64 KiB for a client that read nothing")
            } else {
                #expect(pulledWhileUnread > 8, "\(pulledWhileUnread) chunks")
            }
            // Reading again, the client takes what was queued, and a newest-wins source is
            // pulled again.
            _ = client.read(until: { $0.count > 512 << 10 })
            if newestWins { #expect(source.pulls > pulledWhileUnread) }
            client.close()
        }
    }
}

/// 64 KiB chunks for as long as it is pulled, counting the pulls.
private final class EndlessSource: StreamSource {
    let newestWins: Bool
    private let count = Atomic<Int>(0)
    init(newestWins: Bool) { self.newestWins = newestWins }
    var pulls: Int { count.load(ordering: .relaxed) }
    func next(waker: StreamWaker, idle: Bool) -> StreamPoll {
        count.add(1, ordering: .relaxed)
        return .chunk(StreamChunk(bytes: [UInt8](repeating: 0x55, count: 64 << 10)))
    }
    func close(_ reason: StreamCloseReason) {}
}
