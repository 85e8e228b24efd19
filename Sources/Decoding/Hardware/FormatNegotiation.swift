import CFFmpeg

/// The state `get_format` reads and writes. libavcodec calls it from inside `avcodec_send_packet`
/// (or a frame thread while the sending thread waits), so it is never touched concurrently.
///
/// It picks the hardware format when offered (FFmpeg's hw_decode.c) and otherwise refuses
/// (`AV_PIX_FMT_NONE`, which fails the packet) and remembers why: whether the stream then goes
/// to software is `BackendSupervisor`'s decision, not this decoder's.
final class FormatNegotiation {
    let hardwareFormat: AVPixelFormat
    let hardwareKind: HardwareDeviceKind
    let device: HardwareDeviceID
    /// Why the hardware format was refused; read once by the send that failed.
    private var refusal: HardwareCapability.Refusal?
    /// The stream the last hardware choice was for. libavcodec's `ff_get_format` calls again at
    /// once, without the hardware format, when the hwaccel fails to initialise: the same stream
    /// then means "init failed", not "not offered".
    private var lastHardwareChoice: StreamShape?

    struct StreamShape: Equatable {
        var profile: Int32
        var codedWidth: Int32
        var codedHeight: Int32
        var softwareFormat: AVPixelFormat
    }

    init(hardware kind: HardwareDeviceKind, device: HardwareDeviceID) {
        hardwareFormat = kind == .cuda ? AV_PIX_FMT_CUDA : AV_PIX_FMT_VAAPI
        hardwareKind = kind
        self.device = device
    }

    func choose(from offered: [AVPixelFormat], shape: StreamShape, profileName: String) -> AVPixelFormat {
        if offered.contains(hardwareFormat) {
            lastHardwareChoice = shape
            return hardwareFormat
        }
        let initFailed = lastHardwareChoice == shape
        lastHardwareChoice = nil
        let formatName = av_get_pix_fmt_name(shape.softwareFormat).map { String(cString: $0) } ?? "?"
        let stream = "\(profileName) \(formatName) \(shape.codedWidth)x\(shape.codedHeight)"
        refusal = initFailed
            ? .init(reason: .hwaccelInitFailed, message: "\(hardwareKind.engineName) on \(device) could not start decoding \(stream)")
            : .init(
                reason: .noHardwareFormat,
                message: "\(hardwareKind.engineName) cannot decode \(stream): libavcodec offers no \(hardwareKind.displayName) format for it")
        return AV_PIX_FMT_NONE
    }

    /// The refusal of the last `get_format` call, once.
    func takeRefusal() -> HardwareCapability.Refusal? {
        defer { refusal = nil }
        return refusal
    }
}

/// `AVCodecContext.get_format` for a decoder with a hardware device: collects the offered
/// formats and lets `FormatNegotiation` choose.
let chooseFormat:
    @convention(c) (UnsafeMutablePointer<AVCodecContext>?, UnsafePointer<AVPixelFormat>?) -> AVPixelFormat = {
        context, formats in
        guard let context, let formats, let opaque = context.pointee.opaque else { return AV_PIX_FMT_NONE }
        let negotiation = Unmanaged<FormatNegotiation>.fromOpaque(opaque).takeUnretainedValue()
        var offered: [AVPixelFormat] = []
        var index = 0
        while formats[index] != AV_PIX_FMT_NONE {
            offered.append(formats[index])
            index += 1
        }
        let profileName = avcodec_profile_name(context.pointee.codec_id, context.pointee.profile).map { String(cString: $0) }
            ?? "profile \(context.pointee.profile)"
        let shape = FormatNegotiation.StreamShape(
            profile: context.pointee.profile, codedWidth: context.pointee.coded_width,
            codedHeight: context.pointee.coded_height, softwareFormat: offered.last ?? AV_PIX_FMT_NONE)
        return negotiation.choose(from: offered, shape: shape, profileName: profileName)
    }
