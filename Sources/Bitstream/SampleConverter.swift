import H264
import H265
import VideoCoding

/// Turns a container's samples into the NAL units a codec's reader takes, as the Annex B
/// splitter would have cut them: the parameter sets of the sample description first (an
/// `avcC` or `hvcC` record, or Annex B), then each sample's units (length-prefixed or Annex B).
/// One converter per sample description.
public struct SampleConverter: Sendable {
    public let description: SampleDescription
    /// The description's parameter sets (and SEI), for the reader before the first sample.
    public let parameterSets: [AnnexBUnit]
    /// Bytes in each length field of a sample; nil when samples are Annex B.
    public let lengthSize: Int?
    private let maxNALBytes: Int

    public init(_ description: SampleDescription, maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes) throws(BitstreamError) {
        self.description = description
        self.maxNALBytes = maxNALBytes
        if description.samplesAreAnnexB {
            lengthSize = nil
            parameterSets = AnnexBSplitter.split(description.configuration, maxNALBytes: maxNALBytes).map { $0.detached() }
            return
        }
        switch description.codec {
        case .h264:
            let record = try AVCDecoderConfigurationRecord(parsing: description.configuration)
            lengthSize = record.lengthSize
            parameterSets = (record.sequenceParameterSets + record.pictureParameterSets + record.sequenceParameterSetExtensions)
                .filter { !$0.isEmpty }.map { AnnexBUnit(bytes: $0, streamOffset: 0) }
        case .h265:
            let record = try HEVCDecoderConfigurationRecord(parsing: description.configuration)
            lengthSize = record.lengthSize
            parameterSets = record.nalUnits.map { AnnexBUnit(bytes: $0, streamOffset: 0) }
        }
    }

    /// The NAL units of one sample; `streamOffset` is where the sample begins in the stream.
    /// A unit larger than `maxNALBytes`, or a length that runs past the sample, throws.
    public func units(of sample: UnsafeRawBufferPointer, streamOffset: Int = 0) throws(BitstreamError) -> [AnnexBUnit] {
        var landing = SlabWriter()
        return try units(of: sample, streamOffset: streamOffset, landing: &landing)
    }

    /// `units(of:streamOffset:)` whose sample lands through `landing` (a writer its reader keeps
    /// for every sample): its units are regions of where it landed, not copies.
    public func units(
        of sample: UnsafeRawBufferPointer, streamOffset: Int = 0, landing: inout SlabWriter
    ) throws(BitstreamError) -> [AnnexBUnit] {
        guard let lengthSize else {
            let landed = landing.landContiguous(sample)
            var splitter = AnnexBSplitter(maxNALBytes: maxNALBytes)
            var units: [AnnexBUnit] = []
            var dropped: BitstreamError?
            let handle: (SplitterEvent) -> Void = { event in
                switch event {
                case .unit(let unit): units.append(AnnexBUnit(bytes: unit.bytes, streamOffset: streamOffset + unit.streamOffset))
                case .dropped(let error, _): dropped = error
                }
            }
            splitter.push(landed, handle)
            splitter.finish(handle)
            if let dropped { throw dropped }
            return units
        }
        let units = try LengthPrefixedUnits.units(
            in: sample, lengthSize: lengthSize, streamOffset: streamOffset, landing: &landing)
        if let large = units.first(where: { $0.bytes.count > maxNALBytes }) {
            throw BitstreamError(.nalTooLarge, "a NAL unit of \(large.bytes.count) bytes exceeds the \(maxNALBytes)-byte limit")
        }
        return units
    }
}
