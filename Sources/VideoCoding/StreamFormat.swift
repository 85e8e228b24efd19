/// A readable description of a stream's pictures, built from its sequence parameter set by
/// either codec (what the HTTP API reports as the "format"; its JSON is the API's).
public struct StreamFormat: Sendable, Equatable {
    /// Luma samples removed on each side by the SPS cropping (conformance) window.
    public typealias Crop = EdgeOffsets

    public var codec: VideoCodec
    /// Displayed size (after cropping).
    public var width: Int
    public var height: Int
    /// Decoded size (whole macroblocks or minimum coding blocks).
    public var codedWidth: Int
    public var codedHeight: Int
    public var crop: Crop
    /// e.g. "High", "Constrained Baseline", "Main 10", "Main 4:2:2 10".
    public var profile: String
    public var profileIdc: Int
    /// H.265 only: "Main" or "High".
    public var tier: String?
    /// e.g. "3.1", "1b".
    public var level: String
    /// "4:0:0", "4:2:0", "4:2:2" or "4:4:4".
    public var chromaFormat: String
    public var bitDepth: Int
    public var bitDepthChroma: Int
    /// Pictures may be fields: H.264 field or MBAFF coding (frame_mbs_only_flag 0), H.265
    /// field_seq_flag.
    public var interlaced: Bool
    public var frameRate: Double?
    /// "N:D", nil when the stream does not say.
    public var sampleAspectRatio: String?
    public var fullRange: Bool
    public var colorPrimaries: String
    public var transfer: String
    public var matrix: String

    /// `crop` is in luma samples and must leave a picture; the names come from
    /// `chromaFormatIdc` (0...3) and `display`'s code points.
    public init(
        codec: VideoCodec, codedWidth: Int, codedHeight: Int, crop: Crop, profile: String, profileIdc: Int,
        tier: String? = nil, level: String, chromaFormatIdc: Int, bitDepth: Int, bitDepthChroma: Int,
        interlaced: Bool, frameRate: Double?, display: VUIDisplayParameters
    ) {
        self.codec = codec
        width = codedWidth - crop.left - crop.right
        height = codedHeight - crop.top - crop.bottom
        self.codedWidth = codedWidth
        self.codedHeight = codedHeight
        self.crop = crop
        self.profile = profile
        self.profileIdc = profileIdc
        self.tier = tier
        self.level = level
        chromaFormat = ["4:0:0", "4:2:0", "4:2:2", "4:4:4"][chromaFormatIdc]
        self.bitDepth = bitDepth
        self.bitDepthChroma = bitDepthChroma
        self.interlaced = interlaced
        self.frameRate = frameRate
        sampleAspectRatio = display.sampleAspectRatio?.text
        fullRange = display.videoFullRange
        colorPrimaries = ColourDescription.primariesName(display.colourPrimaries)
        transfer = ColourDescription.transferName(display.transferCharacteristics)
        matrix = ColourDescription.matrixName(display.matrixCoefficients)
    }
}

extension StreamFormat {
    /// `chroma_format_idc` of `chromaFormat`: 0 monochrome, 1 4:2:0, 2 4:2:2, 3 4:4:4.
    public var chromaFormatIdc: Int {
        switch chromaFormat {
        case "4:0:0": 0
        case "4:2:2": 2
        case "4:4:4": 3
        default: 1
        }
    }
}

/// An offset from each edge of a picture: a crop, a cropping or conformance window. Each use
/// says its unit (luma samples, or the codec's crop units as coded).
public struct EdgeOffsets: Sendable, Equatable {
    public var left: Int
    public var right: Int
    public var top: Int
    public var bottom: Int

    public init(left: Int, right: Int, top: Int, bottom: Int) {
        self.left = left
        self.right = right
        self.top = top
        self.bottom = bottom
    }
}
