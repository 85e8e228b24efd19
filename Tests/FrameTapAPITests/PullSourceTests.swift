import Containers
import Foundation
import FrameTapAPI
import Sessions
import Testing
import TestSupport

/// Pull sessions from HTTP sources served by a `SourceServer` on loopback: the allow list before
/// any connection and on redirects, timeouts, reconnects with back-off, DELETE interrupting a
/// blocked connection, credentials never shown.
@Suite("Pull sessions: PUT /sessions/{id} with a source", .timeLimit(.minutes(10)))
struct PullSourceTests {
    /// Pulls allowed from `allowed`, with one-second timeouts and back-off, then `also`.
    static func configure(
        _ allowed: String, also: @escaping (inout ServerConfiguration) -> Void = { _ in }
    ) -> (inout ServerConfiguration) -> Void {
        { configuration in
            configuration.sourcePolicy = try! SourcePolicy(parsing: allowed)
            configuration.sourceConnectTimeout = .seconds(1)
            configuration.sourceReadTimeout = .seconds(1)
            configuration.sourceRetryMax = .seconds(1)
            also(&configuration)
        }
    }

    static func put(_ port: UInt16, _ id: String, _ source: String) throws -> TestResponse {
        try request(port, "PUT", "/sessions/\(id)", headers: [("Content-Type", "application/json")], body: Array(source.utf8))
    }

    /// `PUT /sessions/{id}` of a pull session from `url` (and `transport`), and nothing else.
    static func pull(_ port: UInt16, _ id: String, from url: String, transport: String? = nil) throws -> TestResponse {
        let transportMember = transport.map { #", "transport": "\#($0)""# } ?? ""
        return try put(port, id, #"{"source": {"url": "\#(url)"\#(transportMember)}}"#)
    }

    /// The pull's `lastError`; nil while it has none.
    static func lastError(_ port: UInt16, _ id: String) -> [String: Any]? {
        (try? source(port, id))?["lastError"] as? [String: Any]
    }

    /// Whether session `id`'s pull reports `code` as its last error within 8 s.
    static func fails(_ port: UInt16, _ id: String, with code: String) -> Bool {
        eventually(timeout: .seconds(8)) { lastError(port, id)?["code"] as? String == code }
    }

    /// Whether session `id` decodes at least `count` pictures within 10 s.
    static func decodes(_ port: UInt16, _ id: String, atLeast count: Int) -> Bool {
        eventually(timeout: .seconds(10)) { ((try? framesDecoded(port, id)) ?? 0) >= count }
    }

    /// A camera's live stream over HTTP: the H.264 TS fixture in 2000-byte pieces, 5 ms apart.
    static func liveCamera(port: UInt16 = 0) throws -> SourceServer {
        let ts = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        return try SourceServer(port: port) { _ in .serve(ts, contentType: "video/mp2t", pieceSize: 2000, pause: .milliseconds(5)) }
    }

    static func source(_ port: UInt16, _ id: String) throws -> [String: Any] {
        let status = try jsonObject(try request(port, "GET", "/sessions/\(id)").body)
        return status["source"] as? [String: Any] ?? [:]
    }

    static func framesDecoded(_ port: UInt16, _ id: String) throws -> Int {
        let status = try jsonObject(try request(port, "GET", "/sessions/\(id)").body)
        return (status["counters"] as? [String: Any])?["framesDecoded"] as? Int ?? 0
    }

    @Test("an HTTP source is pulled picture by picture, and pulled again when its stream ends")
    func pullsAndReconnects() throws {
        let server = try Self.liveCamera()
        defer { server.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1")) { service in
            let created = try Self.pull(service.port, "cam", from: server.url("/live.ts"))
            #expect(created.status == 201)
            let state = (try jsonObject(created.body)["source"] as? [String: Any])?["state"] as? String
            #expect(state == "connecting" || state == "live")
            #expect(Self.decodes(service.port, "cam", atLeast: 20))
            // The body ends: the source is lost, retried after its back-off, and read again.
            #expect(eventually(timeout: .seconds(10)) { (try? Self.source(service.port, "cam")["reconnects"] as? Int) ?? 0 >= 1 })
            #expect(Self.decodes(service.port, "cam", atLeast: 40))
            let source = try Self.source(service.port, "cam")
            #expect((source["lastError"] as? [String: Any])?["code"] as? String == "source_ended")
            #expect(server.accepted >= 2)
            let picture = try request(service.port, "GET", "/sessions/cam/frame/latest.jpg")
            #expect(jpegSize(picture.body)?.width == 320)
            // The source's MPEG-TS timestamps (90 kHz already) come with its pictures.
            #expect(picture.headers["X-Frame-PTS"].flatMap { Int64($0) }.map { $0 >= 133_200 } == true)
            // A pull session takes no pushes.
            let push = try post(service.port, "/sessions/cam/nalus", try Fixtures.bytes("high_320x240.264"))
            #expect(push.status == 409)
        }
    }

    @Test("a stored file behind an HTTP URL is read at its own pace, not as fast as it arrives")
    func aStoredFileIsPacedToItsTimestamps() throws {
        // 12 s of 25 fps MPEG-TS, served whole at once: 300 pictures the decoder could take in well under a second.
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("frametap-file-\(getpid()).ts").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try runProgram(
            "/usr/bin/ffmpeg",
            ["-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25",
             "-t", "12", "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-f", "mpegts", path])
        let file = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        let server = try SourceServer { _ in .serve(file, contentType: "video/mp2t") }
        defer { server.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1")) { service in
            let started = ContinuousClock.now
            #expect(try Self.pull(service.port, "file", from: server.url("/file.ts")).status == 201)
            // The first 5 s (SourcePacing.lead) go at once.
            #expect(Self.decodes(service.port, "file", atLeast: 100))
            Thread.sleep(forTimeInterval: 2)
            let decoded = try Self.framesDecoded(service.port, "file")
            let seconds = Double(started.duration(to: .now).components.seconds) + 1
            // Held to real time past the lead: at most 5 s + the time since, at 25 a second.
            #expect(decoded <= Int((5 + 1 + seconds) * 25), "decoded \(decoded) in \(seconds) s")
            #expect(decoded < 300)
            #expect(try Self.source(service.port, "file")["reconnects"] as? Int == 0)
        }
    }

    /// A body read as Annex B in which no access unit of H.264 or H.265 ever comes (noise) is
    /// given up after 64 MiB, instead of being read for ever.
    @Test func annexBWithoutAPictureIsGivenUp() throws {
        var generator = SplitMix64(seed: 7)
        var noise = [UInt8](repeating: 0, count: 72 << 20)
        noise.withUnsafeMutableBytes { bytes in
            for index in stride(from: 0, to: bytes.count, by: 8) { bytes.storeBytes(of: generator.next(), toByteOffset: index, as: UInt64.self) }
        }
        let body = noise
        let server = try SourceServer { _ in .serve(body, contentType: nil) }
        defer { server.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1") { $0.sourceReadTimeout = .seconds(30) }) { service in
            let created = try Self.pull(service.port, "cam", from: server.url("/noise"))
            #expect(created.status == 201)
            #expect(eventually(timeout: .seconds(60)) { Self.lastError(service.port, "cam")?["code"] as? String == "source_failed" })
            let message = Self.lastError(service.port, "cam")?["message"] as? String ?? ""
            #expect(message.contains("64 MiB read as Annex B without one whole picture"), "\(message)")
        }
    }

    @Test("a body that trickles in never opens: the stream's opening has the connect timeout as a whole")
    func aTrickleNeverOpens() throws {
        let ts = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        // A byte every 100 ms: each read well within the read timeout (1 s), the opening never.
        let server = try SourceServer { _ in .serve(ts, contentType: nil, pieceSize: 1, pause: .milliseconds(100)) }
        defer { server.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1")) { service in
            let created = try Self.pull(service.port, "cam", from: server.url("/live.ts"))
            #expect(created.status == 201)
            #expect(Self.fails(service.port, "cam", with: "source_timeout"))
            #expect((try? Self.source(service.port, "cam"))?["state"] as? String != "live")
        }
    }

    @Test("a body that opened and then trickles is lost at its read timeout: a whole packet is due in it, not a byte")
    func aTrickleAfterTheOpeningIsLost() throws {
        let ts = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        // The first 8 KB of the 24 KB at once (the opening and some pictures), then a byte every 50 ms:
        // each read within the read timeout (1 s), a whole packet never.
        let server = try SourceServer { _ in .trickle(ts, contentType: "video/mp2t", fastBytes: 8_000, pause: .milliseconds(50)) }
        defer { server.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1")) { service in
            let created = try Self.pull(service.port, "cam", from: server.url("/live.ts"))
            #expect(created.status == 201)
            #expect(Self.fails(service.port, "cam", with: "source_timeout"))
            let message = Self.lastError(service.port, "cam")?["message"] as? String ?? ""
            #expect(message.contains("sent no whole packet of its stream in time"), "\(message)")
        }
    }

    @Test("an Annex B body that opened and then trickles is lost within twice its read timeout of its last access unit")
    func anAnnexBTrickleIsLost() throws {
        let stream = try Fixtures.bytes("high_320x240.264")
        let server = try SourceServer { _ in .trickle(stream, contentType: nil, fastBytes: 6_000, pause: .milliseconds(50)) }
        defer { server.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1")) { service in
            let created = try Self.pull(service.port, "cam", from: server.url("/live.264"))
            #expect(created.status == 201)
            #expect(Self.fails(service.port, "cam", with: "source_timeout"))
        }
    }

    @Test("a chunked body that breaks its framing fails at once, saying so", arguments: ["zz", "ffffffffffffffffffff"])
    func malformedChunkedBody(size: String) throws {
        let ts = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        let head = "HTTP/1.1 200 OK\r\nContent-Type: video/mp2t\r\nTransfer-Encoding: chunked\r\n\r\n"
        let body = Array(head.utf8) + Array(String(ts.count, radix: 16).utf8) + [13, 10] + ts + [13, 10] + Array("\(size)\r\n".utf8)
        let server = try SourceServer { _ in .raw(body) }
        defer { server.stop() }
        // A read timeout far longer than the test waits: the failure is the framing's, not a timeout.
        try withService(sessions: Self.configure("http://127.0.0.1") { $0.sourceReadTimeout = .seconds(60) }) { service in
            let created = try Self.pull(service.port, "cam", from: server.url("/live.ts"))
            #expect(created.status == 201)
            #expect(Self.fails(service.port, "cam", with: "source_failed"))
            let message = Self.lastError(service.port, "cam")?["message"] as? String ?? ""
            #expect(message.contains("malformed chunked body"), "\(message)")
        }
    }

    @Test("a body whose first bytes are another container than its Content-Type says is read as its bytes say")
    func theBytesOutweighTheContentType() throws {
        let flv = try ContainerFixtures.bytes("h264_320x240.flv")
        let server = try SourceServer { _ in .serve(flv, contentType: "video/mp2t", pieceSize: 4000, pause: .milliseconds(20)) }
        defer { server.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1")) { service in
            let created = try Self.pull(service.port, "cam", from: server.url("/named-as.ts"))
            #expect(created.status == 201)
            #expect(Self.decodes(service.port, "cam", atLeast: 5))
            #expect((try? Self.source(service.port, "cam"))?["format"] as? String == "flv")
        }
    }

    @Test("a PUT of the same definition is a 200 that leaves a live pull as it is: no reconnect, no reset")
    func unchangedDefinitionTouchesNothing() throws {
        let ts = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        // About 6 s of stream on one connection.
        let server = try SourceServer { _ in .serve(ts, contentType: "video/mp2t", pieceSize: 200, pause: .milliseconds(50)) }
        defer { server.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1")) { service in
            let definition = #"{"source": {"url": "\#(server.url("/live.ts"))"}, "decode": "all", "quality": 70, "owner": "sync"}"#
            #expect(try Self.put(service.port, "cam", definition).status == 201)
            #expect(Self.decodes(service.port, "cam", atLeast: 2))
            let before = try jsonObject(try request(service.port, "GET", "/sessions/cam").body)
            let again = try Self.put(service.port, "cam", definition)
            #expect(again.status == 200)
            let after = try jsonObject(again.body)
            for member in ["createdAt", "owner", "quality", "decode"] {
                #expect("\(after[member] ?? "none")" == "\(before[member] ?? "none")", "\(member)")
            }
            let source = after["source"] as? [String: Any] ?? [:]
            let sourceBefore = before["source"] as? [String: Any] ?? [:]
            #expect(source["state"] as? String == "live")
            #expect(source["reconnects"] as? Int == 0)
            #expect(source["connectedAt"] as? String == sourceBefore["connectedAt"] as? String)
            // The decoder goes on from where it was: its counters grow, never start again.
            let decoded = (before["counters"] as? [String: Any])?["framesDecoded"] as? Int ?? 0
            #expect(((after["counters"] as? [String: Any])?["framesDecoded"] as? Int ?? 0) >= decoded)
            #expect(Self.decodes(service.port, "cam", atLeast: decoded + 1))
            #expect(server.accepted == 1)
        }
    }

    @Test("a host outside --allow-sources is refused with 403 before any connection")
    func notAllowed() throws {
        let outside = try SourceServer(host: "127.0.0.2") { _ in .serve([1, 2, 3], contentType: nil) }
        defer { outside.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1,rtsp://10.0.0.0/8")) { service in
            let refused = try Self.pull(service.port, "cam", from: outside.url("/x.ts"))
            #expect(refused.problem == Problem(403, "source_not_allowed"))
            let otherScheme = try Self.pull(service.port, "cam", from: "rtmp://127.0.0.1/live/cam")
            #expect(otherScheme.status == 403)
            #expect(try request(service.port, "GET", "/sessions/cam").status == 404)
        }
        // Pulling is off without --allow-sources.
        try withService { service in
            let off = try Self.pull(service.port, "cam", from: outside.url("/x.ts"))
            #expect(off.status == 403)
            #expect(try jsonObject(off.body)["detail"] as? String ?? "" == "pulling is off: this server allows no sources (--allow-sources)")
        }
        Thread.sleep(forTimeInterval: 0.2)
        #expect(outside.accepted == 0)
    }

    @Test("a redirect to a host outside the list is never followed")
    func redirectRefused() throws {
        let outside = try SourceServer(host: "127.0.0.2") { _ in .serve([1, 2, 3], contentType: nil) }
        defer { outside.stop() }
        let ts = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        let server = try SourceServer { path in
            path == "/away" ? .redirect(outside.url("/x.ts")) : path == "/here" ? .redirect("/live.ts") : .serve(ts, contentType: nil)
        }
        defer { server.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1")) { service in
            let away = try Self.pull(service.port, "away", from: server.url("/away"))
            #expect(away.status == 201)
            #expect(Self.fails(service.port, "away", with: "source_not_allowed"))
            let state = try Self.source(service.port, "away")["state"] as? String
            #expect(state != "live")
            // A redirect within the list is followed.
            let here = try Self.pull(service.port, "here", from: server.url("/here"))
            #expect(here.status == 201)
            #expect(Self.decodes(service.port, "here", atLeast: 20))
        }
        #expect(outside.accepted == 0)
        #expect(server.requests.contains("/live.ts"))
    }

    @Test("an RTSP redirect to a host outside the list: nothing is sent there")
    func rtspRedirectRefused() throws {
        let outside = try SourceServer(host: "127.0.0.2") { _ in .silent }
        defer { outside.stop() }
        let camera = try SourceServer { _ in .rtspRedirect("rtsp://127.0.0.2:\(outside.port)/cam") }
        defer { camera.stop() }
        try withService(sessions: Self.configure("rtsp://127.0.0.1")) { service in
            let created = try Self.pull(service.port, "cam", from: "rtsp://127.0.0.1:\(camera.port)/cam")
            #expect(created.status == 201)
            #expect(Self.fails(service.port, "cam", with: "source_not_allowed"))
            let message = Self.lastError(service.port, "cam")?["message"] as? String
            #expect(message?.contains("redirected to rtsp://127.0.0.2") == true, "\(message ?? "")")
        }
        // The camera was asked; the host it redirected to got no request.
        #expect(!camera.requests.isEmpty)
        #expect(outside.requests.isEmpty)
    }

    @Test("a source that stalls is lost after the read timeout; one that never answers after the connect timeout; a refused one is unreachable")
    func timeouts() throws {
        let ts = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        let server = try SourceServer { path in
            path == "/stall" ? .serve(ts, contentType: "video/mp2t", stallAfter: ts.count / 2) : .silent
        }
        defer { server.stop() }
        let closed = try SourceServer { _ in .silent }
        let closedURL = closed.url("/gone")
        closed.stop()
        try withService(sessions: Self.configure("http://127.0.0.1")) { service in
            for (id, url) in [("stall", server.url("/stall")), ("silent", server.url("/silent")), ("closed", closedURL)] {
                let created = try Self.pull(service.port, id, from: url)
                #expect(created.status == 201)
            }
            #expect(Self.fails(service.port, "stall", with: "source_timeout"))
            #expect((try Self.framesDecoded(service.port, "stall")) > 0)
            #expect(Self.fails(service.port, "silent", with: "source_timeout"))
            #expect(Self.fails(service.port, "closed", with: "source_unreachable"))
            #expect(eventually(timeout: .seconds(8)) { (try? Self.source(service.port, "closed")["state"] as? String) == "retrying" })
            // The session's own lastError says it too, where every client looks.
            let closedStatus = try jsonObject(try request(service.port, "GET", "/sessions/closed").body)
            #expect((closedStatus["lastError"] as? [String: Any])?["code"] as? String == "source_unreachable")
            #expect((closedStatus["source"] as? [String: Any])?["failures"] as? Int ?? 0 >= 1)
            // Other sessions are untouched.
            let push = try post(service.port, "/sessions/other/nalus?flush=true", try Fixtures.bytes("high_320x240.264"))
            #expect(push.status == 200)
        }
    }

    @Test("an SRT call nobody takes says what it may be: no listener, or one that refused this caller")
    func anSRTCallNobodyTakes() throws {
        // A UDP port nothing listens on: the datagrams of the call go nowhere.
        let reserved = try SourceServer { _ in .silent }
        let port = reserved.port
        reserved.stop()
        // libsrt gives up on a call after 3 s, within the default connect timeout of 10 s.
        try withService(sessions: Self.configure("srt://127.0.0.1") { $0.sourceConnectTimeout = .seconds(10) }) { service in
            #expect(try Self.pull(service.port, "srt", from: "srt://127.0.0.1:\(port)").status == 201)
            #expect(eventually(timeout: .seconds(20)) { Self.lastError(service.port, "srt") != nil })
            let error = try #require(Self.lastError(service.port, "srt"))
            #expect(error["code"] as? String == "source_failed")
            #expect((error["message"] as? String)?.hasPrefix("the SRT listener did not take the call") == true, "\(error)")
        }
    }

    /// A pull on the service's manual clock (nothing waits out a back-off unless the test moves
    /// time), its source an HTTP server on a port that refuses connections until `back` starts one.
    static func withManualPull(
        _ body: (_ service: FrameTapService, _ clock: ManualClock, _ port: UInt16) throws -> Void
    ) throws {
        let reserved = try SourceServer { _ in .silent }
        let port = reserved.port
        reserved.stop()
        #expect(eventually { reserved.listenerIsClosed })
        let clock = ManualClock()
        try withService(
            sessions: Self.configure("http://127.0.0.1") {
                $0.sourceRetryMax = .seconds(30)
                $0.sourceReadTimeout = .seconds(60)
            }, clock: clock
        ) { service in
            let created = try Self.pull(service.port, "cam", from: "http://127.0.0.1:\(port)/live.ts")
            #expect(created.status == 201)
            try body(service, clock, port)
        }
    }

    static func sourceNumber(_ port: UInt16, _ key: String) -> Int {
        ((try? Self.source(port, "cam"))?[key] as? Int) ?? -1
    }

    @Test("POST /sessions/{id}/source/retry ends the back-off at once; a push session is 409 not_pulling")
    func retryNow() throws {
        try Self.withManualPull { service, clock, port in
            // Refused at once; the back-off (0.5 s) never ends on its own: the clock stands still.
            #expect(eventually(timeout: .seconds(10)) { Self.sourceNumber(service.port, "failures") == 1 })
            let retried = try request(service.port, "POST", "/sessions/cam/source/retry")
            #expect(retried.status == 200)
            #expect(eventually(timeout: .seconds(10)) { Self.sourceNumber(service.port, "failures") == 2 })
            #expect(Self.sourceNumber(service.port, "reconnects") == 1)
            // The camera is back: a retry connects it without the clock moving.
            let camera = try Self.liveCamera(port: port)
            defer { camera.stop() }
            #expect(try request(service.port, "POST", "/sessions/cam/source/retry").status == 200)
            #expect(eventually(timeout: .seconds(10)) { (try? Self.source(service.port, "cam")["state"] as? String) == "live" })
            #expect(Self.sourceNumber(service.port, "failures") == 0)
            // Live: a retry changes nothing.
            let live = try request(service.port, "POST", "/sessions/cam/source/retry")
            #expect(live.status == 200)
            #expect((try jsonObject(live.body)["source"] as? [String: Any])?["state"] as? String == "live")
        }
        try withService { service in
            #expect(try post(service.port, "/sessions/pushed/nalus?flush=true", try Fixtures.bytes("baseline_176x144.264")).status == 200)
            #expect(try request(service.port, "POST", "/sessions/pushed/source/retry").problem == Problem(409, "not_pulling"))
            let missing = try request(service.port, "POST", "/sessions/nobody/source/retry")
            #expect(missing.problem == Problem(404, "session_not_found"))
        }
    }

    @Test("refused credentials are source_unauthorized, tried again only minutes later (cameras lock accounts); a missing path is source_not_found")
    func credentialsRefusedAndPathsMissing() throws {
        let web = try SourceServer { path in path.hasPrefix("/missing") ? .status(404) : .status(401) }
        defer { web.stop() }
        let camera = try SourceServer { _ in
            .rtsp { method, _ in
                method == "OPTIONS"
                    ? "RTSP/1.0 200 OK\r\nPublic: OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN\r\n\r\n"
                    : "RTSP/1.0 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"cam\"\r\n\r\n"
            }
        }
        defer { camera.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1,rtsp://127.0.0.1")) { service in
            #expect(try Self.pull(service.port, "web", from: "http://127.0.0.1:\(web.port)/live.ts").status == 201)
            #expect(try Self.pull(service.port, "gone", from: "http://127.0.0.1:\(web.port)/missing.ts").status == 201)
            #expect(try Self.pull(service.port, "cam", from: "rtsp://admin:wrong@127.0.0.1:\(camera.port)/s").status == 201)
            #expect(Self.fails(service.port, "web", with: "source_unauthorized"))
            #expect(Self.fails(service.port, "gone", with: "source_not_found"))
            #expect(Self.fails(service.port, "cam", with: "source_unauthorized"), "\(String(describing: Self.lastError(service.port, "cam")))")
            // --source-retry-max is 1 s here: refused credentials wait five minutes all the same.
            for id in ["web", "cam"] {
                let source = try Self.source(service.port, id)
                let next = try #require((source["nextAttemptAt"] as? String).flatMap { try? Date($0, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) })
                #expect(next.timeIntervalSinceNow > 240, "\(id): the next attempt in \(next.timeIntervalSinceNow) s")
            }
            let missing = try Self.source(service.port, "gone")
            let next = try #require((missing["nextAttemptAt"] as? String).flatMap { try? Date($0, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) })
            #expect(next.timeIntervalSinceNow < 5, "a missing path follows the usual back-off")
        }
    }

    @Test("connect on-demand: refused credentials hold the source off across requests: no login until the wait ends or a retry")
    func onDemandCredentialsRefused() throws {
        let web = try SourceServer { _ in .status(401) }
        defer { web.stop() }
        try Self.withOnDemandPull(from: "http://127.0.0.1:\(web.port)/cam.ts") { service, clock in
            let first = try request(service.port, "GET", "/sessions/cam/frame/latest.jpg")
            #expect(first.problem == Problem(503, "source_not_ready"))
            #expect(try jsonObject(first.body)["sourceError"] as? String == "source_unauthorized")
            #expect((295...300).contains(Int(first.headers["Retry-After"] ?? "") ?? 0), "\(first.headers)")
            // A bare TCP probe may follow a failure; a login is a request.
            let logins = web.requests.count
            // Nobody asks: let go, idle. The next request is refused at once with the time left,
            // and nothing reaches the camera.
            clock.advance(by: .seconds(11))
            #expect(eventually(timeout: .seconds(10)) { (try? Self.source(service.port, "cam")["state"] as? String) == "idle" })
            // Idle, and its status still says when the next login may be.
            let idle = try Self.source(service.port, "cam")
            #expect(idle["nextAttemptAt"] is String && (idle["lastError"] as? [String: Any])?["code"] as? String == "source_unauthorized")
            clock.advance(by: .seconds(60))
            let again = try request(service.port, "GET", "/sessions/cam/frame/latest.jpg")
            #expect(again.problem == Problem(503, "source_not_ready"))
            let left = Int(again.headers["Retry-After"] ?? "") ?? 0
            #expect((200...240).contains(left), "\(left) s left")
            #expect(web.requests.count == logins, "no login while the credentials are held off")
            // A retry ends the wait: the next request tries again.
            #expect(try request(service.port, "POST", "/sessions/cam/source/retry").status == 200)
            _ = try request(service.port, "GET", "/sessions/cam/frame/latest.jpg")
            #expect(eventually(timeout: .seconds(10)) { web.requests.count > logins })
        }
    }

    @Test("a source back after an outage is connected within about a probe interval, though its back-off had grown")
    func probedWhileAway() throws {
        try Self.withManualPull { service, clock, port in
            // Time moves in steps of 100 ms until the back-off has grown to 8 s (five failures:
            // 0.5, 1, 2, 4, 8 s); the waits of 2 s and more probe the closed port meanwhile.
            #expect(eventually(timeout: .seconds(60)) {
                clock.advance(by: .milliseconds(100))
                return Self.sourceNumber(service.port, "failures") >= 5
            })
            let source = try Self.source(service.port, "cam")
            let nextAttempt = try #require((source["nextAttemptAt"] as? String).flatMap { try? Date($0, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) })
            let backOffLeft = nextAttempt.timeIntervalSince(clock.now)
            #expect(backOffLeft > 5, "the back-off had \(backOffLeft) s left")
            let camera = try Self.liveCamera(port: port)
            defer { camera.stop() }
            let returnedAt = clock.uptime
            #expect(eventually(timeout: .seconds(30)) {
                clock.advance(by: .milliseconds(100))
                return (try? Self.source(service.port, "cam")["state"] as? String) == "live"
            })
            let waited = Double(clock.uptime - returnedAt) / 1e9
            #expect(waited < 3, "live \(waited) s after the source came back; its back-off had \(backOffLeft) s left")
            #expect(Self.decodes(service.port, "cam", atLeast: 10))
        }
    }

    /// A server on a manual clock whose session `cam` pulls `url` on demand, with a linger of 10 s.
    static func withOnDemandPull(
        from url: String, _ body: (_ service: FrameTapService, _ clock: ManualClock) throws -> Void
    ) throws {
        let clock = ManualClock()
        try withService(sessions: Self.configure("http://127.0.0.1") { $0.onDemandLinger = .seconds(10) }, clock: clock) {
            service in
            let source = #"{"source": {"url": "\#(url)", "connect": "on-demand"}}"#
            #expect(try Self.put(service.port, "cam", source).status == 201)
            try body(service, clock)
        }
    }

    /// A pull that connects on demand, on the service's manual clock (the linger ends only when
    /// the test moves time; the source's timeouts never do), from a source that sends its whole
    /// stream and then holds the connection open, so only FrameTap's letting go ends it.
    static func withOnDemandPull(
        decode: DecodeMode, _ body: (_ service: FrameTapService, _ clock: ManualClock, _ server: SourceServer) throws -> Void
    ) throws {
        let ts = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        let server = try SourceServer { _ in .serve(ts, contentType: "video/mp2t", pieceSize: 2000, stallAfter: ts.count) }
        defer { server.stop() }
        let clock = ManualClock()
        try withService(
            sessions: { configuration in
                Self.configure("http://127.0.0.1")(&configuration)
                configuration.sourceConnectTimeout = .seconds(60)
                configuration.sourceReadTimeout = .seconds(60)
                configuration.onDemandLinger = .seconds(10)
            }, clock: clock
        ) { service in
            let definition = #"{"source": {"url": "\#(server.url("/live.ts"))", "connect": "on-demand"}, "decode": "\#(decode.rawValue)"}"#
            let created = try Self.put(service.port, "cam", definition)
            #expect(created.status == 201)
            let source = try jsonObject(created.body)["source"] as? [String: Any]
            #expect(source?["connect"] as? String == "on-demand")
            #expect(source?["state"] as? String == "idle")
            try body(service, clock, server)
        }
    }

    @Test(
        "connect on-demand: no connection before a request, a picture for it, let go after the linger, connected again for the next",
        arguments: [DecodeMode.all, .onDemand])
    func connectsOnDemand(decode: DecodeMode) throws {
        try Self.withOnDemandPull(decode: decode) { service, clock, server in
            let events = try RawClient(port: service.port)
            try events.send("GET /events?session=cam HTTP/1.1\r\nHost: x\r\n\r\n")
            // Nobody asks: nothing connects.
            #expect(!eventually(timeout: .milliseconds(500)) { server.accepted > 0 }, "connected before any request")
            #expect(try Self.source(service.port, "cam")["state"] as? String == "idle")
            // A request connects it and waits for the connection's first picture.
            let first = try request(service.port, "GET", "/sessions/cam/frame/latest.jpg")
            #expect(first.status == 200, "\(first.text)")
            #expect(jpegSize(first.body)?.width == 320)
            #expect(server.accepted == 1)
            let live = try Self.source(service.port, "cam")
            #expect(live["state"] as? String == "live")
            #expect(live["reconnects"] as? Int == 0)
            // Asked again within the linger: the same connection answers.
            clock.advance(by: .seconds(5))
            #expect(try request(service.port, "GET", "/sessions/cam/frame/latest.jpg").status == 200)
            #expect(server.accepted == 1)
            // The linger after the last request passes: the connection is let go, and the pull
            // shows it is idle, not failing.
            clock.advance(by: .seconds(11))
            #expect(eventually(timeout: .seconds(10)) { server.closedByPeer == 1 }, "the source connection was not closed")
            #expect(eventually(timeout: .seconds(10)) { (try? Self.source(service.port, "cam")["state"] as? String) == "idle" })
            let idle = try jsonObject(try request(service.port, "GET", "/sessions/cam").body)
            #expect((idle["source"] as? [String: Any])?["lastError"] is NSNull)
            #expect(idle["lastError"] is NSNull)
            // Nothing connects meanwhile, though the clock moves on.
            clock.advance(by: .seconds(60))
            #expect(!eventually(timeout: .milliseconds(300)) { server.accepted > 1 }, "connected again with nobody asking")
            // The next request connects again, and gets a picture of the new connection.
            let second = try request(service.port, "GET", "/sessions/cam/frame/latest.jpg")
            #expect(second.status == 200, "\(second.text)")
            #expect(server.accepted == 2)
            let firstNumber = Int(first.headers["X-Frame-Seq"] ?? "") ?? 0
            let secondNumber = Int(second.headers["X-Frame-Seq"] ?? "") ?? 0
            #expect(secondNumber > firstNumber, "picture \(secondNumber) after \(firstNumber)")
            #expect(try Self.source(service.port, "cam")["reconnects"] as? Int == 0)
            // The connection's events: connected twice, let go once between, never lost.
            func count(_ kind: String, _ text: String) -> Int { text.components(separatedBy: "event: \(kind)\n").count - 1 }
            let stream = String(
                decoding: events.read(until: { count("source.connected", String(decoding: $0, as: UTF8.self)) >= 2 }), as: UTF8.self)
            #expect(count("source.connected", stream) == 2, "\(stream)")
            #expect(count("source.released", stream) == 1)
            #expect(count("source.lost", stream) == 0)
        }
    }

    @Test("connect on-demand: an MJPEG viewer keeps the connection; it is let go a linger after the viewer left")
    func viewerKeepsTheConnection() throws {
        try Self.withOnDemandPull(decode: .all) { service, clock, server in
            let viewer = try RawClient(port: service.port)
            try viewer.send("GET /sessions/cam/frames.mjpeg HTTP/1.1\r\nHost: x\r\n\r\n")
            let part = viewer.read(until: { find([0xFF, 0xD9], in: $0) != nil })
            #expect(find([0xFF, 0xD8], in: part) != nil, "no picture for the viewer")
            #expect(server.accepted == 1)
            // Watched: the linger passes many times over and the connection stays.
            clock.advance(by: .seconds(35))
            #expect(!eventually(timeout: .milliseconds(300)) { server.closedByPeer > 0 }, "let go while watched")
            #expect(try Self.source(service.port, "cam")["state"] as? String == "live")
            viewer.close()
            // The server notices the viewer left when it writes to it: a repeat of the picture,
            // due a repeat interval later on the session's clock.
            #expect(eventually(timeout: .seconds(10)) {
                clock.advance(by: .milliseconds(500))
                return (try? jsonObject(try request(service.port, "GET", "/sessions/cam").body))?["subscribers"] as? Int == 0
            }, "the viewer that left was not noticed")
            #expect(try Self.source(service.port, "cam")["state"] as? String == "live")
            clock.advance(by: .seconds(11))
            #expect(eventually(timeout: .seconds(10)) { server.closedByPeer == 1 }, "the source connection was not closed")
            #expect(eventually(timeout: .seconds(10)) { (try? Self.source(service.port, "cam")["state"] as? String) == "idle" })
        }
    }

    @Test("connect on-demand: a request for a source that cannot be reached is 503 source_not_ready with the source's error")
    func onDemandSourceUnreachable() throws {
        let closed = try SourceServer { _ in .silent }
        let port = closed.port
        closed.stop()
        #expect(eventually { closed.listenerIsClosed })
        try Self.withOnDemandPull(from: "http://127.0.0.1:\(port)/live.ts") { service, clock in
            // Idle: a retry has nothing to end.
            let retry = try request(service.port, "POST", "/sessions/cam/source/retry")
            #expect(retry.status == 200)
            #expect((try jsonObject(retry.body)["source"] as? [String: Any])?["state"] as? String == "idle")
            // An MJPEG viewer connects it, and is told it failed: not sent a stream that never comes.
            let viewer = try request(service.port, "GET", "/sessions/cam/frames.mjpeg")
            #expect(viewer.problem == Problem(503, "source_not_ready"), "\(viewer.status)")
            let refused = try request(service.port, "GET", "/sessions/cam/frame/latest.jpg")
            #expect(refused.status == 503)
            #expect(refused.headers["Content-Type"] == "application/problem+json")
            let problem = try jsonObject(refused.body)
            #expect(problem["code"] as? String == "source_not_ready")
            #expect(problem["sourceError"] as? String == "source_unreachable")
            #expect(refused.headers["Retry-After"] != nil)
            #expect(try Self.source(service.port, "cam")["state"] as? String == "retrying")
            // While it keeps failing, the next request is told at once.
            let again = try request(service.port, "GET", "/sessions/cam/frame/latest.jpg")
            #expect(try jsonObject(again.body)["code"] as? String == "source_not_ready")
            // Nobody asks any more: the back-off is given up after the linger, and the pull idles.
            clock.advance(by: .seconds(11))
            #expect(eventually(timeout: .seconds(10)) { (try? Self.source(service.port, "cam")["state"] as? String) == "idle" })
        }
    }

    @Test("connect on-demand: a long poll waits for the first picture no longer than its own wait")
    func onDemandLongPollKeepsToItsWait() throws {
        let server = try SourceServer { _ in .silent }
        defer { server.stop() }
        let clock = ManualClock()
        try withService(sessions: Self.configure("http://127.0.0.1"), clock: clock) { service in
            let body = #"{"source": {"url": "\#(server.url("/never"))", "connect": "on-demand"}}"#
            #expect(try Self.put(service.port, "cam", body).status == 201)
            let poll = try RawClient(port: service.port)
            defer { poll.close() }
            // The first picture may take 2 s here (connect and read timeouts of 1 s); this request waits 1 s.
            try poll.send("GET /sessions/cam/frame/latest.jpg?wait=1000 HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(eventually(timeout: .seconds(5)) { server.requests.count == 1 }, "the pull did not connect")
            clock.advance(by: .seconds(1))
            let answer = String(
                decoding: poll.read(until: { find(Array("on demand)".utf8), in: $0) != nil }), as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 503"), "\(answer)")
            #expect(answer.contains(#""code":"source_not_ready""#) && answer.contains("within 1 s"), "\(answer)")
        }
    }

    @Test("DELETE stops a pull at once, even in the middle of a blocked connection")
    func deleteInterrupts() throws {
        let server = try SourceServer { _ in .silent }
        defer { server.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1") { $0.sourceConnectTimeout = .seconds(60) }) { service in
            let created = try Self.pull(service.port, "cam", from: server.url("/never"))
            #expect(created.status == 201)
            #expect(eventually(timeout: .seconds(5)) { server.requests.count == 1 })
            let start = ContinuousClock.now
            #expect(try request(service.port, "DELETE", "/sessions/cam").status == 204)
            #expect(eventually(timeout: .seconds(2)) { server.closedByPeer == 1 })
            #expect(ContinuousClock.now - start < .seconds(2))
        }
    }

    @Test("credentials in a source URL are never shown: status, events, metrics")
    func redacted() throws {
        let ts = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        let server = try SourceServer { _ in .serve(ts, contentType: "video/mp2t") }
        defer { server.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1")) { service in
            let url = "http://admin:hunter2secret@127.0.0.1:\(server.port)/live.ts?token=tok3nsecret&x=1"
            let created = try Self.pull(service.port, "cam", from: url)
            #expect(created.status == 201)
            #expect(Self.decodes(service.port, "cam", atLeast: 20))
            let status = try request(service.port, "GET", "/sessions/cam").text
            #expect(try Self.source(service.port, "cam")["url"] as? String == "http://***@127.0.0.1:\(server.port)/live.ts?token=***&x=1")
            let events = try RawClient(port: service.port)
            try events.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
            let stream = String(decoding: events.read(until: { String(decoding: $0, as: UTF8.self).contains("source.connected") }), as: UTF8.self)
            #expect(stream.contains("source.connected"))
            let metrics = try request(service.port, "GET", "/metrics").text
            let list = try request(service.port, "GET", "/sessions").text
            for text in [status, stream, metrics, list, created.text] {
                #expect(!text.contains("hunter2"))
                #expect(!text.contains("tok3n"))
            }
        }
    }

    @Test("bad sources are 400s; --max-pull-sessions bounds the pulls; source null stops a pull")
    func limits() throws {
        let server = try SourceServer { _ in .silent }
        defer { server.stop() }
        try withService(sessions: Self.configure("http://127.0.0.1") { $0.maxPullSessions = 1 }) { service in
            for body in [
                #"{"source": {"url": "ftp://127.0.0.1/x"}}"#, #"{"source": {"url": "no scheme"}}"#,
                #"{"source": {"url": "http://127.0.0.1/x", "transport": "udp"}}"#, #"{"source": {"url": "srt://127.0.0.1"}}"#,
                #"{"source": {"transport": "tcp"}}"#, #"{"source": {"url": "http://127.0.0.1/x", "other": 1}}"#,
                #"{"source": {"url": "http://127.0.0.1/x", "connect": "sometimes"}}"#,
                #"{"source": {"url": "http://127.0.0.1/x", "connect": true}}"#,
            ] {
                let response = try Self.put(service.port, "bad", body)
                #expect(response.status == 400, "\(body)")
                #expect(["invalid_source", "invalid_parameter"].contains(try jsonObject(response.body)["code"] as? String))
            }
            let first = try Self.pull(service.port, "one", from: server.url("/a"))
            #expect(first.status == 201)
            let second = try Self.pull(service.port, "two", from: server.url("/b"))
            #expect(second.problem == Problem(503, "too_many_pull_sessions"))
            // The first may change its source; then stop pulling and push instead.
            let changed = try Self.pull(service.port, "one", from: server.url("/c"))
            #expect(changed.status == 200)
            let stopped = try Self.put(service.port, "one", #"{"source": null}"#)
            #expect(stopped.status == 200)
            #expect(eventually { (try? jsonObject(try request(service.port, "GET", "/sessions/one").body))?["source"] is NSNull })
            #expect(try post(service.port, "/sessions/one/nalus?flush=true", try Fixtures.bytes("high_320x240.264")).status == 200)
            let secondAgain = try Self.pull(service.port, "two", from: server.url("/b"))
            #expect(secondAgain.status == 201)
        }
    }
}
