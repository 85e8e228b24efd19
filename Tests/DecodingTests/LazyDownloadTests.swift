import CFFmpeg
@testable import Decoding
import Dispatch
import Foundation
import HardwareTestSupport
import Testing
import TestSupport

/// Pictures stay on the device until read; each is downloaded at most once, counted, and
/// presented in the software decoder's layout. Without a GPU a "device picture" is a software
/// picture whose download is a copy (or a failure).
@Suite(.timeLimit(.minutes(10))) struct LazyDownloadTests {
    static func softwareFrames(_ file: String, counter: FrameDownloadCounter) throws -> [DecodedFrame] {
        var options = DecoderOptions(backend: .software)
        options.frameDownloads = counter
        let decoder = try LibavDecoder(codec: file.hasSuffix(".265") ? .h265 : .h264, options: options)
        let output = decoder.decode(annexB: try Fixtures.bytes(file))
        return output.frames + decoder.drain().frames
    }

    /// A device picture standing in for `source`: its download copies `source`, or fails.
    static func pretendDevicePicture(
        of source: DecodedFrame, counter: FrameDownloadCounter, failing: Bool = false, downloads: Tally? = nil
    ) throws -> DecodedFrame {
        nonisolated(unsafe) let surface = try #require(av_frame_clone(try source.systemFrame()))
        let download = DecodedFrame.DeviceDownload { frame, _ throws(DecodeError) in
            downloads?.add()
            if failing { throw DecodeError(.decoderFailure, "pretend transfer failed") }
            guard let copy = av_frame_clone(frame) else { throw DecodeError(.allocationFailed, "av_frame_clone") }
            return copy
        }
        return DecodedFrame(
            pixelFormat: source.pixelFormat, decodedBy: .cuda, pixels: .device(surface, download),
            pts: source.pts, downloads: counter)
    }

    static func packed(_ frame: DecodedFrame) -> [UInt8] {
        var bytes: [UInt8] = []
        frame.appendPackedPlanes(to: &bytes)
        return bytes
    }

    @Test func softwarePicturesNeverCountADownload() throws {
        let counter = FrameDownloadCounter()
        let frames = try Self.softwareFrames("high_320x240.264", counter: counter)
        #expect(frames.count == 15)
        for frame in frames {
            #expect(frame.decodedBy == .software && !frame.isOnDevice)
            #expect(frame.plane(0) != nil && frame.avFrame != nil && !Self.packed(frame).isEmpty)
        }
        #expect(counter.downloads == 0 && counter.failures == 0 && counter.bytes == 0)
    }

    @Test func aDevicePictureIsDownloadedOnceWhenFirstRead() throws {
        let counter = FrameDownloadCounter()
        let source = try #require(try Self.softwareFrames("high_320x240.264", counter: FrameDownloadCounter()).first)
        let transfers = Tally()
        let picture = try Self.pretendDevicePicture(of: source, counter: counter, downloads: transfers)
        #expect(picture.isOnDevice && picture.pixelFormatName == "yuv420p" && picture.width == 320)
        #expect(counter.downloads == 0, "metadata alone downloads nothing")

        #expect(Self.packed(picture) == Self.packed(source))
        #expect(!picture.isOnDevice)
        _ = picture.plane(1)
        _ = try picture.systemFrame()
        #expect(transfers.value == 1 && counter.downloads == 1 && counter.spills == 0)
        #expect(counter.bytes == source.packedSize)
    }

    @Test func aLentSurfaceDoesNotHoldThePictureLocked() throws {
        let source = try #require(try Self.softwareFrames("high_320x240.264", counter: FrameDownloadCounter()).first)
        let picture = try Self.pretendDevicePicture(of: source, counter: FrameDownloadCounter())
        let expected = Self.packed(source)
        let downloaded = DispatchSemaphore(value: 0)
        let outcome: (readElsewhere: Bool, width: Int32)? = picture.withDeviceSurface { surface in
            guard let surface else { return nil }
            // An encoder on the GPU reads the surface while the decoder's thread spills the
            // picture: the spill must not wait for the encode.
            DispatchQueue.global().async {
                if Self.packed(picture) == expected { downloaded.signal() }
            }
            let readElsewhere =
                (try? downloaded.wait(for: "the picture downloaded while its surface was lent", timeout: .seconds(10))) != nil
            return (readElsewhere, surface.pointee.width)
        }
        #expect(outcome?.readElsewhere == true)
        #expect(outcome?.width == 320, "the lent surface outlived the picture's own reference")
        #expect(!picture.isOnDevice)
        #expect(picture.withDeviceSurface { $0 == nil }, "nothing is lent once the picture is in system memory")
    }

    @Test func concurrentReadersShareOneDownload() throws {
        let counter = FrameDownloadCounter()
        let source = try #require(try Self.softwareFrames("high_320x240.264", counter: FrameDownloadCounter()).first)
        let transfers = Tally()
        let picture = try Self.pretendDevicePicture(of: source, counter: counter, downloads: transfers)
        let bases = Bases()
        DispatchQueue.concurrentPerform(iterations: 32) { _ in
            bases.add(picture.plane(0).map { Int(bitPattern: $0.base) })
        }
        #expect(transfers.value == 1 && counter.downloads == 1)
        #expect(bases.all.count == 32 && Set(bases.all).count == 1 && !bases.all.contains(nil))
    }

    @Test func aFailedDownloadIsFinalAndReported() throws {
        let counter = FrameDownloadCounter()
        let source = try #require(try Self.softwareFrames("high_320x240.264", counter: FrameDownloadCounter()).first)
        let transfers = Tally()
        let picture = try Self.pretendDevicePicture(of: source, counter: counter, failing: true, downloads: transfers)
        #expect(picture.plane(0) == nil && picture.avFrame == nil && Self.packed(picture).isEmpty)
        #expect(picture.downloadError?.message == "pretend transfer failed")
        #expect(!picture.isOnDevice, "the surface went back to the decoder anyway")
        _ = picture.plane(0)
        #expect(transfers.value == 1 && counter.failures == 1 && counter.downloads == 0)
    }

    /// No caller can hold more than `limit` of a decoder's surfaces: the oldest picture still
    /// on the device is downloaded when another arrives. Pictures nobody keeps cost nothing.
    @Test func theBudgetSpillsTheOldestPictureStillOnTheDevice() throws {
        let counter = FrameDownloadCounter()
        let sources = try Self.softwareFrames("high_320x240.264", counter: FrameDownloadCounter())
        var budget = DeviceFrameBudget(limit: 2)

        for index in 0..<3 {  // released at once: no download
            budget.admit(try Self.pretendDevicePicture(of: sources[index], counter: counter))
        }
        #expect(counter.downloads == 0 && budget.onDevice == 0)

        let kept = try (3..<6).map { try Self.pretendDevicePicture(of: sources[$0], counter: counter) }
        for picture in kept { budget.admit(picture) }
        #expect(kept.map(\.isOnDevice) == [false, true, true])
        #expect(counter.downloads == 1 && counter.spills == 1 && budget.onDevice == 2)
        #expect(Self.packed(kept[0]) == Self.packed(sources[3]))
    }

    /// NVDEC and VA-API give NV12 with the left/top crop still to apply; readers get the
    /// software decoder's cropped yuv420p, byte for byte.
    @Test(arguments: ["odd_crop_322x242.264", "fullrange_176x144.264"])
    func nv12IsPresentedAsTheSoftwareLayout(_ file: String) throws {
        let source = try #require(try Self.softwareFrames(file, counter: FrameDownloadCounter()).first)
        let (left, top, right, bottom) = (2, 4, 6, 2)
        let nv12 = try Self.uncroppedNV12(of: source, left: left, top: top, right: right, bottom: bottom)
        var owned: UnsafeMutablePointer<AVFrame>? = nv12
        defer { av_frame_free(&owned) }

        nonisolated(unsafe) let presented = try DecodedFrame.present(nv12, as: source.pixelFormat)
        let picture = DecodedFrame(taking: presented, pts: nil, downloads: FrameDownloadCounter())
        #expect(picture.width == source.width && picture.height == source.height)
        #expect(Self.packed(picture) == Self.packed(source))
        #expect(
            DecodedFrame.presentedFormat(downloaded: AV_PIX_FMT_NV12, softwareFormat: source.pixelFormat)
                == source.pixelFormat)
    }

    /// Ten-bit 4:2:0 from NVDEC or VA-API downloads as P010: 16-bit words with the value in the
    /// high 10 bits, chroma interleaved. Readers get the software decoder's yuv420p10le, byte for
    /// byte (the Main 10 fixture decoded in software stands in for the device's samples).
    @Test func p010IsPresentedAsYUV420P10() throws {
        let source = try #require(try Self.softwareFrames("main10_320x240.265", counter: FrameDownloadCounter()).first)
        #expect(source.pixelFormat == AV_PIX_FMT_YUV420P10LE)
        let p010 = try Self.highBitSurface(
            of: source, as: AV_PIX_FMT_P010LE, significantBits: 10, left: 2, top: 4, right: 6, bottom: 2)
        var owned: UnsafeMutablePointer<AVFrame>? = p010
        defer { av_frame_free(&owned) }
        #expect(DecodedFrame.presentedFormat(downloaded: AV_PIX_FMT_P010LE, softwareFormat: source.pixelFormat) == source.pixelFormat)
        nonisolated(unsafe) let presented = try DecodedFrame.present(p010, as: source.pixelFormat)
        let picture = DecodedFrame(taking: presented, pts: nil, downloads: FrameDownloadCounter())
        #expect(picture.pixelFormatName == "yuv420p10le")
        #expect(picture.width == source.width && picture.height == source.height)
        #expect(Self.packed(picture) == Self.packed(source))
    }

    /// NVDEC's other high-bit surfaces: P016 for 12-bit 4:2:0, YUV444P16 for 10- and 12-bit 4:4:4
    /// (the value in the high bits of each word). Every sample value of the depth is tried.
    @Test(arguments: [
        (AV_PIX_FMT_YUV420P12LE, AV_PIX_FMT_P016LE, 12), (AV_PIX_FMT_YUV444P12LE, AV_PIX_FMT_YUV444P16LE, 12),
        (AV_PIX_FMT_YUV444P10LE, AV_PIX_FMT_YUV444P16LE, 10),
    ])
    func sixteenBitSurfacesArePresentedAtTheStreamsDepth(
        planar: AVPixelFormat, downloaded: AVPixelFormat, depth: Int
    ) throws {
        let source = try Self.countingFrame(planar, width: 130, height: 66, depth: depth)
        let surface = try Self.highBitSurface(
            of: source, as: downloaded, significantBits: depth, left: 0, top: 2, right: 4, bottom: 0)
        var owned: UnsafeMutablePointer<AVFrame>? = surface
        defer { av_frame_free(&owned) }
        #expect(DecodedFrame.presentedFormat(downloaded: downloaded, softwareFormat: planar) == planar)
        nonisolated(unsafe) let presented = try DecodedFrame.present(surface, as: planar)
        let picture = DecodedFrame(taking: presented, pts: nil, downloads: FrameDownloadCounter())
        #expect(picture.pixelFormat == planar)
        #expect(Self.packed(picture) == Self.packed(source))
    }

    /// Only layouts that hold the same values are repacked; anything else is presented as it came.
    @Test func onlyTheSameSamplesAreRepacked() {
        let kept: [(AVPixelFormat, AVPixelFormat)] = [
            (AV_PIX_FMT_P010LE, AV_PIX_FMT_YUV420P),  // would drop two bits of every sample
            (AV_PIX_FMT_NV12, AV_PIX_FMT_YUV420P10LE),  // would invent them
            (AV_PIX_FMT_NV12, AV_PIX_FMT_YUV422P),  // other chroma subsampling
            (AV_PIX_FMT_P010BE, AV_PIX_FMT_YUV420P10LE),  // big-endian words
            (AV_PIX_FMT_YUV444P16LE, AV_PIX_FMT_YUV420P12LE),
            (AV_PIX_FMT_NV12, AV_PIX_FMT_RGB24),
        ]
        for (downloaded, software) in kept {
            #expect(DecodedFrame.presentedFormat(downloaded: downloaded, softwareFormat: software) == downloaded)
        }
        #expect(DecodedFrame.presentedFormat(downloaded: AV_PIX_FMT_YUV444P, softwareFormat: AV_PIX_FMT_YUV444P) == AV_PIX_FMT_YUV444P)
        #expect(DecodedFrame.presentedFormat(downloaded: AV_PIX_FMT_NV12, softwareFormat: AV_PIX_FMT_YUVJ420P) == AV_PIX_FMT_YUVJ420P)
    }

    /// A planar high-bit-depth picture whose samples run through every value of `depth` bits.
    static func countingFrame(_ format: AVPixelFormat, width: Int, height: Int, depth: Int) throws -> DecodedFrame {
        let frame = try #require(av_frame_alloc())
        frame.pointee.format = format.rawValue
        frame.pointee.width = Int32(width)
        frame.pointee.height = Int32(height)
        try #require(av_frame_get_buffer(frame, 0) >= 0)
        nonisolated(unsafe) let owned = frame
        let picture = DecodedFrame(taking: owned, pts: nil, downloads: FrameDownloadCounter())
        var counter = 0
        for index in 0..<3 {
            let (rowBytes, rows) = try #require(picture.planeGeometry(index))
            let plane = try #require(picture.plane(index))
            let words = UnsafeMutableRawPointer(mutating: plane.base)
            for row in 0..<rows {
                for column in 0..<rowBytes / 2 {
                    let value = UInt16(counter % (1 << depth))
                    words.storeBytes(of: value.littleEndian, toByteOffset: row * plane.stride + 2 * column, as: UInt16.self)
                    counter += 7
                }
            }
        }
        return picture
    }

    /// `source` (planar, `significantBits` deep) as a device surface downloads it in `format`
    /// (P010/P016: 16-bit words, chroma interleaved; YUV444P16: 16-bit planes), each value in the
    /// high bits and the low bits zero, with a border that the crop fields remove.
    static func highBitSurface(
        of source: DecodedFrame, as format: AVPixelFormat, significantBits: Int, left: Int, top: Int, right: Int, bottom: Int
    ) throws -> UnsafeMutablePointer<AVFrame> {
        let frame = try #require(av_frame_alloc())
        frame.pointee.format = format.rawValue
        frame.pointee.width = Int32(source.width + left + right)
        frame.pointee.height = Int32(source.height + top + bottom)
        try #require(av_frame_get_buffer(frame, 0) >= 0)
        frame.pointee.crop_left = left
        frame.pointee.crop_top = top
        frame.pointee.crop_right = right
        frame.pointee.crop_bottom = bottom
        let interleaved = format == AV_PIX_FMT_P010LE || format == AV_PIX_FMT_P016LE
        let subsampled = interleaved
        let shift = UInt16(16 - significantBits)
        for planeIndex in 0..<(interleaved ? 2 : 3) {
            let base = try #require(withUnsafePointer(to: frame.pointee.data) {
                $0.withMemoryRebound(to: UnsafeMutablePointer<UInt8>?.self, capacity: 8) { $0[planeIndex] }
            })
            let stride = Int(withUnsafePointer(to: frame.pointee.linesize) {
                $0.withMemoryRebound(to: Int32.self, capacity: 8) { $0[planeIndex] }
            })
            let chroma = planeIndex > 0 && subsampled
            memset(base, 0, stride * (chroma ? (Int(frame.pointee.height) + 1) / 2 : Int(frame.pointee.height)))
        }
        func store(_ value: UInt16, plane planeIndex: Int, x: Int, y: Int) {
            let base = withUnsafePointer(to: frame.pointee.data) {
                $0.withMemoryRebound(to: UnsafeMutablePointer<UInt8>?.self, capacity: 8) { $0[planeIndex] }
            }!
            let stride = Int(withUnsafePointer(to: frame.pointee.linesize) {
                $0.withMemoryRebound(to: Int32.self, capacity: 8) { $0[planeIndex] }
            })
            UnsafeMutableRawPointer(base).storeBytes(of: (value << shift).littleEndian, toByteOffset: y * stride + 2 * x, as: UInt16.self)
        }
        for index in 0..<3 {
            let (rowBytes, rows) = try #require(source.planeGeometry(index))
            let plane = try #require(source.plane(index))
            let chroma = index > 0 && subsampled
            let (x0, y0) = chroma ? (left / 2, top / 2) : (left, top)
            for row in 0..<rows {
                for column in 0..<rowBytes / 2 {
                    let value = UInt16(littleEndian: UnsafeRawPointer(plane.base).loadUnaligned(
                        fromByteOffset: row * plane.stride + 2 * column, as: UInt16.self))
                    if interleaved && index > 0 {
                        store(value, plane: 1, x: 2 * (x0 + column) + (index - 1), y: y0 + row)
                    } else {
                        store(value, plane: index, x: x0 + column, y: y0 + row)
                    }
                }
            }
        }
        return frame
    }

    /// `source` (planar 4:2:0) as a decoder surface would download it: NV12, with a border
    /// that the crop fields remove.
    static func uncroppedNV12(
        of source: DecodedFrame, left: Int, top: Int, right: Int, bottom: Int
    ) throws -> UnsafeMutablePointer<AVFrame> {
        let frame = try #require(av_frame_alloc())
        frame.pointee.format = AV_PIX_FMT_NV12.rawValue
        frame.pointee.width = Int32(source.width + left + right)
        frame.pointee.height = Int32(source.height + top + bottom)
        frame.pointee.color_range = source.colorRange == .full ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG
        try #require(av_frame_get_buffer(frame, 0) >= 0)
        frame.pointee.crop_left = left
        frame.pointee.crop_top = top
        frame.pointee.crop_right = right
        frame.pointee.crop_bottom = bottom
        let luma = try #require(source.plane(0))
        let (u, v) = (try #require(source.plane(1)), try #require(source.plane(2)))
        let outLuma = try #require(frame.pointee.data.0)
        let outChroma = try #require(frame.pointee.data.1)
        let (lumaStride, chromaStride) = (Int(frame.pointee.linesize.0), Int(frame.pointee.linesize.1))
        memset(outLuma, 0, lumaStride * Int(frame.pointee.height))
        memset(outChroma, 0, chromaStride * ((Int(frame.pointee.height) + 1) / 2))
        for row in 0..<source.height {
            (outLuma + (row + top) * lumaStride + left).update(from: luma.base + row * luma.stride, count: source.width)
        }
        for row in 0..<(source.height + 1) / 2 {
            let pairs = outChroma + (row + top / 2) * chromaStride + left
            for column in 0..<(source.width + 1) / 2 {
                pairs[2 * column] = u.base[row * u.stride + column]
                pairs[2 * column + 1] = v.base[row * v.stride + column]
            }
        }
        return frame
    }
}

/// Collects values from concurrent closures.
final class Bases: @unchecked Sendable {
    // @unchecked: every access holds `lock`.
    private let lock = NSLock()
    private var values: [Int?] = []
    func add(_ value: Int?) { lock.withLock { values.append(value) } }
    var all: [Int?] { lock.withLock { values } }
}
