import Decoding
import Foundation
import H264
import TestSupport
import Testing
import VideoCoding

@Suite(.enabled(if: TestSupport.ffmpegAvailable, "needs the ffmpeg CLI to make streams and references"), .timeLimit(.minutes(10)))
struct StreamDecoderTests {
    static let live = DecoderOptions.lowLatency(backend: .software)

    /// A stream with `x264Params`, optionally with SPS+PPS inserted before every picture
    /// (as some cameras send them), cut so it starts at the VCL NAL unit `vclIndex`.
    static func cutStream(_ name: String, _ x264Params: String, everyPicture: Bool, vclIndex: Int) throws -> URL {
        var bytes = try TestSupport.bytes(
            of: TestSupport.stream("gate-\(name)", size: "160x120", frames: 30, x264Params: x264Params))
        var units = AnnexBSplitter.split(bytes).map(NALUnit.init)
        if everyPicture {
            let sps = units.first { $0.type == .sps }!
            let pps = units.first { $0.type == .pps }!
            var withSets: [NALUnit] = []
            var previousWasHeader = false
            for unit in units {
                // A picture's first slice has first_mb_in_slice 0, coded as a single 1 bit.
                if unit.type.isVCL && !previousWasHeader && unit.bytes[1] & 0x80 != 0 { withSets += [sps, pps] }
                previousWasHeader = [.sps, .pps, .sei].contains(unit.type)
                withSets.append(unit)
            }
            units = withSets
        }
        let firstVCL = units.indices.filter { units[$0].type.isVCL }[vclIndex]
        bytes = units[firstVCL...].flatMap { [0, 0, 0, 1] + $0.bytes }
        let url = TestSupport.directory.appendingPathComponent("cut-\(name)-\(everyPicture)-\(vclIndex).h264")
        try Data(bytes).write(to: url)
        return url
    }

    static let gateCases: [(name: String, params: String, everyPicture: Bool, cuts: [Int])] = [
        ("closed-gop", "keyint=8:bframes=2", false, [1, 2, 4, 7, 9]),
        ("open-gop", "keyint=8:min-keyint=8:scenecut=0:bframes=2:open-gop=1", false, [1, 3, 6, 7, 8]),
        ("intra-refresh", "keyint=8:intra-refresh=1:bframes=0", false, [2, 9, 12]),
        ("intra-refresh", "keyint=8:intra-refresh=1:bframes=0", true, [2, 9, 12]),
    ]

    /// Emulating the CLI's probe, every cut decodes exactly like the CLI.
    @Test(arguments: 0..<4)
    func streamsCutMidGOPMatchTheCLI(_ caseIndex: Int) throws {
        let gateCase = Self.gateCases[caseIndex]
        for cut in gateCase.cuts {
            let file = try Self.cutStream(gateCase.name, gateCase.params, everyPicture: gateCase.everyPicture, vclIndex: cut)
            let reference = try TestSupport.ffmpegFrameMD5s(file)
            let decoded = try TestSupport.streamDecodeAll(TestSupport.bytes(of: file))
            #expect(decoded.frames.map(TestSupport.frameMD5) == reference, "\(gateCase.name) cut at VCL \(cut)")
        }
    }

    /// Live (no look-ahead), the gate drops the pictures before the keyframe and still matches
    /// the CLI whenever the stream carries the parameter sets the pictures need before them.
    @Test func liveGateDropsOnlyWhatLibavcodecWouldNotOutput() throws {
        let cases = [("closed-gop", "keyint=8:bframes=2", false, 2), ("open-gop", "keyint=8:min-keyint=8:scenecut=0:bframes=2:open-gop=1", false, 3)]
        for (name, params, everyPicture, cut) in cases {
            let file = try Self.cutStream(name, params, everyPicture: everyPicture, vclIndex: cut)
            let decoded = try TestSupport.streamDecodeAll(TestSupport.bytes(of: file), options: Self.live)
            #expect(decoded.frames.map(TestSupport.frameMD5) == (try TestSupport.ffmpegFrameMD5s(file)))
            #expect(decoded.decoder.counters.framesDroppedBeforeKeyframe > 0)
        }
        // Parameter sets on every picture and no IDR to start from: the pictures before the
        // recovery point are decoded (not output), since the recovered ones reference them.
        for cut in [2, 9, 12] {
            let file = try Self.cutStream("intra-refresh", "keyint=8:intra-refresh=1:bframes=0", everyPicture: true, vclIndex: cut)
            let decoded = try TestSupport.streamDecodeAll(TestSupport.bytes(of: file), options: Self.live)
            #expect(decoded.frames.map(TestSupport.frameMD5) == (try TestSupport.ffmpegFrameMD5s(file)))
        }
    }

    /// An x264 intra-refresh stream (one IDR, then a recovery point every 12 pictures) joined at
    /// its second recovery point, as a camera joined mid-stream: no IDR at all.
    static func joinedIntraRefresh() throws -> URL {
        let file = TestSupport.directory.appendingPathComponent("intra-refresh-joined.h264")
        if FileManager.default.fileExists(atPath: file.path) { return file }
        let whole = try TestSupport.bytes(
            of: TestSupport.stream("intra-refresh-whole", size: "176x144", frames: 40, x264Params: "keyint=12:intra-refresh=1:bframes=0"))
        let sequenceSets = AnnexBSplitter.split(whole).filter { $0.bytes[0] & 0x1F == 7 }
        guard sequenceSets.count >= 3 else { throw TestFailure("x264 repeats no SPS at its recovery points") }
        let partial = TestSupport.directory.appendingPathComponent("intra-refresh-joined.\(UUID().uuidString)")
        try Data([0, 0, 1] + whole[sequenceSets[1].streamOffset...]).write(to: partial)
        // Concurrent tests may make it too: the first one in stays.
        if (try? FileManager.default.moveItem(at: partial, to: file)) == nil { try? FileManager.default.removeItem(at: partial) }
        return file
    }

    /// A stream joined at an H.264 recovery point of intra refresh: libavcodec decodes its first
    /// pictures but shows none until the stream has recovered. Those hidden pictures still take
    /// their places in the numbering, so the first one shown has the number a decoder that
    /// started at the stream's IDR gives it, and a decode from the past (which starts at such a
    /// point) agrees with the live one. What is shown is what the CLI shows, and the hidden ones
    /// are counted as dropped.
    @Test(arguments: [Self.live, TestSupport.cliEquivalent])
    func picturesBeforeRecoveryKeepTheirPlacesInTheNumbering(_ options: DecoderOptions) throws {
        let file = try Self.joinedIntraRefresh()
        let joined = try TestSupport.bytes(of: file)
        let reference = try TestSupport.ffmpegFrameMD5s(file)

        let decoder = try StreamDecoder(options: options)
        var shown: [(number: UInt64, md5: String)] = []
        let collect: (DecodedFrame, UInt64) -> Void = { shown.append(($1, TestSupport.frameMD5($0))) }
        _ = joined.withUnsafeBytes { decoder.push($0, onPicture: collect) }
        _ = decoder.finish(onPicture: collect)

        #expect(shown.map(\.md5) == reference)
        let hidden = decoder.counters.framesDroppedBeforeKeyframe
        #expect(hidden > 0, "the first pictures after the recovery point are not shown")
        #expect(decoder.counters.framesDecoded == reference.count)
        // Every access unit has a number: the hidden ones come first, then the shown ones in order.
        #expect(shown.map(\.number) == Array(UInt64(hidden + 1)...UInt64(hidden + reference.count)))
        #expect(hidden + reference.count == decoder.counters.accessUnits)
    }

    /// With B-frames, a stream joined at a recovery point that ends before it recovered: the
    /// pictures libavcodec releases at the end (its reordering, its frame threads) are not
    /// shown either, as the CLI shows none. Whole, the joined stream is the CLI's.
    @Test(arguments: [1, 2, 3])
    func aStreamThatEndsBeforeRecoveryShowsNothing(_ threads: Int) throws {
        let whole = try TestSupport.bytes(
            of: TestSupport.stream("intra-refresh-b", size: "176x144", frames: 60, x264Params: "keyint=20:intra-refresh=1:bframes=2"))
        let units = AnnexBSplitter.split(whole)
        let sequenceSets = units.filter { $0.bytes[0] & 0x1F == 7 }
        try #require(sequenceSets.count >= 2)
        let joinedUnits = units.filter { $0.streamOffset >= sequenceSets[1].streamOffset }
        let pictures = joinedUnits.filter { [1, 5].contains($0.bytes[0] & 0x1F) }
        let annexB: ([AnnexBUnit]) -> [UInt8] = { units in units.flatMap { unit -> [UInt8] in [0, 0, 1] + Array(unit.bytes) } }
        let joined = annexB(joinedUnits)
        let truncated = annexB(joinedUnits.filter { $0.streamOffset < pictures[10].streamOffset })
        var options = TestSupport.cliEquivalent
        options.threads = threads
        for (name, bytes) in [("truncated", truncated), ("whole", joined)] as [(String, [UInt8])] {
            let file = TestSupport.directory.appendingPathComponent("intra-refresh-b-\(name).h264")
            try Data(bytes).write(to: file)
            let reference = try TestSupport.ffmpegFrameMD5s(file, threads: threads)
            let decoded = try TestSupport.streamDecodeAll(bytes, options: options)
            #expect(decoded.frames.map(TestSupport.frameMD5) == reference, "\(name), \(threads) threads")
            if name == "truncated" { #expect(reference.isEmpty) }
        }
    }

    /// Intra refresh has no picture that decodes alone: keyframes-only mode decodes such a
    /// stream whole (and shows what the CLI shows) instead of showing nothing.
    @Test func keyframesOnlyDecodesAnIntraRefreshStreamWhole() throws {
        let joined = try TestSupport.bytes(of: Self.joinedIntraRefresh())
        let reference = try TestSupport.ffmpegFrameMD5s(Self.joinedIntraRefresh())
        let decoded = try TestSupport.streamDecodeAll(joined, options: Self.live, keyframesOnly: true)
        #expect(decoded.frames.map(TestSupport.frameMD5) == reference)
        #expect(decoded.decoder.counters.framesSkippedNotKeyframe == 0)
        #expect(decoded.decoder.counters.framesDroppedBeforeKeyframe > 0)
    }

    @Test func countsWhatPassesThrough() throws {
        let file = try TestSupport.stream("counted", size: "64x48", frames: 12, x264Params: "keyint=6:bframes=1")
        let bytes = try TestSupport.bytes(of: file)
        let decoded = try TestSupport.streamDecodeAll(bytes, options: Self.live)
        let counters = decoded.decoder.counters
        let units = AnnexBSplitter.split(bytes)
        #expect(counters.bytes == bytes.count)
        #expect(counters.nalUnits["sps"] == 2 && counters.nalUnits["pps"] == 2)
        #expect(counters.nalUnits["idr"] == 2)
        #expect(counters.nalUnits.values.reduce(0, +) == units.count)
        #expect(counters.accessUnits == 12 && counters.framesDecoded == 12 && decoded.frames.count == 12)
        #expect(counters.decodeErrors == 0 && decoded.decoder.lastError == nil)
        #expect(decoded.decoder.format?.width == 64 && decoded.decoder.format?.height == 48)
    }

    @Test func bytesWithoutStartCodeEndAsInvalidData() throws {
        let decoder = try StreamDecoder(options: Self.live)
        let noise = (0..<5000).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) | 1 }  // never two zeros
        #expect(decoder.push(noise).errors.isEmpty)
        let ended = decoder.finish()
        #expect(ended.frames.isEmpty)
        #expect(ended.errors.map(\.code) == [.invalidData])
        #expect(ended.errors.first?.message.contains("no start code in 5000 bytes") == true)
        // A real stream afterwards decodes, and garbage in front of it is reported once.
        let file = try TestSupport.stream("after-noise", size: "64x48", frames: 3, x264Params: "keyint=3")
        let stream = try TestSupport.bytes(of: file)
        var frames = decoder.push([9, 9, 9] + stream).frames
        let second = decoder.finish()
        frames += second.frames
        #expect(frames.count == 3)
        #expect(second.errors.map(\.message) == ["3 bytes that belong to no NAL unit were skipped"])
    }

    @Test func keyframesOnlyDecodesEachKeyframeAtOnce() throws {
        let file = try TestSupport.stream("keyframes", size: "96x64", frames: 20, x264Params: "keyint=5:bframes=2:b-adapt=0")
        let bytes = try TestSupport.bytes(of: file)
        let all = try TestSupport.streamDecodeAll(bytes, options: Self.live).frames
        let decoder = try StreamDecoder(options: Self.live, keyframesOnly: true)
        var keyframes: [DecodedFrame] = []
        for unit in AnnexBSplitter.split(bytes) {
            let output = decoder.push([0, 0, 0, 1] + unit.bytes)
            // A keyframe comes out as soon as the unit after it shows where it ends.
            keyframes += output.frames
        }
        let beforeFinish = keyframes.count
        keyframes += decoder.finish().frames
        #expect(beforeFinish == 4)
        #expect(keyframes.count == 4)
        #expect(keyframes.allSatisfy { $0.isKeyframe })
        #expect(keyframes.map(TestSupport.frameMD5) == all.filter(\.isKeyframe).map(TestSupport.frameMD5))
        // The units skipped keep their places: each keyframe has the index a full decode gives it.
        #expect(keyframes.map(\.accessUnitIndex) == all.filter(\.isKeyframe).map(\.accessUnitIndex))
        #expect(keyframes.map(\.accessUnitIndex) == [0, 5, 10, 15])
        #expect(decoder.counters.framesSkippedNotKeyframe == 16)

        // Joined mid-GOP (a camera's stream taken up late): the pictures before the first
        // keyframe are dropped the same way in both modes, so the numbers still agree.
        let units = AnnexBSplitter.split(bytes)
        let parameterSets = units.prefix { $0.bytes.first.map { $0 & 0x1F == 7 || $0 & 0x1F == 8 } ?? false }
        let slices = units.dropFirst(parameterSets.count)
        let late = (Array(parameterSets) + slices.dropFirst(2)).flatMap { [0, 0, 0, 1] + $0.bytes }
        let lateAll = try TestSupport.streamDecodeAll(late, options: Self.live).frames
        let lateKeyframes = pushAll(late, into: try StreamDecoder(options: Self.live, keyframesOnly: true)).frames
        #expect(!lateKeyframes.isEmpty)
        #expect(lateKeyframes.map(\.accessUnitIndex) == lateAll.filter(\.isKeyframe).map(\.accessUnitIndex))
    }

    /// An I picture that is not a keyframe (x264's at a scene cut inside its minimum GOP, with
    /// B-frames after it) is skipped, not decoded: its number, its place in the GOP's output
    /// order, is known only to a decoder of the whole GOP (libavcodec gave no picture of it
    /// either, its references missing).
    @Test func keyframesOnlySkipsIntraPicturesThatAreNotKeyframes() throws {
        let url = TestSupport.directory.appendingPathComponent("scene-cut.h264")
        if !FileManager.default.fileExists(atPath: url.path) {
            let partial = TestSupport.directory.appendingPathComponent("scene-cut.\(UUID().uuidString).h264")
            _ = try runProgram(TestSupport.ffmpegPath, [
                "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                "testsrc2=s=96x64:r=25:d=0.4 [a]; mandelbrot=s=96x64:r=25,trim=end_frame=10 [b]; [a][b] concat [out0]",
                "-c:v", "libx264", "-x264-params", "keyint=50:min-keyint=30:bframes=2", "-f", "h264", partial.path,
            ])
            if (try? FileManager.default.moveItem(at: partial, to: url)) == nil { try? FileManager.default.removeItem(at: partial) }
        }
        let bytes = try TestSupport.bytes(of: url)
        let all = try TestSupport.streamDecodeAll(bytes, options: Self.live).frames
        #expect(all.contains { $0.pictureType == .i && !$0.isKeyframe }, "the stream has an I picture that is no keyframe")
        let decoder = try StreamDecoder(options: Self.live, keyframesOnly: true)
        let keyframes = pushAll(bytes, into: decoder).frames
        #expect(keyframes.map(\.accessUnitIndex) == all.filter(\.isKeyframe).map(\.accessUnitIndex))
        #expect(keyframes.map(TestSupport.frameMD5) == all.filter(\.isKeyframe).map(TestSupport.frameMD5))
        #expect(decoder.counters.framesSkippedNotKeyframe == all.count - keyframes.count)
    }

    @Test func spsAboveTheLimitIsRejectedBeforeDecoding() throws {
        let file = try TestSupport.stream("too-large", size: "320x240", frames: 6, x264Params: "keyint=3")
        var options = Self.live
        options.sizeLimit = PictureSizeLimit(maxWidth: 1920, maxHeight: 1080, maxPixels: 320 * 239)
        let decoded = try TestSupport.streamDecodeAll(TestSupport.bytes(of: file), options: options)
        #expect(decoded.frames.isEmpty)
        #expect(decoded.decoder.counters.framesRejectedTooLarge == 6)
        #expect(decoded.decoder.counters.framesDecoded == 0 && decoded.decoder.counters.decodeErrors == 1)
        #expect(decoded.errors.map(\.code) == [.pictureTooLarge])  // once per SPS, not per picture
        #expect(decoded.decoder.lastError?.code == .pictureTooLarge)
        #expect(decoded.decoder.format?.width == 320)
    }

    @Test func oversizedNALUnitsAreCountedErrors() throws {
        let file = try TestSupport.stream("nal-cap", size: "160x120", frames: 10, x264Params: "keyint=5")
        let decoded = try TestSupport.streamDecodeAll(TestSupport.bytes(of: file), options: Self.live, maxNALBytes: 600)
        #expect(decoded.errors.contains { $0.code == .nalTooLarge })
        #expect(decoded.decoder.counters.decodeErrors >= decoded.errors.count)
    }

    @Test func finishEndsTheStreamAndTheNextOneDecodes() throws {
        let file = try TestSupport.stream("bframes", size: "320x240", frames: 20, x264Params: "keyint=10:bframes=3:b-adapt=0")
        let bytes = try TestSupport.bytes(of: file)
        let reference = try TestSupport.ffmpegFrameMD5s(file)
        let decoder = try StreamDecoder(options: Self.live)
        for _ in 0..<2 {
            let frames = decoder.push(bytes).frames + decoder.finish().frames
            #expect(frames.map(TestSupport.frameMD5) == reference)
        }
        #expect(decoder.counters.framesDecoded == 2 * reference.count)
    }

    @Test func resolutionChangeUpdatesTheFormat() throws {
        let small = try TestSupport.stream("res-small", size: "64x48", frames: 6, x264Params: "keyint=3:bframes=1")
        let large = try TestSupport.stream("res-large", size: "160x120", frames: 6, x264Params: "keyint=3:bframes=1")
        let decoder = try StreamDecoder(options: Self.live)
        let first = decoder.push(try TestSupport.bytes(of: small))
        #expect(decoder.format?.width == 64)
        let rest = decoder.push(try TestSupport.bytes(of: large)).frames + decoder.finish().frames
        #expect(decoder.format?.width == 160 && decoder.format?.height == 120)
        #expect((first.frames + rest).map(\.width) == Array(repeating: 64, count: 6) + Array(repeating: 160, count: 6))
    }

    @Test func garbageIsSurvivedAndDecodingResumesAtTheNextIDR() throws {
        let stream = try TestSupport.bytes(of: TestSupport.stream("bframes", size: "320x240", frames: 20, x264Params: "keyint=10:bframes=3:b-adapt=0"))
        var generator = SplitMix64(seed: 9)
        let garbage = (0..<20_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let input = garbage + stream.prefix(stream.count / 3) + garbage + stream
        let file = TestSupport.directory.appendingPathComponent("stream-garbage.h264")
        try Data(input).write(to: file)
        let decoded = try TestSupport.streamDecodeAll(input)
        #expect(decoded.frames.map(TestSupport.frameMD5) == (try TestSupport.ffmpegFrameMD5s(file, threads: 1)))
        let live = try TestSupport.streamDecodeAll(input, options: Self.live)
        let reference = try TestSupport.ffmpegFrameMD5s(H264DecoderTests.bFrameStream())
        #expect(live.frames.suffix(10).map(TestSupport.frameMD5) == Array(reference.suffix(10)))
    }
}

/// Which codec a stream is: detected from its first parameter set, stated for the stream, or
/// said by a push; a parameter set that contradicts what was stated or said is refused, and
/// nothing of the push that carries it reaches a decoder.
@Suite(.timeLimit(.minutes(10))) struct CodecStatementTests {
    @Test func theFirstParameterSetTellsTheCodec() throws {
        for (file, codec) in [("main_bframes_176x144.265", VideoCodec.h265), ("baseline_176x144.264", .h264)] {
            let decoder = try StreamDecoder(options: .lowLatency(backend: .software))
            #expect(decoder.codec == nil)
            let output = pushAll(try Fixtures.bytes(file), into: decoder)
            #expect(decoder.codec == codec && output.errors.isEmpty)
            #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5(file))
        }
    }

    /// A push that says H.265 but carries H.264: refused at its first parameter set, no unit of
    /// it read or decoded; the same decoder then takes a push that says nothing.
    @Test func aPushThatContradictsWhatItSaysIsRefused() throws {
        let decoder = try StreamDecoder(options: .lowLatency(backend: .software))
        decoder.beginPush(saying: .h265)
        let refused = decoder.push(try Fixtures.bytes("baseline_176x144.264"))
        #expect(refused.frames.isEmpty)
        #expect(refused.errors.map(\.code) == [.codecMismatch])
        #expect(refused.errors.first?.message.contains("says it is H.265") == true)
        #expect(refused.errors.first?.message.contains("H.264 parameter sets") == true)
        #expect(decoder.codec == nil && decoder.counters.nalUnits.isEmpty && decoder.counters.accessUnits == 0)

        decoder.abandonIncompleteAccessUnit()
        decoder.beginPush(saying: nil)
        let accepted = pushAll(try Fixtures.bytes("baseline_176x144.264"), into: decoder)
        #expect(decoder.codec == .h264 && accepted.errors.isEmpty, "\(accepted.errors)")
        #expect(TestSupport.rawMD5(accepted.frames) == Fixtures.md5("baseline_176x144.264"))
    }

    /// A push cut inside a picture (a phone's connection dropped), then resumed at the access
    /// unit the session had not counted yet: the pictures are the stream's own, none damaged,
    /// none extra, for streams of one slice and of several slices per picture, both codecs.
    @Test(arguments: ["slices4_320x240.264", "slices4_320x240.265", "main_bframes_176x144.264", "main_bframes_176x144.265"])
    func aPushCutInsideAPictureResumesAtTheNextAccessUnitExactly(file: String) throws {
        let bytes = try Fixtures.bytes(file)
        let codec: VideoCodec = file.hasSuffix(".265") ? .h265 : .h264
        let reference = try StreamDecoder(options: .lowLatency(backend: .software))
        let whole = pushAll(bytes, into: reference)
        // Where each access unit starts, from a reader of the stream as a whole.
        let ingest = try AccessUnitIngest(codec: codec, live: true)
        var starts: [Int] = []
        _ = bytes.withUnsafeBytes { raw in
            ingest.push(raw) { unit in
                // Its first unit's start code: four bytes or three.
                let first = unit.unit.nalUnits[0].streamOffset
                starts.append(first >= 4 && bytes[(first - 4)..<first] == [0, 0, 0, 1] ? first - 4 : first - 3)
                return []
            }
        }
        let cutUnit = starts.count / 2
        // A third of the way into that access unit's bytes: inside its picture.
        let cut = starts[cutUnit] + (starts[cutUnit + 1] - starts[cutUnit]) / 3

        let decoder = try StreamDecoder(options: .lowLatency(backend: .software))
        var frames = decoder.push(Array(bytes[..<cut])).frames
        decoder.abandonIncompleteAccessUnit()
        #expect(decoder.counters.accessUnits == cutUnit, "the broken picture is not counted")
        let resumed = pushAll(Array(bytes[starts[decoder.counters.accessUnits]...]), into: decoder)
        frames += resumed.frames
        #expect(resumed.errors.isEmpty, "\(resumed.errors)")
        #expect(frames.count == whole.frames.count)
        #expect(TestSupport.rawMD5(frames) == TestSupport.rawMD5(whole.frames))
    }

    /// Pictures with no parameter sets (an app that kept its avcC aside), or with parameter sets
    /// and no keyframe, end their stream in `no_decodable_picture` that says which, not in an
    /// empty success.
    @Test(arguments: ["baseline_176x144.264", "main_bframes_176x144.265"])
    func aStreamThatNeverStartsSaysWhy(file: String) throws {
        let units = AnnexBSplitter.split(try Fixtures.bytes(file))
        let h265 = file.hasSuffix(".265")
        let isParameterSet: (AnnexBUnit) -> Bool = { unit in
            let header = unit.bytes[0]
            return h265 ? (32...34).contains(Int(header >> 1) & 0x3F) : [7, 8].contains(header & 0x1F)
        }
        let isKeyframe: (AnnexBUnit) -> Bool = { unit in
            let header = unit.bytes[0]
            return h265 ? (16...23).contains(Int(header >> 1) & 0x3F) : header & 0x1F == 5
        }
        func annexB(_ units: [AnnexBUnit]) -> [UInt8] { Array(units.map { [0, 0, 0, 1] + $0.bytes }.joined()) }
        for (kept, expected) in [
            (units.filter { !isParameterSet($0) }, h265 ? "and no VPS, SPS and PPS to decode them with" : "and no SPS and PPS"),
            (units.filter { !isKeyframe($0) }, "and no keyframe"),
        ] {
            let decoder = try StreamDecoder(options: .lowLatency(backend: .software), codec: h265 ? .h265 : .h264)
            let output = pushAll(annexB(kept), into: decoder)
            #expect(output.frames.isEmpty)
            let error = try #require(output.errors.last)
            #expect(error.code == .noDecodablePicture)
            #expect(error.message.contains(expected), "\(error.message)")
        }
        // The whole stream ends with no such error.
        let whole = pushAll(annexB(units), into: try StreamDecoder(options: .lowLatency(backend: .software)))
        #expect(whole.errors.isEmpty && !whole.frames.isEmpty)
    }

    /// A stream of nothing but layers above the base layer (an MVC or SVC stream's other views)
    /// ends in `unsupported_stream`, not an empty success; one whose base layer decodes does not.
    @Test func onlyOtherLayersIsAnErrorOfTheStream() throws {
        let units = AnnexBSplitter.split(try Fixtures.bytes("baseline_176x144.264"))
        let parameterSets = units.prefix { $0.bytes.first.map { $0 & 0x1F == 7 || $0 & 0x1F == 8 } ?? false }
        #expect(parameterSets.count == 2)
        let extensionSlice: [UInt8] = [0, 0, 0, 1, 0x74, 0x80, 0x12, 0x34, 0x56, 0x78]  // type 20
        let onlyExtensions = parameterSets.flatMap { [0, 0, 0, 1] + $0.bytes } + Array((0..<3).map { _ in extensionSlice }.joined())
        let decoder = try StreamDecoder(options: .lowLatency(backend: .software))
        var errors = decoder.push(onlyExtensions).errors
        errors += decoder.finish().errors
        #expect(errors.map(\.code) == [.unsupportedStream], "\(errors)")
        #expect(errors.first?.message.contains("no picture of the base layer") == true)

        // Cut before its first IDR: base-layer slices, all dropped before a keyframe, are not
        // "no base layer".
        let pSlices = units.filter { $0.bytes.first.map { $0 & 0x1F == 1 } ?? false }
        #expect(!pSlices.isEmpty)
        let cut = parameterSets.flatMap { [0, 0, 0, 1] + $0.bytes } + pSlices.flatMap { [0, 0, 0, 1] + $0.bytes + extensionSlice }
        let cutDecoder = try StreamDecoder(options: .lowLatency(backend: .software))
        var cutErrors = cutDecoder.push(cut).errors
        cutErrors += cutDecoder.finish().errors
        #expect(!cutErrors.contains { $0.code == .unsupportedStream }, "\(cutErrors)")

        let withBaseLayer = units.flatMap { [0, 0, 0, 1] + $0.bytes + extensionSlice }
        let both = try StreamDecoder(options: .lowLatency(backend: .software))
        let output = pushAll(withBaseLayer, into: both)
        #expect(!output.frames.isEmpty && output.errors.isEmpty, "\(output.errors)")
    }

    /// A container track said to be H.264 whose samples carry H.265: the refusal names the
    /// track, not the push, which said nothing.
    @Test func aTrackThatContradictsItsCodecIsNamedAsTheTrack() throws {
        let decoder = try StreamDecoder(options: .lowLatency(backend: .software))
        decoder.beginPush(saying: nil)
        let track = SampleDescription(codec: .h264, configuration: [], samplesAreAccessUnits: true)
        let errors = try Fixtures.bytes("main_bframes_176x144.265").withUnsafeBytes { bytes in
            decoder.push(sample: bytes, described: track) { _ in }
        }
        #expect(errors.map(\.code) == [.codecMismatch])
        #expect(errors.first?.message.contains("the container's video track is H.264 but carries H.265") == true, "\(errors)")
        #expect(errors.first?.message.contains("says") == false, "\(errors)")
    }

    /// A stated codec holds across streams; a detected one only within its stream.
    @Test func aStatedCodecHoldsAcrossStreamsADetectedOneWithinItsStream() throws {
        let stated = try StreamDecoder(options: .lowLatency(backend: .software), codec: .h265)
        _ = stated.finish()
        #expect(stated.push(try Fixtures.bytes("baseline_176x144.264")).errors.map(\.code) == [.codecMismatch])

        let detected = try StreamDecoder(options: .lowLatency(backend: .software))
        #expect(!pushAll(try Fixtures.bytes("baseline_176x144.264"), into: detected).frames.isEmpty)
        let next = pushAll(try Fixtures.bytes("main_bframes_176x144.265"), into: detected)
        #expect(detected.codec == .h265 && next.errors.isEmpty)
        #expect(TestSupport.rawMD5(next.frames) == Fixtures.md5("main_bframes_176x144.265"))
    }
}
