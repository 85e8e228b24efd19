import CFFmpeg
import Foundation
import H264

/// Opening a VA-API device for the H.264 decoder (FFmpeg's doc/examples/hw_decode.c pattern).
enum VAAPIDevice {
    /// The DRM render nodes present on this machine, in a stable order.
    static func scanRenderNodes() -> [String] {
        let directory = "/dev/dri"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix("renderD") }.sorted().map { "\(directory)/\($0)" }
    }

    /// Whether this libavcodec build can decode H.264 through a VA-API device context.
    static func decoderSupportsVAAPI(_ codec: UnsafePointer<AVCodec>) -> Bool {
        var index: Int32 = 0
        while let config = avcodec_get_hw_config(codec, index) {
            let viaDevice = config.pointee.methods & Int32(AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX) != 0
            if viaDevice && config.pointee.device_type == AV_HWDEVICE_TYPE_VAAPI
                && config.pointee.pix_fmt == AV_PIX_FMT_VAAPI
            {
                return true
            }
            index += 1
        }
        return false
    }

    /// Opens the first render node that works. Returns the device reference (owned by the
    /// caller) and the node, or the reason none worked, listing everything tried.
    static func open(
        codec: UnsafePointer<AVCodec>, renderNodes: [String]?
    ) -> Result<(device: UnsafeMutablePointer<AVBufferRef>, node: String), DecodeError> {
        guard decoderSupportsVAAPI(codec) else {
            return .failure(DecodeError(
                .decoderUnavailable, "VA-API unavailable: this libavcodec build has no VA-API H.264 hwaccel"))
        }
        let nodes = renderNodes ?? scanRenderNodes()
        guard !nodes.isEmpty else {
            let searched = renderNodes == nil ? "no /dev/dri/renderD* render node found" : "no render node configured"
            return .failure(DecodeError(.decoderUnavailable, "VA-API unavailable: \(searched)"))
        }
        var failures: [String] = []
        for node in nodes {
            var device: UnsafeMutablePointer<AVBufferRef>?
            let status = av_hwdevice_ctx_create(&device, AV_HWDEVICE_TYPE_VAAPI, node, nil, 0)
            if status >= 0, let device {
                return .success((device, node))
            }
            failures.append("\(node): \(avErrorString(status))")
        }
        return .failure(DecodeError(
            .decoderUnavailable, "VA-API unavailable: no render node opened (\(failures.joined(separator: "; ")))"))
    }
}
