/// How a container stores a video track's samples, from its sample description: the codec, its
/// configuration, and whether each sample is a whole access unit. With it the bitstream layer's
/// `SampleConverter` (the `Bitstream` front) turns samples into the NAL units a reader takes.
public struct SampleDescription: Sendable, Equatable {
    public var codec: VideoCodec
    /// The codec configuration record (`avcC`, `hvcC`: length-prefixed samples), Annex B
    /// parameter sets (Annex B samples), or nothing (Annex B samples that carry their own).
    public var configuration: [UInt8]
    /// Each sample is one whole access unit (MP4, Matroska, FLV, an MPEG-TS PES packet), so its
    /// picture can be decoded as soon as its last byte is in. False for pieces of an Annex B
    /// stream cut elsewhere (RTP packets): the access units are found as in a pushed stream.
    public var samplesAreAccessUnits: Bool

    public init(codec: VideoCodec, configuration: [UInt8], samplesAreAccessUnits: Bool) {
        self.codec = codec
        self.configuration = configuration
        self.samplesAreAccessUnits = samplesAreAccessUnits
    }

    /// Whether samples are Annex B (start codes) rather than length-prefixed: so when the
    /// configuration is empty or itself Annex B, as the containers that carry Annex B have it.
    public var samplesAreAnnexB: Bool {
        configuration.isEmpty || configuration.starts(with: [0, 0, 1]) || configuration.starts(with: [0, 0, 0, 1])
    }
}
