import CFFmpeg
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The coding type of a decoded picture, as libavcodec reports it.
public enum PictureType: String, Sendable {
    case i = "I", p = "P", b = "B", s = "S", si = "SI", sp = "SP", bi = "BI", unknown = "?"

    init(_ type: AVPictureType) {
        switch type {
        case AV_PICTURE_TYPE_I: self = .i
        case AV_PICTURE_TYPE_P: self = .p
        case AV_PICTURE_TYPE_B: self = .b
        case AV_PICTURE_TYPE_S: self = .s
        case AV_PICTURE_TYPE_SI: self = .si
        case AV_PICTURE_TYPE_SP: self = .sp
        case AV_PICTURE_TYPE_BI: self = .bi
        default: self = .unknown
        }
    }
}

/// Sample range of the luma/chroma values.
public enum ColorRange: String, Sendable {
    /// 16–235 (luma) / 16–240 (chroma): "TV", the H.264 default.
    case limited
    /// 0–255: "PC"/JPEG range (`video_full_range_flag` = 1, or the yuvj* formats).
    case full

    init(_ range: AVColorRange, pixelFormat: AVPixelFormat) {
        switch pixelFormat {
        case AV_PIX_FMT_YUVJ420P, AV_PIX_FMT_YUVJ422P, AV_PIX_FMT_YUVJ444P, AV_PIX_FMT_YUVJ440P, AV_PIX_FMT_YUVJ411P:
            self = .full
        default:
            self = range == AVCOL_RANGE_JPEG ? .full : .limited
        }
    }
}

/// The YCbCr→RGB matrix the stream signals (VUI `matrix_coefficients`).
public enum ColorMatrix: String, Sendable {
    case bt601, bt709, bt2020, fcc, smpte240m, ycgco, rgb, unspecified

    /// The matrix a picture `height` lines high is read with: its own, or for a stream that
    /// states none, BT.601 below 720 lines and BT.709 from 720 up (the SD/HD split players and
    /// libavcodec's own conversions make).
    public func effective(height: Int) -> ColorMatrix {
        self == .unspecified ? (height < 720 ? .bt601 : .bt709) : self
    }

    init(_ space: AVColorSpace) {
        switch space {
        case AVCOL_SPC_BT709: self = .bt709
        case AVCOL_SPC_BT470BG, AVCOL_SPC_SMPTE170M: self = .bt601
        case AVCOL_SPC_BT2020_NCL, AVCOL_SPC_BT2020_CL: self = .bt2020
        case AVCOL_SPC_FCC: self = .fcc
        case AVCOL_SPC_SMPTE240M: self = .smpte240m
        case AVCOL_SPC_YCGCO: self = .ycgco
        case AVCOL_SPC_RGB: self = .rgb
        default: self = .unspecified
        }
    }
}

/// One decoded picture. Immutable and shared by reference: it owns an `AVFrame` whose
/// pixel buffers are reference-counted by libavutil, so handing a frame to many readers
/// (the latest-picture slot, encoders, raw writers) never copies pixels.
///
/// A picture decoded on a GPU (CUDA or VA-API) stays there until something reads its pixels:
/// `plane(_:)`, `appendPackedPlanes(to:)`, `avFrame` and `systemFrame()` download it first,
/// once, under a lock (readers on other threads wait for that one download and share it).
/// Readers never see device memory: every pointer this type hands out is system memory.
/// The downloaded picture is presented in the software decoder's layout: the NV12 that NVDEC
/// and VA-API produce for 8-bit 4:2:0 becomes `yuv420p` (or `yuvj420p`), the same samples with
/// the chroma de-interleaved; the P010 of 10-bit 4:2:0 (16-bit words, the value in the high
/// bits) becomes `yuv420p10le`, and NVDEC's 12-bit and 16-bit 4:4:4 surfaces the software
/// decoder's 12- and 10-bit planes likewise. So a picture looks the same (format, planes, bytes)
/// whichever back end decoded it. `pixelFormat` is that presented format from the start.
///
/// The metadata is immutable; the pixels sit behind a Mutex and change at most once (device ->
/// system memory, or -> unavailable). The system-memory AVFrame is never mutated after that,
/// and libavutil's buffer reference counts are atomic, so concurrent readers and the final
/// free are safe.
public final class DecodedFrame: Sendable {
    private let pixels: Mutex<Pixels>
    private let downloads: FrameDownloadCounter

    /// Presentation timestamp in the caller's time base, when the input carried one.
    public let pts: Int64?
    /// The index of the access unit this picture was decoded from, as the caller gave it with
    /// the packet (`LibavDecoder.decode(accessUnit:pts:index:)`); nil when none was given.
    public let accessUnitIndex: Int64?
    public let isKeyframe: Bool
    public let pictureType: PictureType
    /// libavcodec could not decode all of this picture and filled the damage in by error
    /// concealment (corrupt or missing slices, missing references): `decode_error_flags`, or
    /// `AV_FRAME_FLAG_CORRUPT` where that flag does not mean `precedesRecovery`. Such a picture is
    /// still output, as the ffmpeg CLI outputs it.
    public let hasDecodeErrors: Bool
    /// Decoded before the stream recovered at the point decoding started from (an H.264
    /// recovery point: intra refresh, or pictures before an I picture that was not an IDR).
    /// libavcodec outputs such pictures only when asked to (`LibavDecoder` asks, so that each
    /// still takes its place in the numbering) and flags them; nobody is shown one.
    public let precedesRecovery: Bool
    /// Display (cropped) size.
    public let width: Int
    public let height: Int
    /// The format of the planes readers get (for a device picture: after the download).
    public let pixelFormat: AVPixelFormat
    public let colorRange: ColorRange
    public let colorMatrix: ColorMatrix
    /// The back end that decoded this picture.
    public let decodedBy: DecoderBackend

    /// The AVFrames are owned by one DecodedFrame and only touched under its lock.
    enum Pixels {
        case system(UnsafeMutablePointer<AVFrame>)
        case device(UnsafeMutablePointer<AVFrame>, DeviceDownload)
        case unavailable(DecodeError)
    }

    /// How a device picture becomes a system-memory one in `pixelFormat`.
    struct DeviceDownload {
        let transfer: @Sendable (UnsafePointer<AVFrame>, AVPixelFormat) throws(DecodeError) -> UnsafeMutablePointer<AVFrame>
    }

    /// Takes ownership of `frame`, which must hold system-memory pixels.
    /// `flagsUnrecovered`: the decoder was opened with `AV_CODEC_FLAG_OUTPUT_CORRUPT`, so its
    /// `AV_FRAME_FLAG_CORRUPT` marks a picture before recovery (`precedesRecovery`).
    public convenience init(
        taking frame: sending UnsafeMutablePointer<AVFrame>, pts: Int64?, downloads: FrameDownloadCounter = .shared,
        flagsUnrecovered: Bool = false
    ) {
        let format = AVPixelFormat(frame.pointee.format)
        self.init(
            pixelFormat: format, decodedBy: .software, pixels: .system(frame), pts: pts, downloads: downloads,
            flagsUnrecovered: flagsUnrecovered)
    }

    /// Takes ownership of `surface`, a hardware frame (`AV_PIX_FMT_CUDA`/`AV_PIX_FMT_VAAPI`).
    /// `softwareFormat` is the format libavcodec's software decoder would have output
    /// (`AVCodecContext.sw_pix_fmt`): the picture is presented in it when the download allows.
    convenience init(
        takingSurface surface: sending UnsafeMutablePointer<AVFrame>, softwareFormat: AVPixelFormat, decodedBy: DecoderBackend,
        pts: Int64?, downloads: FrameDownloadCounter, flagsUnrecovered: Bool = false
    ) {
        let downloaded = Self.transferFormat(of: surface)
        let presented = Self.presentedFormat(downloaded: downloaded, softwareFormat: softwareFormat)
        self.init(
            pixelFormat: presented, decodedBy: decodedBy,
            pixels: .device(surface, DeviceDownload(transfer: Self.downloadSurface)), pts: pts, downloads: downloads,
            flagsUnrecovered: flagsUnrecovered)
    }

    /// The metadata is read from the frame `pixels` holds, before the lock takes it over.
    init(
        pixelFormat: AVPixelFormat, decodedBy: DecoderBackend, pixels: sending Pixels, pts: Int64?,
        downloads: FrameDownloadCounter, flagsUnrecovered: Bool = false
    ) {
        let frame: UnsafePointer<AVFrame>
        switch pixels {
        case .system(let system): frame = UnsafePointer(system)
        case .device(let surface, _): frame = UnsafePointer(surface)
        case .unavailable: preconditionFailure("a decoded picture starts with its pixels")
        }
        self.downloads = downloads
        self.pts = pts
        let opaque = frame.pointee.reordered_opaque
        self.accessUnitIndex = opaque == ft_av_nopts_value() ? nil : opaque
        self.isKeyframe = frame.pointee.key_frame != 0  // FFmpeg 5.1 has no AV_FRAME_FLAG_KEY yet
        self.pictureType = PictureType(frame.pointee.pict_type)
        let flaggedCorrupt = frame.pointee.flags & AV_FRAME_FLAG_CORRUPT != 0
        self.precedesRecovery = flagsUnrecovered && flaggedCorrupt
        self.hasDecodeErrors = frame.pointee.decode_error_flags != 0 || (flaggedCorrupt && !flagsUnrecovered)
        // Hardware frames keep their left/top crop until the download (libavcodec can only
        // shrink a surface from the right and bottom); software frames come fully cropped.
        let cropX = Int(frame.pointee.crop_left) + Int(frame.pointee.crop_right)
        let cropY = Int(frame.pointee.crop_top) + Int(frame.pointee.crop_bottom)
        self.width = max(0, Int(frame.pointee.width) - cropX)
        self.height = max(0, Int(frame.pointee.height) - cropY)
        self.pixelFormat = pixelFormat
        self.colorRange = ColorRange(frame.pointee.color_range, pixelFormat: pixelFormat)
        self.colorMatrix = ColorMatrix(frame.pointee.colorspace)
        self.decodedBy = decodedBy
        self.pixels = Mutex(pixels)
    }

    deinit {
        pixels.withLock { pixels in
            switch pixels {
            case .system(let frame), .device(let frame, _):
                var owned: UnsafeMutablePointer<AVFrame>? = frame
                av_frame_free(&owned)
            case .unavailable:
                break
            }
        }
    }

    // MARK: - Where the pixels are

    /// True while the pixels are still in GPU memory (never for a software-decoded picture).
    public var isOnDevice: Bool {
        pixels.withLock { if case .device = $0 { true } else { false } }
    }

    /// Lends the hardware surface (`AV_PIX_FMT_CUDA`/`AV_PIX_FMT_VAAPI`, uncropped on the left
    /// and top) to `body` while the picture is still on the device, nil once it is not, for an
    /// encoder that reads the picture where it is (no download, nothing counted). `body` gets a
    /// reference of its own to the surface, taken under the lock and freed after `body`: a
    /// download or spill meanwhile frees only the picture's reference, and the decoder, which
    /// takes this lock for each picture it holds, never waits for a GPU encode. nil also when
    /// that reference cannot be made (out of memory): the caller downloads instead.
    public func withDeviceSurface<Result>(_ body: (UnsafePointer<AVFrame>?) -> Result) -> Result {
        let address: UInt = pixels.withLock { pixels in
            guard case .device(let device, _) = pixels else { return 0 }
            return UInt(bitPattern: av_frame_clone(device))
        }
        var lent = UnsafeMutablePointer<AVFrame>(bitPattern: address)
        defer { av_frame_free(&lent) }
        return body(lent.map { UnsafePointer($0) })
    }

    /// Why the download failed; the picture then has no planes.
    public var downloadError: DecodeError? {
        pixels.withLock { if case .unavailable(let error) = $0 { error } else { nil } }
    }

    /// The picture in system memory, downloading it first if it is still on the device
    /// (once; counted in `DecoderOptions.frameDownloads`). Valid as long as this object lives.
    public func systemFrame() throws(DecodeError) -> UnsafePointer<AVFrame> {
        try materialize(spilled: false)
    }

    /// Read-only access for the imaging code; nil when a device picture could not be downloaded.
    public var avFrame: UnsafePointer<AVFrame>? { try? systemFrame() }

    /// The decoder hands a surface back to its pool by downloading the picture (see `DeviceFrameBudget`).
    func spillToSystemMemory() {
        _ = try? materialize(spilled: true)
    }

    private func materialize(spilled: Bool) throws(DecodeError) -> UnsafePointer<AVFrame> {
        let result: Result<UnsafePointer<AVFrame>, DecodeError> = pixels.withLock { pixels in
            switch pixels {
            case .system(let frame):
                return .success(UnsafePointer(frame))
            case .unavailable(let error):
                return .failure(error)
            case .device(let surface, let download):
                var owned: UnsafeMutablePointer<AVFrame>? = surface
                do throws(DecodeError) {
                    let system = try download.transfer(UnsafePointer(surface), pixelFormat)
                    av_frame_free(&owned)  // the surface goes back to the decoder's pool now
                    pixels = .system(system)
                    downloads.recordDownload(bytes: packedSize(of: system), spilled: spilled)
                    return .success(UnsafePointer(system))
                } catch {
                    // Final: the surface is released either way, so a broken device cannot
                    // starve the decoder by pictures that are retried forever.
                    av_frame_free(&owned)
                    pixels = .unavailable(error)
                    downloads.recordFailure()
                    return .failure(error)
                }
            }
        }
        return try result.get()
    }

    // MARK: - Planes (system memory only)

    /// libavutil's name of the pixel format, e.g. `yuv420p`, `yuv420p10le`, `nv12`.
    public var pixelFormatName: String {
        guard let name = av_get_pix_fmt_name(pixelFormat) else { return "unknown" }
        return String(cString: name)
    }

    /// Bytes per row and rows of plane `index` (cropped), or nil when the format has no such plane.
    public func planeGeometry(_ index: Int) -> (rowBytes: Int, rows: Int)? {
        Self.planeGeometry(index, format: pixelFormat, width: width, height: height)
    }

    static func planeGeometry(_ index: Int, format: AVPixelFormat, width: Int, height: Int) -> (rowBytes: Int, rows: Int)? {
        guard let desc = av_pix_fmt_desc_get(format) else { return nil }
        let planeCount = Int(av_pix_fmt_count_planes(format))
        guard index < planeCount else { return nil }
        let rowBytes = Int(av_image_get_linesize(format, Int32(width), Int32(index)))
        let isChroma = (index == 1 || index == 2) && (desc.pointee.flags & UInt64(AV_PIX_FMT_FLAG_RGB)) == 0
        let rows = isChroma ? -((-height) >> Int(desc.pointee.log2_chroma_h)) : height
        return (rowBytes, rows)
    }

    /// Base pointer and stride (bytes, may exceed `rowBytes`) of plane `index`, in system
    /// memory (a device picture is downloaded first); nil when there is no such plane or the
    /// download failed (`downloadError`).
    public func plane(_ index: Int) -> (base: UnsafePointer<UInt8>, stride: Int)? {
        guard planeGeometry(index) != nil, let frame = try? systemFrame() else { return nil }
        return Self.plane(index, of: frame)
    }

    static func plane(_ index: Int, of frame: UnsafePointer<AVFrame>) -> (base: UnsafePointer<UInt8>, stride: Int)? {
        let data = withUnsafePointer(to: frame.pointee.data) { tuple in
            tuple.withMemoryRebound(to: UnsafeMutablePointer<UInt8>?.self, capacity: 8) { $0[index] }
        }
        let stride = withUnsafePointer(to: frame.pointee.linesize) { tuple in
            tuple.withMemoryRebound(to: Int32.self, capacity: 8) { $0[index] }
        }
        guard let data else { return nil }
        return (UnsafePointer(data), Int(stride))
    }

    /// Size in bytes of the tightly packed, cropped native planes (what `--format yuv` writes).
    public var packedSize: Int {
        var total = 0
        var index = 0
        while let geometry = planeGeometry(index) {
            total += geometry.rowBytes * geometry.rows
            index += 1
        }
        return total
    }

    private func packedSize(of frame: UnsafePointer<AVFrame>) -> Int {
        var total = 0
        var index = 0
        while let geometry = Self.planeGeometry(
            index, format: AVPixelFormat(frame.pointee.format), width: Int(frame.pointee.width),
            height: Int(frame.pointee.height))
        {
            total += geometry.rowBytes * geometry.rows
            index += 1
        }
        return total
    }

    /// Appends the tightly packed, cropped native planes to `output`, plane after plane.
    /// This is the byte layout of `ffmpeg -f rawvideo` in the native pixel format.
    /// Appends nothing when a device picture cannot be downloaded (see `downloadError`).
    public func appendPackedPlanes(to output: inout [UInt8]) {
        guard let frame = try? systemFrame() else { return }
        output.reserveCapacity(output.count + packedSize)
        var index = 0
        while let geometry = planeGeometry(index), let plane = Self.plane(index, of: frame) {
            for row in 0..<geometry.rows {
                let start = plane.base + row * plane.stride
                output.append(contentsOf: UnsafeBufferPointer(start: start, count: geometry.rowBytes))
            }
            index += 1
        }
    }
}

// MARK: - Downloading a hardware surface

extension DecodedFrame {
    /// The format `av_hwframe_transfer_data` gives for this surface: its frames context's
    /// `sw_format` (NV12 for 8-bit 4:2:0 on NVDEC and VA-API, P010 for 10-bit 4:2:0).
    static func transferFormat(of surface: UnsafePointer<AVFrame>) -> AVPixelFormat {
        guard let framesRef = surface.pointee.hw_frames_ctx, let data = framesRef.pointee.data else {
            return AV_PIX_FMT_NV12
        }
        return UnsafeRawPointer(data).assumingMemoryBound(to: AVHWFramesContext.self).pointee.sw_format
    }

    /// A download is presented in the software decoder's format when it holds the same samples in
    /// another layout: NV12 as `yuv420p`/`yuvj420p`, P010 (10-bit 4:2:0 from NVDEC and VA-API) as
    /// `yuv420p10le`, P016 (12-bit 4:2:0 on NVDEC) as `yuv420p12le`, NVDEC's 16-bit 4:4:4 as
    /// `yuv444p10le`/`yuv444p12le`. Anything else is presented as downloaded.
    static func presentedFormat(downloaded: AVPixelFormat, softwareFormat: AVPixelFormat) -> AVPixelFormat {
        downloaded == softwareFormat || canRepack(downloaded, as: softwareFormat) ? softwareFormat : downloaded
    }

    /// Whether `source` holds what `target` holds, in another layout that `repack` takes apart:
    /// the same components and chroma subsampling, little-endian samples of one or two bytes,
    /// `target` planar, and at least as many bits per sample in `source` (a 16-bit word with the
    /// value in its high bits, as NVDEC and VA-API write 10- and 12-bit samples).
    static func canRepack(_ source: AVPixelFormat, as target: AVPixelFormat) -> Bool {
        guard source != target, let from = av_pix_fmt_desc_get(source), let to = av_pix_fmt_desc_get(target) else {
            return false
        }
        let excluded = UInt64(AV_PIX_FMT_FLAG_BE | AV_PIX_FMT_FLAG_HWACCEL | AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BITSTREAM)
            | UInt64(AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_ALPHA | AV_PIX_FMT_FLAG_FLOAT)
        guard from.pointee.flags & excluded == 0, to.pointee.flags & excluded == 0,
            from.pointee.nb_components == 3, to.pointee.nb_components == 3,
            from.pointee.log2_chroma_w == to.pointee.log2_chroma_w, from.pointee.log2_chroma_h == to.pointee.log2_chroma_h,
            to.pointee.flags & UInt64(AV_PIX_FMT_FLAG_PLANAR) != 0
        else { return false }
        for index in 0..<3 {
            let (sample, wanted) = (component(index, of: from), component(index, of: to))
            let sourceBits = Int(sample.depth + sample.shift)
            // No bit of the value may be lost: a 16-bit word narrows only to its high 10 or 12
            // bits (where NVDEC and VA-API put them), never to 8.
            guard sourceBits == 8 || sourceBits == 16, wanted.shift == 0, Int(wanted.depth) <= sourceBits,
                wanted.depth >= sample.depth || wanted.depth > 8,
                Int(wanted.step) == (wanted.depth > 8 ? 2 : 1), wanted.offset == 0, Int(wanted.plane) == index
            else { return false }
        }
        return true
    }

    static func component(_ index: Int, of descriptor: UnsafePointer<AVPixFmtDescriptor>) -> AVComponentDescriptor {
        withUnsafePointer(to: descriptor.pointee.comp) { tuple in
            tuple.withMemoryRebound(to: AVComponentDescriptor.self, capacity: 4) { $0[index] }
        }
    }

    /// Surface -> system memory in `format`. The transfer copies only pixels, so timestamps,
    /// colour properties and the crop are copied separately (see `present`).
    @Sendable static func downloadSurface(
        _ surface: UnsafePointer<AVFrame>, as format: AVPixelFormat
    ) throws(DecodeError) -> UnsafeMutablePointer<AVFrame> {
        guard let transferred = av_frame_alloc() else { throw DecodeError(.allocationFailed, "av_frame_alloc") }
        var owned: UnsafeMutablePointer<AVFrame>? = transferred
        defer { av_frame_free(&owned) }
        transferred.pointee.format = transferFormat(of: surface).rawValue
        var status = av_hwframe_transfer_data(transferred, surface, 0)
        if status >= 0 { status = av_frame_copy_props(transferred, surface) }
        guard status >= 0 else { throw DecodeError(averror: status, "downloading a hardware-decoded picture") }
        return try present(transferred, as: format)
    }

    /// A downloaded (uncropped) picture as readers get it: cropped (libavcodec could only apply
    /// the right/bottom crop to the surface, the rest is applied here) and in `format`.
    /// Leaves `downloaded` to the caller.
    static func present(
        _ downloaded: UnsafeMutablePointer<AVFrame>, as format: AVPixelFormat
    ) throws(DecodeError) -> UnsafeMutablePointer<AVFrame> {
        guard let result = av_frame_clone(downloaded) else { throw DecodeError(.allocationFailed, "av_frame_clone") }
        var owned: UnsafeMutablePointer<AVFrame>? = result
        let status = av_frame_apply_cropping(result, Int32(AV_FRAME_CROP_UNALIGNED))
        guard status >= 0 else {
            av_frame_free(&owned)
            throw DecodeError(averror: status, "cropping a downloaded picture")
        }
        guard AVPixelFormat(result.pointee.format) != format else { return result }
        defer { av_frame_free(&owned) }
        return try repack(result, as: format)
    }

    /// The samples of `source` in `format` (see `canRepack`): each component read where the
    /// source's layout keeps it (NV12/P010 chroma interleaved in one plane) and shifted down to
    /// `format`'s depth (P010's 10 bits sit in the high bits of each 16-bit word). No sample
    /// changes value, so the bytes equal the software decoder's when the decode is bit-exact.
    static func repack(
        _ source: UnsafePointer<AVFrame>, as format: AVPixelFormat
    ) throws(DecodeError) -> UnsafeMutablePointer<AVFrame> {
        let sourceFormat = AVPixelFormat(source.pointee.format)
        guard canRepack(sourceFormat, as: format), let from = av_pix_fmt_desc_get(sourceFormat),
            let to = av_pix_fmt_desc_get(format)
        else {
            let names = [sourceFormat, format].map { av_get_pix_fmt_name($0).map { String(cString: $0) } ?? "\($0.rawValue)" }
            throw DecodeError(.decoderFailure, "cannot present a downloaded \(names[0]) picture as \(names[1])")
        }
        guard let output = av_frame_alloc() else { throw DecodeError(.allocationFailed, "av_frame_alloc") }
        var owned: UnsafeMutablePointer<AVFrame>? = output
        let width = Int(source.pointee.width)
        let height = Int(source.pointee.height)
        output.pointee.format = format.rawValue
        output.pointee.width = Int32(width)
        output.pointee.height = Int32(height)
        var status = av_frame_get_buffer(output, 0)
        if status >= 0 { status = av_frame_copy_props(output, source) }
        guard status >= 0 else {
            av_frame_free(&owned)
            throw DecodeError(.allocationFailed, "allocating a \(width)x\(height) picture for a downloaded frame")
        }
        for index in 0..<3 {
            let sample = component(index, of: from)
            let wanted = component(index, of: to)
            let chroma = index > 0
            let columns = chroma ? -((-width) >> Int(from.pointee.log2_chroma_w)) : width
            let rows = chroma ? -((-height) >> Int(from.pointee.log2_chroma_h)) : height
            guard let input = plane(Int(sample.plane), of: source), let result = plane(index, of: UnsafePointer(output)) else {
                av_frame_free(&owned)
                throw DecodeError(.decoderFailure, "a downloaded picture lacks plane \(sample.plane)")
            }
            let shift = Int(sample.depth + sample.shift) - Int(wanted.depth)
            let step = Int(sample.step)
            let wide = sample.depth + sample.shift > 8
            let target = UnsafeMutablePointer(mutating: result.base)
            for row in 0..<rows {
                let line = input.base + row * input.stride + Int(sample.offset)
                let out = target + row * result.stride
                if !wide {
                    if step == 1 {
                        out.update(from: line, count: columns)
                    } else {
                        for column in 0..<columns { out[column] = line[column * step] }
                    }
                } else {
                    let words = UnsafeMutableRawPointer(out).assumingMemoryBound(to: UInt16.self)
                    let raw = UnsafeRawPointer(line)
                    for column in 0..<columns {
                        let value = UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: column * step, as: UInt16.self))
                        if wanted.depth > 8 {
                            words[column] = (value >> UInt16(shift)).littleEndian
                        } else {
                            out[column] = UInt8(truncatingIfNeeded: value >> UInt16(shift))
                        }
                    }
                }
            }
        }
        return output
    }
}
