import CFFmpeg
import FoundationEssentials
import Synchronization
import VideoCoding

/// A libavutil hardware device context (`AVHWDeviceContext` in an `AVBufferRef`), shared by
/// every decoder on that device: each decoder's codec context takes its own reference.
///
/// The reference is set once and released in deinit; AVBufferRef reference counts are atomic,
/// and libavutil's CUDA and VA-API device contexts may be used by several codec contexts on
/// different threads (each call pushes its own CUDA context). The pointer is kept in a Mutex,
/// which makes sharing it checked.
public final class HardwareDeviceContext: Sendable {
    private let reference: Mutex<UnsafeMutablePointer<AVBufferRef>?>

    /// Takes ownership of `buffer`. nil stands for a device that exists only in tests: no real
    /// codec context can decode on it.
    init(taking buffer: sending UnsafeMutablePointer<AVBufferRef>?) {
        reference = Mutex(buffer)
    }

    var buffer: UnsafeMutablePointer<AVBufferRef>? { reference.withLock { $0 } }

    /// A stand-in for tests and injected platforms.
    public static func placeholder() -> HardwareDeviceContext { HardwareDeviceContext(taking: nil) }

    deinit {
        reference.withLock { av_buffer_unref(&$0) }
    }
}

/// An open device as the pool keeps it.
public struct OpenedHardwareDevice: Sendable {
    public var context: HardwareDeviceContext
    /// What the device decodes, by codec; a codec without an entry is not decoded on it.
    public var capabilities: [VideoCodec: HardwareCapability]
    /// The device's own name when known, e.g. "NVIDIA H100 80GB HBM3".
    public var name: String?

    public init(context: HardwareDeviceContext, capabilities: [HardwareCapability], name: String? = nil) {
        self.context = context
        self.capabilities = Dictionary(capabilities.map { ($0.codec, $0) }, uniquingKeysWith: { first, _ in first })
        self.name = name
    }
}

/// What the machine offers: the devices that exist and how to open one. The pool asks this,
/// so tests can pretend devices exist, fail, or come back.
public protocol HardwarePlatform: Sendable {
    /// CUDA device ordinals the driver reports, or why there are none (no driver, no GPU,
    /// libavcodec without NVDEC).
    func cudaDevices() -> Result<[Int], DecodeError>
    /// Render nodes present now (`/dev/dri/renderD*`), in a stable order.
    func renderNodes() -> [String]
    /// Opens a device context. Slow for CUDA (about 0.25 s): the pool calls it once per device.
    func open(_ device: HardwareDeviceID) -> Result<OpenedHardwareDevice, DecodeError>
}

/// The real machine: the CUDA driver through `CUDADriver`, render nodes in /dev/dri, and
/// `av_hwdevice_ctx_create` (FFmpeg's doc/examples/hw_decode.c pattern).
public struct LibavHardwarePlatform: HardwarePlatform {
    public init() {}

    public func cudaDevices() -> Result<[Int], DecodeError> {
        guard LibavHardwareSupport.decodes(.cuda) else {
            return .failure(DecodeError(.decoderUnavailable, "this libavcodec has no NVDEC hwaccel for H.264 or H.265"))
        }
        switch CUDADriver.shared {
        case .failure(let error):
            return .failure(error)
        case .success(let driver):
            switch driver.deviceCount() {
            case .failure(let error): return .failure(error)
            case .success(let count):
                guard count > 0 else {
                    return .failure(DecodeError(.decoderUnavailable, "the NVIDIA driver reports no device"))
                }
                return .success(Array(0..<count))
            }
        }
    }

    public func renderNodes() -> [String] { VAAPIDevice.scanRenderNodes() }

    public func open(_ device: HardwareDeviceID) -> Result<OpenedHardwareDevice, DecodeError> {
        guard LibavHardwareSupport.decodes(device.kind) else {
            return .failure(DecodeError(
                .decoderUnavailable, "this libavcodec has no \(device.kind.displayName) hwaccel for H.264 or H.265"))
        }
        if device.kind == .cuda {
            // libavutil's own "Operation not permitted" for a missing driver or device says little.
            switch CUDADriver.shared.flatMap({ driver in driver.deviceCount() }) {
            case .failure(let error):
                return .failure(DecodeError(.decoderUnavailable, "\(device): \(error.message)"))
            case .success(let count):
                if let ordinal = device.cudaOrdinal, ordinal >= count {
                    return .failure(DecodeError(
                        .decoderUnavailable, "\(device): no such device (the driver reports \(count))"))
                }
            }
        }
        var context: UnsafeMutablePointer<AVBufferRef>?
        let type = device.kind == .cuda ? AV_HWDEVICE_TYPE_CUDA : AV_HWDEVICE_TYPE_VAAPI
        let status = av_hwdevice_ctx_create(&context, type, device.address, nil, 0)
        guard status >= 0, let context else {
            // libavutil's errno ("Invalid argument") hides the cause; libva's own probe names it
            // (no such node, permission denied and which group to add, no driver).
            let explained = device.kind == .vaapi ? HardwareProbe.probeNode(device.address).error : nil
            return .failure(DecodeError(.decoderUnavailable, "\(device): \(explained ?? avErrorString(status))"))
        }
        // Each codec only where this libavcodec has its hwaccel for the device's kind.
        let present = { (capability: HardwareCapability) in LibavHardwareSupport.decodes(device.kind, codec: capability.codec) }
        switch device.kind {
        case .cuda:
            let name = device.cudaOrdinal.flatMap { ordinal in
                (try? CUDADriver.shared.get()).flatMap { try? $0.facts(ordinal: ordinal).get().name }
            }
            return .success(OpenedHardwareDevice(
                context: HardwareDeviceContext(taking: context), capabilities: [.nvdecH264, .nvdecHEVC].filter(present),
                name: name))
        case .vaapi:
            // The node's own profile list says which codecs (and, for H.265, which depth) it
            // decodes; libavutil's device context does not tell.
            let node = HardwareProbe.probeNode(device.address)
            return .success(OpenedHardwareDevice(
                context: HardwareDeviceContext(taking: context), capabilities: node.capabilities.filter(present)))
        }
    }
}

/// What this libavcodec build can decode with each kind of hardware.
enum LibavHardwareSupport {
    /// Whether the build has the hwaccel of `kind` for H.264 or H.265.
    static func decodes(_ kind: HardwareDeviceKind) -> Bool {
        VideoCodec.allCases.contains { decodes(kind, codec: $0) }
    }

    static func decodes(_ kind: HardwareDeviceKind, codec: VideoCodec) -> Bool {
        guard let decoder = avcodec_find_decoder(codec == .h264 ? AV_CODEC_ID_H264 : AV_CODEC_ID_HEVC) else { return false }
        switch kind {
        case .cuda: return supports(decoder, AV_HWDEVICE_TYPE_CUDA, AV_PIX_FMT_CUDA)
        case .vaapi: return supports(decoder, AV_HWDEVICE_TYPE_VAAPI, AV_PIX_FMT_VAAPI)
        }
    }

    static func supports(_ codec: UnsafePointer<AVCodec>, _ type: AVHWDeviceType, _ format: AVPixelFormat) -> Bool {
        var index: Int32 = 0
        while let config = avcodec_get_hw_config(codec, index) {
            let viaDevice = config.pointee.methods & Int32(AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX) != 0
            if viaDevice && config.pointee.device_type == type && config.pointee.pix_fmt == format {
                return true
            }
            index += 1
        }
        return false
    }
}
