import CFFmpeg
import FoundationEssentials

/// VA-API specifics that are not device contexts (those are `LibavHardwarePlatform.open`).
enum VAAPIDevice {
    /// The DRM render nodes present on this machine, in a stable order.
    static func scanRenderNodes(directory: String = "/dev/dri") -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix("renderD") }.sorted().map { "\(directory)/\($0)" }
    }

    /// Whether this libavcodec build can decode H.264 through a VA-API device context.
    static func decoderSupportsVAAPI(_ codec: UnsafePointer<AVCodec>) -> Bool {
        LibavHardwareSupport.supports(codec, AV_HWDEVICE_TYPE_VAAPI, AV_PIX_FMT_VAAPI)
    }
}
