import Decoding
import Foundation
import Synchronization
import TestSupport
import Testing
import VideoCoding

/// H.265 through the whole `StreamDecoder`: which codec a stream is, where decoding starts
/// (RASL pictures, pictures before the first IRAP), other layers, another codec's parameter
/// sets, and parameter sets the decoder must refuse before anything is decoded. Every fixture
/// decoding to its manifest MD5 is `StreamDecoderConformanceTests`.
@Suite(.enabled(if: TestSupport.ffmpegAvailable, "needs the ffmpeg CLI for references"), .timeLimit(.minutes(10)))
struct H265StreamDecoderTests {
    static let live = DecoderOptions.lowLatency(backend: .software)

    static func bytes(_ name: String) throws -> [UInt8] { try Fixtures.bytes(name) }

    static func manifestMD5(_ name: String) throws -> String { try #require(Fixtures.md5(name)) }

    /// Writes `bytes` where the ffmpeg CLI can read them.
    static func file(_ bytes: [UInt8], _ name: String) throws -> URL {
        let url = TestSupport.directory.appendingPathComponent("\(name)-\(UUID().uuidString).265")
        try Data(bytes).write(to: url)
        return url
    }

    /// open_gop_176x144.265 from its third VPS on: it starts at a CRA (the stream's IRAP
    /// pictures are IDR, CRA, CRA, CRA) whose three RASL pictures refer to pictures before it.
    static func fromSecondCRA() throws -> [UInt8] {
        let units = HEVCEdits.units(try bytes("open_gop_176x144.265"))
        let parameterSetStarts = units.indices.filter { HEVCEdits.type(units[$0]) == 32 }
        return HEVCEdits.stream(Array(units[parameterSetStarts[2]...]))
    }

    /// The same stream cut mid-GOP after the first CRA's RASL pictures, its parameter sets in
    /// front: four trailing pictures, then the next CRA and its three RASL pictures.
    static func midGOP() throws -> [UInt8] {
        let units = HEVCEdits.units(try bytes("open_gop_176x144.265"))
        let cra = try #require(units.firstIndex { HEVCEdits.type($0) == 21 })
        let trailing = try #require(units[cra...].firstIndex { [0, 1].contains(HEVCEdits.type($0)) })
        return HEVCEdits.stream(Array(units.prefix(3)) + Array(units[trailing...]))
    }

    // MARK: - Which codec

    @Test(arguments: [("main_bframes_176x144.265", VideoCodec.h265), ("main_bframes_176x144.264", .h264)])
    func theCodecIsDetectedFromTheFirstParameterSet(_ name: String, _ codec: VideoCodec) throws {
        let decoded = try TestSupport.streamDecodeAll(Self.bytes(name), options: Self.live)
        #expect(decoded.decoder.codec == codec)
        #expect(!decoded.decoder.codecIsStated)
        #expect(decoded.decoder.format?.codec == codec)
        #expect(TestSupport.rawMD5(decoded.frames) == (try Self.manifestMD5(name)))
    }

    /// A stated codec, then the other codec's parameter sets: refused, and nothing of that push
    /// reaches the decoder; what was decoded before stays.
    @Test(arguments: [
        (VideoCodec.h264, "baseline_176x144.264", "main_bframes_176x144.265"),
        (.h265, "main_bframes_176x144.265", "baseline_176x144.264"),
    ])
    func aStatedCodecRefusesTheOthersParameterSets(_ codec: VideoCodec, _ own: String, _ other: String) throws {
        let decoder = try StreamDecoder(options: Self.live, codec: codec)
        #expect(decoder.codec == codec && decoder.codecIsStated)
        let first = decoder.push(try Self.bytes(own))
        #expect(first.errors.isEmpty)
        let refused = decoder.push(try Self.bytes(other))
        #expect(refused.errors.map(\.code) == [.codecMismatch])
        #expect(refused.errors.first?.message.contains("(stated)") == true)
        let ended = decoder.finish()
        // The own stream's last pictures come out as the push and the end complete them; not
        // one of the other's.
        let frames = first.frames + refused.frames + ended.frames
        #expect(TestSupport.rawMD5(frames) == (try Self.manifestMD5(own)))
        #expect(decoder.counters.framesDecoded == frames.count)
        #expect(decoder.codec == codec)
    }

    /// A detected H.265 stream's first picture, then an H.264 stream: its first parameter set
    /// ends the picture, which makes the H.265 stream one with a picture, so the H.264 stream is
    /// refused rather than started (with the H.265 picture lost). The same whether the set
    /// arrives whole or its first bytes end a piece; and whether its header reads in H.265 as a
    /// unit of another layer (an SPS, `0x67`) or as a base-layer unit that ends an access unit
    /// anyway (a PPS with pic_parameter_set_id 31, `0x68 0x04`).
    @Test(arguments: [false, true], [false, true])
    func anotherCodecsParameterSetEndsThePictureBeforeItHoweverItArrives(_ cutInsideTheSet: Bool, _ ppsFirst: Bool) throws {
        let units = HEVCEdits.units(try Self.bytes("main_bframes_176x144.265"))
        let firstSlice = try #require(units.firstIndex { HEVCEdits.type($0) < 32 })
        let picture = HEVCEdits.stream(Array(units[...firstSlice]))
        let h264PPS: [UInt8] = [0x68, 0x04, 0x08, 0x80]
        let stream = picture + (ppsFirst ? HEVCEdits.stream([h264PPS]) : []) + (try Self.bytes("baseline_176x144.264"))
        let decoder = try StreamDecoder(options: Self.live)
        let cut = cutInsideTheSet ? picture.count + 4 + 3 : stream.count
        let pushed = [decoder.push(Array(stream[..<cut])), decoder.push(Array(stream[cut...])), decoder.finish()]
        #expect(pushed.flatMap(\.errors).map(\.code) == [.codecMismatch])
        #expect(pushed.flatMap(\.frames).count == 1)
        #expect(decoder.codec == .h265 && decoder.counters.framesDecoded == 1)
    }

    /// Stated from the start: not a picture of the other codec's stream is decoded.
    @Test func aStreamOfTheOtherCodecThanStatedDecodesNothing() throws {
        let decoder = try StreamDecoder(options: Self.live, codec: .h264)
        let output = decoder.push(try Self.bytes("open_gop_176x144.265"))
        let ended = decoder.finish()
        #expect(output.errors.map(\.code) == [.codecMismatch])
        #expect(output.frames.isEmpty && ended.frames.isEmpty)
        #expect(decoder.counters.framesDecoded == 0 && decoder.counters.accessUnits == 0)
    }

    /// Start codes, but no parameter set of either codec (the slices of an H.265 fixture
    /// without its VPS, SPS and PPS): unknown_codec once, at the end of the stream.
    @Test func bytesOfNeitherCodecEndAsUnknownCodec() throws {
        let slices = HEVCEdits.units(try Self.bytes("open_gop_176x144.265")).filter { HEVCEdits.type($0) < 32 }
        let decoder = try StreamDecoder(options: Self.live)
        var errors = decoder.push(HEVCEdits.stream(slices)).errors
        #expect(errors.isEmpty)
        let ended = decoder.finish()
        errors += ended.errors
        #expect(errors.map(\.code) == [.unknownCodec])
        #expect(ended.frames.isEmpty && decoder.codec == nil)
        #expect(decoder.counters.nalUnits["unrecognized"] == slices.count)
    }

    // MARK: - Where decoding starts

    /// A stream that starts at a CRA: its RASL pictures refer to pictures before it, so they
    /// are skipped and counted (libavcodec skips them too), live and emulating the CLI alike.
    @Test func aCRAStartSkipsAndCountsItsRASLPictures() throws {
        let bytes = try Self.fromSecondCRA()
        let reference = try TestSupport.ffmpegFrameMD5s(Self.file(bytes, "cra-start"), format: "hevc")
        for options in [TestSupport.cliEquivalent, Self.live] {
            let decoded = try TestSupport.streamDecodeAll(bytes, options: options, pieces: 1...700)
            #expect(decoded.decoder.counters.framesSkippedLeading == 3)
            #expect(decoded.decoder.counters.framesDroppedBeforeKeyframe == 0)
            #expect(decoded.frames.map(TestSupport.frameMD5) == reference)
            #expect(decoded.frames.count == 14 && decoded.errors.isEmpty)
        }
    }

    /// Cut mid-GOP: the CLI (and frametap decode, emulating it) outputs the four pictures before
    /// the CRA, decoded against references libavcodec makes up; live, they are dropped and
    /// counted, and the pictures from the CRA on are the CLI's.
    @Test func picturesBeforeTheFirstIRAPAreTheCLIsOrDroppedLive() throws {
        let bytes = try Self.midGOP()
        let reference = try TestSupport.ffmpegFrameMD5s(Self.file(bytes, "mid-gop"), format: "hevc")
        #expect(reference.count == 18)
        let cli = try TestSupport.streamDecodeAll(bytes, pieces: 1...700)
        #expect(cli.frames.map(TestSupport.frameMD5) == reference)
        #expect(cli.decoder.counters.framesDroppedBeforeKeyframe == 0)
        #expect(cli.decoder.counters.framesSkippedLeading == 3)

        let live = try TestSupport.streamDecodeAll(bytes, options: Self.live, pieces: 1...700)
        #expect(live.decoder.counters.framesDroppedBeforeKeyframe == 4)
        #expect(live.decoder.counters.framesSkippedLeading == 3)
        #expect(live.frames.map(TestSupport.frameMD5) == Array(reference.suffix(14)))
    }

    /// x265 with an intra picture every 12 that is not an IRAP (a TRAIL_R of I slices), each
    /// picture referring only to the one before it, so decoding from any of those intra pictures
    /// is exact; joined at its second one, with a recovery point SEI (recovery_poc_cnt 3) in
    /// front of each: no IRAP at all, as a camera that marks its entry points with the SEI.
    static func joinedAtRecoveryPoints(pocCount: Int = 3) throws -> [UInt8] {
        let url = TestSupport.directory.appendingPathComponent("x265-intra-not-irap.265")
        if !FileManager.default.fileExists(atPath: url.path) {
            let partial = TestSupport.directory.appendingPathComponent("x265-intra-not-irap.\(UUID().uuidString).265")
            _ = try runProgram(TestSupport.ffmpegPath, [
                "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=176x144:rate=30", "-frames:v", "48",
                // Forced intra pictures before min-keyint are not keyframes: x265 codes them as TRAIL_R.
                "-force_key_frames", "expr:eq(mod(n,12),0)", "-c:v", "libx265", "-preset", "ultrafast", "-x265-params",
                "keyint=1000:min-keyint=1000:scenecut=0:bframes=0:ref=1:open-gop=0:log-level=error:pools=1:frame-threads=1",
                "-f", "hevc", partial.path,
            ])
            if (try? FileManager.default.moveItem(at: partial, to: url)) == nil { try? FileManager.default.removeItem(at: partial) }
        }
        let whole = try TestSupport.bytes(of: url)
        return HEVCEdits.joinedAtRecoveryPoints(whole, firstPicture: 12, every: 12, pocCount: pocCount)
    }

    /// Decoding starts at a recovery point SEI when no IRAP comes. Its first pictures in output
    /// order are not shown (recovery_poc_cnt of them, also when that reaches past the next
    /// recovery point) but keep their numbers; the rest are the CLI's (which shows every
    /// picture, emulated as such). Keyframes-only mode decodes such a stream whole, as none of
    /// its GOPs' pictures is shown alone.
    @Test(arguments: [3, 15])
    func aStreamWithoutIRAPStartsAtItsFirstRecoveryPoint(_ pocCount: Int) throws {
        let bytes = try Self.joinedAtRecoveryPoints(pocCount: pocCount)
        let reference = try TestSupport.ffmpegFrameMD5s(Self.file(bytes, "recovery-points-\(pocCount)"), format: "hevc")
        #expect(reference.count == 36)
        let cli = try TestSupport.streamDecodeAll(bytes, pieces: 1...700)
        #expect(cli.frames.map(TestSupport.frameMD5) == reference)

        for keyframesOnly in [false, true] {
            let decoder = try StreamDecoder(options: Self.live, keyframesOnly: keyframesOnly)
            var shown: [(number: UInt64, md5: String)] = []
            let collect: (DecodedFrame, UInt64) -> Void = { shown.append(($1, TestSupport.frameMD5($0))) }
            _ = bytes.withUnsafeBytes { decoder.push($0, onPicture: collect) }
            _ = decoder.finish(onPicture: collect)
            #expect(shown.map(\.md5) == Array(reference.dropFirst(pocCount)), "keyframes only: \(keyframesOnly)")
            #expect(shown.map(\.number) == Array(UInt64(pocCount + 1)...36), "keyframes only: \(keyframesOnly)")
            #expect(decoder.counters.framesDroppedBeforeKeyframe == pocCount)
            #expect(decoder.counters.framesSkippedNotKeyframe == 0)
        }
    }

    /// Joined without parameter sets in front: the CLI's probe finds the first ones further on
    /// and its decoder starts with them, so the pictures before them decode too.
    @Test func picturesBeforeTheFirstParameterSetsAreTheCLIs() throws {
        let units = HEVCEdits.units(try Self.bytes("open_gop_176x144.265"))
        let pictureStarts = units.indices.filter { HEVCEdits.type(units[$0]) < 32 && units[$0][2] & 0x80 != 0 }
        for cut in [1, 3, 6] {
            let bytes = HEVCEdits.stream(Array(units[pictureStarts[cut]...]))
            let reference = try TestSupport.ffmpegFrameMD5s(Self.file(bytes, "no-sets-\(cut)"), format: "hevc")
            let decoded = try TestSupport.streamDecodeAll(bytes, pieces: 1...700)
            #expect(decoded.frames.map(TestSupport.frameMD5) == reference, "cut at picture \(cut)")
        }
    }

    // MARK: - Other layers

    /// Every unit followed by a copy of it on layer 1 (as a scalable or multiview stream's
    /// enhancement layer would follow its base): the copies are counted and left out, and the
    /// pictures are the base layer's, as libavcodec decodes them.
    @Test func unitsOfOtherLayersAreCountedAndLeftOut() throws {
        let name = "main_bframes_176x144.265"
        let units = HEVCEdits.units(try Self.bytes(name))
        let layered = HEVCEdits.stream(units.flatMap { [$0, HEVCEdits.onLayer($0, 1)] })
        let decoded = try TestSupport.streamDecodeAll(layered, pieces: 1...900)
        #expect(decoded.decoder.counters.unitsOutsideBaseLayer == units.count)
        #expect(TestSupport.rawMD5(decoded.frames) == (try Self.manifestMD5(name)))
        #expect(decoded.errors.isEmpty)
        let reference = try TestSupport.ffmpegFrameMD5s(Self.file(layered, "layered"), format: "hevc")
        #expect(decoded.frames.map(TestSupport.frameMD5) == reference)
    }

    // MARK: - Parameter sets refused before decoding

    /// An SPS the decoder cannot take is refused with a stable code before any picture of it
    /// reaches libavcodec: no decoder is even opened (the codec is detected, so the decoder
    /// would open with the first picture).
    @Test(arguments: [
        (HEVCEdits.SPSChange(bitDepthLuma: 17), DecodeError.Code.invalidData, "bit_depth_luma_minus8 = 9"),
        (HEVCEdits.SPSChange(chromaFormatIdc: 4), .invalidData, "chroma_format_idc = 4"),
        (HEVCEdits.SPSChange(width: 70_000), .invalidData, "pic_width_in_luma_samples"),
        (HEVCEdits.SPSChange(bitDepthLuma: 14), .unsupportedStream, "14-bit luma"),
        (HEVCEdits.SPSChange(bitDepthLuma: 16), .unsupportedStream, "16-bit luma"),
        (HEVCEdits.SPSChange(bitDepthLuma: 10, bitDepthChroma: 8), .unsupportedStream, "10-bit luma and 8-bit chroma"),
        (HEVCEdits.SPSChange(width: 16384, height: 16384), .pictureTooLarge, "16384x16384"),
    ])
    func aBadOrUnsupportedSPSIsRefusedBeforeAnyDecoder(
        _ change: HEVCEdits.SPSChange, _ code: DecodeError.Code, _ message: String
    ) throws {
        let bytes = HEVCEdits.changingSPS(try Self.bytes("main_bframes_176x144.265"), change)
        let factory = CountingDecoderFactory()
        let decoder = try StreamDecoder(options: Self.live, factory: factory)
        let errors = decoder.push(bytes).errors + decoder.finish().errors
        #expect(errors.map(\.code) == [code])  // once per SPS, not once per picture
        #expect(errors.first?.message.contains(message) == true, "\(errors)")
        #expect(decoder.counters.framesDecoded == 0)
        #expect(decoder.counters.framesRejectedTooLarge + decoder.counters.framesDroppedBeforeKeyframe == 25)
        #expect(factory.decodersMade == 0)
        #expect(decoder.codec == .h265)
    }

    /// The same edit that keeps a depth libavcodec decodes decodes like the ffmpeg CLI: the
    /// edits themselves leave the stream intact.
    @Test func aDecodableRewrittenSPSDecodesLikeTheCLI() throws {
        let bytes = HEVCEdits.changingSPS(try Self.bytes("main_bframes_176x144.265"), .init(bitDepthLuma: 12))
        let reference = try TestSupport.ffmpegFrameMD5s(Self.file(bytes, "depth12"), format: "hevc")
        let decoded = try TestSupport.streamDecodeAll(bytes)
        #expect(decoded.frames.count == 25 && decoded.frames.first?.pixelFormatName == "yuv420p12le")
        #expect(decoded.frames.map(TestSupport.frameMD5) == reference)
        let unchanged = HEVCEdits.changingSPS(try Self.bytes("main_bframes_176x144.265"), .init())
        #expect(TestSupport.rawMD5(try TestSupport.streamDecodeAll(unchanged).frames) == (try Self.manifestMD5("main_bframes_176x144.265")))
    }
}

/// libavcodec's decoders, counted as they are made.
final class CountingDecoderFactory: PictureDecoderFactory {
    private let made = Mutex(0)
    var decodersMade: Int { made.withLock { $0 } }

    func makeDecoder(_ plan: DecoderPlan, codec: VideoCodec, options: DecoderOptions) throws(DecodeError)
        -> any PictureDecoder
    {
        made.withLock { $0 += 1 }
        return try LibavDecoderFactory().makeDecoder(plan, codec: codec, options: options)
    }
}
