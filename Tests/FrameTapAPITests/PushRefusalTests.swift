import Foundation
import Testing
import TestSupport

/// What a push that cannot be decoded is answered, and what it leaves behind (issue 25, item 7).
@Suite("Refused pushes: a clear answer, no session left behind, no flood of log lines", .timeLimit(.minutes(10)))
struct PushRefusalTests {
    /// Bytes without a single start code.
    static let garbage = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) | 0x10 }

    @Test("garbage pushed into a session that decodes is a problem answer, not a silent 200; its picture stays")
    func garbageIntoARunningStream() throws {
        try withService { service in
            // A whole stream, flushed: the garbage that follows is not the rest of its last NAL unit.
            let good = try post(service.port, "/sessions/cam/nalus?flush=true", try Fixtures.bytes("high_320x240.264"))
            #expect(good.status == 200)
            let response = try post(service.port, "/sessions/cam/nalus", Self.garbage)
            #expect(response.problem == Problem(422, "invalid_data"), "\(response.text.prefix(300))")
            #expect((try jsonObject(response.body)["detail"] as? String)?.contains("5000 bytes") == true)
            #expect(try request(service.port, "GET", "/sessions/cam/frame/latest.jpg").status == 200)
            // The stream goes on.
            let more = try post(service.port, "/sessions/cam/nalus?flush=true", try Fixtures.bytes("high_320x240.264"))
            #expect(more.status == 200)
        }
    }

    @Test("a session a failed first push created is not left behind; one made by PUT stays")
    func noSessionLeftBehind() throws {
        try withService { service in
            for (id, body, headers, status) in [
                ("garbage", Self.garbage, [(String, String)](), 422),
                ("flushed", Self.garbage, [], 422),
                ("codec", try ContainerFixtures.bytes("h264_320x240.mp4"), [("Content-Type", "video/mp4")], 415),
                ("container", Array("not an mp4 at all, only words".utf8), [("Content-Type", "video/mp4")], 422),
            ] {
                // A container that is not flushed may go on in the next push: only its end tells.
                let query = ["flushed": "?flush=true", "codec": "?codec=h265", "container": "?flush=true"][id] ?? ""
                let target = "/sessions/\(id)/nalus" + query
                let response = try post(service.port, target, body, headers: headers)
                #expect(response.status == status, "\(id): \(response.text.prefix(300))")
                #expect(eventually { (try? request(service.port, "GET", "/sessions/\(id)").status) == 404 }, "\(id)")
            }
            let list = try jsonObject(try request(service.port, "GET", "/sessions").body)
            #expect((list["sessions"] as? [Any])?.isEmpty == true)
            // A session made by PUT is the client's: a failed push does not remove it.
            #expect(try request(service.port, "PUT", "/sessions/kept").status == 201)
            #expect(try post(service.port, "/sessions/kept/nalus?flush=true", Self.garbage).status == 422)
            Thread.sleep(forTimeInterval: 0.3)
            #expect(try request(service.port, "GET", "/sessions/kept").status == 200)
        }
    }

    @Test("refusals at a limit (503) are logged once per kind every 10 s, with a count, never as errors")
    func refusalsRateLimited() throws {
        let logs = LogLines()
        try withService(sessions: { $0.maxSessions = 1 }, logger: logs.logger) { service in
            #expect(try post(service.port, "/sessions/one/nalus?flush=true", try Fixtures.bytes("high_320x240.264")).status == 200)
            for index in 0..<30 {
                let refused = try post(service.port, "/sessions/more\(index)/nalus", Self.garbage)
                #expect(refused.status == 503)
            }
            Thread.sleep(forTimeInterval: 0.2)
        }
        let refusals = logs.all.filter { $0.contains("request refused for now") }
        #expect(refusals.count == 1, "\(refusals)")
        #expect(!logs.all.contains { $0.hasPrefix("error") }, "\(logs.all.filter { $0.hasPrefix("error") })")
    }

    @Test("a session sent damaged pictures push after push logs one line per error code a minute, and counts every one")
    func decodeErrorsRateLimited() throws {
        let logs = LogLines()
        try withService(logger: logs.logger) { service in
            #expect(try post(service.port, "/sessions/cam/nalus", try Fixtures.bytes("baseline_176x144.264")).status == 200)
            // As a client that pushes each access unit in its own request would send them.
            for _ in 0..<12 {
                _ = try post(service.port, "/sessions/cam/nalus", DamagedSlices.make(count: 2))
            }
            #expect(try post(service.port, "/sessions/cam/nalus?flush=true", DamagedSlices.make(count: 1)).status < 500)
            let errors = try #require(try jsonObject(request(service.port, "GET", "/sessions/cam").body)["counters"] as? [String: Any])
            #expect((errors["decodeErrors"] as? Int ?? 0) >= 12, "\(errors)")
        }
        let lines = logs.all.filter { $0.contains("decode error") }
        #expect(lines.count == 1, "\(lines)")
        #expect(lines.first?.contains("code=invalid_data") == true, "\(lines)")
    }

    @Test("a container that needs seeking is told so naming its container and the window, not an MP4's moov only")
    func seekingMessage() throws {
        try withService(sessions: { $0.containerSeekWindow = 4096 }) { service in
            let response = try post(
                service.port, "/sessions/s/nalus?flush=true", try ContainerFixtures.bytes("h264_320x240_moov_at_end.mp4"),
                headers: [("Content-Type", "video/mp4")])
            #expect(response.problem == Problem(422, "container_needs_seeking"))
            let detail = response.problemDetail
            #expect(detail.hasPrefix("reading MP4 needed its byte"), "\(detail)")
            #expect(detail.contains("4096 bytes"), "\(detail)")
        }
    }
}
