import VideoCoding

extension StreamFormat {
    /// The format an H.265 SPS describes. `vps` (the SPS's) supplies the frame rate when the
    /// VUI has no timing: libavcodec takes the VPS's timing first, and x265 writes both.
    public init(sps: SequenceParameterSet, vps: VideoParameterSet? = nil) {
        let vui = sps.vui ?? VUIParameters()
        let frameRate = vps?.frameRate ?? vui.frameRate
        self.init(
            codec: .h265, codedWidth: sps.codedWidth, codedHeight: sps.codedHeight,
            crop: sps.cropRect.edgeOffsets(codedWidth: sps.codedWidth, codedHeight: sps.codedHeight),
            profile: sps.profileName, profileIdc: sps.profileTierLevel.effectiveProfileIdc, tier: sps.tierName,
            level: sps.levelName, chromaFormatIdc: sps.chromaFormatIdc, bitDepth: sps.bitDepthLuma,
            bitDepthChroma: sps.bitDepthChroma, interlaced: vui.fieldSeq, frameRate: frameRate, display: vui.display)
    }
}
