import CFFmpeg
import CTurboJPEG
import Decoding
import Foundation
import H264
import TestSupport
@_spi(Benchmarking) import Imaging
import Testing

@Suite(.timeLimit(.minutes(10))) struct OptionTests {
    @Test func qualityOutsideOneToHundredIsRejected() throws {
        for quality in [0, -5, 101, 1000] {
            #expect(throws: ImagingError.self) { try PictureOptions(quality: quality).validated() }
            do {
                _ = try PictureOptions(quality: quality).validated()
            } catch {
                #expect(error.code == .invalidOptions)
                #expect(error.message.contains("quality"))
            }
        }
        for quality in [1, 50, 85, 100] {
            #expect(try PictureOptions(quality: quality).validated().quality == quality)
        }
    }

    @Test func sizesOutsideLimitsAreRejected() throws {
        for options in [PictureOptions(width: 0), PictureOptions(height: -1), PictureOptions(width: 8193),
                        PictureOptions(format: .rgb, height: 100_000)] {
            #expect(throws: ImagingError(.invalidOptions, options.width != nil
                ? "width must be 1...8192, got \(options.width!)"
                : "height must be 1...8192, got \(options.height!)")) { try options.validated() }
        }
        _ = try PictureOptions(width: 8192, height: 1).validated()
    }

    @Test func outputSizeKeepsAspectRoundingToNearest() {
        #expect(outputSize(sourceWidth: 1920, sourceHeight: 1080, width: nil, height: nil) == (1920, 1080))
        #expect(outputSize(sourceWidth: 1920, sourceHeight: 1080, width: 320, height: nil) == (320, 180))
        #expect(outputSize(sourceWidth: 1920, sourceHeight: 1080, width: nil, height: 101) == (180, 101))  // 179.56
        #expect(outputSize(sourceWidth: 1920, sourceHeight: 1080, width: 333, height: nil) == (333, 187))  // 187.31
        #expect(outputSize(sourceWidth: 300, sourceHeight: 168, width: 150, height: nil) == (150, 84))
        #expect(outputSize(sourceWidth: 1920, sourceHeight: 1080, width: 1, height: nil) == (1, 1))  // 0.56 → 1
        #expect(outputSize(sourceWidth: 8000, sourceHeight: 2, width: 3, height: nil) == (3, 1))  // 0.00075 → min 1
        #expect(outputSize(sourceWidth: 1920, sourceHeight: 1080, width: 100, height: 900) == (100, 900))
        #expect(outputSize(sourceWidth: 3, sourceHeight: 2, width: 5, height: nil) == (5, 3))  // 3.33
    }
}

@Suite(.timeLimit(.minutes(10))) struct JPEGTests {
    /// The JPEG at quality 90, decoded back to RGB, against ffmpeg's RGB rendering of the same
    /// picture, twice: repeated chroma on both sides, and interpolated chroma on both sides.
    private func jpegPSNR(_ stream: TestStream, encoder: TurboJPEGEncoder) throws -> (repeated: Double, smooth: Double) {
        let frame = try stream.firstFrame()
        let picture = try encoder.encode(frame, PictureOptions(format: .jpeg, quality: 90))
        #expect(picture.contentType == "image/jpeg")
        #expect(picture.pixelFormatName == nil)
        #expect(picture.width == stream.width && picture.height == stream.height)
        let repeated = try decodeJPEG(picture, smoothChroma: false)
        let smooth = try decodeJPEG(picture, smoothChroma: true)
        #expect(smooth.width == stream.width && smooth.height == stream.height)
        return (psnr(repeated.rgb, try stream.ffmpegFirstFrame()),
                psnr(smooth.rgb, try stream.ffmpegFirstFrameSmoothChroma()))
    }

    /// JPEG is BT.601 for every decoder that reads it: a BT.709 picture's JPEG, decoded, shows
    /// the colours its RGB rendering (which reads BT.709) shows, at its own size and scaled, from
    /// either range; a JPEG of its samples as they are would shift them (about 25 dB apart).
    @Test(arguments: [("yuv420p", false), ("yuvj420p", true), ("yuv420p10le", false), ("yuv444p", false)])
    func aBT709PictureKeepsItsColours(pixelFormat: String, fullRange: Bool) throws {
        let stream = try TestStream.make(
            pixelFormat: pixelFormat, extra: ["-colorspace", "bt709", "-color_range", fullRange ? "pc" : "tv"])
        defer { stream.remove() }
        let frame = try stream.firstFrame()
        #expect(frame.colorMatrix == .bt709)
        #expect(frame.colorRange == (fullRange ? .full : .limited))
        let encoder = try TurboJPEGEncoder()
        for width in [320, 160] {
            let jpeg = try decodeJPEG(
                try encoder.encode(frame, PictureOptions(format: .jpeg, width: width, quality: 95)), smoothChroma: false)
            let rgb = try encoder.encode(frame, PictureOptions(format: .rgb, width: width)).withUnsafeBytes { Array($0) }
            // Scaled, the two paths filter the sharp test pattern differently (YCbCr planes
            // against RGB): 8x8 block means compare their colours without their edges.
            let value = psnr(blockMeans(jpeg.rgb, width: jpeg.width), blockMeans(rgb, width: jpeg.width))
            #expect(value >= 40, "width \(width): PSNR of 8x8 block means \(value) dB")
            if width == 320 { #expect(psnr(jpeg.rgb, rgb) >= 34) }
        }
    }

    /// Each channel's mean over each whole 8x8 block of packed RGB, rounded to a byte.
    private func blockMeans(_ rgb: [UInt8], width: Int) -> [UInt8] {
        let height = rgb.count / (width * 3)
        var means: [UInt8] = []
        for top in stride(from: 0, to: height - 7, by: 8) {
            for left in stride(from: 0, to: width - 7, by: 8) {
                for channel in 0..<3 {
                    var sum = 0
                    for row in top..<(top + 8) {
                        for column in left..<(left + 8) { sum += Int(rgb[(row * width + column) * 3 + channel]) }
                    }
                    means.append(UInt8((sum + 32) / 64))
                }
            }
        }
        return means
    }

    @Test(arguments: RangeExpansionMethod.allCases)
    func limitedRangeMatchesFFmpeg(method: RangeExpansionMethod) throws {
        let stream = try TestStream.make(pixelFormat: "yuv420p")
        defer { stream.remove() }
        #expect(try stream.firstFrame().colorRange == .limited)
        let encoder = try TurboJPEGEncoder()
        encoder.rangeExpansion = method
        let value = try jpegPSNR(stream, encoder: encoder)
        #expect(value.repeated >= 35 && value.smooth >= 35, "PSNR \(value) dB")
    }

    @Test func fullRangeMatchesFFmpeg() throws {
        let stream = try TestStream.make(pixelFormat: "yuvj420p")
        defer { stream.remove() }
        let frame = try stream.firstFrame()
        #expect(frame.colorRange == .full)
        let value = try jpegPSNR(stream, encoder: try TurboJPEGEncoder())
        #expect(value.repeated >= 35 && value.smooth >= 35, "PSNR \(value) dB")
    }

    @Test func fullRangeViaVUIFlagMatchesFFmpeg() throws {
        // yuv420p with video_full_range_flag: libavcodec reports yuvj420p or yuv420p+JPEG range.
        let stream = try TestStream.make(pixelFormat: "yuv420p", extra: ["-color_range", "pc"])
        defer { stream.remove() }
        #expect(try stream.firstFrame().colorRange == .full)
        let value = try jpegPSNR(stream, encoder: try TurboJPEGEncoder())
        #expect(value.repeated >= 35 && value.smooth >= 35, "PSNR \(value) dB")
    }

    /// Subsampling the JPEG should keep (TJSAMP_*), per x264 pixel format.
    static let subsamplingCases: [(String, TJSAMP)] = [
        ("yuv422p", TJSAMP_422), ("yuv444p", TJSAMP_444), ("yuv420p10le", TJSAMP_420),
        ("yuv422p10le", TJSAMP_422), ("gray", TJSAMP_420), ("yuvj444p", TJSAMP_444),
    ]

    @Test(arguments: subsamplingCases.indices)
    func otherChromaFormatsAndDepthsEncode(caseIndex: Int) throws {
        let (pixelFormat, subsampling) = Self.subsamplingCases[caseIndex]
        let stream = try TestStream.make(pixelFormat: pixelFormat)
        defer { stream.remove() }
        let encoder = try TurboJPEGEncoder()
        let frame = try stream.firstFrame()
        let picture = try encoder.encode(frame, PictureOptions(quality: 90))
        let decoded = try decodeJPEG(picture)
        #expect(decoded.width == 320 && decoded.height == 240)
        #expect(decoded.subsampling == Int32(subsampling.rawValue), "\(pixelFormat) as \(frame.pixelFormatName)")
        let value = psnr(decoded.rgb, try stream.ffmpegFirstFrameSmoothChroma())
        #expect(value >= 35, "\(pixelFormat): PSNR \(value) dB")
    }

    @Test func monochromeStreamComesOutGrey() throws {
        let stream = try TestStream.make(pixelFormat: "gray", width: 64, height: 48)
        defer { stream.remove() }
        let picture = try TurboJPEGEncoder().encode(try stream.firstFrame(), PictureOptions(quality: 95))
        let rgb = try decodeJPEG(picture).rgb
        let maxChannelSpread = stride(from: 0, to: rgb.count, by: 3).map { index in
            Int(max(rgb[index], rgb[index + 1], rgb[index + 2])) - Int(min(rgb[index], rgb[index + 1], rgb[index + 2]))
        }.max() ?? 0
        #expect(maxChannelSpread <= 2)
    }

    /// Also at HD sizes and with a matrix other than BT.601 stated or assumed (from 720 lines up),
    /// where a colour picture's JPEG converts its matrix and a grey one has nothing to convert.
    @Test(arguments: [(33, 17, AVCOL_SPC_UNSPECIFIED), (1280, 720, AVCOL_SPC_UNSPECIFIED), (64, 48, AVCOL_SPC_BT709)])
    func grayFramesBecomeGrayscaleJPEGs(width: Int, height: Int, colorspace: AVColorSpace) throws {
        let encoder = try TurboJPEGEncoder()
        for range in [AVCOL_RANGE_MPEG, AVCOL_RANGE_JPEG] {
            let frame = try makeFrame(AV_PIX_FMT_GRAY8, width: width, height: height, range: range, colorspace: colorspace) { _, x, _ in
                x < 16 ? 16 : 235
            }
            let picture = try encoder.encode(frame, PictureOptions(quality: 100))
            let decoded = try decodeJPEG(picture)
            #expect(decoded.subsampling == Int32(TJSAMP_GRAY.rawValue))
            #expect(decoded.width == width && decoded.height == height)
            let dark = Int(decoded.rgb[3 * (8 * width + 4)])
            let light = Int(decoded.rgb[3 * (8 * width + 28)])
            if range == AVCOL_RANGE_MPEG {
                #expect(abs(dark - 0) <= 2 && abs(light - 255) <= 2, "limited gray expanded: \(dark) \(light)")
            } else {
                #expect(abs(dark - 16) <= 2 && abs(light - 235) <= 2, "full gray untouched: \(dark) \(light)")
            }
        }
    }

    /// Limited-range black, white and saturated chroma must land on full-range values, with
    /// either expansion method, and both methods must agree.
    @Test func rangeExpansionMethodsProduceFullRange() throws {
        let frame = try makeFrame(AV_PIX_FMT_YUV420P, width: 64, height: 32) { plane, x, _ in
            switch plane {
            case 0: return x < 32 ? 16 : 235
            default: return 128
            }
        }
        var renderings: [[UInt8]] = []
        for method in RangeExpansionMethod.allCases {
            let encoder = try TurboJPEGEncoder()
            encoder.rangeExpansion = method
            let rgb = try decodeJPEG(encoder.encode(frame, PictureOptions(quality: 100))).rgb
            let black = rgb[3 * (16 * 64 + 8)]
            let white = rgb[3 * (16 * 64 + 56)]
            #expect(black <= 2 && white >= 253, "\(method): black \(black) white \(white)")
            renderings.append(rgb)
        }
        #expect(psnr(renderings[0], renderings[1]) >= 45)
    }

    /// The C expansion gives, for every byte value, the rounded full-range value (halves away from
    /// zero, clamped): in its sixteen-at-a-time part, in its tail, and in place.
    @Test(arguments: [false, true])
    func rangeExpansionIsExactForEveryByte(chroma: Bool) {
        func expected(_ sample: Int) -> UInt8 {
            let value = chroma ? (Double(sample) - 128) * 255 / 224 + 128 : (Double(sample) - 16) * 255 / 219
            return UInt8(min(max(value.rounded(.toNearestOrAwayFromZero), 0), 255))
        }
        // 256 values twice, the second time shifted by 7; rows of one sample take every value
        // through the tail alone.
        let input = (0..<256).map { UInt8($0) } + (0..<256).map { UInt8(($0 + 7) & 255) }
        let reference = input.map { expected(Int($0)) }
        for rowBytes in [1, 16, 23, 512] {
            let rows = input.count / rowBytes
            var output = [UInt8](repeating: 0, count: input.count)
            input.withUnsafeBufferPointer { source in
                output.withUnsafeMutableBufferPointer { result in
                    ft_expand_range_plane(
                        source.baseAddress, rowBytes, result.baseAddress, rowBytes, rowBytes, rows, chroma ? 1 : 0)
                }
            }
            let covered = rows * rowBytes
            #expect(Array(output[..<covered]) == Array(reference[..<covered]), "rows of \(rowBytes)")
            var inPlace = input
            inPlace.withUnsafeMutableBufferPointer { plane in
                ft_expand_range_plane(plane.baseAddress, rowBytes, plane.baseAddress, rowBytes, rowBytes, rows, chroma ? 1 : 0)
            }
            #expect(Array(inPlace[..<covered]) == Array(reference[..<covered]), "in place, rows of \(rowBytes)")
        }
    }

    @Test func nv12FromHardwareDownloadEncodes() throws {
        let stream = try TestStream.make(pixelFormat: "yuv420p", width: 160, height: 96)
        defer { stream.remove() }
        let planar = try stream.firstFrame()
        let nv12 = try nv12Copy(of: planar)
        let encoder = try TurboJPEGEncoder()
        let fromPlanar = try decodeJPEG(encoder.encode(planar, PictureOptions(quality: 90)))
        let fromNV12 = try decodeJPEG(encoder.encode(nv12, PictureOptions(quality: 90)))
        #expect(fromNV12.subsampling == Int32(TJSAMP_420.rawValue))
        #expect(psnr(fromPlanar.rgb, fromNV12.rgb) >= 40)
    }

    @Test func jpegOutputBufferIsReusedAcrossSizes() throws {
        let stream = try TestStream.make(pixelFormat: "yuv420p", width: 160, height: 96, frames: 3)
        defer { stream.remove() }
        let encoder = try TurboJPEGEncoder()
        var pictures: [EncodedPicture] = []
        for frame in try stream.decodeFrames() {
            for width in [160, 40, 320] {
                pictures.append(try encoder.encode(frame, PictureOptions(width: width)))
            }
        }
        // Each picture owns its bytes: earlier ones must survive later encodes untouched.
        for picture in pictures {
            let decoded = try decodeJPEG(picture)
            #expect(decoded.width == picture.width)
        }
        #expect(pictures.count == 9, "three sizes of each of three pictures")
    }
}

@Suite(.timeLimit(.minutes(10))) struct ScalingTests {
    @Test func thumbnailDimensionsAreExact() throws {
        let stream = try TestStream.make(pixelFormat: "yuv420p", width: 320, height: 240)
        defer { stream.remove() }
        let frame = try stream.firstFrame()
        let encoder = try TurboJPEGEncoder()
        let cases: [(Int?, Int?, Int, Int)] = [
            (160, nil, 160, 120), (nil, 60, 80, 60), (100, 100, 100, 100), (101, nil, 101, 76),
            (nil, 77, 103, 77), (33, 17, 33, 17), (1, 1, 1, 1), (1, nil, 1, 1), (641, 479, 641, 479),
        ]
        for (width, height, expectedWidth, expectedHeight) in cases {
            for format in PictureFormat.allCases {
                let picture = try encoder.encode(frame, PictureOptions(format: format, width: width, height: height))
                #expect(picture.width == expectedWidth && picture.height == expectedHeight)
                switch format {
                case .jpeg:
                    let decoded = try decodeJPEG(picture)
                    #expect(decoded.width == expectedWidth && decoded.height == expectedHeight)
                case .rgb:
                    #expect(picture.count == expectedWidth * expectedHeight * 3)
                case .yuv:
                    let chroma = ((expectedWidth + 1) / 2) * ((expectedHeight + 1) / 2)
                    #expect(picture.count == expectedWidth * expectedHeight + 2 * chroma)
                    #expect(picture.pixelFormatName == "yuv420p")
                }
            }
        }
        #expect(encoder.cachedScalerCount <= 8)
    }

    @Test func scaledThumbnailLooksLikeFFmpegScale() throws {
        let stream = try TestStream.make(pixelFormat: "yuv420p", width: 320, height: 240)
        defer { stream.remove() }
        let picture = try TurboJPEGEncoder().encode(try stream.firstFrame(), PictureOptions(format: .rgb, width: 160))
        let reference = try runFFmpeg(
            ["-f", "h264", "-i", stream.path, "-frames:v", "1", "-vf", "scale=160:120", "-f", "rawvideo",
             "-pix_fmt", "rgb24", "-"])
        let value = psnr(picture.byteArray, reference)
        #expect(value >= 30, "PSNR \(value) dB")
    }

    @Test func oddAndTinyFramesNeverFail() throws {
        let encoder = try TurboJPEGEncoder()
        for (format, width, height) in [
            (AV_PIX_FMT_YUV420P, 1, 1), (AV_PIX_FMT_YUV420P, 3, 3), (AV_PIX_FMT_YUV420P, 321, 241),
            (AV_PIX_FMT_YUVJ420P, 5, 1), (AV_PIX_FMT_YUV422P, 7, 5), (AV_PIX_FMT_YUV444P, 1, 9),
            (AV_PIX_FMT_NV12, 9, 7), (AV_PIX_FMT_GRAY8, 1, 1),
        ] {
            let frame = try makeFrame(format, width: width, height: height) { plane, x, y in
                UInt8(truncatingIfNeeded: 16 + plane * 40 + x * 3 + y * 5)
            }
            for options in [
                PictureOptions(format: .jpeg), PictureOptions(format: .yuv), PictureOptions(format: .rgb),
                PictureOptions(format: .jpeg, width: 1), PictureOptions(format: .rgb, width: 2, height: 3),
                PictureOptions(format: .yuv, width: 17, height: 1), PictureOptions(format: .jpeg, height: 64),
            ] {
                let picture = try encoder.encode(frame, options)
                let size = outputSize(
                    sourceWidth: width, sourceHeight: height, width: options.width, height: options.height)
                #expect(picture.width == size.width && picture.height == size.height)
                if options.format == .jpeg {
                    let decoded = try decodeJPEG(picture)
                    #expect(decoded.width == size.width && decoded.height == size.height)
                }
            }
        }
    }

    @Test func extremeRatiosScale() throws {
        let encoder = try TurboJPEGEncoder()
        let large = try makeFrame(AV_PIX_FMT_YUV420P, width: 1280, height: 720) { plane, x, y in
            plane == 0 ? UInt8(truncatingIfNeeded: x ^ y) : 128
        }
        for (width, height) in [(1, 1), (2, 2), (1, 720), (1280, 1)] {
            for format in PictureFormat.allCases {
                let picture = try encoder.encode(large, PictureOptions(format: format, width: width, height: height))
                #expect(picture.width == width && picture.height == height)
            }
        }
        let tiny = try makeFrame(AV_PIX_FMT_YUV420P, width: 1, height: 1) { plane, _, _ in plane == 0 ? 200 : 100 }
        let enlarged = try encoder.encode(tiny, PictureOptions(format: .rgb, width: 1000))
        #expect(enlarged.width == 1000 && enlarged.height == 1000)
        // A flat 1x1 picture stays flat when enlarged.
        let pixels = enlarged.byteArray
        #expect(pixels.count == 1000 * 1000 * 3)
        #expect(pixels[0..<3] == pixels[pixels.count - 3..<pixels.count])
    }

    @Test func outputAboveThePixelLimitIsRejected() throws {
        let frame = try makeFrame(AV_PIX_FMT_YUV420P, width: 16, height: 16) { _, _, _ in 128 }
        let encoder = try TurboJPEGEncoder()
        #expect(throws: ImagingError.self) {
            try encoder.encode(frame, PictureOptions(width: 8192, height: 8192))
        }
        do {
            _ = try encoder.encode(frame, PictureOptions(format: .rgb, width: 8192, height: 8192))
        } catch {
            #expect(error.code == .invalidOptions)
        }
        // Width alone on a tall source can push the derived height over the per-side limit.
        let tall = try makeFrame(AV_PIX_FMT_GRAY8, width: 2, height: 64) { _, _, _ in 128 }
        do {
            _ = try encoder.encode(tall, PictureOptions(width: 300))
            Issue.record("expected a size error")
        } catch {
            #expect(error.code == .invalidOptions)
        }
    }
}

@Suite(.timeLimit(.minutes(10))) struct RawOutputTests {
    @Test(arguments: ["yuv420p", "yuvj420p", "yuv422p", "yuv444p", "yuv420p10le", "gray"])
    func nativeYUVEqualsPackedPlanes(pixelFormat: String) throws {
        let stream = try TestStream.make(pixelFormat: pixelFormat, width: 176, height: 144)
        defer { stream.remove() }
        let frame = try stream.firstFrame()
        let picture = try TurboJPEGEncoder().encode(frame, PictureOptions(format: .yuv))
        var expected: [UInt8] = []
        frame.appendPackedPlanes(to: &expected)
        #expect(picture.byteArray == expected)
        #expect(picture.pixelFormatName == frame.pixelFormatName)
        #expect(picture.contentType == "application/octet-stream")
        // And it is what ffmpeg writes for the native format.
        #expect(picture.byteArray == (try stream.ffmpegFirstFrame(pixelFormat: frame.pixelFormatName)))
    }

    @Test func scaledYUVKeepsPixelFormatAndRange() throws {
        let stream = try TestStream.make(pixelFormat: "yuv420p10le", width: 176, height: 144)
        defer { stream.remove() }
        let picture = try TurboJPEGEncoder().encode(try stream.firstFrame(), PictureOptions(format: .yuv, width: 87))
        #expect(picture.pixelFormatName == "yuv420p10le")
        #expect(picture.width == 87 && picture.height == 71)
        #expect(picture.count == 2 * (87 * 71 + 2 * 44 * 36))
    }

    @Test func nv12BecomesPlanarYUV420() throws {
        let stream = try TestStream.make(pixelFormat: "yuv420p", width: 98, height: 66)
        defer { stream.remove() }
        let planar = try stream.firstFrame()
        let picture = try TurboJPEGEncoder().encode(try nv12Copy(of: planar), PictureOptions(format: .yuv))
        var expected: [UInt8] = []
        planar.appendPackedPlanes(to: &expected)
        #expect(picture.pixelFormatName == "yuv420p")
        #expect(picture.byteArray == expected)
    }

    @Test(arguments: [("yuv420p", [String]()), ("yuvj420p", []), ("yuv444p", []), ("yuv420p10le", []),
                      ("yuv420p", ["-colorspace", "bt709"]), ("yuv422p", ["-colorspace", "bt470bg"])])
    func rgbMatchesFFmpeg(pixelFormat: String, extra: [String]) throws {
        let stream = try TestStream.make(pixelFormat: pixelFormat, extra: extra)
        defer { stream.remove() }
        let frame = try stream.firstFrame()
        let picture = try TurboJPEGEncoder().encode(frame, PictureOptions(format: .rgb))
        #expect(picture.count == stream.width * stream.height * 3)
        #expect(picture.pixelFormatName == "rgb24")
        let value = psnr(picture.byteArray, try stream.ffmpegFirstFrame())
        #expect(value >= 35, "\(pixelFormat) \(extra) (\(frame.colorMatrix)): PSNR \(value) dB")
    }

    @Test func rgbUsesTheSignalledMatrix() throws {
        // Pure limited-range colour: BT.601 and BT.709 give clearly different RGB.
        func render(_ colorspace: AVColorSpace, height: Int) throws -> [UInt8] {
            let frame = try makeFrame(AV_PIX_FMT_YUV444P, width: 4, height: height, colorspace: colorspace) { plane, _, _ in
                [81, 90, 240][plane]  // BT.601 red
            }
            return Array(try TurboJPEGEncoder().encode(frame, PictureOptions(format: .rgb)).byteArray.prefix(3))
        }
        let bt601 = try render(AVCOL_SPC_SMPTE170M, height: 4)
        let bt709 = try render(AVCOL_SPC_BT709, height: 4)
        #expect(bt601[0] >= 250 && bt601[1] <= 4 && bt601[2] <= 4, "\(bt601)")
        #expect(bt709 != bt601)
        #expect(try render(AVCOL_SPC_UNSPECIFIED, height: 4) == bt601)
        #expect(try render(AVCOL_SPC_UNSPECIFIED, height: 720).prefix(3) == bt709.prefix(3))
    }
}

/// Pictures deeper than 8 bits (H.265 Main 10, the range extensions' 4:2:2 10-bit and 12-bit,
/// monochrome 10/12; H.264 High 10 goes the same way): JPEG is 8-bit, so swscale converts depth
/// and range together (limited 64-940 at 10 bits, 256-3760 at 12, or full range, to JPEG's full
/// 0-255), and `yuv` serves the decoder's own planes, as ffmpeg writes them.
@Suite(.timeLimit(.minutes(10))) struct HighBitDepthTests {
    static let hevcCases: [(String, TJSAMP, [String])] = [
        ("yuv420p10le", TJSAMP_420, []), ("yuv422p10le", TJSAMP_422, []), ("yuv444p12le", TJSAMP_444, []),
        ("yuv420p12le", TJSAMP_420, []), ("gray10le", TJSAMP_GRAY, []), ("gray12le", TJSAMP_GRAY, []),
        ("yuv420p10le", TJSAMP_420, ["-color_range", "pc"]),
    ]

    /// The JPEG of a libx265 picture, decoded, against ffmpeg's own 8-bit RGB conversion of the
    /// same picture (the CLI's swscale with the stream's range), as the H.264 cases above.
    @Test(arguments: hevcCases.indices)
    func hevcJPEGMatchesFFmpegsEightBitConversion(caseIndex: Int) throws {
        let (pixelFormat, subsampling, extra) = Self.hevcCases[caseIndex]
        let stream = try TestStream.make(pixelFormat: pixelFormat, extra: extra, encoder: "libx265")
        defer { stream.remove() }
        let frame = try stream.firstFrame()
        #expect(frame.pixelFormatName == pixelFormat)
        // ffmpeg hands libx265 grey pictures as full range (and the stream says so).
        #expect(frame.colorRange == (extra.isEmpty && !pixelFormat.hasPrefix("gray") ? .limited : .full))
        let picture = try TurboJPEGEncoder().encode(frame, PictureOptions(quality: 90))
        let decoded = try decodeJPEG(picture)
        #expect(decoded.width == 320 && decoded.height == 240)
        #expect(decoded.subsampling == Int32(subsampling.rawValue), "\(pixelFormat)")
        let value = psnr(decoded.rgb, try stream.ffmpegFirstFrameSmoothChroma())
        #expect(value >= 35, "\(pixelFormat) \(extra): PSNR \(value) dB")
        // Thumbnails take the same conversion, scaled.
        #expect(try decodeJPEG(try TurboJPEGEncoder().encode(frame, PictureOptions(width: 160))).width == 160)
    }

    /// Range-aware, exactly: limited-range black, middle grey and white at 10 and 12 bits, and
    /// full-range ones, come out of the JPEG as 0, 128 and 255 (give or take the rounding of
    /// the 8-bit conversion).
    static let rangeCases: [(format: AVPixelFormat, range: AVColorRange, lumas: [UInt16], neutral: UInt16)] = [
        (AV_PIX_FMT_YUV420P10LE, AVCOL_RANGE_MPEG, [64, 504, 940], 512),
        (AV_PIX_FMT_YUV422P10LE, AVCOL_RANGE_MPEG, [64, 504, 940], 512),
        (AV_PIX_FMT_YUV444P12LE, AVCOL_RANGE_MPEG, [256, 2015, 3760], 2048),
        (AV_PIX_FMT_YUV420P12LE, AVCOL_RANGE_MPEG, [256, 2015, 3760], 2048),
        (AV_PIX_FMT_YUV420P10LE, AVCOL_RANGE_JPEG, [0, 514, 1023], 512),
        (AV_PIX_FMT_GRAY10LE, AVCOL_RANGE_MPEG, [64, 504, 940], 0),
        (AV_PIX_FMT_GRAY12LE, AVCOL_RANGE_MPEG, [256, 2015, 3760], 0),
        (AV_PIX_FMT_GRAY10LE, AVCOL_RANGE_JPEG, [0, 514, 1023], 0),
    ]

    @Test(arguments: rangeCases.indices)
    func blackGreyAndWhiteAreRangeAware(caseIndex: Int) throws {
        let (format, range, lumas, neutral) = Self.rangeCases[caseIndex]
        for (luma, expected) in zip(lumas, [0, 128, 255]) {
            let frame = try makeHighBitFrame(format, width: 64, height: 32, range: range) { plane, _, _ in
                plane == 0 ? luma : neutral
            }
            // At its own size (swscale's depth conversion: each sample rounded) and as a
            // thumbnail (its scaler, which dithers the last bit like the CLI's: the mean holds).
            for (width, spread) in [(nil, 1), (32, 5)] as [(Int?, Int)] {
                let rgb = try decodeJPEG(try TurboJPEGEncoder().encode(frame, PictureOptions(width: width, quality: 100))).rgb
                let (low, high) = (Int(rgb.min() ?? 0), Int(rgb.max() ?? 0))
                let mean = Double(rgb.reduce(0) { $0 + Int($1) }) / Double(rgb.count)
                #expect(
                    abs(mean - Double(expected)) <= 1 && low >= expected - spread && high <= expected + spread,
                    "\(frame.pixelFormatName) \(range == AVCOL_RANGE_JPEG ? "full" : "limited") luma \(luma) width \(width ?? 64): RGB \(low)...\(high), mean \(mean), want \(expected)")
            }
        }
    }

    /// At its own size a 10- or 12-bit picture goes to 8 bits by table (depth and range in one
    /// lookup); swscale's conversion of the same picture must give the same JPEG but for rounding
    /// (swscale dithers the last bit).
    @Test(arguments: ["yuv420p10le", "yuv444p12le", "gray10le"])
    func tableAndSwscaleAgreeOnDeepPictures(pixelFormat: String) throws {
        let stream = try TestStream.make(pixelFormat: pixelFormat, encoder: "libx265")
        defer { stream.remove() }
        let frame = try stream.firstFrame()
        var renderings: [[UInt8]] = []
        for method in RangeExpansionMethod.allCases {
            let encoder = try TurboJPEGEncoder()
            encoder.rangeExpansion = method
            renderings.append(try decodeJPEG(encoder.encode(frame, PictureOptions(quality: 95))).rgb)
        }
        let value = psnr(renderings[0], renderings[1])
        #expect(value >= 40, "\(pixelFormat): table against swscale PSNR \(value) dB")
    }

    /// `yuv` is the decoder's own picture: its native format, byte for byte what
    /// `ffmpeg -f hevc -i F -f rawvideo` writes in that format.
    @Test(arguments: ["yuv420p10le", "yuv422p10le", "yuv444p12le", "gray12le"])
    func nativeYUVOfAnHEVCPictureEqualsFFmpegs(pixelFormat: String) throws {
        let stream = try TestStream.make(pixelFormat: pixelFormat, width: 176, height: 144, encoder: "libx265")
        defer { stream.remove() }
        let frame = try stream.firstFrame()
        let picture = try TurboJPEGEncoder().encode(frame, PictureOptions(format: .yuv))
        #expect(picture.pixelFormatName == pixelFormat)
        #expect(picture.byteArray == (try stream.ffmpegFirstFrame(pixelFormat: pixelFormat)))
    }
}

/// The same picture as a VA-API download would hand it over: NV12 (interleaved CbCr).
func nv12Copy(of frame: DecodedFrame) throws -> DecodedFrame {
    guard frame.pixelFormat == AV_PIX_FMT_YUV420P, let y = frame.plane(0), let u = frame.plane(1), let v = frame.plane(2)
    else { throw TestFailure("nv12Copy needs yuv420p") }
    return try makeFrame(AV_PIX_FMT_NV12, width: frame.width, height: frame.height) { plane, x, row in
        if plane == 0 { return y.base[row * y.stride + x] }
        return x % 2 == 0 ? u.base[row * u.stride + x / 2] : v.base[row * v.stride + x / 2]
    }
}

/// The frames the service really encodes come from the Decoding target's H264Decoder; the
/// rest of these tests use an independent minimal libavcodec loop so a decoder bug cannot hide
/// an imaging bug. Here both must agree, and every frame of the stream must encode.
@Suite(.timeLimit(.minutes(10))) struct DecoderIntegrationTests {
    @Test func framesFromH264DecoderEncode() throws {
        let stream = try TestStream.make(pixelFormat: "yuv420p", width: 322, height: 182, frames: 5)
        defer { stream.remove() }
        let decoder = try LibavDecoder(options: DecoderOptions(backend: .software))
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: stream.path)))
        var output = decoder.decode(annexB: bytes)
        output.frames += decoder.drain().frames
        #expect(output.errors.isEmpty)
        let reference = try stream.decodeFrames()
        #expect(output.frames.count == 5 && reference.count == 5)
        let encoder = try TurboJPEGEncoder()
        for (frame, referenceFrame) in zip(output.frames, reference) {
            let jpeg = try encoder.encode(frame, PictureOptions(width: 161, quality: 80))
            #expect(try decodeJPEG(jpeg).width == 161)
            let raw = try encoder.encode(frame, PictureOptions(format: .yuv))
            let referenceRaw = try encoder.encode(referenceFrame, PictureOptions(format: .yuv))
            #expect(raw.byteArray == referenceRaw.byteArray)
        }
    }
}
