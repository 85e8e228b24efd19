import VideoCoding

/// A stream's format as the API and `frametap probe --json` show it (openapi.yaml
/// `VideoFormat`): `frameRate` and `sampleAspectRatio` are left out when the stream does not
/// say them, `tier` for codecs without tiers (H.264); every other member is always there.
public struct StreamFormatJSON: Encodable {
    let format: StreamFormat

    public init(_ format: StreamFormat) { self.format = format }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(format.codec.rawValue, forKey: .codec)
        try container.encode(format.width, forKey: .width)
        try container.encode(format.height, forKey: .height)
        try container.encode(format.codedWidth, forKey: .codedWidth)
        try container.encode(format.codedHeight, forKey: .codedHeight)
        var crop = container.nestedContainer(keyedBy: CropKey.self, forKey: .crop)
        try crop.encode(format.crop.left, forKey: .left)
        try crop.encode(format.crop.right, forKey: .right)
        try crop.encode(format.crop.top, forKey: .top)
        try crop.encode(format.crop.bottom, forKey: .bottom)
        try container.encode(format.profile, forKey: .profile)
        try container.encode(format.profileIdc, forKey: .profileIdc)
        try container.encodeIfPresent(format.tier, forKey: .tier)
        try container.encode(format.level, forKey: .level)
        try container.encode(format.chromaFormat, forKey: .chromaFormat)
        try container.encode(format.bitDepth, forKey: .bitDepth)
        try container.encode(format.bitDepthChroma, forKey: .bitDepthChroma)
        try container.encode(format.interlaced, forKey: .interlaced)
        try container.encodeIfPresent(format.frameRate, forKey: .frameRate)
        try container.encodeIfPresent(format.sampleAspectRatio, forKey: .sampleAspectRatio)
        try container.encode(format.fullRange, forKey: .fullRange)
        try container.encode(format.colorPrimaries, forKey: .colorPrimaries)
        try container.encode(format.transfer, forKey: .transfer)
        try container.encode(format.matrix, forKey: .matrix)
    }

    private enum Key: String, CodingKey {
        case codec, width, height, codedWidth, codedHeight, crop, profile, profileIdc, tier, level, chromaFormat
        case bitDepth, bitDepthChroma, interlaced, frameRate, sampleAspectRatio, fullRange, colorPrimaries, transfer
        case matrix
    }

    private enum CropKey: String, CodingKey { case left, right, top, bottom }
}
