import Dispatch
import Foundation
@testable import FrameTapAPI
import HTTPServer
import Sessions
import Synchronization
import Testing
import TestSupport

/// Every picture route with an H.265 session, as APIPictureTests and APIPushTests check them
/// with H.264 (the fixtures are Tests/Fixtures/*.265 and their MANIFEST.tsv rows), and every way
/// a client says which codec it sends: `PUT` `codec`, `?codec=`, Content-Type, and what each
/// contradiction gets.
@Suite(.serialized, .timeLimit(.minutes(10))) struct APIHEVCTests {
    static let main = "main_bframes_176x144.265"

    @Test func latestJPEGOfAnHEVCSessionWithItsHeadersAndStatus() throws {
        let entry = try Fixtures.entry(Self.main)
        try withService { service in
            let seq = try pushFixture(service.port, session: "hevc", Self.main)
            #expect(seq == entry.frames)
            let response = try request(service.port, "GET", "/sessions/hevc/frame/latest.jpg")
            #expect(response.status == 200)
            #expect(response.headers["Content-Type"] == "image/jpeg")
            #expect(jpegSize(response.body)! == (entry.width, entry.height))
            #expect(endsWithEOI(response.body))
            #expect(response.headers["ETag"]?.hasPrefix("\"\(seq)@") == true)
            #expect(response.headers["X-Frame-Seq"] == String(seq))
            #expect(response.headers["X-Frame-Width"] == String(entry.width))
            #expect(response.headers["X-Decoder-Backend"] != nil)
            let head = try request(service.port, "HEAD", "/sessions/hevc/frame/latest.jpg")
            #expect(head.status == 200 && head.body.isEmpty && head.headers["ETag"] == response.headers["ETag"])

            let status = try jsonObject(request(service.port, "GET", "/sessions/hevc").body)
            #expect(status["codec"] as? String == "h265")
            #expect(status["codecStated"] as? Bool == false, "detected from the VPS/SPS, not stated")
            let format = try #require(status["format"] as? [String: Any])
            #expect(format["codec"] as? String == "h265")
            #expect(format["tier"] as? String == "Main")
            #expect(format["profile"] as? String == "Main")
            let counters = try #require(status["counters"] as? [String: Any])
            #expect(counters["framesDecoded"] as? Int == entry.frames)
            #expect(counters["decodeErrors"] as? Int == 0)
            #expect(counters["framesSkippedLeading"] as? Int == 0 && counters["unitsOutsideBaseLayer"] as? Int == 0)
            let nalUnits = counters["nalUnits"] as? [String: Int] ?? [:]
            #expect(nalUnits["vps"] == 1 && nalUnits["sps"] == 1 && nalUnits["pps"] == 1, "\(nalUnits)")
        }
    }

    @Test func thumbnailsAndRawFormatsOfAnHEVCPicture() throws {
        try withService { service in
            let seq = try pushFixture(service.port, session: "thumbs", "wpp_320x240.265")
            for (query, width, height) in [("width=160", 160, 120), ("height=60", 80, 60), ("width=100&height=50", 100, 50)] {
                let response = try request(service.port, "GET", "/sessions/thumbs/frame/latest.jpg?\(query)")
                #expect(response.status == 200, "\(query)")
                #expect(jpegSize(response.body)! == (width, height), "\(query)")
                #expect(response.headers["ETag"]?.hasPrefix("\"\(seq)-") == true)
            }
            let yuv = try request(service.port, "GET", "/sessions/thumbs/frame/latest.yuv")
            #expect(yuv.headers["X-Frame-Pix-Fmt"] == "yuv420p")
            #expect(yuv.body.count == 320 * 240 * 3 / 2)
            // No matrix stated, below 720 lines: read as BT.601.
            #expect(yuv.headers["X-Frame-Color-Range"] == "limited" && yuv.headers["X-Frame-Color-Matrix"] == "bt601")
            let rgb = try request(service.port, "GET", "/sessions/thumbs/frame/latest.rgb?width=32")
            #expect(rgb.headers["X-Frame-Pix-Fmt"] == "rgb24" && rgb.body.count == 32 * 24 * 3)
            #expect(rgb.headers["X-Frame-Color-Range"] == "full" && rgb.headers["X-Frame-Color-Matrix"] == "bt601")
            let jpeg = try request(service.port, "GET", "/sessions/thumbs/frame/latest.jpg")
            #expect(jpeg.headers["X-Frame-Color-Range"] == nil && jpeg.headers["X-Frame-Color-Matrix"] == nil)
        }
    }

    /// A raw picture says how to read its samples: a full-range BT.709 stream's own.
    @Test func rawPicturesSayTheirRangeAndMatrix() throws {
        try withService { service in
            _ = try pushFixture(service.port, session: "bt709", "fullrange_bt709_176x144.265")
            let yuv = try request(service.port, "GET", "/sessions/bt709/frame/latest.yuv")
            #expect(yuv.headers["X-Frame-Color-Range"] == "full" && yuv.headers["X-Frame-Color-Matrix"] == "bt709")
            let rgb = try request(service.port, "GET", "/sessions/bt709/frame/latest.rgb")
            #expect(rgb.headers["X-Frame-Color-Range"] == "full" && rgb.headers["X-Frame-Color-Matrix"] == "bt709")
        }
    }

    @Test func ifNoneMatchAndLongPollsOfAnHEVCSession() throws {
        let bytes = try Fixtures.bytes("radl_176x144.265")
        try withService { service in
            let seq = try pushFixture(service.port, session: "lp", "radl_176x144.265")
            let first = try request(service.port, "GET", "/sessions/lp/frame/latest.jpg?width=88")
            let etag = try #require(first.headers["ETag"])
            let again = try request(
                service.port, "GET", "/sessions/lp/frame/latest.jpg?width=88", headers: [("If-None-Match", etag)])
            #expect(again.status == 304 && again.body.isEmpty && again.headers["ETag"] == etag)
            #expect(try request(service.port, "GET", "/sessions/lp/frame/latest.jpg?after=\(seq)&wait=300").status == 304)

            // A long poll waiting for the next picture wakes when the next push decodes one.
            let poll = BackgroundRequest(service.port, "GET", "/sessions/lp/frame/latest.jpg?wait=10000&after=\(seq)")
            let session = try #require(service.registry.find(try SessionID("lp")))
            #expect(eventually { session.waitingRequests == 1 })
            #expect(try post(service.port, "/sessions/lp/nalus?flush=true", bytes).status == 200)
            let answer = try poll.wait(for: "the long poll's answer")
            let woken = answer.response
            #expect(woken?.status == 200)
            #expect(Int(woken?.headers["X-Frame-Seq"] ?? "") ?? 0 > seq)
            #expect(jpegSize(woken?.body ?? [])! == (176, 144))
        }
    }

    @Test func mjpegOfAnHEVCSession() throws {
        try withService(sessions: { $0.mjpegRepeatInterval = .milliseconds(200) }) { service in
            let seq = try pushFixture(service.port, session: "live", "odd_crop_322x242.265")
            let client = try RawClient(port: service.port)
            try client.send("GET /sessions/live/frames.mjpeg?width=161 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            var raw: [UInt8] = []
            var parts: [MultipartPart] = []
            let deadline = ContinuousClock.now + .seconds(10)
            while parts.count < 2, ContinuousClock.now < deadline {
                guard let bytes = client.read(timeout: .milliseconds(500)) else { break }
                raw += bytes
                guard let response = try? parseResponse(raw) else { continue }
                parts = try parseMultipart(response.body, boundary: boundary(of: response.headers["Content-Type"])).parts
            }
            #expect(try parseResponse(raw).headers["Content-Type"]?.hasPrefix("multipart/x-mixed-replace;boundary=") == true)
            #expect(parts.count >= 2)
            for part in parts {
                #expect(part.headers["Content-Type"] == "image/jpeg")
                #expect(part.headers["X-Frame-Seq"] == String(seq))
                #expect(jpegSize(part.body)! == (161, 121))
            }
            client.close()
        }
    }

    /// The pictures of a push answered as multipart/mixed, raw, equal the manifest's reference
    /// decode (ffmpeg -f hevc ... -f rawvideo at fixture creation) for every kind of stream: B
    /// pictures, open GOP with RASL, RADL, 10-bit, 4:2:2 10-bit, 4:4:4, monochrome, odd crop.
    @Test(arguments: [
        "main_bframes_176x144.265", "open_gop_176x144.265", "radl_176x144.265", "main10_320x240.265",
        "yuv422p10_176x144.265", "yuv444p_176x144.265", "gray_176x144.265", "odd_crop_322x242.265",
        "res_change_176x144_320x240.265",
    ])
    func multipartRawPartsEqualTheReferenceDecode(name: String) throws {
        try withService { service in
            let parts = try rawPartsOfAPush(service.port, fixture: name)
            #expect(parts.first?.headers["X-Frame-Pix-Fmt"] == Self.pixelFormat(of: name), "\(name)")
            #expect(parts.first?.headers["X-Frame-Keyframe"] == "true")
        }
    }

    @Test func multipartJPEGOfAnHEVCPush() throws {
        let entry = try Fixtures.entry("main10_320x240.265")
        try withService { service in
            let response = try post(
                service.port, "/sessions/mpj/nalus?flush=true&width=160", try Fixtures.bytes("main10_320x240.265"),
                headers: [("Accept", "multipart/mixed")])
            #expect(response.status == 200)
            let (parts, closed) = try parseMultipart(response.body, boundary: boundary(of: response.headers["Content-Type"]))
            #expect(closed && parts.count == entry.frames)
            #expect(parts.allSatisfy { $0.headers["Content-Type"] == "image/jpeg" && jpegSize($0.body)! == (160, 120) })
        }
    }

    /// `latest.yuv` serves the decoder's own planes in its own format, named by X-Frame-Pix-Fmt:
    /// byte for byte the last picture of `ffmpeg -f hevc -i F -f rawvideo` in the native format,
    /// for Main 10, 4:2:2 10-bit and a 4:4:4 12-bit stream made here with libx265.
    @Test(.enabled(if: FFmpeg.available, "no ffmpeg"), arguments: ["main10_320x240.265", "yuv422p10_176x144.265", "12-bit"])
    func latestYUVIsTheNativePictureByteForByte(name: String) throws {
        let path: String
        if name == "12-bit" {
            path = try FFmpeg.makeHEVC(pixelFormat: "yuv444p12le", size: "96x64", frames: 4)
        } else {
            path = Fixtures.directory.appendingPathComponent(name).path
        }
        let nativeFormat = try FFmpeg.pixelFormat(of: path)
        let reference = try FFmpeg.run(["-f", "hevc", "-i", path, "-f", "rawvideo", "-"])
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        try withService { service in
            let seq = try pushFixtureBytes(service.port, session: "raw", bytes)
            let yuv = try request(service.port, "GET", "/sessions/raw/frame/latest.yuv")
            #expect(yuv.status == 200)
            #expect(yuv.headers["X-Frame-Pix-Fmt"] == nativeFormat)
            #expect(yuv.headers["X-Frame-Seq"] == String(seq))
            let pictureSize = yuv.body.count
            try #require(pictureSize > 0 && reference.count == pictureSize * seq, "\(reference.count) bytes for \(seq) pictures")
            #expect(yuv.body == Array(reference.suffix(pictureSize)), "\(name) as \(nativeFormat)")
        }
    }

    // MARK: - Saying the codec

    /// `PUT {"codec": "h265"}` states the codec: the status says so, an H.264 push is refused
    /// 415 before a byte of it is decoded (the message names both codecs), an H.265 push decodes.
    @Test func aStatedCodecRefusesTheOtherCodec() throws {
        try withService { service in
            let created = try request(service.port, "PUT", "/sessions/cam", body: Array(#"{"codec":"h265"}"#.utf8))
            #expect(created.status == 201)
            let status = try jsonObject(created.body)
            #expect(status["codec"] as? String == "h265" && status["codecStated"] as? Bool == true)

            let refused = try post(service.port, "/sessions/cam/nalus?flush=true", try Fixtures.bytes("high_320x240.264"))
            #expect(refused.problem == Problem(415, "codec_mismatch"))
            #expect(refused.headers["Content-Type"] == "application/problem+json")
            #expect(refused.problemDetail.contains("H.264") && refused.problemDetail.contains("H.265"), "\(refused.problemDetail)")
            let after = try jsonObject(request(service.port, "GET", "/sessions/cam").body)
            let counters = try #require(after["counters"] as? [String: Any])
            #expect(counters["framesDecoded"] as? Int == 0 && counters["accessUnits"] as? Int == 0)
            #expect((counters["nalUnits"] as? [String: Int] ?? [:])["sps"] == nil, "no H.264 unit was read")
            #expect((after["lastError"] as? [String: Any])?["code"] as? String == "codec_mismatch")

            let accepted = try post(service.port, "/sessions/cam/nalus?flush=true", try Fixtures.bytes(Self.main))
            #expect(accepted.status == 200)
            let frames = try Fixtures.entry(Self.main).frames
            #expect(try jsonObject(accepted.body)["frames"] as? Int == frames)
            #expect(try jsonObject(accepted.body)["decodeErrors"] as? Int == 0, "the refused push left nothing behind")
            #expect(try request(service.port, "GET", "/sessions/cam/frame/latest.jpg").status == 200)

            // The stated codec can be changed back, and its refusals follow.
            #expect(try request(service.port, "PUT", "/sessions/cam", body: Array(#"{"codec":"h264"}"#.utf8)).status == 200)
            let nowH265 = try post(service.port, "/sessions/cam/nalus?flush=true", try Fixtures.bytes(Self.main))
            #expect(nowH265.status == 415)
            #expect(try request(service.port, "PUT", "/sessions/cam", body: Array(#"{"codec":"h266"}"#.utf8)).status == 400)
        }
    }

    /// A codec stated while a stream of the other codec is under way takes over at the next
    /// stream start; until then the status names the running stream's codec, as detected, and
    /// the stated one beside it.
    @Test func aCodecStatedDuringAStreamOfTheOtherTakesOverAtTheNextStart() throws {
        try withService { service in
            #expect(try post(service.port, "/sessions/cam/nalus", try Fixtures.bytes("high_320x240.264")).status == 200)
            #expect(try request(service.port, "PUT", "/sessions/cam", body: Array(#"{"codec":"h265"}"#.utf8)).status == 200)
            let during = try jsonObject(request(service.port, "GET", "/sessions/cam").body)
            #expect(during["codec"] as? String == "h264" && during["codecStated"] as? Bool == false)
            #expect(during["statedCodec"] as? String == "h265")

            #expect(try post(service.port, "/sessions/cam/nalus?flush=true", []).status == 200)
            let accepted = try post(service.port, "/sessions/cam/nalus?flush=true", try Fixtures.bytes(Self.main))
            #expect(accepted.status == 200)
            let after = try jsonObject(request(service.port, "GET", "/sessions/cam").body)
            #expect(after["codec"] as? String == "h265" && after["codecStated"] as? Bool == true)
            #expect(after["statedCodec"] as? String == "h265")

            // Stated again during the stated stream: that stream stays stated until it ends.
            #expect(try post(service.port, "/sessions/cam/nalus", try Fixtures.bytes(Self.main)).status == 200)
            #expect(try request(service.port, "PUT", "/sessions/cam", body: Array(#"{"codec":"h264"}"#.utf8)).status == 200)
            let restated = try jsonObject(request(service.port, "GET", "/sessions/cam").body)
            #expect(restated["codec"] as? String == "h265" && restated["codecStated"] as? Bool == true)
            #expect(restated["statedCodec"] as? String == "h264")
        }
    }

    /// A push's `?codec=` and its Content-Type (`video/H265`, `video/H264`, any case, with
    /// parameters) say what it carries: bytes of the other codec are refused 415, and a push
    /// that says another codec than the session's stream is refused before any byte is read.
    @Test(arguments: [
        ("?codec=h265", [(String, String)]()), ("", [("Content-Type", "video/H265")]),
        ("", [("Content-Type", "video/h265; sprop-max-don-diff=0")]), ("?codec=h265", [("Content-Type", "video/H265")]),
    ])
    func aPushSaysItsCodec(query: String, headers: [(String, String)]) throws {
        try withService { service in
            let wrong = try post(
                service.port, "/sessions/a/nalus\(query)\(query.isEmpty ? "?" : "&")flush=true",
                try Fixtures.bytes("baseline_176x144.264"), headers: headers)
            #expect(wrong.problem == Problem(415, "codec_mismatch"))
            // Nothing of it was decoded, and the session it would have made is not left behind.
            #expect(eventually { (try? request(service.port, "GET", "/sessions/a").status) == 404 })

            let right = try post(
                service.port, "/sessions/b/nalus\(query)\(query.isEmpty ? "?" : "&")flush=true",
                try Fixtures.bytes(Self.main), headers: headers)
            #expect(right.status == 200)
            #expect(try jsonObject(right.body)["frames"] as? Int == 25)
            let status = try jsonObject(request(service.port, "GET", "/sessions/b").body)
            #expect(status["codec"] as? String == "h265" && status["codecStated"] as? Bool == false)

            // b's stream is H.265 now: a push that says H.264 is refused before its body is read.
            let bytesBefore = try Self.counter(service.port, "b", "bytes")
            let saysH264 = try post(
                service.port, "/sessions/b/nalus?codec=h264", try Fixtures.bytes("baseline_176x144.264"))
            #expect(saysH264.problem == Problem(415, "codec_mismatch"))
            #expect(try Self.counter(service.port, "b", "bytes") == bytesBefore)
        }
    }

    /// A session whose codec was detected refuses parameter sets of the other codec in the same
    /// stream; after the stream ended (flush), a new stream may be of the other codec.
    @Test func aDetectedCodecHoldsForItsStream() throws {
        try withService { service in
            #expect(try post(service.port, "/sessions/d/nalus", try Fixtures.bytes("high_320x240.264")).status == 200)
            let midStream = try post(service.port, "/sessions/d/nalus?flush=true", try Fixtures.bytes(Self.main))
            #expect(midStream.status == 415)
            let detail = try jsonObject(midStream.body)["detail"] as? String ?? ""
            #expect(detail.contains("H.265 parameter sets") && detail.contains("H.264 (detected)"), "\(detail)")
            #expect(try post(service.port, "/sessions/d/nalus?flush=true", []).status == 200)
            let next = try post(service.port, "/sessions/d/nalus?flush=true", try Fixtures.bytes(Self.main))
            #expect(next.status == 200)
            #expect(try jsonObject(request(service.port, "GET", "/sessions/d").body)["codec"] as? String == "h265")
        }
    }

    /// `?codec=h265` with `Content-Type: video/H264` contradicts itself: 400, nothing created.
    @Test func aCodecParameterThatContradictsTheContentTypeIsABadRequest() throws {
        try withService { service in
            let response = try post(
                service.port, "/sessions/c/nalus?codec=h265", try Fixtures.bytes(Self.main),
                headers: [("Content-Type", "video/H264")])
            #expect(response.problem == Problem(400, "invalid_parameter"))
            #expect(response.problemDetail.contains("codec=h265"))
            #expect(service.registry.count == 0)
            let unknown = try post(service.port, "/sessions/c/nalus?codec=vp9", try Fixtures.bytes(Self.main))
            #expect(unknown.status == 400 && service.registry.count == 0)
        }
    }

    /// Start codes, NAL units, but no parameter set of either codec: 422 unknown_codec.
    @Test func bytesOfNeitherCodecAreUnprocessable() throws {
        // Access unit delimiters and filler only: splittable, but neither codec's parameter set.
        let units = (0..<50).flatMap { _ in [0, 0, 0, 1, 0x09, 0xF0] + [0, 0, 1, 0x0C, 0xFF, 0xFF, 0x80] as [UInt8] }
        try withService { service in
            let response = try post(service.port, "/sessions/u/nalus?flush=true", units)
            #expect(response.problem == Problem(422, "unknown_codec"))
            #expect(response.problemDetail.contains("neither H.264 nor H.265"))
            // The session the push made is not left behind; one made by PUT shows no codec.
            #expect(eventually { (try? request(service.port, "GET", "/sessions/u").status) == 404 })
            #expect(try request(service.port, "PUT", "/sessions/u").status == 201)
            #expect(try post(service.port, "/sessions/u/nalus?flush=true", units).status == 422)
            let status = try jsonObject(request(service.port, "GET", "/sessions/u").body)
            #expect(status["codec"] is NSNull)
        }
    }

    /// `format.changed` carries the format, and with it the codec (and H.265's tier).
    @Test func formatChangedEventsNameTheCodec() throws {
        try withService { service in
            let client = try RawClient(port: service.port)
            try client.send("GET /events?session=ev HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
            _ = client.read(until: { find(Array(": frametap events\n\n".utf8), in: $0) != nil }, timeout: .seconds(5))
            try pushFixture(service.port, session: "ev", Self.main)
            let text = String(decoding: client.read(until: { String(decoding: $0, as: UTF8.self).contains("upload.ended") }), as: UTF8.self)
            client.close()
            let line = try #require(text.components(separatedBy: "\n").first { $0.hasPrefix("data: ") && $0.contains("\"format\"") })
            #expect(line.contains(#""codec":"h265""#) && line.contains(#""tier":"Main""#), "\(line)")
        }
    }

    static func counter(_ port: UInt16, _ session: String, _ name: String) throws -> Int? {
        (try jsonObject(request(port, "GET", "/sessions/\(session)").body)["counters"] as? [String: Any])?[name] as? Int
    }

    /// The manifest's pix_fmt of a fixture (yuvj420p is the decoder's name for full range).
    static func pixelFormat(of name: String) -> String? {
        (try? Fixtures.entry(name))?.pixelFormat
    }
}

/// Pushes bytes with a flush and returns the newest sequence.
@discardableResult
func pushFixtureBytes(_ port: UInt16, session: String, _ bytes: [UInt8]) throws -> Int {
    let response = try post(port, "/sessions/\(session)/nalus?flush=true", bytes)
    guard response.status == 200, let seq = try jsonObject(response.body)["latestSeq"] as? Int else {
        throw TestFailure("push failed: \(response.status) \(response.text)")
    }
    return seq
}

/// The ffmpeg CLI as the reference decoder (and libx265 for streams no fixture has).
enum FFmpeg {
    static let path = ["/usr/bin/ffmpeg", "/usr/local/bin/ffmpeg"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static var available: Bool { path != nil }

    @discardableResult
    static func run(_ arguments: [String], executable: String? = nil) throws -> [UInt8] {
        guard let program = executable ?? path else { throw TestFailure("no ffmpeg") }
        let defaults = ["-nostdin", "-hide_banner", "-loglevel", "error", "-y"]
        return Array(try runProgram(program, executable == nil ? defaults + arguments : arguments))
    }

    /// A short testsrc2 stream from libx265 in `pixelFormat`, as raw HEVC.
    static func makeHEVC(pixelFormat: String, size: String, frames: Int) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("api-\(pixelFormat)-\(UUID().uuidString).265").path
        try run([
            "-f", "lavfi", "-i", "testsrc2=size=\(size):rate=25", "-frames:v", "\(frames)", "-c:v", "libx265",
            "-x265-params", "log-level=error", "-pix_fmt", pixelFormat, "-f", "hevc", path,
        ])
        return path
    }

    /// The decoder's native pixel format of a stream, as ffprobe names it.
    static func pixelFormat(of path: String) throws -> String {
        guard let probe = ["/usr/bin/ffprobe", "/usr/local/bin/ffprobe"].first(where: FileManager.default.isExecutableFile)
        else { throw TestFailure("no ffprobe") }
        let output = try run(
            ["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=pix_fmt", "-of", "csv=p=0", path],
            executable: probe)
        return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
