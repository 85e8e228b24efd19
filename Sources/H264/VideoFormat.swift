/// A readable description of a stream's pictures, built from its SPS (what the HTTP API
/// reports as the "format").
public struct VideoFormat: Sendable, Equatable {
    /// Luma samples removed on each side by the SPS cropping window.
    public struct Crop: Sendable, Equatable {
        public var left: Int
        public var right: Int
        public var top: Int
        public var bottom: Int
    }

    /// Displayed size (after cropping).
    public var width: Int
    public var height: Int
    /// Decoded size (whole macroblocks).
    public var codedWidth: Int
    public var codedHeight: Int
    public var crop: Crop
    /// e.g. "High", "Constrained Baseline".
    public var profile: String
    public var profileIdc: Int
    /// e.g. "3.1", "1b".
    public var level: String
    /// "4:0:0", "4:2:0", "4:2:2" or "4:4:4".
    public var chromaFormat: String
    public var bitDepth: Int
    public var bitDepthChroma: Int
    /// Field or MBAFF coding possible (frame_mbs_only_flag is 0).
    public var interlaced: Bool
    public var frameRate: Double?
    /// "N:D", nil when the stream does not say.
    public var sampleAspectRatio: String?
    public var fullRange: Bool
    public var colorPrimaries: String
    public var transfer: String
    public var matrix: String

    public init(sps: SequenceParameterSet) {
        let rect = sps.cropRect
        width = rect.width
        height = rect.height
        codedWidth = sps.codedWidth
        codedHeight = sps.codedHeight
        crop = Crop(
            left: rect.x, right: sps.codedWidth - rect.x - rect.width,
            top: rect.y, bottom: sps.codedHeight - rect.y - rect.height)
        profile = sps.profileName
        profileIdc = Int(sps.profileIdc)
        level = sps.levelName
        chromaFormat = ["4:0:0", "4:2:0", "4:2:2", "4:4:4"][sps.chromaFormatIdc]
        bitDepth = sps.bitDepthLuma
        bitDepthChroma = sps.bitDepthChroma
        interlaced = !sps.frameMbsOnly
        let vui = sps.vui ?? VUIParameters()
        frameRate = vui.frameRate
        sampleAspectRatio = vui.sampleAspectRatio?.text
        fullRange = vui.videoFullRange
        colorPrimaries = ColourDescription.primariesName(vui.colourPrimaries)
        transfer = ColourDescription.transferName(vui.transferCharacteristics)
        matrix = ColourDescription.matrixName(vui.matrixCoefficients)
    }
}
