import Foundation
import HTTPServer
import Synchronization
import Testing
import TestSupport

@testable import FrameTapAPI
import Sessions

/// On-demand sessions and pictures from the past over HTTP: `decode: on-demand`, the status's
/// `decoding`, `frame/at.*`, `/history`, and their problems.
@Suite(.serialized, .timeLimit(.minutes(10))) struct APIHistoryTests {
    /// `t`: RFC 3339 with any number of fraction digits, a day the calendar has, or milliseconds.
    @Test func timesAreRFC3339OrMilliseconds() {
        let noon = Date(timeIntervalSince1970: 1_795_953_600)  // 2026-11-29T12:00:00Z
        #expect(FrameTapAPI.parseTime("2026-11-29T12:00:00Z") == noon)
        #expect(FrameTapAPI.parseTime("2026-11-29T13:00:00+01:00") == noon)
        #expect(FrameTapAPI.parseTime("2026-11-29T13:00:00 01:00") == noon, "a + that a query read as a space")
        #expect(FrameTapAPI.parseTime("1795953600000") == noon)
        #expect(FrameTapAPI.parseTime("2026-11-29 12:00:00Z") == noon, "RFC 3339's space between date and time")
        #expect(FrameTapAPI.parseTime("2026-11-29 13:00:00 01:00") == noon)
        #expect(FrameTapAPI.parseTime("2026-11-29t12:00:00.250z") == noon.addingTimeInterval(0.25))
        let long = FrameTapAPI.parseTime("2026-11-29T12:00:00.2501234567890123Z")
        #expect(long.map { abs($0.timeIntervalSince(noon) - 0.25) < 0.0005 } == true, "\(String(describing: long))")
        #expect(FrameTapAPI.parseTime("2024-02-29T00:00:00Z") != nil)
        #expect(FrameTapAPI.parseTime("2026-11-30T11:00:00+23:00") == noon, "offsets up to ±23:59")
        #expect(FrameTapAPI.parseTime("2026-11-28T12:30:00-23:30") == noon)
        #expect(FrameTapAPI.parseTime("2026-11-29T13:00:00+0100") == noon, "an offset without its colon")
        #expect(FrameTapAPI.parseTime("2026-11-29 13:00:00.000+01") == noon, "in hours only, as PostgreSQL writes it")
        #expect(FrameTapAPI.parseTime("2026-11-29 12:00:00 00") == noon, "+00 whose + a query read as a space")
        #expect(FrameTapAPI.parseTime("2026-11-29T12:00:00.5-00:00") == noon.addingTimeInterval(0.5))
        #expect(FrameTapAPI.parseTime("1969-12-31T23:59:59.999Z") == Date(timeIntervalSince1970: -0.001))
        #expect(FrameTapAPI.parseTime("2000-03-01T00:00:00Z") == Date(timeIntervalSince1970: 951_868_800))
        for impossible in [
            "2026-02-29T00:00:00Z", "2026-02-30T00:00:00Z", "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-11-29",
            "yesterday", "2026-11-29T24:00:00Z", "2026-11-29T12:60:00Z", "2026-11-29T12:00:00+24:00", "2026-11-29T12:00:00",
            "2026-11-29T12:00:00.Z", "2026-11-29T12:00Z", "2026-11-29T12:00:00Z ", "2026-1-29T12:00:00Z",
            "2026-11-29T12:00:00+01:", "2026-11-29T12:00:00+1",
        ] {
            #expect(FrameTapAPI.parseTime(impossible) == nil, "\(impossible)")
        }
    }

    @Test func onDemandSessionsDecodeOnlyWhenAPictureIsAskedFor() throws {
        try withService { service in
            let port = service.port
            let created = try request(port, "PUT", "/sessions/od", body: Array(#"{"decode": "on-demand"}"#.utf8))
            #expect(created.status == 201)
            let status = try jsonObject(created.body)
            #expect(status["decode"] as? String == "on-demand")
            #expect(status["decoding"] as? Bool == false)
            #expect(status["decoder"] as? String == "idle")
            try pushToHistory(port, session: "od", Fixture.repeatHeaders)
            let idle = try jsonObject(try request(port, "GET", "/sessions/od").body)
            #expect(idle["decoding"] as? Bool == false)
            #expect((idle["counters"] as? [String: Any])?["framesDecoded"] as? Int == 0)
            let latest = try request(port, "GET", "/sessions/od/frame/latest.jpg")
            #expect(latest.status == 200)
            #expect(latest.headers["X-Frame-Seq"] == "20")
            let live = try jsonObject(try request(port, "GET", "/sessions/od").body)
            #expect(live["decoding"] as? Bool == true)
            #expect(live["decoder"] as? String == "live")
            // A whole server can default to it.
            let metrics = try request(port, "GET", "/metrics").text
            #expect(metrics.contains("frametap_catchup_decodes_total{kind=\"wake\",result=\"ok\"} 1"))
            #expect(metrics.contains("frametap_sessions_decoding 1"))
            // The process's resident memory, a few megabytes at least.
            let resident = metrics.split(separator: "\n").first { $0.hasPrefix("frametap_process_resident_bytes ") }
            #expect(resident.flatMap { Double($0.split(separator: " ")[1]) }.map { $0 > 4_000_000 } == true, "\(String(describing: resident))")
        }
        try withService(sessions: { $0.defaultDecode = .onDemand }) { service in
            try pushToHistory(service.port, session: "default", Fixture.repeatHeaders)
            let status = try jsonObject(try request(service.port, "GET", "/sessions/default").body)
            #expect(status["decode"] as? String == "on-demand")
        }
    }

    @Test func picturesFromThePastWithLatestsOptionsAndHeaders() throws {
        try withService(sessions: { $0.defaultDecode = .onDemand }) { service in
            let port = service.port
            try pushToHistory(port, session: "past", Fixture.repeatHeaders)
            let history = try jsonObject(try request(port, "GET", "/sessions/past/history").body)
            #expect(history["firstSeq"] as? Int == 1)
            #expect(history["lastSeq"] as? Int == 20)
            #expect(history["gops"] as? Int == 3)
            #expect(history["accessUnits"] as? Int == 20)
            #expect((history["bytes"] as? Int ?? 0) > 0)
            #expect((history["limits"] as? [String: Any])?["seconds"] as? Double == 10)
            let to = try #require(history["to"] as? String)

            let jpeg = try request(port, "GET", "/sessions/past/frame/at.jpg?seq=5&width=88")
            #expect(jpeg.status == 200)
            #expect(jpeg.headers["Content-Type"] == "image/jpeg")
            #expect(jpeg.headers["X-Frame-Seq"] == "5")
            let tag = try #require(jpeg.headers["ETag"])
            #expect(tag.hasPrefix("\"5-w88@"), "\(tag)")
            #expect(jpeg.headers["X-Frame-Width"] == "88")
            let format = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
            let received = try format.parse(try #require(jpeg.headers["X-Frame-Received-At"]))
            #expect(received <= (try format.parse(to)))
            #expect(received >= (try format.parse(try #require(history["from"] as? String))))
            let yuv = try request(port, "GET", "/sessions/past/frame/at.yuv?seq=5")
            #expect(yuv.body.count == 176 * 144 * 3 / 2)
            let rgb = try request(port, "GET", "/sessions/past/frame/at.rgb?seq=5")
            #expect(rgb.body.count == 176 * 144 * 3)
            // The client has it: no decode, 304.
            let cached = try request(port, "GET", "/sessions/past/frame/at.jpg?seq=5&width=88", headers: [("If-None-Match", tag)])
            #expect(cached.status == 304)
            // `*` holds a picture that exists, not a number never given out.
            let any = [("If-None-Match", "*")]
            #expect(try request(port, "GET", "/sessions/past/frame/at.jpg?seq=5", headers: any).status == 304)
            for number in ["0", "999999999"] {
                let never = try request(port, "GET", "/sessions/past/frame/at.jpg?seq=\(number)", headers: any)
                let code = try jsonObject(never.body)["code"] as? String
                #expect(never.status == 404 && code == "not_in_history", "\(number)")
            }
            // By time: RFC 3339, and milliseconds since 1970. A time names its whole millisecond, so
            // the range's own ends (published to the millisecond) are held.
            let byTime = try request(port, "GET", "/sessions/past/frame/at.jpg?t=\(to)")
            #expect(byTime.status == 200)
            let oldest = try request(port, "GET", "/sessions/past/frame/at.jpg?t=\(try #require(history["from"] as? String))")
            #expect(oldest.status == 200)
            let milliseconds = Int64((try format.parse(to).timeIntervalSince1970 * 1000).rounded())
            let byMilliseconds = try request(port, "GET", "/sessions/past/frame/at.jpg?t=\(milliseconds)")
            #expect(byMilliseconds.status == 200)
            #expect(byMilliseconds.headers["X-Frame-Seq"] == byTime.headers["X-Frame-Seq"])
        }
    }

    /// `If-None-Match: *` holds a picture that exists: the newest numbers of a B-frame stream
    /// still arriving, whose pictures cannot come out yet, are 404 with it as without.
    @Test func anyTagMatchesOnlyNumbersThatHaveAPicture() throws {
        try withService { service in
            let port = service.port
            let bytes = try Fixtures.bytes("main_bframes_176x144.264")
            #expect(try post(port, "/sessions/live/nalus", bytes).status == 200)
            var unsettled = 0
            for number in 18...25 {
                let plain = try request(port, "GET", "/sessions/live/frame/at.jpg?seq=\(number)").status
                let any = try request(port, "GET", "/sessions/live/frame/at.jpg?seq=\(number)", headers: [("If-None-Match", "*")]).status
                #expect(plain == 200 && any == 304 || plain == 404 && any == 404, "\(number): \(plain) without, \(any) with *")
                if plain == 404 { unsettled += 1 }
            }
            #expect(unsettled > 0, "the stream's newest pictures wait for more of it")
        }
    }

    /// A tag matches only a picture that exists: a request that would be 404 is 404 whatever
    /// tag it carries (a client's cache from an earlier session of the same name, or a guess).
    @Test func aTagForAPictureNotHeldIs404() throws {
        try withService { service in
            let port = service.port
            try pushToHistory(port, session: "empty", Fixture.repeatHeaders)
            let tag = try #require(try request(port, "GET", "/sessions/empty/frame/at.jpg?seq=5").headers["ETag"])
            // This session's own tag, of numbers it does not hold.
            for number in [900, 0] {
                let unheld = tag.replacingOccurrences(of: "\"5@", with: "\"\(number)@")
                let answer = try request(port, "GET", "/sessions/empty/frame/at.jpg?seq=\(number)", headers: [("If-None-Match", unheld)])
                #expect(answer.status == 404, "\(number): \(answer.status)")
            }
            let held = try request(port, "GET", "/sessions/empty/frame/at.jpg?seq=5", headers: [("If-None-Match", tag)])
            #expect(held.status == 304 && held.headers["ETag"] == tag)
        }
    }

    @Test func outsideTheHistoryIs404NotInHistoryNamingTheRange() throws {
        try withService { service in
            let port = service.port
            try pushToHistory(port, session: "range", Fixture.repeatHeaders)
            let beyond = try request(port, "GET", "/sessions/range/frame/at.jpg?seq=900")
            #expect(beyond.status == 404)
            #expect(beyond.headers["Content-Type"] == "application/problem+json")
            let problem = try jsonObject(beyond.body)
            #expect(problem["code"] as? String == "not_in_history")
            // Numbers, as in /history.
            #expect(problem["firstSeq"] as? Int == 1)
            #expect(problem["lastSeq"] as? Int == 20)
            #expect(problem["heldFrom"] is String && problem["heldTo"] is String)
            #expect((problem["detail"] as? String)?.contains("1 to 20") == true)
            let early = try request(port, "GET", "/sessions/range/frame/at.jpg?t=2001-01-01T00:00:00Z")
            #expect(try jsonObject(early.body)["code"] as? String == "not_in_history")
            // Seconds since 1970 where milliseconds go (a day of January 1970) are refused too.
            for bad in ["", "?t=yesterday", "?seq=1&t=2001-01-01T00:00:00Z", "?seq=-1", "?t=1795953600"] {
                let refused = try request(port, "GET", "/sessions/range/frame/at.jpg\(bad)")
                #expect(refused.problem == Problem(400, "invalid_parameter"), "\(bad)")
            }
            #expect(try request(port, "GET", "/sessions/nobody/history").status == 404)
        }
    }

    /// Past `--max-history-memory`, the session whose history keeps the most gives GOPs up, and
    /// `/history`, `/system` and `/metrics` say so.
    ///
    /// Each quiet session's one push keeps its slabs alive (256 KiB each, shared with bytes it
    /// does not hold) however little it holds: those are not held against it, so the busy
    /// session, whose own bytes are the most, gives first even while it keeps less memory alive.
    @Test func everySessionsHistoryTogetherStaysWithinItsBound() throws {
        let limit = 2 << 20
        try withService(sessions: { $0.historyMemoryLimit = limit }) { service in
            let port = service.port
            let quietOnes = ["quiet-a", "quiet-b", "quiet-c"]
            for id in quietOnes { try pushToHistory(port, session: id, Fixture.repeatHeaders) }
            // 13 KB a push: a hundred of them pass the bound.
            for _ in 0..<100 { try pushToHistory(port, session: "busy", Fixture.repeatHeaders) }
            let busy = try jsonObject(try request(port, "GET", "/sessions/busy/history").body)
            #expect((busy["gopsShed"] as? Int ?? 0) > 0, "\(busy)")
            #expect((busy["gops"] as? Int ?? 0) > 0, "the busiest keeps what fits")
            for id in quietOnes {
                let quiet = try jsonObject(try request(port, "GET", "/sessions/\(id)/history").body)
                #expect(quiet["gopsShed"] as? Int == 0 && quiet["gops"] as? Int == 3, "\(id): \(quiet)")
            }
            let system = try jsonObject(try request(port, "GET", "/system").body)
            let memory = try #require(system["historyMemory"] as? [String: Any])
            #expect(memory["limitBytes"] as? Int == limit && memory["histories"] as? Int == 4)
            #expect((memory["usedBytes"] as? Int ?? .max) <= limit, "\(memory)")
            let metrics = String(decoding: try request(port, "GET", "/metrics").body, as: UTF8.self)
            #expect(metrics.contains("frametap_history_gops_shed_total \(memory["gopsShed"] as? Int ?? -1)"))
            #expect(metrics.contains("frametap_history_memory_limit_bytes \(limit)"))
        }
    }

    @Test func pastTheCatchUpQueueIs503WithRetryAfter() throws {
        try withService(sessions: {
            $0.catchUpDecoders = 1
            $0.catchUpQueue = 0
        }) { service in
            let pool = service.registry.services.catchUpPool
            let port = service.port
            _ = try request(port, "PUT", "/sessions/busy", body: Array(#"{"decode": "on-demand"}"#.utf8))
            try pushToHistory(port, session: "busy", Fixture.repeatHeaders)
            // Someone else holds the one catch-up decoder.
            let held = Mutex<CatchUpPermit?>(nil)
            #expect(pool.request { permit in held.withLock { $0 = permit } } == .started)
            for target in ["/sessions/busy/frame/latest.jpg", "/sessions/busy/frame/at.jpg?seq=3"] {
                let refused = try request(port, "GET", target)
                #expect(refused.status == 503, "\(target)")
                #expect(Int(refused.headers["Retry-After"] ?? "") ?? 0 >= 1)
                #expect(try jsonObject(refused.body)["code"] as? String == "catchup_queue_full")
            }
            held.withLock { $0?.release() }
            #expect(try request(port, "GET", "/sessions/busy/frame/latest.jpg").status == 200)
            #expect(try request(port, "GET", "/sessions/busy/frame/at.jpg?seq=3").status == 200)
        }
    }
}

/// Pushes a whole fixture with a flush (an on-demand session answers with no pictures).
private func pushToHistory(_ port: UInt16, session: String, _ name: String) throws {
    let response = try post(port, "/sessions/\(session)/nalus?flush=true", try Fixtures.bytes(name))
    guard response.status == 200 else { throw TestFailure("push failed: \(response.status) \(response.text)") }
}

private enum Fixture {
    /// 20 pictures of 176x144, an IDR with SPS/PPS every 8.
    static let repeatHeaders = "repeat_headers_176x144.264"
}
