import TestSupport
import Decoding
import Foundation
@testable import FrameTapAPI
import HTTPServer
import Sessions
import Testing
import VideoCoding

/// `POST /sessions/{id}/nalus`: JSON and multipart answers, stream continuity, limits, errors.
@Suite(.serialized, .timeLimit(.minutes(10))) struct APIPushTests {
    /// The JSON summary unless `multipart/mixed` is asked for at least as much as JSON.
    @Test(arguments: [
        (nil, false), ("multipart/mixed", true), ("application/json, multipart/mixed", true),
        ("application/json;q=0.5, multipart/mixed", true), ("application/json, multipart/mixed;q=0.5", false),
        ("multipart/mixed;q=0", false), ("multipart/mixed; q=0.000", false), ("*/*", false),
        ("*/*;q=0.1, MULTIPART/MIXED;q=0.2", true), ("multipart/*", false),
        ("application/json;q=0, multipart/mixed;q=0.001", true),
    ])
    func multipartIsAnsweredWhenAskedForAtLeastAsMuchAsJSON(accept: String?, multipart: Bool) {
        #expect(FrameTapAPI.acceptsMultipart(accept) == multipart, "\(accept ?? "no Accept")")
    }

    @Test func flushAnswersTheFrameCountOfTheManifest() throws {
        try withService { service in
            for name in ["baseline_176x144.264", "main_bframes_176x144.264", "high_320x240.264"] {
                let entry = try Fixtures.entry(name)
                let bytes = try Fixtures.bytes(name)
                let id = name.replacingOccurrences(of: ".264", with: "")
                let response = try post(service.port, "/sessions/\(id)/nalus?flush=true", bytes)
                #expect(response.status == 200)
                #expect(response.headers["Content-Type"] == "application/json")
                let json = try jsonObject(response.body)
                #expect(json["session"] as? String == id)
                #expect(json["bytes"] as? Int == bytes.count)
                #expect(json["frames"] as? Int == entry.frames, "\(name)")
                #expect(json["latestSeq"] as? Int == entry.frames)
                #expect(json["flushed"] as? Bool == true)
                let format = json["format"] as? [String: Any]
                #expect(format?["width"] as? Int == entry.width)
                #expect(format?["height"] as? Int == entry.height)
                let nalUnits = json["nalUnits"] as? [String: Int] ?? [:]
                #expect(nalUnits["sps"] == 1 && nalUnits["pps"] == 1 && (nalUnits["idr"] ?? 0) >= 1)
            }
        }
    }

    /// The stream continues across requests: a start code cut in two by the request boundary,
    /// and chunks cut at odd places inside each request, still give every picture.
    @Test func chunkedPushSplitInsideAStartCodeAcrossTwoRequests() throws {
        let entry = try Fixtures.entry("high_320x240.264")
        let bytes = try Fixtures.bytes("high_320x240.264")
        let offsets = startCodeOffsets(bytes)
        let cut = offsets[offsets.count / 2] + 2  // between "00 00" and "01"
        let first = Array(bytes[..<cut])
        let second = Array(bytes[cut...])
        func pieces(_ part: [UInt8], size: Int) -> [[UInt8]] {
            stride(from: 0, to: part.count, by: size).map { Array(part[$0..<min($0 + size, part.count)]) }
        }
        try withService { service in
            let one = try chunkedPost(service.port, "/sessions/split/nalus", pieces: pieces(first, size: 1000))
            #expect(one.status == 200)
            let two = try chunkedPost(service.port, "/sessions/split/nalus?flush=true", pieces: pieces(second, size: 333))
            #expect(two.status == 200)
            let a = try jsonObject(one.body)
            let b = try jsonObject(two.body)
            #expect((a["bytes"] as? Int ?? 0) + (b["bytes"] as? Int ?? 0) == bytes.count)
            #expect((a["frames"] as? Int ?? 0) + (b["frames"] as? Int ?? 0) == entry.frames)
            #expect(b["latestSeq"] as? Int == entry.frames)
            let status = try jsonObject(request(service.port, "GET", "/sessions/split").body)
            let counters = status["counters"] as? [String: Any]
            #expect(counters?["framesDecoded"] as? Int == entry.frames)
            #expect(counters?["decodeErrors"] as? Int == 0)
            #expect(status["uploading"] as? Bool == false)
        }
    }

    /// A push of length-prefixed units (VideoToolbox's samples) is refused at once, saying how
    /// to send them; the same session then takes the stream as Annex B.
    @Test func lengthPrefixedUnitsAreRefusedSayingHow() throws {
        let annexB = try Fixtures.bytes("high_320x240.264")
        var lengthPrefixed: [UInt8] = []
        for unit in AnnexBSplitter.split(annexB) {
            let count = unit.bytes.count
            lengthPrefixed += [UInt8(count >> 24 & 0xFF), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)]
            lengthPrefixed += Array(unit.bytes)
        }
        try withService { service in
            for flush in [false, true] {
                let refused = try post(service.port, "/sessions/vt/nalus\(flush ? "?flush=true" : "")", lengthPrefixed)
                #expect(refused.problem == Problem(422, "length_prefixed_units"), "\(refused.text)")
                #expect(refused.text.contains("write a start code 00 00 00 01 in place of each length"))
            }
            let accepted = try post(service.port, "/sessions/vt/nalus?flush=true", annexB)
            let frames = try jsonObject(accepted.body)["frames"] as? Int
            #expect(accepted.status == 200 && frames == 15, "\(accepted.text)")

            // The parameter sets kept aside: the first unit, a 100 kB keyframe, is larger than any
            // piece the server reads at once.
            var generator = SplitMix64(seed: 5)
            let keyframe: [UInt8] = [0x65, 0x88] + (0..<99_998).map { _ in UInt8(truncatingIfNeeded: generator.next() | 0x10) }
            let keyframeFirst: [UInt8] = [0, 0x01, 0x86, 0xA0] + keyframe
            let noParameterSets = try post(service.port, "/sessions/vt2/nalus", keyframeFirst)
            #expect(noParameterSets.problem == Problem(422, "length_prefixed_units"), "\(noParameterSets.text)")
        }
    }

    /// A live push of noise is refused once 64 MiB of it made no access unit, with what it
    /// decoded kept: the client is told while it sends, not after however much it sends.
    @Test func noiseIsRefusedAfter64MiBWithoutAnAccessUnit() throws {
        var generator = SplitMix64(seed: 11)
        var noise = [UInt8](repeating: 0, count: 66 << 20)
        noise.withUnsafeMutableBytes { bytes in
            for index in stride(from: 0, to: bytes.count, by: 8) { bytes.storeBytes(of: generator.next(), toByteOffset: index, as: UInt64.self) }
        }
        try withService { service in
            try pushFixture(service.port, session: "n")
            let before = try jsonObject(try request(service.port, "GET", "/sessions/n").body)["latestFrame"] as? [String: Any]
            #expect(before != nil)
            let response = try post(service.port, "/sessions/n/nalus", noise)
            #expect(response.problem == Problem(422, "invalid_data"))
            #expect(response.problemDetail.contains("64 MiB of this push made no access unit"), "\(response.text.prefix(300))")
            let after = try jsonObject(try request(service.port, "GET", "/sessions/n").body)["latestFrame"] as? [String: Any]
            #expect(after?["seq"] as? Int == before?["seq"] as? Int)
        }
    }

    /// After a flush the next POST starts a fresh stream: the same file again gives every picture again.
    @Test func flushStartsAFreshStream() throws {
        let entry = try Fixtures.entry("baseline_176x144.264")
        let bytes = try Fixtures.bytes("baseline_176x144.264")
        try withService { service in
            for round in 1...2 {
                let json = try jsonObject(post(service.port, "/sessions/again/nalus?flush=true", bytes).body)
                #expect(json["frames"] as? Int == entry.frames)
                #expect(json["latestSeq"] as? Int == entry.frames * round)
            }
        }
    }

    @Test(arguments: ["high_320x240.264", "main_bframes_176x144.264", "odd_crop_322x242.264", "high10_320x240.264"])
    func multipartRawPartsEqualTheReferenceDecode(name: String) throws {
        let entry = try Fixtures.entry(name)
        try withService { service in
            let parts = try rawPartsOfAPush(service.port, fixture: name)
            for (index, part) in parts.enumerated() {
                #expect(part.headers["Content-Type"] == "application/octet-stream")
                #expect(part.headers["X-Frame-Seq"] == String(index + 1))
                #expect(part.headers["X-Frame-Width"] == String(entry.width))
                #expect(part.headers["X-Frame-Height"] == String(entry.height))
                #expect(part.headers["X-Frame-Pix-Fmt"] != nil)
                #expect(part.headers["X-Frame-Keyframe"] == (index == 0 ? "true" : "false"))
            }
        }
    }

    @Test func multipartJPEGThumbnailsOnePartPerPicture() throws {
        let entry = try Fixtures.entry("baseline_176x144.264")
        let bytes = try Fixtures.bytes("baseline_176x144.264")
        try withService { service in
            let response = try post(
                service.port, "/sessions/mpj/nalus?flush=true&width=88&quality=60", bytes,
                headers: [("Accept", "application/json;q=0.5, multipart/mixed")])
            #expect(response.status == 200)
            let (parts, closed) = try parseMultipart(response.body, boundary: boundary(of: response.headers["Content-Type"]))
            #expect(closed)
            #expect(parts.count == entry.frames)
            for part in parts {
                #expect(part.headers["Content-Type"] == "image/jpeg")
                #expect(jpegSize(part.body)! == (88, 72))
                #expect(part.headers["X-Frame-Pix-Fmt"] == nil)
            }
            // The pictures are the session's pictures: the last one is the latest.
            let latest = try request(service.port, "GET", "/sessions/mpj/frame/latest.jpg?width=88&quality=60")
            #expect(latest.body == parts.last?.body)
        }
    }

    /// A long body (the same stream 20 times) through both answers: every picture comes out,
    /// the multipart answer drops none, and the upload queue stays within its bound.
    @Test func longBodiesLoseNoPicture() throws {
        let entry = try Fixtures.entry("baseline_176x144.264")
        let once = try Fixtures.bytes("baseline_176x144.264")
        let repeats = 20
        let body = Array([[UInt8]](repeating: once, count: repeats).joined())
        let pieces = stride(from: 0, to: body.count, by: 4099).map { Array(body[$0..<min($0 + 4099, body.count)]) }
        try withService(sessions: { $0.uploadQueueBytes = 64 << 10 }) { service in
            let json = try jsonObject(chunkedPost(service.port, "/sessions/long/nalus?flush=true", pieces: pieces).body)
            #expect(json["frames"] as? Int == entry.frames * repeats)
            #expect(json["bytes"] as? Int == body.count)
            let session = try #require(service.registry.find(try SessionID("long")))
            #expect(!session.status().uploading)
            let response = try chunkedPost(
                service.port, "/sessions/long/nalus?flush=true&width=16", pieces: pieces,
                headers: [("Accept", "multipart/mixed")])
            let (parts, closed) = try parseMultipart(response.body, boundary: boundary(of: response.headers["Content-Type"]))
            #expect(closed)
            #expect(parts.count == entry.frames * repeats)
            let sequences = parts.compactMap { Int($0.headers["X-Frame-Seq"] ?? "") }
            #expect(sequences == Array((entry.frames * repeats + 1)...(2 * entry.frames * repeats)))
        }
    }

    @Test func multipartParametersAreChecked() throws {
        try withService { service in
            for query in ["format=png", "width=0", "quality=101"] {
                let response = try post(
                    service.port, "/sessions/x/nalus?\(query)", [0, 0, 1], headers: [("Accept", "multipart/mixed")])
                #expect(response.problem == Problem(400, "invalid_parameter"), "\(query)")
            }
        }
    }

    /// Bad input is reported but never costs what was already decoded.
    @Test func garbageKeepsTheLastPictureAndShowsLastError() throws {
        let bytes = try Fixtures.bytes("baseline_176x144.264")
        // A P slice naming a PPS that does not exist: libavcodec rejects it as invalid data.
        let badSlice: [UInt8] = [0, 0, 0, 1, 0x41, 0x98, 0x44]
        try withService { service in
            let first = try jsonObject(post(service.port, "/sessions/g/nalus", Array(bytes[..<6000])).body)
            let seqBefore = first["latestSeq"] as? Int ?? 0
            #expect(seqBefore > 0)
            // The flush ends the stream, so the bad access unit surely reaches the decoder.
            let response = try post(service.port, "/sessions/g/nalus?flush=true", badSlice + badSlice)
            #expect(response.status == 200)
            let json = try jsonObject(response.body)
            #expect((json["decodeErrors"] as? Int ?? 0) >= 1)
            #expect((json["error"] as? [String: Any])?["code"] as? String == "invalid_data")
            let status = try jsonObject(request(service.port, "GET", "/sessions/g").body)
            let lastError = status["lastError"] as? [String: Any]
            #expect(lastError?["code"] as? String == "invalid_data")
            #expect(lastError?["message"] is String && lastError?["at"] is String)
            let latest = try request(service.port, "GET", "/sessions/g/frame/latest.jpg")
            #expect(latest.status == 200)
            #expect(Int(latest.headers["X-Frame-Seq"] ?? "") ?? 0 >= seqBefore)
            // And the session goes on: a new stream decodes.
            let again = try jsonObject(post(service.port, "/sessions/g/nalus?flush=true", bytes).body)
            #expect(again["frames"] as? Int == 20)
        }
    }

    @Test func aMultipartAnswerSpoolsAtMostTheSpoolLimit() throws {
        let bytes = try Fixtures.bytes("baseline_176x144.264")
        try withService(sessions: { $0.maxSpoolBytes = 4096 }) { service in
            let response = try chunkedPost(
                service.port, "/sessions/spool/nalus?flush=true", pieces: [Array(bytes[..<3000]), Array(bytes[3000...])],
                headers: [("Accept", "multipart/mixed")])
            #expect(response.problem == Problem(413, "body_too_large"))
            // The JSON answer streams to the decoder instead and has no such limit.
            let plain = try post(service.port, "/sessions/spool/nalus?flush=true", bytes)
            #expect(plain.status == 200)
        }
    }

    @Test func aBodyThatIsNotH264IsUnprocessable() throws {
        let noise = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) | 0x10 }
        try withService { service in
            let response = try post(service.port, "/sessions/noise/nalus?flush=true", noise)
            #expect(response.problem == Problem(422, "invalid_data"))
            #expect(response.problemDetail.contains("no start code"))
        }
    }

    @Test func aFlushedRequestWithOnlyErrorsIsUnprocessable() throws {
        let bytes = try Fixtures.bytes("baseline_176x144.264")
        try withService(sessions: { $0.pictureSizeLimit = PictureSizeLimitForTests.tiny }) { service in
            let response = try post(service.port, "/sessions/big/nalus?flush=true", bytes)
            #expect(response.problem == Problem(422, "picture_too_large"))
            #expect(response.headers["Content-Type"] == "application/problem+json")
        }
    }

    @Test func nalTooLarge() throws {
        try withService(sessions: { $0.maxNALBytes = 1024 }) { service in
            let hugeNAL: [UInt8] = [0, 0, 1, 0x65] + [UInt8](repeating: 0x88, count: 4000)
            #expect(try post(service.port, "/sessions/n/nalus?flush=true", hugeNAL).problem == Problem(413, "nal_too_large"))
            // Without a flush the stream goes on, but a push that carried no NAL unit FrameTap
            // kept is told so all the same.
            let unflushed = try post(service.port, "/sessions/n/nalus", hugeNAL + [0, 0, 1, 9, 0xf0])
            #expect(unflushed.problem == Problem(413, "nal_too_large"))
            // With a unit it kept, the request succeeds and the skipped unit shows as an error.
            let good = try Fixtures.bytes("baseline_176x144.264")
            let mixed = try jsonObject(post(service.port, "/sessions/n/nalus", Array(good.prefix(3000)) + hugeNAL + [0, 0, 1, 9, 0xf0]).body)
            #expect((mixed["error"] as? [String: Any])?["code"] as? String == "nal_too_large")
        }
    }

    @Test func bodyTooLarge() throws {
        let bytes = try Fixtures.bytes("baseline_176x144.264")
        try withService(sessions: { $0.maxBodyBytes = 4096 }) { service in
            // Announced length: refused before the body is read.
            let announced = try post(service.port, "/sessions/b/nalus", bytes)
            #expect(announced.status == 413)
            let problem = try jsonObject(announced.body)
            #expect(problem["code"] as? String == "body_too_large")
            #expect(problem["status"] as? Int == 413)
            // Chunked: refused when the limit is passed.
            let chunked = try chunkedPost(service.port, "/sessions/b/nalus", pieces: [Array(bytes[..<3000]), Array(bytes[3000...])])
            #expect(chunked.problem == Problem(413, "body_too_large"))
            // Under the limit is fine, and the session still works.
            let small = try post(service.port, "/sessions/b/nalus", Array(bytes[..<4000]))
            #expect(small.status == 200)
        }
    }

    @Test func invalidSessionIDs() throws {
        try withService { service in
            for id in [String(repeating: "a", count: 129), "bad%20id", "caf%C3%A9", "a%3Ab"] {
                let response = try post(service.port, "/sessions/\(id)/nalus", [0, 0, 1])
                #expect(response.problem == Problem(400, "invalid_session_id"), "\(id)")
            }
            let longest = String(repeating: "Az0._~-", count: 18).prefix(128)
            #expect(try post(service.port, "/sessions/\(longest)/nalus", [0, 0, 1]).status == 200)
        }
    }

    @Test func tooManySessions() throws {
        try withService(sessions: { $0.maxSessions = 1 }) { service in
            #expect(try post(service.port, "/sessions/one/nalus", [0, 0, 1]).status == 200)
            let refused = try post(service.port, "/sessions/two/nalus", [0, 0, 1])
            #expect(refused.status == 503)
            #expect(Int(refused.headers["Retry-After"] ?? "") ?? 0 >= 1)
            #expect(try jsonObject(refused.body)["code"] as? String == "too_many_sessions")
            // An existing session is still served, and deleting frees the slot.
            #expect(try post(service.port, "/sessions/one/nalus", [0, 0, 1]).status == 200)
            #expect(try request(service.port, "DELETE", "/sessions/one").status == 204)
            #expect(try post(service.port, "/sessions/two/nalus", [0, 0, 1]).status == 200)
        }
    }

    @Test func aSecondConcurrentUploadIsABusySession() throws {
        try withService { service in
            let client = try RawClient(port: service.port)
            try client.send("POST /sessions/busy/nalus HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n\0\0\u{1}\r\n")
            #expect(eventually { service.registry.find(try! SessionID("busy"))?.status().uploading == true })
            #expect(try post(service.port, "/sessions/busy/nalus", [0, 0, 1]).problem == Problem(409, "session_busy"))
            try client.send("0\r\n\r\n")
            #expect(try parseResponse(client.readToEnd()).status == 200)
        }
    }

    /// `?takeover=true` ends the push under way instead of a 409: its client, still connected,
    /// is answered 409 `push_taken_over` at once, and the new push is decoded after what of the
    /// old one arrived.
    @Test func aTakeoverPushEndsThePushUnderWay() throws {
        try withService { service in
            let bytes = try Fixtures.bytes("baseline_176x144.264")
            let holder = try RawClient(port: service.port)
            try holder.send(
                "POST /sessions/held/nalus HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + String(2000, radix: 16) + "\r\n")
            try holder.send(Array(bytes[..<2000]))
            try holder.send("\r\n")
            #expect(eventually { service.registry.find(try! SessionID("held"))?.status().counters.bytes == 2000 })
            let session = try #require(service.registry.find(try SessionID("held")))
            let busy = try post(service.port, "/sessions/held/nalus", bytes)
            #expect(busy.problem == Problem(409, "session_busy"))
            #expect((try jsonObject(busy.body)["detail"] as? String)?.contains("takeover=true") == true)
            #expect(try jsonObject(busy.body)["heldBy"] as? String == "push")
            let taken = try post(service.port, "/sessions/held/nalus?takeover=true&flush=true", bytes)
            #expect(taken.status == 200)
            // The whole stream again, after the old push's cut picture was dropped.
            #expect(try jsonObject(taken.body)["frames"] as? Int == 20)
            let answer = try parseResponse(holder.readToEnd())
            #expect(answer.problem == Problem(409, "push_taken_over"))
            #expect(session.status().uploading == false)

            // A push answered as multipart/mixed is taken over the same way while its body arrives.
            let spooling = try RawClient(port: service.port)
            try spooling.send(
                "POST /sessions/held/nalus HTTP/1.1\r\nHost: x\r\nAccept: multipart/mixed\r\n"
                    + "Transfer-Encoding: chunked\r\n\r\n" + String(2000, radix: 16) + "\r\n")
            try spooling.send(Array(bytes[..<2000]))
            try spooling.send("\r\n")
            #expect(eventually { session.status().uploading })
            #expect(try post(service.port, "/sessions/held/nalus?takeover=1&flush=1", bytes).status == 200)
            #expect(try parseResponse(spooling.readToEnd()).problem == Problem(409, "push_taken_over"))
            let counters = try jsonObject(try request(service.port, "GET", "/sessions/held").body)["counters"] as? [String: Any]
            #expect(counters?["uploadsTakenOver"] as? Int == 2)

            let metrics = String(decoding: try request(service.port, "GET", "/metrics").body, as: UTF8.self)
            #expect(metrics.contains("frametap_uploads_stopped_total{reason=\"taken_over\"} 2"))
        }
    }

    /// A push that names its publisher holds the stream against another client's pushes, which
    /// are told who holds it; a malformed name is a 400.
    @Test func aNamedPublisherHoldsTheSession() throws {
        try withService { service in
            let bytes = try Fixtures.bytes("baseline_176x144.264")
            #expect(try post(service.port, "/sessions/shared/nalus?publisher=phone-a", Array(bytes.prefix(4000))).status == 200)
            let status = try jsonObject(try request(service.port, "GET", "/sessions/shared").body)
            #expect(status["publisher"] as? String == "phone-a" && status["heldBy"] as? String == "publisher")
            let refused = try post(service.port, "/sessions/shared/nalus?publisher=phone-b", bytes)
            #expect(refused.problem == Problem(409, "session_busy"))
            let problem = try jsonObject(refused.body)
            #expect(problem["heldBy"] as? String == "publisher" && problem["publisher"] as? String == "phone-a")
            #expect((1...10).contains(Int(refused.headers["Retry-After"] ?? "") ?? 0), "the hold's end, between phone-a's pushes")
            #expect(try post(service.port, "/sessions/shared/nalus?publisher=phone-a&flush=true", Array(bytes.dropFirst(4000))).status == 200)
            #expect(try post(service.port, "/sessions/shared/nalus?publisher=phone-b&flush=true", bytes).status == 200)
            #expect(try post(service.port, "/sessions/shared/nalus?publisher=a%20b", bytes).problem == Problem(400, "invalid_parameter"))
        }
    }

    /// A chunked push whose framing breaks (a chunk size that is not hexadecimal) is answered
    /// with a problem, not libmicrohttpd's HTML page; a live push's whole chunks before it were
    /// decoded and stay, and a push that broke before anything of it made a session leaves none
    /// behind.
    @Test func aChunkedPushWhoseFramingBreaksIsAProblemAndKeepsWhatCameBefore() throws {
        try withService { service in
            let bytes = try Fixtures.bytes("baseline_176x144.264")
            /// `bytes` as one chunk to `session` (none when `whole` is false), then a chunk size
            /// that is not hexadecimal; the answer must be the problem.
            func pushBroken(_ session: String, whole: Bool, headers: String = "") throws {
                let client = try RawClient(port: service.port)
                try client.send(
                    "POST /sessions/\(session)/nalus HTTP/1.1\r\nHost: x\r\n\(headers)Transfer-Encoding: chunked\r\n\r\n")
                if whole {
                    try client.send(String(bytes.count, radix: 16) + "\r\n")
                    try client.send(bytes)
                    try client.send("\r\n")
                }
                try client.send("zz\r\nabc\r\n")
                let answer = try parseResponse(client.readToEnd())
                #expect(answer.status == 400 && answer.headers["Content-Type"] == "application/problem+json", "\(session)")
                #expect(try jsonObject(answer.body)["code"] as? String == "invalid_chunked_encoding", "\(session)")
            }

            try pushBroken("broken", whole: true)
            let session = try #require(service.registry.find(try SessionID("broken")))
            #expect(eventually { session.status().counters.framesDecoded > 0 }, "the pictures of the chunk before the fault")
            #expect(eventually { session.status().lastError?.code == "invalid_chunked_encoding" })

            try pushBroken("never", whole: false)
            #expect(eventually { (try? request(service.port, "GET", "/sessions/never").status) == 404 })

            // Answered as multipart/mixed, a push is decoded once its body is whole: refused whole.
            try pushBroken("parts", whole: true, headers: "Accept: multipart/mixed\r\n")
            #expect(eventually { (try? request(service.port, "GET", "/sessions/parts").status) == 404 }, "refused, not aborted")
        }
    }

    @Test func aForcedHardwareBackendThatIsMissingIsUnavailable() throws {
        let renderNodes = (try? FileManager.default.contentsOfDirectory(atPath: "/dev/dri"))?.filter { $0.hasPrefix("renderD") } ?? []
        guard renderNodes.isEmpty else { return }  // a machine with VA-API would open it
        try withService(sessions: { $0.backend = .vaapi }) { service in
            let response = try post(service.port, "/sessions/hw/nalus", [0, 0, 1])
            #expect(response.problem == Problem(503, "decoder_unavailable"))
            #expect(service.registry.count == 0)
        }
        try withService { service in
            #expect(try request(service.port, "PUT", "/sessions/hw", body: Array(#"{"backend":"software"}"#.utf8)).status == 201)
            let response = try request(service.port, "PUT", "/sessions/hw", body: Array(#"{"backend":"vaapi"}"#.utf8))
            #expect(response.problem == Problem(503, "decoder_unavailable"))
        }
    }
}

enum PictureSizeLimitForTests {
    /// Smaller than every fixture.
    static var tiny: PictureSizeLimit { PictureSizeLimit(maxWidth: 8192, maxHeight: 8192, maxPixels: 100 * 100) }
}
