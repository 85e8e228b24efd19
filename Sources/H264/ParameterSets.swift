import VideoCoding

/// The SPSs and PPSs seen so far, by id, as a decoder would hold them.
public struct ParameterSets: Sendable {
    public private(set) var sps: [Int: SequenceParameterSet] = [:]
    public private(set) var pps: [Int: PictureParameterSet] = [:]
    /// The NAL units they were parsed from, e.g. to build an avcC record or to prime a decoder.
    public private(set) var spsUnits: [Int: NALUnit] = [:]
    public private(set) var ppsUnits: [Int: NALUnit] = [:]

    public init() {}

    /// Parses an SPS or PPS and stores it; other NAL types are ignored. Returns true when a set
    /// was added or its content changed. A malformed set throws and leaves the stored one alone.
    @discardableResult
    public mutating func update(with nal: NALUnit) throws(BitstreamError) -> Bool {
        switch nal.type {
        case .sps:
            let parsed = try SequenceParameterSet(nal: nal)
            return sps.storeParameterSet(parsed, id: parsed.id, from: nal, units: &spsUnits)
        case .pps:
            let rbsp = nal.rbsp()
            var reader = BitReader(rbsp)
            _ = try reader.readUE(max: 255, "pic_parameter_set_id")
            let spsId = try reader.readUE(max: 31, "seq_parameter_set_id")
            let parsed = try PictureParameterSet(rbsp: rbsp, chromaFormatIdc: sps[spsId]?.chromaFormatIdc ?? 1)
            return pps.storeParameterSet(parsed, id: parsed.id, from: nal, units: &ppsUnits)
        default:
            return false
        }
    }

    /// The SPS a PPS refers to, when both are known.
    public func sps(forPPS ppsId: Int) -> SequenceParameterSet? {
        pps[ppsId].flatMap { sps[$0.spsId] }
    }

    public mutating func removeAll() {
        self = ParameterSets()
    }
}
