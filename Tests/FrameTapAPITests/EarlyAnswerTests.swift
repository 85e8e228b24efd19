import Foundation
import HTTPServer
import Ingest
import Sessions
import SessionsTestSupport
import Synchronization
import TestSupport
import Testing

@testable import FrameTapAPI

/// A client pushing a body that never ends (a live camera, or an endless stream of zeros),
/// reading whatever the server answers meanwhile, as a real client with a duplex socket does.
final class EndlessPush: Sendable {
    private let client: RawClient
    private let state = Mutex<(answer: [UInt8], answeredAt: ContinuousClock.Instant?, closed: Bool, sent: Int)>(
        ([], nil, false, 0))
    private let running = Atomic<Bool>(true)

    /// `piece` is sent as one chunk every `interval` until the server closes or `stop()`.
    init(port: UInt16, target: String, headers: [(String, String)] = [], piece: [UInt8], interval: Duration) throws {
        client = try RawClient(port: port)
        var head = "POST \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        try client.send(head + "\r\n")
        let chunk = Array("\(String(piece.count, radix: 16))\r\n".utf8) + piece + [13, 10]
        let microseconds = UInt32(clamping: interval.nanoseconds / 1_000)
        Thread.detachNewThread { [self] in
            while running.load(ordering: .relaxed) {
                guard (try? client.send(chunk)) != nil else { break }
                state.withLock { $0.sent += chunk.count }
                if microseconds > 0 { usleep(microseconds) }
            }
        }
        Thread.detachNewThread { [self] in
            while running.load(ordering: .relaxed) {
                guard let bytes = client.read(timeout: .milliseconds(50)) else {
                    state.withLock { $0.closed = true }
                    return
                }
                if !bytes.isEmpty {
                    state.withLock { state in
                        if state.answeredAt == nil { state.answeredAt = .now }
                        state.answer += bytes
                    }
                }
            }
        }
    }

    var answeredAt: ContinuousClock.Instant? { state.withLock { $0.answeredAt } }
    var isClosed: Bool { state.withLock { $0.closed } }
    var bytesSent: Int { state.withLock { $0.sent } }

    func response() throws -> TestResponse { try parseResponse(state.withLock { $0.answer }) }

    func stop() {
        running.store(false, ordering: .relaxed)
        client.close()
    }
}

/// D1-D3: a server that stops listening to an upload says so at once and closes the connection.
@Suite(.serialized, .timeLimit(.minutes(10))) struct EarlyAnswerTests {
    private func baseline() throws -> [UInt8] { try Fixtures.bytes("baseline_176x144.264") }

    @Test func aLivePushToADeletedSessionIsAnswered404AtOnceAndClosed() throws {
        try withService(http: { $0.maxDiscardDuration = .milliseconds(500) }) { service in
            // A camera sends a picture's worth every 20 ms, forever.
            let push = try EndlessPush(
                port: service.port, target: "/sessions/live/nalus", piece: try baseline(), interval: .milliseconds(20))
            defer { push.stop() }
            let id = try SessionID("live")
            #expect(eventually { service.registry.find(id)?.latestSequence != nil }, "the push is decoding")
            let session = try #require(service.registry.find(id))
            let deleted = ContinuousClock.now
            #expect(try request(service.port, "DELETE", "/sessions/live").status == 204)
            #expect(eventually(timeout: .seconds(3)) { push.answeredAt != nil }, "answered at once, not when the body ends")
            let response = try push.response()
            #expect(response.problem == Problem(404, "session_not_found"))
            #expect(response.headers["Connection"] == "close")
            #expect((push.answeredAt ?? .now) - deleted < .seconds(3))
            #expect(eventually(timeout: .seconds(3)) { push.isClosed }, "the connection is closed")
            #expect(session.isClosed)
            let metrics = try request(service.port, "GET", "/metrics").text
            #expect(metricValue(metrics, "frametap_uploads_stopped_total", labels: ["session_deleted"]) == 1)
        }
    }

    @Test func endlessZerosPastTheSpoolLimitAreAnswered413AtOnceAndClosed() throws {
        try withService(sessions: { $0.maxSpoolBytes = 1 << 20 }, http: { $0.maxDiscardBytes = 4 << 20 }) { service in
            let push = try EndlessPush(
                port: service.port, target: "/sessions/zeros/nalus", headers: [("Accept", "multipart/mixed")],
                piece: [UInt8](repeating: 0, count: 64 << 10), interval: .zero)
            defer { push.stop() }
            #expect(eventually(timeout: .seconds(5)) { push.answeredAt != nil })
            #expect(try push.response().problem == Problem(413, "body_too_large"))
            #expect(eventually(timeout: .seconds(5)) { push.isClosed }, "closed after at most maxDiscardBytes more")
            // What the client got through before the close: the limit, the discard allowance and
            // what the kernel buffers hold, never gigabytes.
            #expect(push.bytesSent < 64 << 20)
            #expect(eventually {
                let metrics = (try? request(service.port, "GET", "/metrics").text) ?? ""
                return metricValue(metrics, "frametap_uploads_stopped_total", labels: ["body_too_large"]) == 1
            })
            // The session took no harm: the next push works.
            #expect(try post(service.port, "/sessions/zeros/nalus?flush=true", try baseline()).status == 200)
        }
    }

    /// `--max-spool-total-bytes`: uploads answered as multipart/mixed share one spool budget;
    /// the one that would pass it is answered 413 spool_full at once, and what an upload spooled
    /// is given back when it ends.
    @Test func multipartUploadsShareOneSpoolBudget() throws {
        try withService(sessions: { $0.maxSpoolTotalBytes = 1 << 20 }) { service in
            let budget = service.registry.services.spoolBudget
            let piece = [UInt8](repeating: 0, count: 50_000)
            // The first holds 600 KB of the 1 MiB and goes quiet (its body has not ended).
            let first = try RawClient(port: service.port)
            try first.send(
                "POST /sessions/first/nalus HTTP/1.1\r\nHost: x\r\nAccept: multipart/mixed\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in 0..<12 { try first.send(Array("c350\r\n".utf8) + piece + [13, 10]) }
            #expect(eventually { budget.usedBytes == 600_000 }, "spooled: \(budget.usedBytes)")
            // The second passes the total: refused at once, however small its own limit is.
            let second = try EndlessPush(
                port: service.port, target: "/sessions/second/nalus", headers: [("Accept", "multipart/mixed")],
                piece: piece, interval: .zero)
            defer { second.stop() }
            #expect(eventually(timeout: .seconds(5)) { second.answeredAt != nil })
            let response = try second.response()
            #expect(response.problem == Problem(413, "spool_full"))
            #expect(response.problemDetail.contains("1048576"), "\(response.text)")
            // The first ends (its client leaves): its spool is given back, and the next push fits.
            first.close()
            #expect(eventually { budget.usedBytes == 0 }, "still held: \(budget.usedBytes)")
            let body = Array([[UInt8]](repeating: try Fixtures.bytes("baseline_176x144.264"), count: 20).joined())
            let next = try post(
                service.port, "/sessions/next/nalus?flush=true", body, headers: [("Accept", "multipart/mixed")])
            #expect(next.status == 200)
            #expect(next.headers["Content-Type"]?.hasPrefix("multipart/mixed") == true)
            let metrics = try request(service.port, "GET", "/metrics").text
            #expect(metricValue(metrics, "frametap_uploads_stopped_total", labels: ["spool_full"]) == 1)
        }
    }

    /// A push that fails answers 200 (the status line goes out before decoding starts) but
    /// ends with a problem part, the same problem the JSON answer would be.
    @Test func aFailedMultipartPushEndsWithAProblemPart() throws {
        try withService(sessions: { $0.pictureSizeLimit = .init(maxPixels: 50_000) }) { service in
            // The last: H.265 after the pictures of an H.264 stream, refused from there on.
            let mixed = try Fixtures.bytes("baseline_176x144.264") + Fixtures.bytes("main_bframes_176x144.265")
            for (body, code, status) in [
                (Array("this is not an H.264 stream".utf8), "invalid_data", 422),
                (try Fixtures.bytes("high_320x240.264"), "picture_too_large", 422),
                (mixed, "codec_mismatch", 415),
            ] {
                let json = try post(service.port, "/sessions/j\(code)/nalus?flush=true", body)
                #expect(json.status == status)
                #expect(try jsonObject(json.body)["code"] as? String == code)

                let response = try post(
                    service.port, "/sessions/m\(code)/nalus?flush=true", body, headers: [("Accept", "multipart/mixed")])
                #expect(response.status == 200)
                let (parts, closed) = try parseMultipart(
                    response.body, boundary: boundary(of: response.headers["Content-Type"]))
                #expect(closed)
                let last = try #require(parts.last)
                #expect(last.headers["Content-Type"] == "application/problem+json")
                #expect(last.headers["X-Problem-Status"] == String(status))
                let problem = try jsonObject(last.body)
                #expect(problem["code"] as? String == code)
                #expect(problem["status"] as? Int == status)
                #expect(parts.dropLast().allSatisfy { $0.headers["Content-Type"] == "image/jpeg" })
                if code == "codec_mismatch" {
                    // Every picture of the H.264 part, the one the end of the stream drains too.
                    let alone = try post(service.port, "/sessions/alone/nalus?flush=true", try Fixtures.bytes("baseline_176x144.264"))
                    #expect(parts.count - 1 == (try jsonObject(alone.body)["frames"] as? Int))
                }
            }
            // Refused without a flush, the push leaves nothing behind: the next push is read.
            let unflushed = try post(
                service.port, "/sessions/again/nalus", mixed, headers: [("Accept", "multipart/mixed")])
            #expect(unflushed.status == 200)
            let next = try post(service.port, "/sessions/again/nalus?flush=true", try Fixtures.bytes("baseline_176x144.264"))
            #expect(next.status == 200, "\(next.text.prefix(300))")
            #expect((try jsonObject(next.body)["frames"] as? Int ?? 0) > 0)
        }
    }

    @Test func stopAnswersAPushInProgress503WithoutWaitingForTheGracePeriod() throws {
        var http = HTTPServerConfiguration()
        http.host = "127.0.0.1"
        http.port = 0
        http.shutdownGracePeriod = .seconds(10)
        let service = FrameTapService(
            http: http, sessions: try ServerConfiguration().validated(), services: SessionServices.forTests())
        try service.start()
        defer { service.stop() }
        let push = try EndlessPush(
            port: service.port, target: "/sessions/term/nalus", piece: try baseline(), interval: .milliseconds(20))
        defer { push.stop() }
        let id = try SessionID("term")
        #expect(eventually { service.registry.find(id)?.latestSequence != nil })
        let decodedBefore = service.registry.find(id)?.status().counters.framesDecoded ?? 0
        let started = ContinuousClock.now
        service.stop()
        // The grace period is 10 s; the push is answered long before (margin for a loaded host).
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(eventually(timeout: .seconds(5)) { push.answeredAt != nil })
        let response = try push.response()
        #expect(response.problem == Problem(503, "shutting_down"))
        #expect(response.headers["Retry-After"] == "1")
        #expect(decodedBefore > 0)
    }

    /// A pusher that pauses (nothing arrives to carry the answer) is told at once all the same.
    @Test func aPausedPushToADeletedSessionIsAnsweredAtOnce() throws {
        try withService(http: { $0.maxDiscardDuration = .milliseconds(500) }) { service in
            let client = try RawClient(port: service.port)
            try client.send("POST /sessions/paused/nalus HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            let piece = try Fixtures.bytes("baseline_176x144.264")
            try client.send(Array("\(String(piece.count, radix: 16))\r\n".utf8) + piece + [13, 10])
            let id = try SessionID("paused")
            #expect(eventually { service.registry.find(id)?.latestSequence != nil })
            // The pusher now sends nothing more.
            let deleted = ContinuousClock.now
            #expect(try request(service.port, "DELETE", "/sessions/paused").status == 204)
            let answer = client.read(until: { find([13, 10, 13, 10], in: $0) != nil }, timeout: .seconds(3))
            #expect(ContinuousClock.now - deleted < .seconds(3))
            #expect(try parseResponse(answer).problem == Problem(404, "session_not_found"))
            // A quiet client is not kept for the connection timeout: closed after maxDiscardDuration.
            let rest = client.readToEnd(timeout: .seconds(5))
            #expect(rest.isEmpty, "nothing after the answer")
            #expect(ContinuousClock.now - deleted < .seconds(5))
        }
    }

    /// After an early answer libmicrohttpd goes on parsing the chunked body; a framing error it
    /// finds then must not put a second response on the wire.
    @Test func brokenFramingAfterAnEarlyAnswerAddsNoSecondResponse() throws {
        try withService(sessions: { $0.maxBodyBytes = 10_000 }) { service in
            let client = try RawClient(port: service.port)
            try client.send("POST /sessions/framing/nalus HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            try client.send(Array("4000\r\n".utf8) + [UInt8](repeating: 0, count: 0x4000) + [13, 10])
            try? client.send("zz-not-a-chunk-size\r\n\r\n")
            let text = String(decoding: client.readToEnd(timeout: .seconds(3)), as: UTF8.self)
            let statusLines = text.components(separatedBy: "\r\n").filter { $0.hasPrefix("HTTP/1.") }
            #expect(statusLines == ["HTTP/1.1 413 Content Too Large"], "\(text)")
        }
    }

    /// SIGTERM in the middle of a multipart answer: the answer ends with a shutting_down problem
    /// part and its closing delimiter, so the client knows it is incomplete.
    @Test func shutdownDuringAMultipartAnswerEndsItWithAProblemPart() throws {
        var http = HTTPServerConfiguration()
        http.host = "127.0.0.1"
        http.port = 0
        let service = FrameTapService(
            http: http, sessions: try ServerConfiguration().validated(), services: SessionServices.forTests())
        try service.start()
        defer { service.stop() }
        let body = Array([[UInt8]](repeating: try Fixtures.bytes("high_320x240.264"), count: 20).joined())
        let client = try RawClient(port: service.port)
        try client.send(
            "POST /sessions/mp/nalus?flush=true HTTP/1.1\r\nHost: x\r\nAccept: multipart/mixed\r\nContent-Length: \(body.count)\r\n\r\n")
        try client.send(body)
        // Read a little of the answer only, so it is still going when the server stops.
        let head = client.read(until: { find(Array("image/jpeg".utf8), in: $0) != nil }, timeout: .seconds(10))
        service.stop()
        let raw = head + client.readToEnd(timeout: .seconds(5))
        let response = try parseResponse(raw)
        #expect(response.status == 200)
        let (parts, closed) = try parseMultipart(response.body, boundary: boundary(of: response.headers["Content-Type"]))
        #expect(closed)
        let last = try #require(parts.last)
        #expect(last.headers["Content-Type"] == "application/problem+json")
        #expect(try jsonObject(last.body)["code"] as? String == "shutting_down")
        #expect(parts.count < 20 * 15 + 1, "cut short")
    }

    /// A multipart answer whose client stopped reading cannot send its end: the stop gives it a
    /// moment (`StreamResponse.shutdownStallAllowance`) and then closes it, instead of holding
    /// SIGTERM for the whole grace period. On a manual clock with an hour of grace, so only the
    /// stall can let the stop end.
    @Test func aMultipartAnswerWhoseClientStoppedReadingDoesNotHoldTheStop() throws {
        let clock = ManualClock()
        var http = HTTPServerConfiguration()
        http.host = "127.0.0.1"
        http.port = 0
        http.shutdownGracePeriod = .seconds(3600)
        let service = FrameTapService(
            http: http, sessions: try ServerConfiguration().validated(), services: SessionServices.forTests(clock: clock))
        try service.start()
        let body = Array([[UInt8]](repeating: try Fixtures.bytes("high_320x240.264"), count: 20).joined())
        let client = try RawClient(port: service.port)
        try client.send(
            "POST /sessions/unread/nalus?flush=true&format=rgb HTTP/1.1\r\nHost: x\r\nAccept: multipart/mixed\r\n"
                + "Content-Length: \(body.count)\r\n\r\n")
        try client.send(body)
        // The client reads nothing: the answer fills the socket buffers and stops being pulled,
        // so the pictures stop being decoded.
        let id = try SessionID("unread")
        var decoded: [Int] = []
        #expect(
            eventually(timeout: .seconds(20)) {
                decoded.append(service.registry.find(id)?.status().counters.framesDecoded ?? 0)
                usleep(200_000)
                return decoded.count >= 4 && decoded.last! > 0 && Set(decoded.suffix(4)).count == 1
            }, "the answer stalled: \(decoded.suffix(4))")

        let stopped = Atomic<Bool>(false)
        Thread.detachNewThread {
            service.stop()
            stopped.store(true, ordering: .releasing)
        }
        // Past the stall allowance, in steps the stop's periodic looks see.
        for _ in 0..<20 {
            usleep(50_000)
            clock.advance(by: .milliseconds(100))
        }
        #expect(eventually(timeout: .seconds(10)) { stopped.load(ordering: .acquiring) }, "the stop waited for the grace period")
        if !stopped.load(ordering: .acquiring) {
            clock.advance(by: .seconds(3600))
            _ = eventually(timeout: .seconds(10)) { stopped.load(ordering: .acquiring) }
        }
        client.close()
    }
}
