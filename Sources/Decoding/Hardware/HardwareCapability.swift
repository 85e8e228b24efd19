import H264

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
