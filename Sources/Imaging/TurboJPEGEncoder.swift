import CFFmpeg
import CTurboJPEG
import Decoding

/// Turns decoded pictures into JPEG (TurboJPEG, straight from the YUV planes where it can), raw
/// YUV or raw RGB, optionally resized (libswscale), on the CPU. Users get it through a
/// `PictureEncoderFactory` (`TurboJPEGEncoderFactory`).
///
/// Not thread-safe: it owns a TurboJPEG handle (stateful), reusable conversion buffers and a
/// swscale context cache. Give each worker thread its own encoder.
public final class TurboJPEGEncoder: PictureEncoding {
    /// `identity.name`.
    public static let name = "turbojpeg"
    public let identity: PictureEncoderIdentity
    private let compressor: tjhandle
    /// TurboJPEG writes into this worst-case-sized buffer (TJFLAG_NOREALLOC); each picture
    /// then gets one exact-size copy of the compressed bytes. Grows, never shrinks.
    private var jpegBuffer: UnsafeMutablePointer<UInt8>?
    private var jpegBufferCapacity = 0
    private let scratch = PlaneScratch()
    private let scalers = ScalerCache(capacity: 8)
    /// High-bit-depth to 8-bit tables made so far (a few KiB each; a stream keeps one depth).
    private var narrowingTables: [NarrowingTables.Key: [UInt8]] = [:]

    /// Chosen by measurement (release build, 1920x1080 testsrc2 yuv420p, quality 90, one
    /// core of a shared 2-core VM): JPEG with the table 2.67 ms/frame, with swscale 5.56 ms,
    /// zero-copy full-range 2.04 ms; so the expansion costs ~0.6 ms by table and ~3.5 ms
    /// through swscale's generic scaler path (a same-size range change cannot use its copy path).
    /// The built-in expansion has since become C doing sixteen samples at a time, half the
    /// table's cost (BENCHMARKS.md, issue 27 third round).
    @_spi(Benchmarking) public var rangeExpansion: RangeExpansionMethod = .builtIn

    /// Buffers above this are freed after the picture that needed them, so one huge request
    /// (up to 36 Mpixel) does not pin ~100 MB per encoder for the rest of its life. 4K 4:4:4
    /// stays below it and is reused.
    static let retainedBufferLimit = 64 << 20

    /// `reason`: why this encoder serves (`identity.reason`).
    public init(reason: String = TurboJPEGEncoderFactory.defaultReason) throws(ImagingError) {
        guard let compressor = tjInitCompress() else {
            throw ImagingError(.allocationFailed, "cannot create a TurboJPEG compressor: \(Self.turboJPEGError(nil))")
        }
        self.compressor = compressor
        identity = PictureEncoderIdentity(name: Self.name, reason: reason)
    }

    deinit {
        tjDestroy(compressor)
        jpegBuffer?.deallocate()
    }

    /// Number of cached swscale contexts (for tests and diagnostics).
    public var cachedScalerCount: Int { scalers.count }

    public func encode(_ frame: DecodedFrame, _ options: PictureOptions) throws(ImagingError) -> EncodedPicture {
        let options = try options.validated()
        defer { releaseOversizedBuffers() }
        let source = try SourcePicture(frame)
        let size = outputSize(sourceWidth: source.width, sourceHeight: source.height, width: options.width, height: options.height)
        guard size.width <= PictureOptions.maxDimension, size.height <= PictureOptions.maxDimension,
            size.width * size.height <= PictureSizeLimit.defaultMaxPixels
        else {
            throw ImagingError(
                .invalidOptions,
                "output \(size.width)x\(size.height) exceeds the limit of \(PictureOptions.maxDimension) per side "
                    + "and \(PictureSizeLimit.defaultMaxPixels) pixels")
        }
        switch options.format {
        case .jpeg: return try encodeJPEG(source, size: size, quality: options.quality)
        case .yuv: return try encodeYUV(source, size: size)
        case .rgb: return try encodeRGB(source, size: size)
        }
    }

    private func releaseOversizedBuffers() {
        if jpegBufferCapacity > Self.retainedBufferLimit {
            jpegBuffer?.deallocate()
            jpegBuffer = nil
            jpegBufferCapacity = 0
        }
        scratch.release(above: Self.retainedBufferLimit)
    }

    // MARK: JPEG

    private func encodeJPEG(_ source: SourcePicture, size: (width: Int, height: Int), quality: Int) throws(ImagingError)
        -> EncodedPicture
    {
        let (inputFormat, subsampling) = PixelFormats.jpegInput(for: source.format)
        let nativeSize = size.width == source.width && size.height == source.height
        // A matrix other than JPEG's is converted with the range (from the source's range), or
        // after whatever made the planes full range (`convertInPlace`). A grey picture has no
        // chroma, and its luma is the same under every matrix.
        let color =
            inputFormat == AV_PIX_FMT_GRAY8
            ? nil : JPEGColor(matrix: source.matrix, height: source.height, fullRange: source.range == .full)
        let planes: PlanePointers
        if nativeSize && source.format == inputFormat && (source.range == .full || rangeExpansion == .builtIn),
            let color, let layout = PlaneLayout(pixelFormat: inputFormat, width: size.width, height: size.height)
        {
            let output = scratch.planes(for: layout)
            var written = PlanePointers()
            for plane in 0..<layout.planeCount {
                written.data[plane] = output.data[plane].map { UnsafePointer($0) }
                written.strides[plane] = output.strides[plane]
            }
            color.apply(source.planes, to: written, layout: layout)
            planes = written
        } else if nativeSize && source.format == inputFormat && source.range == .full {
            planes = source.planes  // the zero-copy path: TurboJPEG reads the decoder's planes
        } else if nativeSize && source.format == inputFormat && rangeExpansion == .builtIn {
            planes = expandRange(source)
        } else if nativeSize && rangeExpansion == .builtIn, let depth = PixelFormats.narrowableDepth(source.format, to: inputFormat) {
            // 10- and 12-bit pictures at their own size: one table lookup per sample does depth
            // and range together. swscale's generic path for it cost more than the JPEG itself
            // (H2 in BENCHMARKS.md).
            planes = narrow(source, depth: depth, to: inputFormat)
            convertInPlace(planes, of: source, format: inputFormat, size: size)
        } else if inputFormat == AV_PIX_FMT_GRAY8 && source.range == .limited {
            // swscale converts a grey picture deeper than 8 bits (gray10/gray12: H.265
            // monochrome) to gray8 without the range change it is asked for, scaled or not
            // (libswscale 6; measured: 10-bit black 64 stays 16): convert depth and size alone,
            // then expand the 8-bit result like any limited-range luma.
            planes = try convert(source, to: inputFormat, size: size, outputFullRange: false, rgbColorspace: nil)
            expandLumaInPlace(planes, width: size.width, height: size.height)
        } else {
            planes = try convert(source, to: inputFormat, size: size, outputFullRange: true, rgbColorspace: nil)
            convertInPlace(planes, of: source, format: inputFormat, size: size)
        }
        return try compress(
            planes, width: size.width, height: size.height, subsampling: subsampling, quality: quality)
    }

    /// `source`'s matrix to JPEG's, on planes this encoder wrote (full range, 8-bit), where they are.
    private func convertInPlace(
        _ planes: PlanePointers, of source: SourcePicture, format: AVPixelFormat, size: (width: Int, height: Int)
    ) {
        guard format != AV_PIX_FMT_GRAY8, let color = JPEGColor(matrix: source.matrix, height: source.height, fullRange: true),
            let layout = PlaneLayout(pixelFormat: format, width: size.width, height: size.height)
        else { return }
        color.apply(planes, to: planes, layout: layout)
    }

    private func expandRange(_ source: SourcePicture) -> PlanePointers {
        guard let layout = PlaneLayout(pixelFormat: source.format, width: source.width, height: source.height) else {
            return source.planes  // unreachable: SourcePicture already built this layout
        }
        let output = scratch.planes(for: layout)
        var planes = PlanePointers()
        for plane in 0..<layout.planeCount {
            guard let input = source.planes.data[plane], let result = output.data[plane] else { continue }
            RangeExpansion.apply(
                chroma: plane > 0, from: input,
                sourceStride: Int(source.planes.strides[plane]), to: result, outputStride: Int(output.strides[plane]),
                rowBytes: layout.rowBytes[plane], rows: layout.rows[plane])
            planes.data[plane] = UnsafePointer(result)
            planes.strides[plane] = output.strides[plane]
        }
        return planes
    }

    private func narrow(_ source: SourcePicture, depth: Int, to format: AVPixelFormat) -> PlanePointers {
        guard let layout = PlaneLayout(pixelFormat: format, width: source.width, height: source.height) else {
            return source.planes  // unreachable: the source's own layout at 8 bits exists
        }
        let output = scratch.planes(for: layout)
        var planes = PlanePointers()
        for plane in 0..<layout.planeCount {
            guard let input = source.planes.data[plane], let result = output.data[plane] else { continue }
            let key = NarrowingTables.Key(depth: depth, fullRange: source.range == .full, chroma: plane > 0)
            let table = narrowingTables[key] ?? NarrowingTables.make(key)
            narrowingTables[key] = table
            NarrowingTables.apply(
                table, from: input, sourceStride: Int(source.planes.strides[plane]), to: result,
                outputStride: Int(output.strides[plane]), samples: layout.rowBytes[plane], rows: layout.rows[plane])
            planes.data[plane] = UnsafePointer(result)
            planes.strides[plane] = output.strides[plane]
        }
        return planes
    }

    /// Limited to full range, in place, on an 8-bit luma plane this encoder converted into.
    private func expandLumaInPlace(_ planes: PlanePointers, width: Int, height: Int) {
        guard let luma = planes.data[0] else { return }
        let stride = Int(planes.strides[0])
        RangeExpansion.apply(
            chroma: false, from: luma, sourceStride: stride, to: UnsafeMutablePointer(mutating: luma),
            outputStride: stride, rowBytes: width, rows: height)
    }

    private func compress(
        _ planes: PlanePointers, width: Int, height: Int, subsampling: TJSAMP, quality: Int
    ) throws(ImagingError) -> EncodedPicture {
        let samp = Int32(subsampling.rawValue)
        let bound = tjBufSize(Int32(width), Int32(height), samp)
        guard bound != UInt(bitPattern: -1), bound <= UInt(Int.max) else {
            throw ImagingError(.encodeFailed, "TurboJPEG cannot size a \(width)x\(height) JPEG")
        }
        if Int(bound) > jpegBufferCapacity {
            jpegBuffer?.deallocate()
            jpegBuffer = UnsafeMutablePointer<UInt8>.allocate(capacity: Int(bound))
            jpegBufferCapacity = Int(bound)
        }
        var output = jpegBuffer
        var outputSize = UInt(jpegBufferCapacity)
        var data = planes.data
        let status = data.withUnsafeMutableBufferPointer { data in
            planes.strides.withUnsafeBufferPointer { strides in
                tjCompressFromYUVPlanes(
                    compressor, data.baseAddress, Int32(width), strides.baseAddress, Int32(height), samp, &output,
                    &outputSize, Int32(quality), TJFLAG_NOREALLOC)
            }
        }
        guard status == 0, let output else {
            throw ImagingError(.encodeFailed, "JPEG compression failed: \(Self.turboJPEGError(compressor))")
        }
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(outputSize), alignment: 64)
        storage.copyMemory(from: UnsafeRawBufferPointer(start: output, count: Int(outputSize)))
        return EncodedPicture(
            taking: storage, format: .jpeg, width: width, height: height, pixelFormatName: nil)
    }

    private static func turboJPEGError(_ handle: tjhandle?) -> String {
        guard let message = tjGetErrorStr2(handle) else { return "unknown error" }
        return String(cString: message)
    }

    // MARK: Raw

    /// The native planar format (semi-planar becomes planar), scaled in that same format; the
    /// samples keep the source range and bit depth.
    private func encodeYUV(_ source: SourcePicture, size: (width: Int, height: Int)) throws(ImagingError)
        -> EncodedPicture
    {
        let outputFormat = PixelFormats.planarEquivalent(of: source.format)
        let nativeSize = size.width == source.width && size.height == source.height
        let planes: PlanePointers
        if nativeSize && outputFormat == source.format {
            planes = source.planes
        } else {
            planes = try convert(
                source, to: outputFormat, size: size, outputFullRange: source.range == .full, rgbColorspace: nil)
        }
        // Report the decoder's own name (e.g. yuvj420p) when the layout is unchanged: it also says the range.
        let name = outputFormat == source.format ? source.formatName : PixelFormats.name(outputFormat)
        return try packed(
            planes, format: outputFormat, size: size, name: name, kind: .yuv,
            colors: PictureColors(range: source.range, matrix: source.matrix, height: source.height))
    }

    private func encodeRGB(_ source: SourcePicture, size: (width: Int, height: Int)) throws(ImagingError)
        -> EncodedPicture
    {
        let planes = try convert(
            source, to: AV_PIX_FMT_RGB24, size: size, outputFullRange: true,
            rgbColorspace: Self.swsColorspace(source.matrix, height: source.height))
        return try packed(
            planes, format: AV_PIX_FMT_RGB24, size: size, name: "rgb24", kind: .rgb,
            colors: .rgb(convertedFrom: source.matrix, height: source.height))
    }

    /// SWS_CS_* for a stream's matrix (`ColorMatrix.effective`: an unstated one by the picture's
    /// height). swscale has no YCgCo matrix; such streams (rare) render with BT.601.
    static func swsColorspace(_ matrix: ColorMatrix, height: Int) -> Int32 {
        switch matrix.effective(height: height) {
        case .bt709: SWS_CS_ITU709
        case .bt2020: SWS_CS_BT2020
        case .fcc: SWS_CS_FCC
        case .smpte240m: SWS_CS_SMPTE240M
        case .bt601, .ycgco, .rgb, .unspecified: SWS_CS_ITU601
        }
    }

    /// Copies planes tightly packed, plane after plane, into memory the picture will own.
    private func packed(
        _ planes: PlanePointers, format: AVPixelFormat, size: (width: Int, height: Int), name: String,
        kind: PictureFormat, colors: PictureColors
    ) throws(ImagingError) -> EncodedPicture {
        guard let layout = PlaneLayout(pixelFormat: format, width: size.width, height: size.height) else {
            throw ImagingError(.encodeFailed, "cannot lay out \(name) at \(size.width)x\(size.height)")
        }
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: layout.packedSize, alignment: 64)
        var offset = 0
        for plane in 0..<layout.planeCount {
            guard let base = planes.data[plane] else {
                storage.deallocate()
                throw ImagingError(.encodeFailed, "\(name) plane \(plane) is missing")
            }
            let stride = Int(planes.strides[plane])
            for row in 0..<layout.rows[plane] {
                let source = UnsafeRawBufferPointer(start: base + row * stride, count: layout.rowBytes[plane])
                UnsafeMutableRawBufferPointer(rebasing: storage[offset..<offset + source.count]).copyMemory(from: source)
                offset += source.count
            }
        }
        return EncodedPicture(
            taking: storage, format: kind, width: size.width, height: size.height, pixelFormatName: name, colors: colors)
    }

    // MARK: swscale

    private func convert(
        _ source: SourcePicture, to format: AVPixelFormat, size: (width: Int, height: Int), outputFullRange: Bool,
        rgbColorspace: Int32?
    ) throws(ImagingError) -> PlanePointers {
        guard let layout = PlaneLayout(pixelFormat: format, width: size.width, height: size.height) else {
            throw ImagingError(.encodeFailed, "cannot lay out \(PixelFormats.name(format)) at \(size.width)x\(size.height)")
        }
        let key = ScalerKey(
            sourceFormat: source.format.rawValue, sourceWidth: source.width, sourceHeight: source.height,
            outputFormat: format.rawValue, outputWidth: size.width, outputHeight: size.height,
            sourceFullRange: source.range == .full, outputFullRange: outputFullRange, rgbColorspace: rgbColorspace)
        let context = try scalers.context(for: key)
        let output = scratch.planes(for: layout)
        let lines = source.planes.data.withUnsafeBufferPointer { input in
            source.planes.strides.withUnsafeBufferPointer { inputStrides in
                output.data.withUnsafeBufferPointer { result in
                    output.strides.withUnsafeBufferPointer { resultStrides in
                        sws_scale(
                            context, input.baseAddress, inputStrides.baseAddress, 0, Int32(source.height),
                            result.baseAddress, resultStrides.baseAddress)
                    }
                }
            }
        }
        guard lines == Int32(size.height) else {
            throw ImagingError(
                .encodeFailed,
                "swscale produced \(lines) of \(size.height) lines converting \(source.formatName) to \(PixelFormats.name(format))")
        }
        var planes = PlanePointers()
        for plane in 0..<layout.planeCount {
            planes.data[plane] = output.data[plane].map { UnsafePointer($0) }
            planes.strides[plane] = output.strides[plane]
        }
        return planes
    }
}

/// A decoded frame as the encoder sees it: planes, format without the yuvj alias, range.
struct SourcePicture {
    let frame: DecodedFrame
    let format: AVPixelFormat
    let formatName: String
    let width: Int
    let height: Int
    let range: ColorRange
    let matrix: ColorMatrix
    let planes: PlanePointers

    init(_ frame: DecodedFrame) throws(ImagingError) {
        guard let descriptor = av_pix_fmt_desc_get(frame.pixelFormat) else {
            throw ImagingError(.encodeFailed, "frame has no known pixel format (\(frame.pixelFormat.rawValue))")
        }
        guard descriptor.pointee.flags & UInt64(AV_PIX_FMT_FLAG_HWACCEL) == 0 else {
            throw ImagingError(
                .encodeFailed, "frame holds \(frame.pixelFormatName) hardware surfaces; download it to memory first")
        }
        guard frame.width > 0, frame.height > 0 else {
            throw ImagingError(.encodeFailed, "frame has no pixels (\(frame.width)x\(frame.height))")
        }
        let format = PixelFormats.withoutJPEGAlias(frame.pixelFormat)
        guard let layout = PlaneLayout(pixelFormat: format, width: frame.width, height: frame.height) else {
            throw ImagingError(.encodeFailed, "cannot lay out \(frame.pixelFormatName) at \(frame.width)x\(frame.height)")
        }
        var planes = PlanePointers()
        for index in 0..<layout.planeCount {
            guard let plane = frame.plane(index) else {
                throw ImagingError(.encodeFailed, "\(frame.pixelFormatName) frame lacks plane \(index)")
            }
            guard plane.stride >= layout.rowBytes[index] else {
                // Negative (bottom-up) or short strides never come from libavcodec's H.264 decoder.
                throw ImagingError(.encodeFailed, "\(frame.pixelFormatName) plane \(index) has stride \(plane.stride)")
            }
            planes.data[index] = plane.base
            planes.strides[index] = Int32(plane.stride)
        }
        self.frame = frame
        self.format = format
        self.formatName = frame.pixelFormatName
        self.width = frame.width
        self.height = frame.height
        self.range = frame.colorRange
        self.matrix = frame.colorMatrix
        self.planes = planes
    }
}
