import CFFmpeg
import Foundation
import H264

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
public final class DecodedFrame: @unchecked Sendable {
    // @unchecked: the AVFrame is never mutated after init, and libavutil's buffer
    // reference counts are atomic, so concurrent readers and the final free are safe.
    private let frame: UnsafeMutablePointer<AVFrame>

    /// Position in output order within its decoder, starting at 1.
    public let sequence: UInt64
    /// Presentation timestamp in the caller's time base, when the input carried one.
    public let pts: Int64?
    public let isKeyframe: Bool
    public let pictureType: PictureType
    /// libavcodec could not decode all of this picture and filled the damage in by error
    /// concealment (corrupt or missing slices, missing references): `decode_error_flags` or
    /// `AV_FRAME_FLAG_CORRUPT`. Such a picture is still output, as the ffmpeg CLI outputs it.
    public let hasDecodeErrors: Bool
    /// Display (cropped) size.
    public let width: Int
    public let height: Int
    public let pixelFormat: AVPixelFormat
    public let colorRange: ColorRange
    public let colorMatrix: ColorMatrix
    /// Wall-clock time the decoder returned this picture.
    public let decodedAt: Date
    /// Monotonic time the decoder returned this picture (for ages and latencies).
    public let decodedAtUptimeNanoseconds: UInt64

    /// Takes ownership of `frame` (which must hold system-memory pixels).
    public init(taking frame: UnsafeMutablePointer<AVFrame>, sequence: UInt64, pts: Int64?) {
        self.frame = frame
        self.sequence = sequence
        self.pts = pts
        self.isKeyframe = frame.pointee.key_frame != 0  // FFmpeg 5.1 has no AV_FRAME_FLAG_KEY yet
        self.pictureType = PictureType(frame.pointee.pict_type)
        self.hasDecodeErrors =
            frame.pointee.decode_error_flags != 0 || frame.pointee.flags & AV_FRAME_FLAG_CORRUPT != 0
        self.width = Int(frame.pointee.width)
        self.height = Int(frame.pointee.height)
        self.pixelFormat = AVPixelFormat(frame.pointee.format)
        self.colorRange = ColorRange(frame.pointee.color_range, pixelFormat: AVPixelFormat(frame.pointee.format))
        self.colorMatrix = ColorMatrix(frame.pointee.colorspace)
        self.decodedAt = Date()
        self.decodedAtUptimeNanoseconds = DispatchTime.now().uptimeNanoseconds
    }

    deinit {
        var owned: UnsafeMutablePointer<AVFrame>? = frame
        av_frame_free(&owned)
    }

    /// Read-only access for the imaging code (swscale/TurboJPEG take the planes directly).
    public var avFrame: UnsafePointer<AVFrame> { UnsafePointer(frame) }

    /// libavutil's name of the pixel format, e.g. `yuv420p`, `yuv420p10le`, `nv12`.
    public var pixelFormatName: String {
        guard let name = av_get_pix_fmt_name(pixelFormat) else { return "unknown" }
        return String(cString: name)
    }

    /// Bytes per row and rows of plane `index` (cropped), or nil when the format has no such plane.
    public func planeGeometry(_ index: Int) -> (rowBytes: Int, rows: Int)? {
        guard let desc = av_pix_fmt_desc_get(pixelFormat) else { return nil }
        let planeCount = Int(av_pix_fmt_count_planes(pixelFormat))
        guard index < planeCount else { return nil }
        let rowBytes = Int(av_image_get_linesize(pixelFormat, Int32(width), Int32(index)))
        let isChroma = (index == 1 || index == 2) && (desc.pointee.flags & UInt64(AV_PIX_FMT_FLAG_RGB)) == 0
        let rows = isChroma ? -((-height) >> Int(desc.pointee.log2_chroma_h)) : height
        return (rowBytes, rows)
    }

    /// Base pointer and stride (bytes, may exceed `rowBytes`) of plane `index`.
    public func plane(_ index: Int) -> (base: UnsafePointer<UInt8>, stride: Int)? {
        guard planeGeometry(index) != nil else { return nil }
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

    /// Appends the tightly packed, cropped native planes to `output`, plane after plane.
    /// This is the byte layout of `ffmpeg -f rawvideo` in the native pixel format.
    public func appendPackedPlanes(to output: inout [UInt8]) {
        output.reserveCapacity(output.count + packedSize)
        var index = 0
        while let geometry = planeGeometry(index), let plane = plane(index) {
            for row in 0..<geometry.rows {
                let start = plane.base + row * plane.stride
                output.append(contentsOf: UnsafeBufferPointer(start: start, count: geometry.rowBytes))
            }
            index += 1
        }
    }
}
