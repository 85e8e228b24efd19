import CFFmpeg
import CTurboJPEG
@testable import Decoding
@testable import Imaging
import Synchronization
import Testing
import TestSupport

/// The nvJPEG encoder's choices without a GPU: which encoder serves and why, which pictures go
/// to the device (and are then never downloaded), and how a failing device falls back to the
/// CPU. The pretend device "encodes" the surface it is lent, a software picture standing in for
/// an NV12 CUDA surface, with TurboJPEG straight from its planes, so its JPEGs are real and
/// reading them downloads nothing.
@Suite(.timeLimit(.minutes(10))) struct DeviceJPEGEncoderTests {
    // MARK: Pretend hardware

    final class PretendDevice: DeviceJPEGPlatform, @unchecked Sendable {
        struct Call: Equatable {
            let width: Int
            let height: Int
            let mapping: DeviceSampleMapping
            let quality: Int
        }

        let unavailability: String?
        let description = "a pretend device"
        /// Device encodes that fail, from the first; nil: all succeed.
        private let failures = Mutex<Int>(0)
        private let recorded = Mutex<[Call]>([])
        private let backendsMade = Atomic<Int>(0)

        init(unavailability: String? = nil, failing: Int = 0) {
            self.unavailability = unavailability
            failures.withLock { $0 = failing }
        }

        var calls: [Call] { recorded.withLock { $0 } }
        var backends: Int { backendsMade.load(ordering: .relaxed) }

        func makeBackend() throws(DeviceJPEGError) -> any DeviceJPEGBackend {
            backendsMade.add(1, ordering: .relaxed)
            return PretendBackend(device: self)
        }

        fileprivate func record(_ call: Call) throws(DeviceJPEGError) {
            recorded.withLock { $0.append(call) }
            let fail = failures.withLock { remaining in
                guard remaining > 0 else { return false }
                remaining -= 1
                return true
            }
            if fail { throw DeviceJPEGError("nvjpegEncodeYUV failed: NVJPEG_STATUS_EXECUTION_FAILED (6)") }
        }
    }

    final class PretendBackend: DeviceJPEGBackend {
        let device: PretendDevice
        let compressor = tjInitCompress()
        var output: UnsafeMutablePointer<UInt8>?

        init(device: PretendDevice) {
            self.device = device
        }

        deinit {
            tjDestroy(compressor)
            tjFree(output)
        }

        func encodeJPEG(
            _ surface: UnsafePointer<AVFrame>, width: Int, height: Int, mapping: DeviceSampleMapping, quality: Int
        ) throws(DeviceJPEGError) -> UnsafeRawBufferPointer {
            try device.record(PretendDevice.Call(width: width, height: height, mapping: mapping, quality: quality))
            var planes: [UnsafePointer<UInt8>?] = [
                UnsafePointer(surface.pointee.data.0), UnsafePointer(surface.pointee.data.1),
                UnsafePointer(surface.pointee.data.2),
            ]
            let strides: [Int32] = [surface.pointee.linesize.0, surface.pointee.linesize.1, surface.pointee.linesize.2]
            tjFree(output)
            output = nil
            var size: UInt = 0
            let status = planes.withUnsafeMutableBufferPointer { planes in
                strides.withUnsafeBufferPointer { strides in
                    tjCompressFromYUVPlanes(
                        compressor, planes.baseAddress, Int32(width), strides.baseAddress, Int32(height),
                        Int32(TJSAMP_420.rawValue), &output, &size, Int32(quality), 0)
                }
            }
            guard status == 0, let output else { throw DeviceJPEGError("pretend compression failed") }
            return UnsafeRawBufferPointer(start: output, count: Int(size))
        }
    }

    static func softwareFrames(_ file: String = "high_320x240.264") throws -> [DecodedFrame] {
        let decoder = try LibavDecoder(codec: file.hasSuffix(".265") ? .h265 : .h264, options: DecoderOptions(backend: .software))
        let output = try Fixtures.bytes(file).withUnsafeBytes { decoder.decode(annexB: $0) }
        return output.frames + decoder.drain().frames
    }

    /// A picture "on the device" as NVDEC leaves it (presented as yuv420p), whose download is
    /// a copy counted by `counter`.
    static func devicePicture(of source: DecodedFrame, counter: FrameDownloadCounter) throws -> DecodedFrame {
        nonisolated(unsafe) let surface = try #require(av_frame_clone(try source.systemFrame()))
        let download = DecodedFrame.DeviceDownload { frame, _ throws(DecodeError) in
            guard let copy = av_frame_clone(frame) else { throw DecodeError(.allocationFailed, "av_frame_clone") }
            return copy
        }
        return DecodedFrame(
            pixelFormat: source.pixelFormat, decodedBy: .cuda, pixels: .device(surface, download), pts: source.pts,
            downloads: counter)
    }

    static func isJPEG(_ picture: EncodedPicture, width: Int, height: Int) -> Bool {
        let bytes = Array(picture.bytes)
        guard picture.format == .jpeg, bytes.count > 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return false }
        let decompressor = tjInitDecompress()
        defer { tjDestroy(decompressor) }
        var w: Int32 = 0
        var h: Int32 = 0
        var subsampling: Int32 = 0
        var colorspace: Int32 = 0
        let status = bytes.withUnsafeBufferPointer {
            tjDecompressHeader3(decompressor, $0.baseAddress, UInt($0.count), &w, &h, &subsampling, &colorspace)
        }
        return status == 0 && Int(w) == width && Int(h) == height
    }

    // MARK: Selection

    @Test func withoutTheLibraryTurboJPEGServesAndSaysWhy() throws {
        let device = PretendDevice(unavailability: "libnvjpeg.so.12 not found (no such file)")
        let encoder = try PictureEncoders.choose(.auto, platform: device).makeEncoder()
        #expect(encoder is TurboJPEGEncoder)
        #expect(encoder.identity.name == "turbojpeg")
        #expect(encoder.identity.reason == "--encoder auto: nvJPEG cannot serve: libnvjpeg.so.12 not found (no such file)")
        #expect(device.backends == 0)
    }

    @Test func withoutADeviceAForcedNvJPEGStillServesOnTheCPU() throws {
        let device = PretendDevice(unavailability: "no CUDA device (cuDeviceGetCount: status 0, 0 devices)")
        let encoder = try PictureEncoders.choose(.nvjpeg, platform: device).makeEncoder()
        #expect(encoder.identity.name == "turbojpeg")
        #expect(encoder.identity.reason.hasPrefix("--encoder nvjpeg: nvJPEG cannot serve: no CUDA device"))
    }

    @Test func withLibraryAndDeviceNvJPEGServesUnlessTurboJPEGIsForced() throws {
        let device = PretendDevice()
        let automatic = try PictureEncoders.choose(.auto, platform: device).makeEncoder()
        #expect(automatic.identity.name == "nvjpeg")
        #expect(automatic.identity.reason.hasPrefix("--encoder auto: a pretend device; JPEG of CUDA-decoded"))
        let forced = try PictureEncoders.choose(.turbojpeg, platform: device).makeEncoder()
        #expect(forced.identity == PictureEncoderIdentity(name: "turbojpeg", reason: "chosen by --encoder turbojpeg"))
        #expect(device.backends == 0, "choosing touches no device")
    }

    @Test func thisMachinesStandardEncoderMatchesWhatLoads() throws {
        let identity = try PictureEncoders.standard().makeEncoder().identity
        switch NvJPEGLibrary.shared {
        case .failure(let error):
            #expect(identity.name == "turbojpeg")
            #expect(identity.reason == "--encoder auto: nvJPEG cannot serve: \(error)")
        case .success:
            #expect(identity.name == "nvjpeg")
        }
    }

    @Test func aMissingLibraryIsNamedInTheReason() {
        let result = NvJPEGLibrary.load(nvjpeg: "libnvjpeg-frametap-absent.so.12", cuda: NvJPEGLibrary.cudaLibrary)
        guard case .failure(let error) = result else {
            Issue.record("a library that does not exist loaded")
            return
        }
        #expect(error.description.hasPrefix("libnvjpeg-frametap-absent.so.12 not found ("))
    }

    @Test func aSoftwarePictureIsNoCUDASurface() throws {
        let frame = try #require(try Self.softwareFrames().first)
        let system = try frame.systemFrame()
        #expect(throws: DeviceJPEGError.self) { try SurfaceNV12(system, width: frame.width, height: frame.height) }
    }

    // MARK: What goes to the device

    @Test func aJPEGAtItsOwnSizeIsEncodedOnTheDeviceWithoutADownload() throws {
        let device = PretendDevice()
        let encoder = try PictureEncoders.choose(.auto, platform: device).makeEncoder()
        let counter = FrameDownloadCounter()
        for source in try Self.softwareFrames().prefix(3) {
            let picture = try Self.devicePicture(of: source, counter: counter)
            let jpeg = try encoder.encode(picture, PictureOptions(quality: 80))
            #expect(Self.isJPEG(jpeg, width: 320, height: 240))
            #expect(picture.isOnDevice)
            // Asking the same size explicitly is still the picture's own size.
            _ = try encoder.encode(picture, PictureOptions(width: 320, quality: 80))
        }
        #expect(counter.downloads == 0)
        #expect(device.calls == Array(repeating: .init(width: 320, height: 240, mapping: .range(.limited), quality: 80), count: 6))
        #expect(device.backends == 1, "one backend per encoder, reused")
        #expect(encoder.identity.name == "nvjpeg")
    }

    @Test func rawAndScaledRequestsDownloadOnceAndStayOnTheCPU() throws {
        let device = PretendDevice()
        let encoder = try PictureEncoders.choose(.auto, platform: device).makeEncoder()
        let source = try #require(try Self.softwareFrames().first)
        let counter = FrameDownloadCounter()
        let raw = try Self.devicePicture(of: source, counter: counter)
        let yuv = try encoder.encode(raw, PictureOptions(format: .yuv))
        #expect(yuv.count == 320 * 240 * 3 / 2 && !raw.isOnDevice)
        #expect(counter.downloads == 1)
        let scaled = try Self.devicePicture(of: source, counter: counter)
        #expect(Self.isJPEG(try encoder.encode(scaled, PictureOptions(width: 160)), width: 160, height: 120))
        #expect(counter.downloads == 2)
        #expect(device.calls.isEmpty)
    }

    @Test func aPictureInSystemMemoryNeverReachesTheDevice() throws {
        let device = PretendDevice()
        let encoder = try PictureEncoders.choose(.auto, platform: device).makeEncoder()
        let frame = try #require(try Self.softwareFrames().first)
        #expect(Self.isJPEG(try encoder.encode(frame, PictureOptions()), width: 320, height: 240))
        #expect(device.calls.isEmpty && device.backends == 0)
        #expect(encoder.identity.name == "turbojpeg")
        #expect(encoder.identity.reason.hasSuffix(
            "; but this session's pictures are decoded by software into system memory, so TurboJPEG encodes them"))
        // The session's pictures come from NVDEC again (a decoder that moved back to the GPU).
        let counter = FrameDownloadCounter()
        _ = try encoder.encode(try Self.devicePicture(of: frame, counter: counter), PictureOptions())
        #expect(encoder.identity.name == "nvjpeg" && counter.downloads == 0 && device.calls.count == 1)
    }

    @Test func aFullRangePictureIsPassedAsFullRange() throws {
        let device = PretendDevice()
        let encoder = try PictureEncoders.choose(.auto, platform: device).makeEncoder()
        let source = try #require(try Self.softwareFrames("fullrange_176x144.264").first)
        #expect(source.colorRange == .full)
        let picture = try Self.devicePicture(of: source, counter: FrameDownloadCounter())
        _ = try encoder.encode(picture, PictureOptions(quality: 90))
        #expect(device.calls == [.init(width: 176, height: 144, mapping: .range(.full), quality: 90)])
    }

    @Test func aBT709PictureIsEncodedOnTheDeviceWithItsMatrixConverted() throws {
        let device = PretendDevice()
        let encoder = try PictureEncoders.choose(.auto, platform: device).makeEncoder()
        let source = try #require(try Self.softwareFrames("fullrange_bt709_176x144.265").first)
        let counter = FrameDownloadCounter()
        _ = try encoder.encode(try Self.devicePicture(of: source, counter: counter), PictureOptions(quality: 90))
        let color = try #require(JPEGColor(matrix: .bt709, height: 144, fullRange: true))
        #expect(device.calls == [.init(width: 176, height: 144, mapping: .matrix(color), quality: 90)])
        #expect(counter.downloads == 0 && encoder.identity.name == "nvjpeg")
    }

    // MARK: Failures

    @Test func aFailedDeviceEncodeIsServedOnTheCPUAndSaysSo() throws {
        let device = PretendDevice(failing: 1)
        let encoder = try PictureEncoders.choose(.auto, platform: device).makeEncoder()
        let sources = try Self.softwareFrames()
        let counter = FrameDownloadCounter()
        let first = try Self.devicePicture(of: sources[0], counter: counter)
        #expect(Self.isJPEG(try encoder.encode(first, PictureOptions()), width: 320, height: 240))
        #expect(counter.downloads == 1, "the CPU encoder downloads the picture the device failed on")
        #expect(encoder.identity.name == "nvjpeg")
        #expect(encoder.identity.reason.contains("the last picture fell back to TurboJPEG because nvJPEG failed: nvjpegEncodeYUV failed"))
        let second = try Self.devicePicture(of: sources[1], counter: counter)
        _ = try encoder.encode(second, PictureOptions())
        #expect(counter.downloads == 1, "the next picture is encoded on the device again")
        #expect(!encoder.identity.reason.contains("fell back"))
        #expect(device.backends == 2, "a backend that failed is made anew")
    }

    @Test func afterThreeFailuresInARowTheDeviceIsNoLongerTried() throws {
        let device = PretendDevice(failing: 100)
        let encoder = try PictureEncoders.choose(.auto, platform: device).makeEncoder()
        let counter = FrameDownloadCounter()
        let sources = try Self.softwareFrames()
        for source in sources.prefix(5) {
            let picture = try Self.devicePicture(of: source, counter: counter)
            #expect(Self.isJPEG(try encoder.encode(picture, PictureOptions()), width: 320, height: 240))
        }
        #expect(device.calls.count == NvJPEGEncoder.failureLimit)
        #expect(counter.downloads == 5)
        #expect(encoder.identity.name == "turbojpeg")
        #expect(
            encoder.identity.reason
                == "nvJPEG failed on 3 pictures in a row and is no longer tried (last: nvjpegEncodeYUV failed: NVJPEG_STATUS_EXECUTION_FAILED (6))"
        )
    }

    // MARK: The device's tables

    @Test func theKernelsTablesAreTheCPUPathsOwn() {
        #expect(RangeExpansion.luma[16] == 0 && RangeExpansion.luma[235] == 255 && RangeExpansion.chroma[128] == 128)
        #expect(JPEGInputKernels.tables == (0..<256).map { UInt8($0) } + RangeExpansion.luma + RangeExpansion.chroma)
    }

    // MARK: Measuring one encoder against another

    @Test func psnrIsInfiniteForTheSameJPEGAndFallsWithQuality() throws {
        let frame = try #require(try Self.softwareFrames().first)
        let encoder = try TurboJPEGEncoder()
        let best = try encoder.encode(frame, PictureOptions(quality: 95))
        let same = try encoder.encode(frame, PictureOptions(quality: 95))
        let good = try encoder.encode(frame, PictureOptions(quality: 75))
        let poor = try encoder.encode(frame, PictureOptions(quality: 10))
        #expect(try JPEGComparison.psnr(same, against: best) == .infinity)
        let goodPSNR = try JPEGComparison.psnr(good, against: best)
        let poorPSNR = try JPEGComparison.psnr(poor, against: best)
        #expect(goodPSNR.isFinite && poorPSNR > 15 && poorPSNR < goodPSNR && goodPSNR < 60)
        let small = try encoder.encode(frame, PictureOptions(width: 160))
        #expect(throws: ImagingError.self) { try JPEGComparison.psnr(small, against: best) }
        let raw = try encoder.encode(frame, PictureOptions(format: .yuv))
        #expect(throws: ImagingError.self) { try JPEGComparison.psnr(raw, against: best) }
    }
}
