import VideoCoding

/// What a hardware decoding engine accepts for one codec, as far as the SPS can tell before any
/// picture is sent to it. Anything the SPS cannot show (driver quirks, sizes libva does not
/// report, 12-bit HEVC on some GPUs) is left to libavcodec: `get_format` without the hardware
/// format, or a failed hwaccel init.
public struct HardwareCapability: Sendable, Equatable {
    /// "NVDEC", "VA-API": names the engine in messages.
    public var engine: String
    public var codec: VideoCodec
    public var maxBitDepth: Int
    /// `chroma_format_idc` values decoded: 0 monochrome, 1 4:2:0, 2 4:2:2, 3 4:4:4.
    public var chromaFormats: Set<Int>
    /// Profile numbers (H.264 profile_idc, H.265 general_profile_idc) refused even at 8-bit
    /// 4:2:0, with their names.
    public var refusedProfiles: [Int: String]
    public var decodesLossless: Bool
    /// Largest coded size; nil when unknown.
    public var maxCodedWidth: Int?
    public var maxCodedHeight: Int?

    public init(
        engine: String, codec: VideoCodec, maxBitDepth: Int, chromaFormats: Set<Int>, refusedProfiles: [Int: String] = [:],
        decodesLossless: Bool = false, maxCodedWidth: Int? = nil, maxCodedHeight: Int? = nil
    ) {
        self.engine = engine
        self.codec = codec
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
        engine: "NVDEC", codec: .h264, maxBitDepth: 8, chromaFormats: [1], refusedProfiles: [88: "Extended"],
        maxCodedWidth: 4096, maxCodedHeight: 4096)

    /// NVDEC's HEVC decoder per NVIDIA's application note (Video Codec SDK 13.0, Hopper column):
    /// Main and Main 10 4:2:0 and 4:4:4, up to 8192x8192; 4:2:2 only on newer chips. 12-bit is
    /// not in Hopper's column: it is left to the device (libavcodec then offers no CUDA format).
    public static let nvdecHEVC = HardwareCapability(
        engine: "NVDEC", codec: .h265, maxBitDepth: 12, chromaFormats: [1, 3], decodesLossless: true,
        maxCodedWidth: 8192, maxCodedHeight: 8192)

    /// libavcodec's VA-API H.264 hwaccel handles 8-bit 4:2:0 (monochrome goes the same way);
    /// profiles and sizes are the driver's to accept or refuse at hwaccel init.
    public static let vaapiH264 = HardwareCapability(engine: "VA-API", codec: .h264, maxBitDepth: 8, chromaFormats: [0, 1])

    /// libavcodec's VA-API HEVC hwaccel as FrameTap uses it: Main and Main 10 4:2:0; sizes and
    /// anything else are the driver's to accept or refuse at hwaccel init.
    public static let vaapiHEVC = HardwareCapability(
        engine: "VA-API", codec: .h265, maxBitDepth: 10, chromaFormats: [1], decodesLossless: true)

    /// `vaapiHEVC` as far as a render node's H.265 profiles (`RenderNodeReport.hevcProfiles`)
    /// allow: 10-bit with Main10, 8-bit with Main only, nil without either (the node then does
    /// not decode H.265 for FrameTap, and a stream of it goes on to the next back end).
    public static func vaapiHEVC(profiles: [String]) -> HardwareCapability? {
        var capability = vaapiHEVC
        if profiles.contains("Main10") {
            capability.maxBitDepth = 10
        } else if profiles.contains("Main") {
            capability.maxBitDepth = 8
        } else {
            return nil
        }
        return capability
    }

    public struct Refusal: Sendable, Equatable {
        public var reason: BackendFallback.Reason
        /// e.g. "NVDEC cannot decode High 10 (10-bit)".
        public var message: String

        public init(reason: BackendFallback.Reason, message: String) {
            self.reason = reason
            self.message = message
        }
    }

    /// Why a stream with these sequence facts cannot go to this engine, or nil when it can (as
    /// far as the SPS tells). Bit depth is checked first: High 10 says more about a 10-bit stream
    /// than its chroma.
    public func refusal(for sequence: SequenceFacts) -> Refusal? {
        let format = sequence.format
        let chroma = format.chromaFormatIdc
        let depth = max(format.bitDepth, format.bitDepthChroma)
        if depth > maxBitDepth {
            let chromaNote = chroma == 1 ? "" : " \(Self.chromaName(chroma))"
            return Refusal(
                reason: .unsupportedProfile, message: "\(engine) cannot decode \(format.profile) (\(depth)-bit\(chromaNote))")
        }
        if !chromaFormats.contains(chroma) {
            return Refusal(
                reason: .unsupportedChroma,
                message: "\(engine) cannot decode \(format.profile) (\(Self.chromaName(chroma)) chroma)")
        }
        if let name = refusedProfiles[format.profileIdc] {
            return Refusal(reason: .unsupportedProfile, message: "\(engine) cannot decode \(name)")
        }
        if sequence.lossless && !decodesLossless {
            return Refusal(reason: .unsupportedProfile, message: "\(engine) cannot decode lossless \(format.profile)")
        }
        if let maxCodedWidth, let maxCodedHeight, format.codedWidth > maxCodedWidth || format.codedHeight > maxCodedHeight {
            return Refusal(
                reason: .tooLarge,
                message: "\(engine) decodes \(codec.displayName) up to \(maxCodedWidth)x\(maxCodedHeight); "
                    + "this stream is \(format.codedWidth)x\(format.codedHeight) (coded)")
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
