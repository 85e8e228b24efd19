import CFFmpeg
import CTurboJPEG

/// Rows and bytes per row of each plane of a picture in one pixel format at one size.
struct PlaneLayout: Equatable {
    let pixelFormat: AVPixelFormat
    let width: Int
    let height: Int
    let rowBytes: [Int]
    let rows: [Int]

    var planeCount: Int { rowBytes.count }
    /// Bytes of all planes tightly packed one after another.
    var packedSize: Int { zip(rowBytes, rows).reduce(0) { $0 + $1.0 * $1.1 } }

    /// Same geometry rules as `DecodedFrame.planeGeometry`: chroma rows round up, so odd sizes
    /// keep their last chroma row (libavcodec and TurboJPEG both round up).
    init?(pixelFormat: AVPixelFormat, width: Int, height: Int) {
        guard width > 0, height > 0, let descriptor = av_pix_fmt_desc_get(pixelFormat) else { return nil }
        let planeCount = Int(av_pix_fmt_count_planes(pixelFormat))
        guard planeCount > 0 else { return nil }
        let isRGB = descriptor.pointee.flags & UInt64(AV_PIX_FMT_FLAG_RGB) != 0
        var rowBytes: [Int] = []
        var rows: [Int] = []
        for plane in 0..<planeCount {
            let lineSize = Int(av_image_get_linesize(pixelFormat, Int32(width), Int32(plane)))
            guard lineSize > 0 else { return nil }
            let isChroma = (plane == 1 || plane == 2) && !isRGB
            rowBytes.append(lineSize)
            rows.append(isChroma ? -((-height) >> Int(descriptor.pointee.log2_chroma_h)) : height)
        }
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.rowBytes = rowBytes
        self.rows = rows
    }
}

/// Base pointers and strides of up to four planes, in the shape swscale and TurboJPEG take.
struct PlanePointers {
    var data: [UnsafePointer<UInt8>?] = [nil, nil, nil, nil]
    var strides: [Int32] = [0, 0, 0, 0]
}

/// Pixel format decisions. Everything here is pure lookup on libavutil's descriptors.
enum PixelFormats {
    /// swscale wants the deprecated yuvj* formats spelled as their yuv* twin plus an explicit
    /// full range (it warns otherwise); the sample bytes are identical.
    static func withoutJPEGAlias(_ format: AVPixelFormat) -> AVPixelFormat {
        switch format {
        case AV_PIX_FMT_YUVJ420P: AV_PIX_FMT_YUV420P
        case AV_PIX_FMT_YUVJ422P: AV_PIX_FMT_YUV422P
        case AV_PIX_FMT_YUVJ444P: AV_PIX_FMT_YUV444P
        case AV_PIX_FMT_YUVJ440P: AV_PIX_FMT_YUV440P
        case AV_PIX_FMT_YUVJ411P: AV_PIX_FMT_YUV411P
        default: format
        }
    }

    /// The 8-bit planar format TurboJPEG compresses for a source format, keeping its chroma
    /// subsampling wherever JPEG has the same one so no chroma is thrown away or invented.
    static func jpegInput(for format: AVPixelFormat) -> (pixelFormat: AVPixelFormat, subsampling: TJSAMP) {
        guard let descriptor = av_pix_fmt_desc_get(format) else { return (AV_PIX_FMT_YUV420P, TJSAMP_420) }
        let flags = descriptor.pointee.flags
        if flags & UInt64(AV_PIX_FMT_FLAG_RGB) != 0 { return (AV_PIX_FMT_YUV444P, TJSAMP_444) }
        if descriptor.pointee.nb_components <= 2 { return (AV_PIX_FMT_GRAY8, TJSAMP_GRAY) }
        switch (descriptor.pointee.log2_chroma_w, descriptor.pointee.log2_chroma_h) {
        case (0, 0): return (AV_PIX_FMT_YUV444P, TJSAMP_444)
        case (1, 0): return (AV_PIX_FMT_YUV422P, TJSAMP_422)
        case (0, 1): return (AV_PIX_FMT_YUV440P, TJSAMP_440)
        case (2, 0): return (AV_PIX_FMT_YUV411P, TJSAMP_411)
        default: return (AV_PIX_FMT_YUV420P, TJSAMP_420)
        }
    }

    /// The planar format of the same subsampling and bit depth, for `yuv` output: a
    /// semi-planar frame (NV12/P010 from a VA-API download) becomes yuv420p/yuv420p10le, so a
    /// `yuv` picture always has separate Y, U and V planes whatever the decoder back end.
    static func planarEquivalent(of format: AVPixelFormat) -> AVPixelFormat {
        guard let descriptor = av_pix_fmt_desc_get(format) else { return format }
        let components = Int(descriptor.pointee.nb_components)
        let isRGB = descriptor.pointee.flags & UInt64(AV_PIX_FMT_FLAG_RGB) != 0
        let isPlanar = Int(av_pix_fmt_count_planes(format)) == components
        if isPlanar || components <= 2 { return format }
        let depth = Int(descriptor.pointee.comp.0.depth)
        let subsampling: String
        switch (isRGB, descriptor.pointee.log2_chroma_w, descriptor.pointee.log2_chroma_h) {
        case (true, _, _), (false, 0, 0): subsampling = "444"
        case (false, 1, 0): subsampling = "422"
        default: subsampling = "420"
        }
        let wanted = depth > 8 ? "yuv\(subsampling)p\(depth > 10 ? 16 : 10)le" : "yuv\(subsampling)p"
        let planar = av_get_pix_fmt(wanted)
        return planar == AV_PIX_FMT_NONE ? AV_PIX_FMT_YUV420P : planar
    }

    /// The bit depth of `format` when its samples go to the 8-bit planar `target` by table
    /// (`NarrowingTables`): planar, little-endian 9- to 16-bit words, YUV or grey, with
    /// `target`'s chroma subsampling; nil otherwise.
    static func narrowableDepth(_ format: AVPixelFormat, to target: AVPixelFormat) -> Int? {
        guard let source = av_pix_fmt_desc_get(format), let output = av_pix_fmt_desc_get(target) else { return nil }
        let excluded = UInt64(AV_PIX_FMT_FLAG_BE | AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_ALPHA | AV_PIX_FMT_FLAG_FLOAT)
            | UInt64(AV_PIX_FMT_FLAG_HWACCEL | AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BITSTREAM)
        let components = Int(source.pointee.nb_components)
        guard source.pointee.flags & excluded == 0, components == 1 || components == 3,
            Int(output.pointee.nb_components) == components, Int(av_pix_fmt_count_planes(format)) == components,
            source.pointee.log2_chroma_w == output.pointee.log2_chroma_w,
            source.pointee.log2_chroma_h == output.pointee.log2_chroma_h
        else { return nil }
        let luma = source.pointee.comp.0
        guard (9...16).contains(Int(luma.depth)), luma.step == 2, luma.shift == 0, luma.offset == 0 else { return nil }
        if components == 3 {
            for chroma in [source.pointee.comp.1, source.pointee.comp.2]
            where chroma.depth != luma.depth || chroma.step != 2 || chroma.shift != 0 || chroma.offset != 0 {
                return nil
            }
        }
        return Int(luma.depth)
    }

    static func name(_ format: AVPixelFormat) -> String {
        av_get_pix_fmt_name(format).map { String(cString: $0) } ?? "unknown"
    }
}

/// Grow-only memory for converted planes. Strides and plane starts are 64-byte aligned so
/// swscale's SIMD paths run at full speed and never write past a row into the next plane.
final class PlaneScratch {
    private var storage: UnsafeMutableRawPointer?
    private var capacity = 0

    static let alignment = 64

    deinit { storage?.deallocate() }

    func release(above limit: Int) {
        guard capacity > limit else { return }
        storage?.deallocate()
        storage = nil
        capacity = 0
    }

    /// Mutable planes for `layout`, valid until the next call.
    func planes(for layout: PlaneLayout) -> (data: [UnsafeMutablePointer<UInt8>?], strides: [Int32]) {
        var offsets: [Int] = []
        var strides: [Int32] = []
        var total = 0
        for plane in 0..<layout.planeCount {
            let stride = Self.aligned(layout.rowBytes[plane])
            offsets.append(total)
            strides.append(Int32(stride))
            total += Self.aligned(stride * layout.rows[plane])
        }
        total += Self.alignment  // tail room: vector loads/stores of the last row stay inside
        let base: UnsafeMutableRawPointer
        if let storage, total <= capacity {
            base = storage
        } else {
            storage?.deallocate()
            base = UnsafeMutableRawPointer.allocate(byteCount: total, alignment: Self.alignment)
            storage = base
            capacity = total
        }
        var data: [UnsafeMutablePointer<UInt8>?] = [nil, nil, nil, nil]
        var paddedStrides: [Int32] = [0, 0, 0, 0]
        for plane in 0..<layout.planeCount {
            data[plane] = (base + offsets[plane]).assumingMemoryBound(to: UInt8.self)
            paddedStrides[plane] = strides[plane]
        }
        return (data, paddedStrides)
    }

    private static func aligned(_ value: Int) -> Int { (value + alignment - 1) / alignment * alignment }
}
