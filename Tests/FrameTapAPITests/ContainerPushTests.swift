import Foundation
import Testing
import TestSupport

extension ContainerFixtures.Row {
    /// The Content-Type a client would send for it.
    var contentType: String {
        switch container {
        case "mpegts": "video/mp2t"
        case "mp4": file.contains("fragmented") ? "video/iso.segment" : "video/mp4"
        case "matroska": "video/x-matroska"
        default: "video/x-flv"
        }
    }
}

/// The pictures of a multipart answer: count and MD5 of the concatenated YUV parts.
func multipartPictures(_ response: TestResponse) throws -> (count: Int, md5: String) {
    let (parts, closed) = try parseMultipart(response.body, boundary: try boundary(of: response.headers["Content-Type"]))
    guard closed else { throw TestFailure("the multipart answer did not close") }
    var md5 = MD5()
    var pictures = 0
    for part in parts where part.headers["Content-Type"] != "application/problem+json" {
        md5.update(part.body)
        pictures += 1
    }
    return (pictures, md5.finalize())
}

@Suite("Containers pushed to POST /sessions/{id}/nalus", .timeLimit(.minutes(10)))
struct ContainerPushTests {
    @Test("every container, named by its Content-Type, decodes picture-exact to the ffmpeg CLI's decode", arguments: ContainerFixtures.decodable)
    func declared(row: ContainerFixtures.Row) throws {
        try withService { service in
            let response = try post(
                service.port, "/sessions/c1/nalus?flush=true&format=yuv", try ContainerFixtures.bytes(row.file),
                headers: [("Content-Type", row.contentType), ("Accept", "multipart/mixed")])
            #expect(response.status == 200)
            let pictures = try multipartPictures(response)
            #expect(pictures.count == row.frames)
            #expect(pictures.md5 == row.md5)
        }
    }

    @Test("without a Content-Type the first bytes tell the container", arguments: ContainerFixtures.decodable)
    func sniffed(row: ContainerFixtures.Row) throws {
        try withService { service in
            let response = try post(service.port, "/sessions/c1/nalus?flush=true", try ContainerFixtures.bytes(row.file))
            #expect(response.status == 200, "\(response.text)")
            let summary = try jsonObject(response.body)
            #expect(summary["frames"] as? Int == row.frames)
            let status = try jsonObject(try request(service.port, "GET", "/sessions/c1").body)
            let counters = try #require(status["counters"] as? [String: Any])
            #expect(counters["framesDecoded"] as? Int == row.frames)
            #expect(status["codec"] as? String == row.codec)
        }
    }

    @Test("MPEG-TS that begins inside a packet, without a Content-Type, is read as MPEG-TS")
    func mpegTSCutInsideAPacket() throws {
        let file = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        try withService { service in
            let response = try post(service.port, "/sessions/cut/nalus?flush=true", Array(file.dropFirst(100)))
            #expect(response.status == 200, "\(response.text)")
            let summary = try jsonObject(response.body)
            #expect(summary["frames"] as? Int == 20 && summary["decodeErrors"] as? Int == 0, "\(response.text.prefix(400))")
        }
    }

    @Test(
        "each picture of a container push keeps its sample's presentation time, in 90 kHz, live and from the history",
        // FrameTap decodes the PID-change file's two video tracks as one stream; ffprobe decodes two.
        arguments: ContainerFixtures.decodable.filter { !$0.file.contains("pid_change") })
    func presentationTimes(row: ContainerFixtures.Row) throws {
        let expected = try Self.framePTS90kHz(row.file)
        #expect(expected.count == row.frames)
        try withService { service in
            let response = try post(
                service.port, "/sessions/c1/nalus?flush=true", try ContainerFixtures.bytes(row.file),
                headers: [("Content-Type", row.contentType), ("Accept", "multipart/mixed")])
            #expect(response.status == 200)
            let (parts, _) = try parseMultipart(response.body, boundary: try boundary(of: response.headers["Content-Type"]))
            let live = parts.compactMap { $0.headers["X-Frame-PTS"].flatMap { Int64($0) } }
            #expect(live == expected, "X-Frame-PTS of the parts against ffprobe's frames")
            let seqs = parts.compactMap { $0.headers["X-Frame-Seq"] }
            // The same picture decoded again from the history has the same time.
            if let seq = seqs.dropFirst(seqs.count / 2).first, let index = seqs.firstIndex(of: seq), index < live.count {
                let past = try request(service.port, "GET", "/sessions/c1/frame/at.jpg?seq=\(seq)")
                #expect(past.status == 200)
                #expect(past.headers["X-Frame-PTS"].flatMap { Int64($0) } == live[index])
            }
            // Asked for by its time: the same picture.
            for (seq, pts) in zip(seqs, live).enumerated().filter({ $0.offset % 3 == 0 }).map(\.element) {
                let byTime = try request(service.port, "GET", "/sessions/c1/frame/at.jpg?pts=\(pts)")
                #expect(byTime.status == 200 && byTime.headers["X-Frame-Seq"] == seq, "pts \(pts): \(byTime.status)")
                #expect(byTime.headers["X-Frame-PTS"] == String(pts))
            }
            let status = try jsonObject(try request(service.port, "GET", "/sessions/c1").body)
            let latest = try #require(status["latestFrame"] as? [String: Any])
            #expect((latest["pts"] as? NSNumber)?.int64Value == expected.last)
        }
        try withService { service in
            let response = try post(service.port, "/sessions/plain/nalus?flush=true", try Fixtures.bytes("high_320x240.264"))
            #expect(response.status == 200)
            let latest = try request(service.port, "GET", "/sessions/plain/frame/latest.jpg")
            #expect(latest.headers["X-Frame-PTS"] == nil, "an Annex B push has no timestamps")
            let noTime = try request(service.port, "GET", "/sessions/plain/frame/at.jpg?pts=0")
            #expect(noTime.problem == Problem(404, "not_in_history"))
            #expect(noTime.text.contains("Annex B pushes carry none"))
            for bad in ["?pts=x", "?pts=1&seq=1", "?pts=1&t=now"] {
                #expect(try request(service.port, "GET", "/sessions/plain/frame/at.jpg\(bad)").problem == Problem(400, "invalid_parameter"), "\(bad)")
            }
        }
    }

    /// ffprobe's presentation time of each picture of the file's first video track, in output
    /// order, rescaled to 90 kHz as libavutil's av_rescale_q does (to the nearest, halves away
    /// from zero).
    static func framePTS90kHz(_ file: String) throws -> [Int64] {
        let output = try runProgram(
            "/usr/bin/ffprobe",
            ["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=time_base:frame=pts", "-of", "csv=p=0",
             ContainerFixtures.directory.appendingPathComponent(file).path])
        let lines = String(decoding: output, as: UTF8.self).split(whereSeparator: \.isNewline).map(String.init)
        guard let base = lines.first(where: { $0.contains("/") })?.split(separator: "/"), base.count == 2,
            let num = Int64(base[0]), let den = Int64(base[1])
        else { throw TestFailure("no time base from ffprobe for \(file): \(lines.prefix(3))") }
        return lines.filter { !$0.contains("/") }.compactMap { Int64($0.trimmingCharacters(in: .init(charactersIn: ","))) }
            .map { pts in
                let scaled = pts * 90_000 * num
                return (scaled + (scaled >= 0 ? den / 2 : -den / 2)) / den
            }
    }

    @Test("audio beside the video is counted in packetsIgnored")
    func audioCounted() throws {
        try withService { service in
            _ = try post(service.port, "/sessions/a/nalus?flush=true", try ContainerFixtures.bytes("h264_320x240_aac.mp4"))
            let status = try jsonObject(try request(service.port, "GET", "/sessions/a").body)
            let ignored = try #require((status["counters"] as? [String: Any])?["packetsIgnored"] as? [String: Int])
            #expect((ignored["audio"] ?? 0) > 0)
        }
    }

    @Test("refused containers get their problem, and the session serves what it had")
    func refusals() throws {
        try withService(sessions: { $0.containerSeekWindow = 4096 }) { service in
            let good = try post(service.port, "/sessions/r/nalus?flush=true", try ContainerFixtures.bytes("h264_320x240.mkv"))
            #expect(good.status == 200)
            func problem(_ file: String, _ contentType: String?, body: [UInt8]? = nil) throws -> (Int, String?) {
                let headers = contentType.map { [("Content-Type", $0)] } ?? []
                let response = try post(service.port, "/sessions/r/nalus?flush=true", body ?? ContainerFixtures.bytes(file), headers: headers)
                #expect(response.headers["Content-Type"] == "application/problem+json")
                return (response.status, try jsonObject(response.body)["code"] as? String)
            }
            let vp8 = try problem("vp8_176x144.webm", "video/webm")
            #expect(vp8 == (415, "unsupported_codec"))
            let audio = try problem("audio_only.mp4", nil)
            #expect(audio == (422, "no_video_track"))
            let audioTS = try problem("audio_only.ts", "video/mp2t")
            #expect(audioTS == (422, "no_video_track"))
            let moov = try ContainerFixtures.bytes("h264_320x240.mp4")
            let truncated = try problem("", "video/mp4", body: Array(moov.prefix(600)))
            #expect(truncated == (422, "invalid_container"))
            let needsSeeking = try problem("h264_320x240_moov_at_end.mp4", "video/mp4")
            #expect(needsSeeking == (422, "container_needs_seeking"))
            // An elementary stream said to be a container: named as such, whatever the container.
            for (stream, contentType) in [
                ("high_320x240.264", "video/mp4"), ("high_320x240.264", "video/mp2t"), ("main10_320x240.265", "video/x-flv"),
                ("main10_320x240.265", "video/x-matroska"),
            ] {
                let annexB = try problem("", contentType, body: try Fixtures.bytes(stream))
                #expect(annexB == (415, "content_type_mismatch"), "\(stream) as \(contentType)")
            }
            // An MP4 whose first box is 265 bytes long begins 00 00 01 09, as an H.264 delimiter
            // does: its box type says what it is. (Fragments count their offsets from their moof,
            // so a box before them moves nothing.)
            let padded = [0, 0, 1, 9] + Array("free".utf8) + [UInt8](repeating: 0, count: 257)
                + (try ContainerFixtures.bytes("h264_320x240_fragmented.mp4"))
            let mp4 = try post(service.port, "/sessions/box/nalus?flush=true", padded, headers: [("Content-Type", "video/mp4")])
            #expect(mp4.status == 200, "\(String(decoding: mp4.body, as: UTF8.self))")
            // MPEG-TS whose elementary streams' packets never start a PES (the tables do, so the
            // video track is found): not one sample, which is no 200.
            var unstarted = try ContainerFixtures.bytes("h264_320x240_aac.ts")
            for packet in stride(from: 0, to: unstarted.count - 187, by: 188) {
                let pid = Int(unstarted[packet + 1] & 0x1F) << 8 | Int(unstarted[packet + 2])
                if (0x100..<0x200).contains(pid) { unstarted[packet + 1] &= ~0x40 }
            }
            let noSample = try problem("", "video/mp2t", body: unstarted)
            #expect(noSample == (422, "invalid_container"))
            // A Content-Type the first bytes plainly contradict, and a form, are named as such.
            for (file, contentType) in [
                ("h264_320x240.mp4", "video/mp2t"), ("h264_320x240_aac.ts", "video/mp4"), ("h264_320x240.mkv", "video/x-flv"),
                ("h264_320x240.flv", "video/H264"), ("h264_320x240.mp4", "multipart/form-data; boundary=x"),
            ] {
                let contradicted = try problem(file, contentType)
                #expect(contradicted == (415, "content_type_mismatch"), "\(file) as \(contentType)")
            }
            // curl --data-binary's default Content-Type says nothing: the bytes tell.
            let binary = try post(
                service.port, "/sessions/form/nalus?flush=true", try ContainerFixtures.bytes("h264_320x240.mp4"),
                headers: [("Content-Type", "application/x-www-form-urlencoded")])
            #expect(binary.status == 200)
            // The session still serves its last good picture.
            let picture = try request(service.port, "GET", "/sessions/r/frame/latest.jpg")
            #expect(picture.status == 200)
            #expect(jpegSize(picture.body)?.width == 320)
        }
    }

    @Test("a fragmented MP4 continues across pushes: init and first fragments, more, the rest with flush")
    func fragmentsAcrossPushes() throws {
        let bytes = try ContainerFixtures.bytes("h264_320x240_fragmented.mp4")
        try withService { service in
            let cuts = [0, bytes.count / 3, 2 * bytes.count / 3, bytes.count]
            var frames = 0
            for index in 0..<3 {
                let last = index == 2
                let response = try post(
                    service.port, "/sessions/f/nalus\(last ? "?flush=true" : "")", Array(bytes[cuts[index]..<cuts[index + 1]]),
                    headers: [("Content-Type", "video/iso.segment")])
                #expect(response.status == 200, "\(response.text)")
                frames += try jsonObject(response.body)["frames"] as? Int ?? 0
            }
            #expect(frames == 20)
        }
    }

    @Test("a fragment with no MP4 stream under way (after a flush) is refused, saying to send the init segment first")
    func aFragmentWithoutItsInitSegment() throws {
        let bytes = try ContainerFixtures.bytes("h264_320x240_fragmented.mp4")
        // Where the first fragment begins: the init segment (ftyp, moov) is before it.
        let moof = try #require((0..<(bytes.count - 8)).first { bytes[($0 + 4)..<($0 + 8)] == Array("moof".utf8)[...] })
        try withService { service in
            for contentType in ["video/iso.segment", nil] {
                let response = try post(
                    service.port, "/sessions/g/nalus?flush=true", Array(bytes[moof...]),
                    headers: contentType.map { [("Content-Type", $0)] } ?? [])
                #expect(response.status == 422, "\(response.text)")
                let problem = try jsonObject(response.body)
                #expect(problem["code"] as? String == "invalid_container")
                #expect((problem["detail"] as? String)?.contains("Send the init segment (ftyp and moov) first") == true)
            }
            let whole = try post(
                service.port, "/sessions/g/nalus?flush=true", bytes, headers: [("Content-Type", "video/iso.segment")])
            let frames = try jsonObject(whole.body)["frames"] as? Int
            #expect(whole.status == 200 && frames == 20, "\(whole.text)")
            // After that flushed stream, and while an MPEG-TS stream is open: refused alike.
            let afterFlush = try post(
                service.port, "/sessions/g/nalus", Array(bytes[moof...]), headers: [("Content-Type", "video/iso.segment")])
            #expect(afterFlush.problem == Problem(422, "invalid_container"), "\(afterFlush.text)")
            let ts = try post(service.port, "/sessions/t/nalus", try ContainerFixtures.bytes("h264_320x240_aac.ts"))
            #expect(ts.status == 200)
            let afterTS = try post(
                service.port, "/sessions/t/nalus", Array(bytes[moof...]), headers: [("Content-Type", "video/iso.segment")])
            #expect(afterTS.problem == Problem(422, "invalid_container"), "\(afterTS.text)")
        }
    }

    @Test("a Matroska stream continues in pushes without a Content-Type (a recorder's pieces)")
    func matroskaPieces() throws {
        let bytes = try ContainerFixtures.bytes("h264_320x240.mkv")
        try withService { service in
            let first = try post(service.port, "/sessions/w/nalus", Array(bytes.prefix(5000)), headers: [("Content-Type", "video/webm")])
            #expect(first.status == 200)
            let second = try post(service.port, "/sessions/w/nalus", Array(bytes[5000..<9000]))
            #expect(second.status == 200)
            let last = try post(service.port, "/sessions/w/nalus?flush=true", Array(bytes[9000...]))
            #expect(last.status == 200)
            let status = try jsonObject(try request(service.port, "GET", "/sessions/w").body)
            #expect((status["counters"] as? [String: Any])?["framesDecoded"] as? Int == 20)
        }
    }

    @Test("a push of Annex B ends the open container stream first; its pictures come before")
    func switchToAnnexB() throws {
        try withService { service in
            let ts = try post(service.port, "/sessions/s/nalus", try ContainerFixtures.bytes("h264_320x240_aac.ts"))
            #expect(ts.status == 200)
            let annexB = try post(service.port, "/sessions/s/nalus?flush=true", try Fixtures.bytes("high_320x240.264"))
            #expect(annexB.status == 200, "\(annexB.text)")
            let status = try jsonObject(try request(service.port, "GET", "/sessions/s").body)
            let decoded = (status["counters"] as? [String: Any])?["framesDecoded"] as? Int
            #expect(decoded == 20 + (try Fixtures.entry("high_320x240.264").frames))
        }
    }

    @Test(
        "a container pushed whole again, and again after an Annex B push of other parameter sets, decodes picture-exact each time",
        arguments: ContainerFixtures.decodable)
    func pushedAgain(row: ContainerFixtures.Row) throws {
        let file = try ContainerFixtures.bytes(row.file)
        // Another stream of the same codec whose parameter sets have the same ids.
        let other = row.codec == "h264" ? "baseline_176x144.264" : "gray_176x144.265"
        try withService { service in
            func pushFile(_ round: String) throws {
                let response = try post(
                    service.port, "/sessions/again/nalus?flush=true&format=yuv", file,
                    headers: [("Content-Type", row.contentType), ("Accept", "multipart/mixed")])
                #expect(response.status == 200, "\(round): \(response.text.prefix(300))")
                let pictures = try multipartPictures(response)
                #expect(pictures.count == row.frames, "\(round)")
                #expect(pictures.md5 == row.md5, "\(round)")
            }
            try pushFile("first")
            try pushFile("second")
            let annexB = try post(service.port, "/sessions/again/nalus?flush=true", try Fixtures.bytes(other))
            #expect(annexB.status == 200, "\(annexB.text.prefix(300))")
            #expect(try jsonObject(annexB.body)["frames"] as? Int == (try Fixtures.entry(other).frames))
            try pushFile("after Annex B")
            let status = try jsonObject(try request(service.port, "GET", "/sessions/again").body)
            #expect((status["counters"] as? [String: Any])?["decodeErrors"] as? Int == 0)
        }
    }

    @Test("?codec= is enforced for containers: a track of the other codec is 415 codec_mismatch", arguments: ContainerFixtures.decodable)
    func statedCodec(row: ContainerFixtures.Row) throws {
        let file = try ContainerFixtures.bytes(row.file)
        let wrong = row.codec == "h264" ? "h265" : "h264"
        try withService { service in
            let refused = try post(
                service.port, "/sessions/said/nalus?flush=true&codec=\(wrong)", file, headers: [("Content-Type", row.contentType)])
            #expect(refused.problem == Problem(415, "codec_mismatch"), "\(refused.text.prefix(300))")
            // Without a Content-Type (sniffed) too, and the right codec is taken.
            let sniffed = try post(service.port, "/sessions/said2/nalus?flush=true&codec=\(wrong)", file)
            #expect(sniffed.status == 415, "\(sniffed.text.prefix(300))")
            let right = try post(
                service.port, "/sessions/said3/nalus?flush=true&codec=\(row.codec)", file, headers: [("Content-Type", row.contentType)])
            #expect(right.status == 200, "\(right.text.prefix(300))")
            #expect(try jsonObject(right.body)["frames"] as? Int == row.frames)
        }
    }

    @Test("a container sent slowly in small chunks decodes every picture as it arrives")
    func chunked() throws {
        let bytes = try ContainerFixtures.bytes("h264_320x240_fragmented.mp4")
        try withService { service in
            let pieces = stride(from: 0, to: bytes.count, by: 700).map { Array(bytes[$0..<min(bytes.count, $0 + 700)]) }
            let response = try chunkedPost(
                service.port, "/sessions/k/nalus?flush=true", pieces: pieces, headers: [("Content-Type", "video/mp4")])
            #expect(response.status == 200)
            #expect(try jsonObject(response.body)["frames"] as? Int == 20)
        }
    }
}

@Suite("A container's picture is served as soon as its sample's last byte arrived", .timeLimit(.minutes(10)))
struct ContainerFreshnessTests {
    /// Top-level MP4 boxes as byte ranges.
    static func boxes(_ bytes: [UInt8]) -> [(type: String, bytes: ArraySlice<UInt8>)] {
        var boxes: [(String, ArraySlice<UInt8>)] = []
        var offset = 0
        while offset + 8 <= bytes.count {
            let size = bytes[offset..<(offset + 4)].reduce(0) { $0 << 8 | Int($1) }
            guard size >= 8, offset + size <= bytes.count else { break }
            boxes.append((String(decoding: bytes[(offset + 4)..<(offset + 8)], as: UTF8.self), bytes[offset..<(offset + size)]))
            offset += size
        }
        return boxes
    }

    @Test("fragment by fragment, each picture is served before the next fragment is sent")
    func pictureAtItsFragmentsEnd() throws {
        let bytes = try ContainerFixtures.bytes("h264_320x240_ipp_fragmented.mp4")
        let boxes = Self.boxes(bytes)
        let initSegment = boxes.filter { $0.type == "ftyp" || $0.type == "moov" }.flatMap(\.bytes)
        var fragments: [[UInt8]] = []
        var current: [UInt8] = []
        for box in boxes where box.type != "ftyp" && box.type != "moov" {
            current += box.bytes
            if box.type == "mdat" {
                fragments.append(current)
                current = []
            }
        }
        #expect(fragments.count == 20)
        try withService { service in
            let client = try RawClient(port: service.port)
            try client.send(
                "POST /sessions/fresh/nalus HTTP/1.1\r\nHost: x\r\nContent-Type: video/mp4\r\nTransfer-Encoding: chunked\r\n\r\n")
            func chunk(_ piece: [UInt8]) throws {
                try client.send(Array("\(String(piece.count, radix: 16))\r\n".utf8) + piece + [13, 10])
            }
            try chunk(initSegment)
            // The push's head is routed on its own connection: on a loaded machine the first long
            // poll could otherwise reach the server before the push has created the session.
            let created = ContinuousClock.now + .seconds(10)
            while try request(service.port, "GET", "/sessions/fresh").status != 200, ContinuousClock.now < created {
                Thread.sleep(forTimeInterval: 0.01)
            }
            for (index, fragment) in fragments.enumerated() {
                try chunk(fragment)
                // Nothing of the next fragment is sent: the picture must come without it.
                let picture = try request(
                    service.port, "GET", "/sessions/fresh/frame/latest.jpg?after=\(index)&wait=5000")
                #expect(picture.status == 200, "picture \(index + 1) waited for the next fragment")
                #expect(picture.headers["X-Frame-Seq"] == "\(index + 1)")
                if picture.status != 200 { break }
            }
            try client.send("0\r\n\r\n")
            _ = client.readToEnd()
        }
    }

    /// A multipart answer's client that leaves early abandons the rest of its push: what the
    /// container stream had read ahead of the answer is not decoded into the next push.
    @Test func anAbandonedMultipartPushLeavesNothingForTheNext() throws {
        let ts = try ContainerFixtures.bytes("h264_320x240_aac.ts")
        try withService { service in
            let client = try RawClient(port: service.port, receiveBuffer: 16 << 10)
            try client.send(
                Array(
                    ("POST /sessions/ab/nalus?flush=true&format=yuv HTTP/1.1\r\nHost: x\r\nContent-Type: video/mp2t\r\n"
                        + "Accept: multipart/mixed\r\nContent-Length: \(ts.count)\r\n\r\n").utf8) + ts)
            let first = client.read(until: { find(Array("X-Frame-Seq: 2".utf8), in: $0) != nil })
            #expect(find(Array("X-Frame-Seq: 1".utf8), in: first) != nil, "no first part")
            client.close()
            let ended = eventually(timeout: .seconds(10)) {
                (try? jsonObject(try request(service.port, "GET", "/sessions/ab").body))?["uploading"] as? Bool == false
            }
            #expect(ended, "the abandoned push did not end")
            let next = try post(service.port, "/sessions/ab/nalus?flush=true", ts, headers: [("Content-Type", "video/mp2t")])
            #expect(next.status == 200)
            #expect(try jsonObject(next.body)["frames"] as? Int == 20, "\(String(decoding: next.body, as: UTF8.self))")
        }
    }

    /// Bad input never costs what was decoded: a flushed FLV that turns to noise answers its
    /// problem after every picture it had, also the ones its decoder held back (B-frames), and
    /// as multipart/mixed every one of them goes out before the problem part.
    @Test(arguments: [false, true])
    func aContainerThatBreaksKeepsEveryPictureBefore(multipart: Bool) throws {
        var generator = SplitMix64(seed: 11)
        let flv = try ContainerFixtures.bytes("h264_320x240.flv") + (0..<5000).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        try withService { service in
            var headers = [("Content-Type", "video/x-flv")]
            if multipart { headers.append(("Accept", "multipart/mixed")) }
            let response = try post(service.port, "/sessions/broken/nalus?flush=true&format=yuv", flv, headers: headers)
            if multipart {
                #expect(response.status == 200)
                let (parts, closed) = try parseMultipart(response.body, boundary: try boundary(of: response.headers["Content-Type"]))
                #expect(closed)
                #expect(parts.filter { $0.headers["Content-Type"] != "application/problem+json" }.count == 20)
                #expect(parts.last?.headers["Content-Type"] == "application/problem+json")
            } else {
                #expect(response.status == 422)
            }
            let counters = (try jsonObject(try request(service.port, "GET", "/sessions/broken").body))["counters"] as? [String: Any]
            #expect(counters?["framesDecoded"] as? Int == 20, "\(String(describing: counters))")
        }
    }
}
