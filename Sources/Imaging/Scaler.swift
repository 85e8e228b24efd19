import CFFmpeg
import Decoding

/// Everything that makes one SwsContext different from another.
struct ScalerKey: Hashable {
    let sourceFormat: Int32
    let sourceWidth: Int
    let sourceHeight: Int
    let outputFormat: Int32
    let outputWidth: Int
    let outputHeight: Int
    let sourceFullRange: Bool
    let outputFullRange: Bool
    /// SWS_CS_* of the YCbCr→RGB matrix; only meaningful (and only set) for RGB output.
    let rgbColorspace: Int32?
}

/// A small most-recently-used cache of SwsContexts. Building one costs far more than a
/// scale (filter tables), but requests can ask for any size, so the cache is bounded.
final class ScalerCache {
    private var entries: [(key: ScalerKey, context: OpaquePointer)] = []
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    deinit {
        for entry in entries { sws_freeContext(entry.context) }
    }

    var count: Int { entries.count }

    func context(for key: ScalerKey) throws(ImagingError) -> OpaquePointer {
        if let index = entries.firstIndex(where: { $0.key == key }) {
            let entry = entries.remove(at: index)
            entries.append(entry)
            return entry.context
        }
        let context = try Self.makeContext(key)
        if entries.count >= capacity {
            sws_freeContext(entries.removeFirst().context)
        }
        entries.append((key, context))
        return context
    }

    /// Bicubic: swscale widens the bicubic kernel by the reduction ratio when it shrinks, so
    /// thumbnails are properly low-passed (no aliasing on fine detail) yet sharper than
    /// SWS_AREA's box average, and it stays a real interpolator when a request enlarges
    /// (where SWS_AREA degrades to bilinear). It is also the ffmpeg CLI's default, and no
    /// other flag is added on purpose: at native size `rgb` then equals
    /// `ffmpeg -pix_fmt rgb24` byte for byte (SWS_FULL_CHR_H_INT would interpolate chroma
    /// instead of repeating it, smoother on synthetic colour edges but no longer ffmpeg's output).
    static let flags: Int32 = SWS_BICUBIC

    private static func makeContext(_ key: ScalerKey) throws(ImagingError) -> OpaquePointer {
        guard let context = sws_alloc_context() else {
            throw ImagingError(.allocationFailed, "cannot allocate a swscale context")
        }
        // Ranges go in as options before init, as libavfilter's scale filter does: set after
        // init, a same-size same-format context has already picked a plain copy and would
        // silently skip the range expansion.
        let options: [(String, Int64)] = [
            ("srcw", Int64(key.sourceWidth)), ("srch", Int64(key.sourceHeight)),
            ("src_format", Int64(key.sourceFormat)),
            ("dstw", Int64(key.outputWidth)), ("dsth", Int64(key.outputHeight)),
            ("dst_format", Int64(key.outputFormat)),
            ("sws_flags", Int64(flags)),
            ("src_range", key.sourceFullRange ? 1 : 0), ("dst_range", key.outputFullRange ? 1 : 0),
        ]
        let raw = UnsafeMutableRawPointer(context)
        for (name, value) in options where av_opt_set_int(raw, name, value, 0) < 0 {
            sws_freeContext(context)
            throw ImagingError(.encodeFailed, "swscale rejected option \(name)=\(value)")
        }
        let status = sws_init_context(context, nil, nil)
        guard status >= 0 else {
            sws_freeContext(context)
            throw ImagingError(.encodeFailed, "swscale cannot convert \(describe(key)): \(errorString(status))")
        }
        if let colorspace = key.rgbColorspace {
            let status = sws_setColorspaceDetails(
                context, sws_getCoefficients(colorspace), key.sourceFullRange ? 1 : 0,
                sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16)
            guard status >= 0 else {
                sws_freeContext(context)
                throw ImagingError(.encodeFailed, "swscale cannot apply the colour matrix for \(describe(key))")
            }
        }
        return context
    }

    private static func describe(_ key: ScalerKey) -> String {
        let source = PixelFormats.name(AVPixelFormat(key.sourceFormat))
        let output = PixelFormats.name(AVPixelFormat(key.outputFormat))
        return "\(source) \(key.sourceWidth)x\(key.sourceHeight) to \(output) \(key.outputWidth)x\(key.outputHeight)"
    }
}

func errorString(_ code: Int32) -> String {
    var buffer = [CChar](repeating: 0, count: 128)
    av_strerror(code, &buffer, buffer.count)
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
