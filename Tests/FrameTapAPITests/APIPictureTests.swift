import TestSupport
import Dispatch
import Foundation
@testable import FrameTapAPI
import HTTPServer
import Sessions
import Synchronization
import Testing

/// Pushes a whole fixture with a flush and returns the newest sequence.
@discardableResult
func pushFixture(_ port: UInt16, session: String, _ name: String = "high_320x240.264") throws -> Int {
    let response = try post(port, "/sessions/\(session)/nalus?flush=true", try Fixtures.bytes(name))
    guard response.status == 200, let seq = try jsonObject(response.body)["latestSeq"] as? Int else {
        throw TestFailure("push failed: \(response.status) \(response.text)")
    }
    return seq
}

/// `GET /sessions/{id}/frame/latest.*` and the MJPEG stream.
@Suite(.serialized, .timeLimit(.minutes(10))) struct APIPictureTests {
    @Test func latestJPEGIsAValidJPEGOfThePictureSizeWithItsHeaders() throws {
        try withService { service in
            let seq = try pushFixture(service.port, session: "cam")
            let response = try request(service.port, "GET", "/sessions/cam/frame/latest.jpg")
            #expect(response.status == 200)
            #expect(response.headers["Content-Type"] == "image/jpeg")
            #expect(jpegSize(response.body)! == (320, 240))
            #expect(endsWithEOI(response.body))
            #expect(response.headers["Content-Length"] == String(response.body.count))
            #expect(response.headers["ETag"]?.hasPrefix("\"\(seq)@") == true)
            #expect(response.headers["Cache-Control"] == "no-cache")
            #expect(response.headers["Last-Modified"]?.hasSuffix(" GMT") == true)
            #expect(response.headers["X-Frame-Seq"] == String(seq))
            #expect(Int(response.headers["X-Frame-Age-Ms"] ?? "") != nil)
            #expect(response.headers["X-Frame-Keyframe"] == "false")
            #expect(["software", "vaapi"].contains(response.headers["X-Decoder-Backend"] ?? ""))
            // HEAD: the same headers, no body.
            let head = try request(service.port, "HEAD", "/sessions/cam/frame/latest.jpg")
            #expect(head.status == 200)
            #expect(head.headers["ETag"] == response.headers["ETag"])
        }
    }

    @Test func rawFormatsHaveTheirExactSize() throws {
        try withService { service in
            try pushFixture(service.port, session: "raw")
            let yuv = try request(service.port, "GET", "/sessions/raw/frame/latest.yuv")
            #expect(yuv.status == 200)
            #expect(yuv.headers["Content-Type"] == "application/octet-stream")
            #expect(yuv.headers["X-Frame-Pix-Fmt"] == "yuv420p")
            #expect(yuv.body.count == 320 * 240 * 3 / 2)
            let rgb = try request(service.port, "GET", "/sessions/raw/frame/latest.rgb?width=32")
            #expect(rgb.headers["X-Frame-Pix-Fmt"] == "rgb24")
            #expect(rgb.body.count == 32 * 24 * 3)
        }
    }

    @Test func thumbnailsHaveTheExactSizeAsked() throws {
        try withService { service in
            let seq = try pushFixture(service.port, session: "thumb")
            let cases: [(String, Int, Int)] = [
                ("width=160", 160, 120), ("height=60", 80, 60), ("width=100&height=50", 100, 50),
                ("width=33&quality=40", 33, 25), ("width=640", 640, 480),
            ]
            for (query, width, height) in cases {
                let response = try request(service.port, "GET", "/sessions/thumb/frame/latest.jpg?\(query)")
                #expect(response.status == 200, "\(query)")
                #expect(jpegSize(response.body)! == (width, height), "\(query)")
                #expect(response.headers["ETag"]?.hasPrefix("\"\(seq)-") == true, "\(query)")
            }
        }
    }

    @Test func badPictureParametersAreRejected() throws {
        try withService { service in
            try pushFixture(service.port, session: "p")
            for query in ["quality=0", "quality=101", "quality=high", "width=0", "width=8193", "height=-1", "wait=30001", "wait=x", "after=-3", "width=641", "height=481",
                          "width=160&width=200", "quality=50&quality=50"] {
                let response = try request(service.port, "GET", "/sessions/p/frame/latest.jpg?\(query)")
                #expect(response.status == 400, "\(query)")
                #expect(response.headers["Content-Type"] == "application/problem+json")
                let problem = try jsonObject(response.body)
                #expect(problem["code"] as? String == "invalid_parameter", "\(query)")
                #expect(problem["type"] as? String == "urn:frametap:problem:invalid_parameter")
                #expect(problem["title"] is String && problem["detail"] is String)
            }
            // A '+' is a space in a query: the message says so rather than show ' 160' unexplained.
            let signed = try jsonObject(try request(service.port, "GET", "/sessions/p/frame/latest.jpg?width=+160").body)
            #expect((signed["detail"] as? String)?.hasSuffix("got ' 160' (a '+' in a query is a space: write the number without a sign)") == true)
            // A parameter no route reads is the client's own business (a cache buster).
            #expect(try request(service.port, "GET", "/sessions/p/frame/latest.jpg?_=1732800000&width=64").status == 200)
        }
    }

    @Test func ifNoneMatchAnswersNotModified() throws {
        try withService { service in
            try pushFixture(service.port, session: "etag")
            let first = try request(service.port, "GET", "/sessions/etag/frame/latest.jpg?width=64")
            let etag = try #require(first.headers["ETag"])
            let again = try request(
                service.port, "GET", "/sessions/etag/frame/latest.jpg?width=64", headers: [("If-None-Match", etag)])
            #expect(again.status == 304)
            #expect(again.body.isEmpty)
            #expect(again.headers["ETag"] == etag)
            // Another representation of the same picture has another tag.
            let other = try request(
                service.port, "GET", "/sessions/etag/frame/latest.jpg?width=65", headers: [("If-None-Match", etag)])
            #expect(other.status == 200)
            #expect(other.headers["ETag"] != etag)
            // ?after=<seq> without wait: the same answer.
            let seq = try #require(first.headers["X-Frame-Seq"])
            #expect(try request(service.port, "GET", "/sessions/etag/frame/latest.jpg?after=\(seq)").status == 304)
        }
    }

    /// Numbers start again at 1 in a session made again (or after a restart): a tag of the
    /// earlier session matches nothing, so a cache is sent the new stream's picture, and a long
    /// poll holding such a tag gets the newest picture at once rather than waiting for its number.
    @Test func tagsOfAnEarlierSessionOfTheSameNameMatchNothing() throws {
        try withService { service in
            try pushFixture(service.port, session: "again")
            let before = try request(service.port, "GET", "/sessions/again/frame/latest.jpg")
            let oldTag = try #require(before.headers["ETag"])
            #expect(try request(service.port, "DELETE", "/sessions/again").status == 204)
            try pushFixture(service.port, session: "again")
            let after = try request(service.port, "GET", "/sessions/again/frame/latest.jpg")
            #expect(after.headers["X-Frame-Seq"] == before.headers["X-Frame-Seq"], "the same number, another session")
            #expect(after.headers["ETag"] != oldTag)
            let revalidated = try request(service.port, "GET", "/sessions/again/frame/latest.jpg", headers: [("If-None-Match", oldTag)])
            #expect(revalidated.status == 200)
            // Its number is far ahead of this session's: without the session's mark it would wait.
            let seq = Int(try #require(before.headers["X-Frame-Seq"]))!
            let foreign = oldTag.replacingOccurrences(of: "\"\(seq)@", with: "\"\(seq + 5000)@")
            let poll = try request(
                service.port, "GET", "/sessions/again/frame/latest.jpg?wait=3000", headers: [("If-None-Match", foreign)])
            #expect(poll.status == 200 && poll.headers["ETag"] == after.headers["ETag"])
        }
    }

    @Test func noFrameYetAndUnknownSessions() throws {
        try withService { service in
            #expect(try request(service.port, "PUT", "/sessions/empty").status == 201)
            #expect(try request(service.port, "GET", "/sessions/empty/frame/latest.jpg").problem == Problem(404, "no_frame_yet"))
            let unknown = try request(service.port, "GET", "/sessions/nobody/frame/latest.jpg")
            #expect(unknown.problem == Problem(404, "session_not_found"))
            // Reading never creates a session.
            #expect(service.registry.count == 1)
        }
    }

    @Test func longPollTimesOutWithNotModified() throws {
        try withService { service in
            let seq = try pushFixture(service.port, session: "lp")
            let started = ContinuousClock.now
            let response = try request(service.port, "GET", "/sessions/lp/frame/latest.jpg?wait=400&after=\(seq)")
            let elapsed = ContinuousClock.now - started
            #expect(response.status == 304)
            #expect(elapsed >= .milliseconds(380) && elapsed < .seconds(3))
            // With If-None-Match naming the current picture.
            let etag = try #require(try request(service.port, "GET", "/sessions/lp/frame/latest.jpg").headers["ETag"])
            let tagged = try request(
                service.port, "GET", "/sessions/lp/frame/latest.jpg?wait=300", headers: [("If-None-Match", etag)])
            #expect(tagged.status == 304)
        }
    }

    @Test func longPollWakesOnANewerPicture() throws {
        let bytes = try Fixtures.bytes("baseline_176x144.264")
        try withService { service in
            let seq = try pushFixture(service.port, session: "wake", "baseline_176x144.264")
            let poll = BackgroundRequest(service.port, "GET", "/sessions/wake/frame/latest.jpg?wait=10000&after=\(seq)")
            let session = try #require(service.registry.find(try SessionID("wake")))
            #expect(eventually { session.waitingRequests == 1 })
            _ = try post(service.port, "/sessions/wake/nalus?flush=true", bytes)
            let answer = try poll.wait(for: "the long poll's answer")
            let response = answer.response
            #expect(response?.status == 200)
            #expect(Int(response?.headers["X-Frame-Seq"] ?? "") ?? 0 > seq)
            #expect(jpegSize(response?.body ?? []) != nil)
            #expect(answer.elapsed < .seconds(8))
        }
    }

    @Test func longPollBeforeTheFirstPictureGetsTheFirstPicture() throws {
        try withService { service in
            #expect(try request(service.port, "PUT", "/sessions/first").status == 201)
            let poll = BackgroundRequest(service.port, "GET", "/sessions/first/frame/latest.jpg?wait=10000")
            let session = try #require(service.registry.find(try SessionID("first")))
            #expect(eventually { session.waitingRequests == 1 })
            try pushFixture(service.port, session: "first", "baseline_176x144.264")
            let answer = try poll.wait(for: "the long poll's answer")
            #expect(answer.response?.status == 200)
        }
    }

    /// Many simultaneous requests for the same new representation share one encode, and
    /// repeated requests are served from the cache.
    @Test func encodeOnceUnderConcurrentRequests() throws {
        try withService { service in
            try pushFixture(service.port, session: "once")
            let session = try #require(service.registry.find(try SessionID("once")))
            let before = session.encodeCount
            let port = service.port
            let bodies = Mutex<[[UInt8]]>([])
            DispatchQueue.concurrentPerform(iterations: 12) { _ in
                if let response = try? request(port, "GET", "/sessions/once/frame/latest.jpg?width=120&quality=70"),
                    response.status == 200
                {
                    bodies.withLock { $0.append(response.body) }
                }
            }
            let all = bodies.withLock { $0 }
            #expect(all.count == 12)
            #expect(Set(all.map { MD5.hex($0) }).count == 1)
            #expect(session.encodeCount == before + 1)
            _ = try request(port, "GET", "/sessions/once/frame/latest.jpg?width=120&quality=70")
            #expect(session.encodeCount == before + 1)
            let metrics = try request(port, "GET", "/metrics").text
            #expect(metricValue(metrics, "frametap_picture_encodes_total", labels: [#"format="jpeg""#]) == Double(session.encodeCount))
        }
    }

    @Test func mjpegStreamsPartsAndEndsCleanlyWhenTheSessionIsDeleted() throws {
        try withService(sessions: { $0.mjpegRepeatInterval = .milliseconds(200) }) { service in
            let seq = try pushFixture(service.port, session: "live")
            let client = try RawClient(port: service.port)
            try client.send("GET /sessions/live/frames.mjpeg?width=160 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            var raw: [UInt8] = []
            var parts: [MultipartPart] = []
            var boundaryText = ""
            let deadline = ContinuousClock.now + .seconds(10)
            while parts.count < 3, ContinuousClock.now < deadline {
                guard let bytes = client.read(timeout: .milliseconds(500)) else { break }
                raw += bytes
                guard let response = try? parseResponse(raw) else { continue }
                boundaryText = try boundary(of: response.headers["Content-Type"])
                parts = try parseMultipart(response.body, boundary: boundaryText).parts
            }
            let head = try parseResponse(raw)
            #expect(head.status == 200)
            #expect(head.headers["Content-Type"]?.hasPrefix("multipart/x-mixed-replace;boundary=") == true)
            #expect(parts.count >= 3)  // the first picture, then repeats while nothing new comes
            for part in parts {
                #expect(part.headers["Content-Type"] == "image/jpeg")
                #expect(part.headers["X-Frame-Seq"] == String(seq))
                #expect(jpegSize(part.body)! == (160, 120))
            }
            let session = try #require(service.registry.find(try SessionID("live")))
            #expect(session.viewerCount == 1)
            #expect(try request(service.port, "DELETE", "/sessions/live").status == 204)
            raw += client.readToEnd(timeout: .seconds(5))
            let final = try parseResponse(raw)
            #expect(final.chunkedComplete)
            #expect(try parseMultipart(final.body, boundary: boundaryText).closed)
        }
    }

    @Test func mjpegViewerLeavingIsForgottenAtOnce() throws {
        try withService { service in
            try pushFixture(service.port, session: "gone")
            let session = try #require(service.registry.find(try SessionID("gone")))
            let client = try RawClient(port: service.port)
            try client.send("GET /sessions/gone/frames.mjpeg?fps=5 HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = client.read(until: { $0.count > 1000 })
            #expect(session.viewerCount == 1)
            client.close()
            #expect(eventually { session.viewerCount == 0 })
        }
    }

    /// A viewer with nothing to be sent (no picture yet, or one it cannot have at its size) is
    /// suspended with no repeat to write: its leaving is still noticed, within a heartbeat or two.
    @Test func mjpegViewerWithNothingToSendIsForgottenWhenItLeaves() throws {
        try withService { service in
            let created = try request(
                service.port, "PUT", "/sessions/empty", headers: [("Content-Type", "application/json")], body: Array("{}".utf8))
            #expect(created.status == 201)
            // The picture to come is enlarged too far: known only when it comes.
            for (name, target) in [("empty", "/sessions/empty/frames.mjpeg"), ("empty", "/sessions/empty/frames.mjpeg?width=5000")] {
                let session = try #require(service.registry.find(try SessionID(name)))
                let client = try RawClient(port: service.port)
                try client.send("GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(eventually { session.viewerCount == 1 }, "\(target)")
                client.close()
                #expect(eventually(timeout: .seconds(10)) { session.viewerCount == 0 }, "\(target)")
            }
        }
    }

    @Test func mjpegErrors() throws {
        try withService { service in
            try pushFixture(service.port, session: "m")
            // A size the picture cannot be served at, as latest.jpg answers it.
            for query in ["fps=0", "fps=121", "fps=abc", "quality=0", "width=5000"] {
                let response = try request(service.port, "GET", "/sessions/m/frames.mjpeg?\(query)")
                #expect(response.problem == Problem(400, "invalid_parameter"), "\(query)")
            }
            #expect(try request(service.port, "GET", "/sessions/none/frames.mjpeg").problem == Problem(404, "session_not_found"))
        }
    }
}
