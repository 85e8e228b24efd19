import Decoding
import Foundation
import HardwareTestSupport
import H264
import TestSupport
import Testing
import Timekeeping

@Suite(.enabled(if: TestSupport.ffmpegAvailable, "needs the ffmpeg CLI to make streams and references"), .timeLimit(.minutes(10)))
struct H264DecoderTests {
    /// 320x240 with B-frames (reordering delay) and two GOPs.
    static func bFrameStream() throws -> URL {
        try TestSupport.stream("bframes", size: "320x240", frames: 20, x264Params: "keyint=10:bframes=3:b-adapt=0")
    }

    /// 302x170: not a multiple of 16, so the SPS crops right and bottom.
    static func oddSizeStream() throws -> URL {
        try TestSupport.stream("oddsize", size: "302x170", frames: 8, x264Params: "keyint=4:bframes=1")
    }

    @Test(arguments: ["bframes", "oddsize"])
    func matchesFFmpegFrameForFrame(_ name: String) throws {
        let file = name == "bframes" ? try Self.bFrameStream() : try Self.oddSizeStream()
        let reference = try TestSupport.ffmpegFrameMD5s(file)
        let decoded = try TestSupport.decodeAll(TestSupport.bytes(of: file))
        #expect(decoded.errors.isEmpty)
        #expect(decoded.frames.count == reference.count)
        #expect(decoded.frames.map(TestSupport.frameMD5) == reference)

        var whole = MD5()
        for frame in decoded.frames {
            var bytes: [UInt8] = []
            frame.appendPackedPlanes(to: &bytes)
            whole.update(bytes)
        }
        #expect(whole.finalize() == (try TestSupport.ffmpegRawMD5(file)))
    }

    @Test func oddSizeKeepsTheExactCrop() throws {
        let decoded = try TestSupport.decodeAll(TestSupport.bytes(of: Self.oddSizeStream()))
        #expect(decoded.frames.allSatisfy { $0.width == 302 && $0.height == 170 && $0.pixelFormatName == "yuv420p" })
    }

    @Test func withoutTheReorderProbeAnnouncedReorderingDecodesTheSame() throws {
        let file = try Self.bFrameStream()
        let decoded = try TestSupport.decodeAll(TestSupport.bytes(of: file), options: .lowLatency(backend: .software))
        #expect(decoded.frames.map(TestSupport.frameMD5) == (try TestSupport.ffmpegFrameMD5s(file)))
    }

    @Test func frameThreadingGivesTheSameFrames() throws {
        let file = try Self.bFrameStream()
        let options = DecoderOptions.throughput(backend: .software)
        let decoded = try TestSupport.decodeAll(TestSupport.bytes(of: file), options: options)
        #expect(decoded.frames.map(TestSupport.frameMD5) == (try TestSupport.ffmpegFrameMD5s(file)))
    }

    @Test func tinyRandomChunksGiveTheSameFrames() throws {
        let file = try Self.bFrameStream()
        let bytes = try TestSupport.bytes(of: file)
        var generator = SplitMix64(seed: 0x5eed)
        let chunked = try TestSupport.decodeAll(bytes) { Int.random(in: 1...37, using: &generator) }
        let whole = try TestSupport.decodeAll(bytes) { bytes.count }
        #expect(chunked.frames.map(TestSupport.frameMD5) == whole.frames.map(TestSupport.frameMD5))
        #expect(chunked.frames.map(TestSupport.frameMD5) == (try TestSupport.ffmpegFrameMD5s(file)))
    }

    @Test func drainReturnsDelayedFramesAndTheDecoderIsReusable() throws {
        let file = try Self.bFrameStream()
        let bytes = try TestSupport.bytes(of: file)
        let reference = try TestSupport.ffmpegFrameMD5s(file)
        let decoder = try LibavDecoder(options: DecoderOptions(backend: .software))
        try checkDrainAndReuse(decoder, bytes: bytes, reference: reference)
        try checkDrainAndReuse(
            LibavDecoder(options: TestSupport.cliEquivalent), bytes: bytes, reference: reference, probing: true)
    }

    private func checkDrainAndReuse(
        _ decoder: LibavDecoder, bytes: [UInt8], reference: [String], probing: Bool = false
    ) throws {
        let before = decoder.decode(annexB: bytes)
        let drained = decoder.drain()
        // The parser holds the last access unit and B-frame reordering holds more.
        #expect(drained.frames.count >= 2)
        if !probing { #expect(before.frames.count >= reference.count - 3) }
        #expect((before.frames + drained.frames).map(TestSupport.frameMD5) == reference)

        let again = TestSupport.decodeAll(bytes, with: decoder)
        #expect(again.frames.map(TestSupport.frameMD5) == reference)
        #expect(decoder.framesDecoded == UInt64(2 * reference.count))
        #expect(decoder.drain().frames.isEmpty)
    }

    @Test func timestampsPassThrough() throws {
        let bytes = try TestSupport.bytes(of: Self.oddSizeStream())
        let decoder = try LibavDecoder(options: TestSupport.cliEquivalent)
        let frames = decoder.decode(annexB: bytes, pts: 1000).frames + decoder.drain().frames
        #expect(frames.first?.pts == 1000)
        let untimed = try TestSupport.decodeAll(bytes)
        #expect(untimed.frames.allSatisfy { $0.pts == nil })
    }

    @Test func pictureAboveTheLimitIsNotDecoded() throws {
        let bytes = try TestSupport.bytes(of: Self.bFrameStream())
        let limit = PictureSizeLimit(maxWidth: 320, maxHeight: 240, maxPixels: 320 * 200)
        let decoded = try TestSupport.decodeAll(bytes, options: DecoderOptions(sizeLimit: limit))
        #expect(decoded.frames.isEmpty)
        #expect(!decoded.errors.isEmpty)
        #expect(decoded.errors.allSatisfy { $0.code == .pictureTooLarge })
    }

    @Test func sizeLimitCheck() {
        let limit = PictureSizeLimit()
        #expect(throws: Never.self) { try limit.check(width: 8192, height: 4352) }
        #expect(throws: DecodeError.self) { try limit.check(width: 8193, height: 16) }
        #expect(throws: DecodeError.self) { try limit.check(width: 8192, height: 8192) }
    }

    @Test func garbageAndTruncationDoNotWedgeTheDecoder() throws {
        let stream = try TestSupport.bytes(of: Self.bFrameStream())
        let reference = try TestSupport.ffmpegFrameMD5s(Self.bFrameStream())
        var generator = SplitMix64(seed: 42)
        func garbage(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) } }
        // Garbage, a stream cut off in the middle of a picture, more garbage with start codes
        // in it, then the whole stream again from its IDR.
        var garbageWithStartCodes = garbage(3000)
        for position in stride(from: 0, to: 3000, by: 300) {
            garbageWithStartCodes.replaceSubrange(position..<position + 4, with: [0, 0, 1, 0x65])
        }
        let input = garbage(5000) + stream.prefix(stream.count / 2 + 17) + garbageWithStartCodes + stream
        let file = TestSupport.directory.appendingPathComponent("garbage-\(UUID().uuidString).h264")
        try Data(input).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let decoded = try TestSupport.decodeAll(input) { 1500 }
        #expect(!decoded.errors.isEmpty)
        #expect(decoded.frames.map(TestSupport.frameMD5) == (try TestSupport.ffmpegFrameMD5s(file, threads: 1)))
        // Measured: libavcodec's first picture after the garbage is concealed from the
        // damaged state, but the copy's second GOP (from its second IDR on) is exact.
        #expect(decoded.frames.suffix(10).map(TestSupport.frameMD5) == Array(reference.suffix(10)))

        // Only garbage: no frames, no crash, and the same decoder still works afterwards.
        let decoder = try LibavDecoder()
        _ = TestSupport.decodeAll(garbage(20_000) + [0, 0, 0, 1, 0x67] + garbage(100), with: decoder)
        let recovered = TestSupport.decodeAll(stream, with: decoder)
        #expect(recovered.frames.map(TestSupport.frameMD5) == reference)
    }

    @Test func resolutionChangeMidStream() throws {
        let small = try TestSupport.stream("res-small", size: "64x48", frames: 6, x264Params: "keyint=3:bframes=1")
        let large = try TestSupport.stream("res-large", size: "160x120", frames: 6, x264Params: "keyint=3:bframes=1")
        let joined = TestSupport.directory.appendingPathComponent("res-joined.h264")
        let bytes = try TestSupport.bytes(of: small) + TestSupport.bytes(of: large)
        try Data(bytes).write(to: joined)
        let decoded = try TestSupport.decodeAll(bytes)
        #expect(decoded.frames.map(TestSupport.frameMD5) == (try TestSupport.ffmpegFrameMD5s(joined)))
        #expect(decoded.frames.map(\.width) == Array(repeating: 64, count: 6) + Array(repeating: 160, count: 6))
    }
}

@Suite(.timeLimit(.minutes(10))) struct BackendSelectionTests {
    @Test func autoWithoutRenderNodesUsesSoftwareAndSaysWhy() throws {
        let plan = try BackendSelection.plan(
            options: DecoderOptions(backend: .auto, hardwareDevices: HardwareDeviceList([.everyRenderNode]),
                devicePool: HardwareDevicePool(platform: NoHardware(), clock: SystemClock())))
        #expect(plan.backend == .software)
        #expect(plan.reason.contains("render node"))
    }

    @Test func autoOnThisMachineDecidesAndExplains() throws {
        let backends = try BackendSupervisor(options: DecoderOptions(backend: .auto), factory: LibavDecoderFactory())
        #expect(!backends.backendReason.isEmpty)
        if !FileManager.default.fileExists(atPath: "/dev/dri") {
            #expect(backends.backend == .software)
        }
    }

    @Test func forcedVAAPIWithoutADeviceIsUnavailable() {
        #expect {
            _ = try LibavDecoder(
                options: DecoderOptions(backend: .vaapi, devicePool: HardwareDevicePool(platform: NoHardware(), clock: SystemClock())))
        } throws: { error in
            (error as? DecodeError)?.code == .decoderUnavailable
        }
    }

    @Test(arguments: ["/dev/null", "not-a-device"])
    func bogusRenderNodeFailsCleanlyAndAutoFallsBack(_ node: String) throws {
        let path: String
        if node == "not-a-device" {
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("frametap-fake-renderD\(UUID().uuidString)")
            try Data("not a DRM device".utf8).write(to: file)
            path = file.path
        } else {
            path = node
        }
        defer { if node != "/dev/null" { try? FileManager.default.removeItem(atPath: path) } }

        var thrown: DecodeError?
        do {
            _ = try LibavDecoder(options: DecoderOptions(backend: .vaapi, hardwareDevices: HardwareDeviceList([.device(.renderNode(path))]), devicePool: HardwareDevicePool(clock: SystemClock())))
        } catch {
            thrown = error
        }
        #expect(thrown?.code == .decoderUnavailable)
        #expect(thrown?.message.contains(path) == true)

        let fallback = try BackendSupervisor(
            options: DecoderOptions(
                backend: .auto, hardwareDevices: HardwareDeviceList([.device(.renderNode(path))]),
                devicePool: HardwareDevicePool(clock: SystemClock())),
            factory: LibavDecoderFactory())
        #expect(fallback.backend == .software)
        #expect(fallback.backendReason.contains(path))
    }

    @Test func softwareIsSoftware() throws {
        let decoder = try LibavDecoder(options: DecoderOptions(backend: .software))
        #expect(decoder.backend == .software)
    }

    @Test func invalidThreadCountIsRejected() {
        #expect(throws: DecodeError(.invalidOptions, "decoder threads must be 0...64, got -1")) {
            _ = try LibavDecoder(options: DecoderOptions(threads: -1))
        }
    }
}
