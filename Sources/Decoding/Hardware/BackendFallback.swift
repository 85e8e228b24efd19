import H264

/// One time a decoder gave up hardware for another back end (software, or VA-API after CUDA).
/// The session layer counts these by `reason` and shows `message`.
public struct BackendFallback: Sendable, Equatable {
    /// Stable, machine-readable reasons (metric labels). Never rename a raw value.
    public enum Reason: String, Sendable, CaseIterable {
        /// The SPS asks for a profile or bit depth the hardware does not decode (High 10, Extended, lossless).
        case unsupportedProfile = "unsupported_profile"
        /// 4:2:2, 4:4:4 or monochrome where the hardware decodes 4:2:0 only.
        case unsupportedChroma = "unsupported_chroma"
        /// The coded picture exceeds the hardware's largest size.
        case tooLarge = "too_large"
        /// libavcodec did not offer the hardware pixel format for this stream.
        case noHardwareFormat = "no_hw_format"
        /// The hardware decoder did not start (libavcodec's hwaccel init, or the decoder did not open).
        case hwaccelInitFailed = "hwaccel_init_failed"
        /// Several access units in a row failed on the hardware decoder mid-stream.
        case deviceErrors = "device_errors"
        /// Hardware devices exist but none could be opened.
        case deviceUnavailable = "device_unavailable"
    }

    public var reason: Reason
    /// The back end given up.
    public var from: DecoderBackend
    /// The back end that took over.
    public var to: DecoderBackend
    /// The device given up, when one was in use.
    public var device: HardwareDeviceID?
    /// Human-readable, e.g. "NVDEC cannot decode High 10 (10-bit)".
    public var message: String
    /// Pictures the stream's decoders had output before the fallback (0: before the first).
    public var afterFrames: UInt64

    public init(
        reason: Reason, from: DecoderBackend, to: DecoderBackend = .software, device: HardwareDeviceID? = nil,
        message: String, afterFrames: UInt64 = 0
    ) {
        self.reason = reason
        self.from = from
        self.to = to
        self.device = device
        self.message = message
        self.afterFrames = afterFrames
    }
}

/// What a hardware decoding engine accepts, as far as the SPS can tell before any picture is
/// sent to it. Anything the SPS cannot show (driver quirks, sizes libva does not report) is
/// left to libavcodec: `get_format` without the hardware format, or a failed hwaccel init.
public struct HardwareCapability: Sendable, Equatable {
    /// "NVDEC", "VA-API": names the engine in messages.
    public var engine: String
    public var maxBitDepth: Int
    /// `chroma_format_idc` values decoded: 0 monochrome, 1 4:2:0, 2 4:2:2, 3 4:4:4.
    public var chromaFormats: Set<Int>
    /// `profile_idc` values refused even at 8-bit 4:2:0, with their names.
    public var refusedProfiles: [Int: String]
    public var decodesLossless: Bool
    /// Largest coded (macroblock-aligned) size; nil when unknown.
    public var maxCodedWidth: Int?
    public var maxCodedHeight: Int?

    public init(
        engine: String, maxBitDepth: Int, chromaFormats: Set<Int>, refusedProfiles: [Int: String] = [:],
        decodesLossless: Bool = false, maxCodedWidth: Int? = nil, maxCodedHeight: Int? = nil
    ) {
        self.engine = engine
        self.maxBitDepth = maxBitDepth
        self.chromaFormats = chromaFormats
        self.refusedProfiles = refusedProfiles
        self.decodesLossless = decodesLossless
        self.maxCodedWidth = maxCodedWidth
        self.maxCodedHeight = maxCodedHeight
    }

    /// NVDEC's H.264 decoder on the GPUs measured (Hopper) and per NVIDIA's NVDEC application
    /// note: Baseline, Main and High, 8-bit 4:2:0 only, at most 4096x4096. Monochrome is refused
    /// too: libavcodec would hand NVDEC a 4:2:0 surface for it, and the note lists 4:2:0 only.
    public static let nvdecH264 = HardwareCapability(
        engine: "NVDEC", maxBitDepth: 8, chromaFormats: [1], refusedProfiles: [88: "Extended"],
        maxCodedWidth: 4096, maxCodedHeight: 4096)

    /// libavcodec's VA-API H.264 hwaccel handles 8-bit 4:2:0 (monochrome goes the same way);
    /// profiles and sizes are the driver's to accept or refuse at hwaccel init.
    public static let vaapiH264 = HardwareCapability(engine: "VA-API", maxBitDepth: 8, chromaFormats: [0, 1])

    public struct Refusal: Sendable, Equatable {
        public var reason: BackendFallback.Reason
        /// e.g. "NVDEC cannot decode High 10 (10-bit)".
        public var message: String
    }

    /// Why a stream with this SPS cannot go to this engine, or nil when it can (as far as the
    /// SPS tells). Bit depth is checked first: High 10 says more about a 10-bit stream than its chroma.
    public func refusal(for sps: SequenceParameterSet) -> Refusal? {
        // Checked for every picture on the hardware: the name is only built for a refusal.
        var profile: String { sps.profileName }
        let depth = max(sps.bitDepthLuma, sps.bitDepthChroma)
        if depth > maxBitDepth {
            let chroma = sps.chromaArrayType == 1 ? "" : " \(Self.chromaName(sps.chromaFormatIdc))"
            return Refusal(reason: .unsupportedProfile, message: "\(engine) cannot decode \(profile) (\(depth)-bit\(chroma))")
        }
        if !chromaFormats.contains(sps.chromaFormatIdc) {
            return Refusal(
                reason: .unsupportedChroma,
                message: "\(engine) cannot decode \(profile) (\(Self.chromaName(sps.chromaFormatIdc)) chroma)")
        }
        if let name = refusedProfiles[Int(sps.profileIdc)] {
            return Refusal(reason: .unsupportedProfile, message: "\(engine) cannot decode \(name)")
        }
        if sps.qpprimeYZeroTransformBypass && !decodesLossless {
            return Refusal(reason: .unsupportedProfile, message: "\(engine) cannot decode lossless \(profile)")
        }
        if let maxCodedWidth, let maxCodedHeight, sps.codedWidth > maxCodedWidth || sps.codedHeight > maxCodedHeight {
            return Refusal(
                reason: .tooLarge,
                message: "\(engine) decodes H.264 up to \(maxCodedWidth)x\(maxCodedHeight); "
                    + "this stream is \(sps.codedWidth)x\(sps.codedHeight) (coded)")
        }
        return nil
    }

    static func chromaName(_ chromaFormatIdc: Int) -> String {
        switch chromaFormatIdc {
        case 0: "monochrome 4:0:0"
        case 1: "4:2:0"
        case 2: "4:2:2"
        default: "4:4:4"
        }
    }
}
