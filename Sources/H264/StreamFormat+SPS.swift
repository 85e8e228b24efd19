import VideoCoding

extension StreamFormat {
    /// The format an H.264 SPS describes.
    public init(sps: SequenceParameterSet) {
        let vui = sps.vui ?? VUIParameters()
        self.init(
            codec: .h264, codedWidth: sps.codedWidth, codedHeight: sps.codedHeight,
            crop: sps.cropRect.edgeOffsets(codedWidth: sps.codedWidth, codedHeight: sps.codedHeight),
            profile: sps.profileName, profileIdc: Int(sps.profileIdc), level: sps.levelName,
            chromaFormatIdc: sps.chromaFormatIdc, bitDepth: sps.bitDepthLuma, bitDepthChroma: sps.bitDepthChroma,
            interlaced: !sps.frameMbsOnly, frameRate: vui.frameRate, display: vui.display)
    }
}
