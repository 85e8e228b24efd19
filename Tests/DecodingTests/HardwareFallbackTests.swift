import CFFmpeg
@testable import Decoding
import Foundation
import HardwareTestSupport
import H264
import Testing
import TestSupport
import VideoCoding
import Timekeeping

/// Per-decoder fallback to software, driven by pretend hardware (a real software decoder that
/// reports itself as CUDA and fails where told): no GPU needed.
@Suite(.timeLimit(.minutes(10))) struct SPSRefusalTests {
    static let cuda = PretendPlatform(cuda: [0])

    /// Streams NVDEC cannot decode go to software before the first picture, with the reason;
    /// the pictures are exactly the software decode's.
    @Test(arguments: [
        ("high10_320x240.264", BackendFallback.Reason.unsupportedProfile, "NVDEC cannot decode High 10 (10-bit)"),
        ("yuv422p10_176x144.264", .unsupportedProfile, "NVDEC cannot decode High 4:2:2 (10-bit 4:2:2)"),
        ("yuv422p_320x240.264", .unsupportedChroma, "NVDEC cannot decode High 4:2:2 (4:2:2 chroma)"),
        ("yuv444p_176x144.264", .unsupportedChroma, "NVDEC cannot decode High 4:4:4 Predictive (4:4:4 chroma)"),
        ("gray_176x144.264", .unsupportedChroma, "NVDEC cannot decode High (monochrome 4:0:0 chroma)"),
    ])
    func autoDecodesWhatNVDECRefusesInSoftware(
        _ file: String, _ reason: BackendFallback.Reason, _ message: String
    ) throws {
        let factory = PretendHardwareFactory()
        let decoder = try StreamDecoder(options: .pretend(.auto, Self.cuda), factory: factory)
        #expect(decoder.backend == .cuda)
        let output = pushAll(try Fixtures.bytes(file), into: decoder)

        #expect(decoder.backend == .software)
        #expect(decoder.backendReason == "software: \(message)")
        #expect(decoder.fallbacks.count == 1)
        let fallback = try #require(decoder.fallbacks.first)
        #expect(fallback.reason == reason && fallback.message == message)
        #expect(fallback.codec == .h264)
        #expect(fallback.from == .cuda && fallback.to == .software && fallback.device == .cuda(0))
        #expect(fallback.afterFrames == 0)
        #expect(factory.hardwareAccessUnits.value == 0, "nothing reached the hardware")
        #expect(output.errors.isEmpty)
        #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5(file))
        #expect(output.frames.allSatisfy { $0.decodedBy == .software && !$0.isOnDevice })
    }

    @Test func tooLargeForTheDeviceGoesToSoftware() throws {
        var small = HardwareCapability.nvdecH264
        small.maxCodedWidth = 256
        small.maxCodedHeight = 256
        let factory = PretendHardwareFactory()
        let decoder = try StreamDecoder(
            options: .pretend(.auto, PretendPlatform(cuda: [0], cudaCapability: small)), factory: factory)
        let output = pushAll(try Fixtures.bytes("high_320x240.264"), into: decoder)
        #expect(decoder.fallbacks.map(\.reason) == [.tooLarge])
        #expect(decoder.backendReason == "software: NVDEC decodes H.264 up to 256x256; this stream is 320x240 (coded)")
        #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5("high_320x240.264"))
        #expect(factory.hardwareAccessUnits.value == 0)
    }

    @Test func nvdecSizeLimitIs4096() throws {
        let units = AnnexBSplitter.split(try Fixtures.bytes("high_320x240.264")).map(NALUnit.init)
        var sps = try SequenceParameterSet(nal: try #require(units.first { $0.type == .sps }))
        #expect(HardwareCapability.nvdecH264.refusal(for: SequenceFacts(sps: sps)) == nil)
        sps.picWidthInMbs = 256  // 4096: still fine
        #expect(HardwareCapability.nvdecH264.refusal(for: SequenceFacts(sps: sps)) == nil)
        sps.picWidthInMbs = 257
        #expect(
            HardwareCapability.nvdecH264.refusal(for: SequenceFacts(sps: sps))
                == .init(reason: .tooLarge, message: "NVDEC decodes H.264 up to 4096x4096; this stream is 4112x240 (coded)"))
        #expect(HardwareCapability.vaapiH264.refusal(for: SequenceFacts(sps: sps)) == nil, "VA-API sizes are the driver's to refuse")
    }

    @Test func whatNVDECDecodesStaysOnIt() throws {
        let factory = PretendHardwareFactory()
        let decoder = try StreamDecoder(options: .pretend(.auto, Self.cuda), factory: factory)
        let output = pushAll(try Fixtures.bytes("high_320x240.264"), into: decoder)
        #expect(decoder.backend == .cuda && decoder.fallbacks.isEmpty)
        #expect(factory.hardwareAccessUnits.value == 15 && factory.hardwareFrames.value == 15)
        #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5("high_320x240.264"))
    }

    /// Required CUDA never decodes in software: each picture is a clear error naming the reason.
    @Test func requiredCUDARefusesInsteadOfFallingBack() throws {
        let factory = PretendHardwareFactory()
        let decoder = try StreamDecoder(options: .pretend(.cuda, Self.cuda), factory: factory)
        let output = pushAll(try Fixtures.bytes("high10_320x240.264"), into: decoder)
        #expect(output.frames.isEmpty)
        #expect(decoder.backend == .cuda && decoder.fallbacks.isEmpty)
        #expect(!output.errors.isEmpty)
        #expect(output.errors.allSatisfy {
            $0.code == .decoderUnavailable
                && $0.message == "NVDEC cannot decode High 10 (10-bit) (unsupported_profile); backend auto decodes such streams in software"
        })
        #expect(factory.hardwareAccessUnits.value == 0)
    }
}

@Suite(.enabled(if: TestSupport.ffmpegAvailable, "needs the ffmpeg CLI to make a stream with several IDRs"), .timeLimit(.minutes(10)))
struct DeviceFailureFallbackTests {
    /// 24 pictures, an IDR every 8, no B-frames: access unit n (1-based) is picture n-1, out at
    /// once. The SPS and PPS only at the start (ffmpeg's libx264 repeats them at each IDR), so a
    /// decoder that takes over mid-stream has to be given them.
    static func stream() throws -> [UInt8] {
        let bytes = try TestSupport.bytes(
            of: TestSupport.stream(
                "fallback-idr8", size: "160x120", frames: 24, x264Params: "keyint=8:min-keyint=8:scenecut=0:bframes=0"))
        var seen = Set<NALUnitType>()
        return AnnexBSplitter.split(bytes).map(NALUnit.init).filter { unit in
            guard unit.type == .sps || unit.type == .pps else { return true }
            return seen.insert(unit.type).inserted
        }.flatMap { [0, 0, 0, 1] + $0.bytes }
    }

    /// The stream from its second IDR on (picture 8), with the parameter sets in front.
    static func fromSecondIDR(_ bytes: [UInt8]) -> [UInt8] {
        let units = AnnexBSplitter.split(bytes).map(NALUnit.init)
        let idrs = units.indices.filter { units[$0].type == .idr }
        let sets = units.filter { $0.type == .sps || $0.type == .pps }
        return (sets + units[idrs[1]...]).flatMap { [0, 0, 0, 1] + $0.bytes }
    }

    static func softwareMD5s(_ bytes: [UInt8]) throws -> [String] {
        let decoder = try StreamDecoder(options: .lowLatency(backend: .software))
        return pushAll(bytes, into: decoder).frames.map(TestSupport.frameMD5)
    }

    @Test func repeatedDeviceErrorsSwitchToSoftwareAtTheNextKeyframe() throws {
        let bytes = try Self.stream()
        let reference = try Self.softwareMD5s(bytes)
        #expect(reference.count == 24)
        let fromKeyframe = try Self.softwareMD5s(Self.fromSecondIDR(bytes))
        #expect(fromKeyframe.count == 16)

        // Access units 3, 4 and 5 fail on the "GPU"; the limit is 3 in a row.
        let factory = PretendHardwareFactory(failing: { (3...5).contains($0) })
        let decoder = try StreamDecoder(options: .pretend(.auto, PretendPlatform(cuda: [0])), factory: factory)
        let (output, numbers) = pushAllNumbered(bytes, into: decoder)
        let md5s = output.frames.map(TestSupport.frameMD5)

        // Until the keyframe the hardware decoder kept going (access units 6-8, damaged
        // references); from access unit 9 (the IDR) software took over.
        #expect(factory.hardwareAccessUnits.value == 8)
        #expect(decoder.backend == .software)
        #expect(decoder.backendReason.hasPrefix("software: NVDEC on cuda:0 failed 3 access units in a row"))
        let fallback = try #require(decoder.fallbacks.first)
        #expect(decoder.fallbacks.count == 1 && fallback.reason == .deviceErrors && fallback.from == .cuda)
        #expect(fallback.message.contains("pretend NVDEC failure at access unit 5"))

        // Nothing decoded before the switch is lost: the two good pictures come first...
        #expect(Array(md5s.prefix(2)) == Array(reference.prefix(2)))
        // ...the hardware decoder's later (concealed) pictures were drained, not dropped...
        let beforeSwitch = output.frames.count - 16
        #expect(beforeSwitch >= 2)
        #expect(beforeSwitch == factory.hardwareFrames.value)
        #expect(fallback.afterFrames == UInt64(beforeSwitch))
        // ...and after it, exactly a pure software decode from that keyframe on.
        #expect(Array(md5s.suffix(16)) == fromKeyframe)
        #expect(Array(md5s.suffix(16)) == Array(reference.suffix(16)))
        // One numbering across both decoders, by place in the stream (`PictureNumbering`): the
        // pictures the hardware failed leave a gap, and software numbers from the IDR's place.
        #expect(numbers == numbers.sorted() && Set(numbers).count == numbers.count)
        #expect(Array(numbers.suffix(16)) == Array(9...24))
        #expect(output.errors.filter { $0.code == .decoderFailure }.count == 3)
    }

    /// The software decoder that takes over at a keyframe whose access unit repeats some of
    /// the parameter sets but not the one after them in decoding order (here the SPS but not
    /// the PPS; the H.265 fixture the VPS and SPS but not the PPS) is given the missing one
    /// after those, never before: libavcodec refuses a PPS whose SPS it does not have yet, and
    /// every picture after would fail.
    @Test(arguments: [("h264", "h264"), ("h265", "hevc")])
    func aDecoderThatTakesOverGetsTheParameterSetsInDecodingOrder(_ codec: String, _ format: String) throws {
        let pps: (AnnexBUnit) -> Bool = { unit in
            codec == "h264" ? unit.bytes[0] & 0x1F == 8 : (unit.bytes[0] >> 1) & 0x3F == 34
        }
        let source =
            codec == "h264"
            ? try TestSupport.bytes(
                of: TestSupport.stream(
                    "fallback-idr8-headers", size: "160x120", frames: 24,
                    x264Params: "keyint=8:min-keyint=8:scenecut=0:bframes=0:repeat-headers=1"))
            : try Fixtures.bytes("repeat_headers_176x144.265")
        var seenPPS = false
        let kept = AnnexBSplitter.split(source).filter { (unit: AnnexBUnit) -> Bool in
            guard pps(unit) else { return true }
            defer { seenPPS = true }
            return !seenPPS
        }
        let bytes: [UInt8] = kept.flatMap { [0, 0, 0, 1] + $0.bytes }
        let file = TestSupport.directory.appendingPathComponent("pps-once-\(codec).\(codec)")
        try Data(bytes).write(to: file)
        let reference = try TestSupport.ffmpegFrameMD5s(file, format: format)

        let factory = PretendHardwareFactory(failing: { (3...5).contains($0) })
        let decoder = try StreamDecoder(options: .pretend(.auto, PretendPlatform(cuda: [0])), factory: factory)
        let output = pushAll(bytes, into: decoder)
        #expect(decoder.backend == .software && decoder.fallbacks.map(\.reason) == [.deviceErrors])
        // From the keyframe at access unit 9 on, the software decode is the CLI's.
        let afterSwitch = reference.count - 8
        #expect(Array(output.frames.map(TestSupport.frameMD5).suffix(afterSwitch)) == Array(reference.suffix(afterSwitch)))
        #expect(output.errors.allSatisfy { $0.code == .decoderFailure }, "\(output.errors)")
    }

    /// A switch to software at an H.265 recovery point that recovers gradually: the software
    /// decoder starts afresh there, so it does not show the pictures below the point's recovery
    /// count (which a decoder that went on through it would), and they keep their numbers.
    @Test func aDecoderThatTakesOverAtARecoveryPointShowsOnlyRecoveredPictures() throws {
        let bytes = try H265StreamDecoderTests.joinedAtRecoveryPoints(pocCount: 3)
        // Recovery points at access units 1, 13 and 25; 15-17 fail on the "GPU".
        let factory = PretendHardwareFactory(failing: { (15...17).contains($0) })
        let decoder = try StreamDecoder(options: .pretend(.auto, PretendPlatform(cuda: [0])), factory: factory)
        let (_, numbers) = pushAllNumbered(bytes, into: decoder)
        #expect(decoder.backend == .software && decoder.fallbacks.map(\.reason) == [.deviceErrors])
        #expect(!numbers.contains(25) && !numbers.contains(26) && !numbers.contains(27), "\(numbers)")
        #expect(Array(numbers.suffix(9)) == Array(28...36))
    }

    @Test func scatteredDeviceErrorsDoNotSwitch() throws {
        let factory = PretendHardwareFactory(failing: { $0 % 2 == 0 })
        let decoder = try StreamDecoder(options: .pretend(.auto, PretendPlatform(cuda: [0])), factory: factory)
        _ = pushAll(try Self.stream(), into: decoder)
        #expect(decoder.backend == .cuda && decoder.fallbacks.isEmpty)
        #expect(factory.hardwareAccessUnits.value == 24)
    }

    @Test func requiredCUDAKeepsGoingOnErrors() throws {
        let factory = PretendHardwareFactory(failing: { (3...12).contains($0) })
        let decoder = try StreamDecoder(options: .pretend(.cuda, PretendPlatform(cuda: [0])), factory: factory)
        let output = pushAll(try Self.stream(), into: decoder)
        #expect(decoder.backend == .cuda && decoder.fallbacks.isEmpty)
        #expect(factory.hardwareAccessUnits.value == 24)
        #expect(output.errors.filter { $0.code == .decoderFailure }.count == 10)
    }

    @Test func aHardwareDecoderThatDoesNotOpenLeavesTheStreamToSoftware() throws {
        let factory = PretendHardwareFactory(failOpen: true)
        let pool = HardwareDevicePool(platform: PretendPlatform(cuda: [0]), clock: SystemClock())
        // The codec is stated, so the decoder opens now.
        let decoder = try StreamDecoder(options: .pretend(.auto, NoHardware(), pool: pool), codec: .h264, factory: factory)
        #expect(decoder.backend == .software)
        #expect(decoder.fallbacks.map(\.reason) == [.hwaccelInitFailed])
        #expect(decoder.backendReason.contains("the NVDEC on cuda:0 (Pretend CUDA 0) decoder did not open"))
        #expect(decoder.backendReason.contains("the pretend NVDEC decoder did not start"))
        #expect(pool.sessions(on: .cuda(0)) == 0, "the failed decoder's lease is given back")
        let bytes = try Self.stream()
        #expect(pushAll(bytes, into: decoder).frames.map(TestSupport.frameMD5) == (try Self.softwareMD5s(bytes)))

        #expect {
            _ = try StreamDecoder(options: .pretend(.cuda, NoHardware(), pool: pool), codec: .h264, factory: factory)
        } throws: { error in
            (error as? DecodeError)
                == DecodeError(
                    .decoderUnavailable,
                    "the NVDEC on cuda:0 (Pretend CUDA 0) decoder did not open: the pretend NVDEC decoder did not start")
        }
    }
}

/// libavcodec turning the hardware down itself (`get_format`), through pretend hardware that
/// refuses every access unit the way `LibavDecoder` reports it.
@Suite(.timeLimit(.minutes(10))) struct HardwareRefusalTests {
    static let refusal = HardwareCapability.Refusal(
        reason: .noHardwareFormat, message: "NVDEC cannot decode High yuv420p 320x240: libavcodec offers no CUDA format for it")

    /// With `auto` the refused access unit goes again to a software decoder, from which the
    /// stream continues: the pictures are exactly the software decode's.
    @Test func autoSendsTheRefusedUnitToSoftware() throws {
        let factory = PretendHardwareFactory(refusal: Self.refusal)
        let decoder = try StreamDecoder(options: .pretend(.auto, PretendPlatform(cuda: [0])), factory: factory)
        let output = pushAll(try Fixtures.bytes("high_320x240.264"), into: decoder)
        #expect(decoder.backend == .software && decoder.device == nil)
        #expect(decoder.fallbacks.map(\.reason) == [.noHardwareFormat])
        #expect(decoder.backendReason == "software: \(Self.refusal.message)")
        #expect(factory.hardwareAccessUnits.value == 1, "only the first unit reached the hardware")
        #expect(output.errors.isEmpty)
        #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5("high_320x240.264"))
    }

    /// A refusal that comes with the third access unit (as NVDEC's for a 64x64 H.265 stream did
    /// with frame threads): the two units the hardware took without a picture go to software
    /// again first, so no picture is lost.
    @Test func autoSendsTheUnitsTakenBeforeALateRefusalToSoftware() throws {
        let factory = PretendHardwareFactory(refusal: Self.refusal, refusalFrom: 3)
        let decoder = try StreamDecoder(options: .pretend(.auto, PretendPlatform(cuda: [0])), factory: factory)
        let output = pushAll(try Fixtures.bytes("high_320x240.264"), into: decoder)
        #expect(decoder.backend == .software && decoder.fallbacks.map(\.reason) == [.noHardwareFormat])
        #expect(factory.hardwareAccessUnits.value == 3)
        #expect(output.errors.isEmpty)
        #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5("high_320x240.264"))
    }

    @Test func requiredCUDAReportsTheRefusal() throws {
        let factory = PretendHardwareFactory(refusal: Self.refusal)
        let decoder = try StreamDecoder(options: .pretend(.cuda, PretendPlatform(cuda: [0])), factory: factory)
        let output = pushAll(try Fixtures.bytes("high_320x240.264"), into: decoder)
        #expect(output.frames.isEmpty)
        #expect(decoder.backend == .cuda && decoder.fallbacks.isEmpty)
        #expect(!output.errors.isEmpty)
        #expect(output.errors.allSatisfy {
            $0.code == .decoderUnavailable && $0.message == "\(Self.refusal.message) (no_hw_format); backend auto decodes such streams in software"
        })
    }
}

/// libavcodec going on in software inside the hardware decoder without refusing anything (NVDEC
/// below its smallest size): the pictures stay, and the record and reason say the device did
/// not decode them.
@Suite(.timeLimit(.minutes(10))) struct DecodedInSoftwareTests {
    static let inside = HardwareCapability.Refusal(
        reason: .decodedInSoftware, message: "NVDEC on cuda:0 refused H.264 High 320x240; libavcodec decoded it in software")

    @Test(arguments: [DecoderBackendChoice.cuda, .auto])
    func theRefusalIsRecordedAndNoPictureIsLost(_ choice: DecoderBackendChoice) throws {
        let factory = PretendHardwareFactory(insideSoftware: Self.inside)
        let decoder = try StreamDecoder(options: .pretend(choice, PretendPlatform(cuda: [0])), factory: factory)
        let output = pushAll(try Fixtures.bytes("high_320x240.264"), into: decoder)
        #expect(output.errors.isEmpty)
        #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5("high_320x240.264"))
        let fallback = try #require(decoder.fallbacks.last)
        #expect(decoder.fallbacks.count == 1)
        #expect(fallback.reason == .decodedInSoftware && fallback.message == Self.inside.message)
        #expect(fallback.from == .cuda && fallback.to == .software && fallback.device == .cuda(0))
        #expect(fallback.afterFrames == 0)
        #expect(decoder.backendReason == "software inside the cuda decoder: \(Self.inside.message)")
    }

    @Test func hardwareThatDecodesSaysNothing() throws {
        let factory = PretendHardwareFactory()
        let decoder = try StreamDecoder(options: .pretend(.cuda, PretendPlatform(cuda: [0])), factory: factory)
        let output = pushAll(try Fixtures.bytes("high_320x240.264"), into: decoder)
        #expect(!output.frames.isEmpty)
        #expect(decoder.fallbacks.isEmpty)
        #expect(!decoder.backendReason.contains("software"))
    }
}

/// `get_format` as libavcodec drives it, without a GPU: `FormatNegotiation` is what the
/// callback asks; it only picks the hardware format or says why not.
@Suite(.timeLimit(.minutes(10))) struct FormatNegotiationTests {
    static let shape = FormatNegotiation.StreamShape(
        profile: 100, codedWidth: 1920, codedHeight: 1088, softwareFormat: AV_PIX_FMT_YUV420P)

    static func cuda() -> FormatNegotiation {
        FormatNegotiation(hardware: .cuda, device: .cuda(0))
    }

    @Test func offeredHardwareFormatIsChosen() {
        let negotiation = Self.cuda()
        #expect(negotiation.choose(from: [AV_PIX_FMT_CUDA, AV_PIX_FMT_YUV420P], shape: Self.shape, profileName: "High") == AV_PIX_FMT_CUDA)
        #expect(negotiation.takeRefusal() == nil)
    }

    /// libavcodec asks again without CUDA when the hwaccel did not initialise.
    @Test func hwaccelInitFailureIsRefusedAsSuch() {
        let negotiation = Self.cuda()
        _ = negotiation.choose(from: [AV_PIX_FMT_CUDA, AV_PIX_FMT_YUV420P], shape: Self.shape, profileName: "High")
        #expect(negotiation.choose(from: [AV_PIX_FMT_YUV420P], shape: Self.shape, profileName: "High") == AV_PIX_FMT_NONE)
        #expect(
            negotiation.takeRefusal()
                == .init(reason: .hwaccelInitFailed, message: "NVDEC on cuda:0 could not start decoding High yuv420p 1920x1088"))
        #expect(negotiation.takeRefusal() == nil, "read once")
    }

    @Test func notOfferedIsNoHardwareFormat() {
        let negotiation = Self.cuda()
        var shape = Self.shape
        shape.softwareFormat = AV_PIX_FMT_YUV420P10LE
        shape.profile = 110
        #expect(negotiation.choose(from: [AV_PIX_FMT_YUV420P10LE], shape: shape, profileName: "High 10") == AV_PIX_FMT_NONE)
        let refusal = negotiation.takeRefusal()
        #expect(refusal?.reason == .noHardwareFormat)
        #expect(refusal?.message.hasPrefix("NVDEC cannot decode High 10 yuv420p10le 1920x1088") == true)
    }
}

/// H.265 on the hardware engines: what each refuses goes to software before the first picture,
/// every fallback names the codec, and a device without H.265 passes the stream on.
@Suite(.timeLimit(.minutes(10))) struct HEVCFallbackTests {
    static let cuda = PretendPlatform(cuda: [0])

    /// NVDEC on Hopper: no 4:2:2 and no monochrome (NVIDIA's application note); Main 10 and
    /// 4:4:4 stay on the device.
    @Test(arguments: [
        ("yuv422p10_176x144.265", BackendFallback.Reason.unsupportedChroma, "NVDEC cannot decode Main 4:2:2 10 (4:2:2 chroma)"),
        ("gray_176x144.265", .unsupportedChroma, "NVDEC cannot decode Monochrome (monochrome 4:0:0 chroma)"),
    ])
    func autoDecodesWhatNVDECRefusesInSoftware(_ file: String, _ reason: BackendFallback.Reason, _ message: String) throws {
        let factory = PretendHardwareFactory()
        let decoder = try StreamDecoder(options: .pretend(.auto, Self.cuda), factory: factory)
        let output = pushAll(try Fixtures.bytes(file), into: decoder)
        #expect(decoder.codec == .h265 && decoder.backend == .software)
        let fallback = try #require(decoder.fallbacks.first)
        #expect(decoder.fallbacks.count == 1)
        #expect(fallback.reason == reason && fallback.message == message, "\(fallback.message)")
        #expect(fallback.codec == .h265 && fallback.from == .cuda && fallback.to == .software)
        #expect(factory.hardwareAccessUnits.value == 0, "nothing reached the hardware")
        #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5(file))
    }

    @Test(arguments: ["main10_320x240.265", "yuv444p_176x144.265", "main_bframes_176x144.265"])
    func whatNVDECDecodesStaysOnIt(_ file: String) throws {
        let factory = PretendHardwareFactory()
        let decoder = try StreamDecoder(options: .pretend(.auto, Self.cuda), factory: factory)
        let output = pushAll(try Fixtures.bytes(file), into: decoder)
        #expect(decoder.backend == .cuda && decoder.fallbacks.isEmpty)
        #expect(factory.hardwareAccessUnits.value > 0)
        #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5(file))
    }

    /// A render node that lists no H.265 profile: the H.265 stream moves on (unsupported_codec),
    /// named as H.265, while H.264 stays on the node.
    @Test func aRenderNodeWithoutHEVCProfilesPassesTheStreamOn() throws {
        let node = RenderNodeReport(path: "/dev/dri/renderD128", h264Profiles: ["Main", "High"])
        let platform = PretendPlatform(renderNodes: [node.path], vaapiCapabilities: node.capabilities)
        let factory = PretendHardwareFactory()
        let hevc = try StreamDecoder(options: .pretend(.auto, platform), factory: factory)
        let output = pushAll(try Fixtures.bytes("main_bframes_176x144.265"), into: hevc)
        #expect(hevc.backend == .software)
        #expect(hevc.fallbacks.map(\.reason) == [.unsupportedCodec])
        #expect(hevc.fallbacks.first?.codec == .h265 && hevc.fallbacks.first?.from == .vaapi)
        #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5("main_bframes_176x144.265"))

        let avc = try StreamDecoder(options: .pretend(.auto, platform), factory: factory)
        _ = pushAll(try Fixtures.bytes("high_320x240.264"), into: avc)
        #expect(avc.backend == .vaapi && avc.fallbacks.isEmpty)
    }

    /// A node that lists HEVC Main but not Main10 takes 8-bit H.265 and refuses 10-bit.
    @Test func aRenderNodeWithHEVCMainOnlyRefusesMain10() throws {
        let node = RenderNodeReport(path: "/dev/dri/renderD128", h264Profiles: ["High"], hevcProfiles: ["Main"])
        let platform = PretendPlatform(renderNodes: [node.path], vaapiCapabilities: node.capabilities)
        let decoder = try StreamDecoder(options: .pretend(.auto, platform), factory: PretendHardwareFactory())
        let output = pushAll(try Fixtures.bytes("main10_320x240.265"), into: decoder)
        #expect(decoder.fallbacks.map(\.reason) == [.unsupportedProfile])
        #expect(decoder.fallbacks.first?.message == "VA-API cannot decode Main 10 (10-bit)")
        #expect(decoder.fallbacks.first?.codec == .h265)
        #expect(TestSupport.rawMD5(output.frames) == Fixtures.md5("main10_320x240.265"))
    }

    /// A device that does not open at selection: the fallback names the codec when it was stated,
    /// and none when the stream's codec was still unknown.
    @Test func aFallbackAtSelectionNamesTheCodecOnlyWhenItWasStated() throws {
        let platform = PretendPlatform(cuda: [0], failing: [.cuda(0): "pretend: out of memory"])
        let stated = try StreamDecoder(options: .pretend(.auto, platform), codec: .h265, factory: PretendHardwareFactory())
        #expect(stated.fallbacks.map(\.reason) == [.deviceUnavailable])
        #expect(stated.fallbacks.first?.codec == .h265)
        let detected = try StreamDecoder(options: .pretend(.auto, platform), factory: PretendHardwareFactory())
        #expect(detected.fallbacks.map(\.reason) == [.deviceUnavailable])
        #expect(detected.fallbacks.first?.codec == nil)
    }
}
