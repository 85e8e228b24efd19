import VideoCoding

/// The VPSs, SPSs and PPSs seen so far, by id, as a decoder would hold them.
public struct ParameterSets: Sendable {
    public private(set) var vps: [Int: VideoParameterSet] = [:]
    public private(set) var sps: [Int: SequenceParameterSet] = [:]
    public private(set) var pps: [Int: PictureParameterSet] = [:]
    /// The NAL units they were parsed from, e.g. to build an hvcC record or to prime a decoder.
    public private(set) var vpsUnits: [Int: NALUnit] = [:]
    public private(set) var spsUnits: [Int: NALUnit] = [:]
    public private(set) var ppsUnits: [Int: NALUnit] = [:]

    public init() {}

    /// At least one VPS, SPS and PPS: what any picture needs before it can be decoded.
    public var hasEachKind: Bool { !vps.isEmpty && !sps.isEmpty && !pps.isEmpty }

    /// Parses a VPS, SPS or PPS and stores it; other NAL types are ignored. Returns true when a
    /// set was added or its content changed. A malformed set throws and leaves the stored one alone.
    @discardableResult
    public mutating func update(with nal: NALUnit) throws(BitstreamError) -> Bool {
        switch nal.type {
        case .vps:
            let parsed = try VideoParameterSet(nal: nal)
            return vps.storeParameterSet(parsed, id: parsed.id, from: nal, units: &vpsUnits)
        case .sps:
            let parsed = try SequenceParameterSet(nal: nal)
            return sps.storeParameterSet(parsed, id: parsed.id, from: nal, units: &spsUnits)
        case .pps:
            let parsed = try PictureParameterSet(nal: nal)
            return pps.storeParameterSet(parsed, id: parsed.id, from: nal, units: &ppsUnits)
        default:
            return false
        }
    }

    /// The SPS a PPS refers to, when both are known.
    public func sps(forPPS ppsId: Int) -> SequenceParameterSet? {
        pps[ppsId].flatMap { sps[$0.spsId] }
    }

    /// The VPS an SPS refers to, when both are known.
    public func vps(forSPS spsId: Int) -> VideoParameterSet? {
        sps[spsId].flatMap { vps[$0.vpsId] }
    }

    /// The units a decoder needs before a picture using `ppsId`, in the order libavcodec
    /// accepts them (it refuses an SPS before its VPS and a PPS before its SPS); nil unless all
    /// three are known.
    public func units(forPPS ppsId: Int) -> (vps: NALUnit, sps: NALUnit, pps: NALUnit)? {
        guard let spsId = pps[ppsId]?.spsId, let vpsId = sps[spsId]?.vpsId,
            let vpsUnit = vpsUnits[vpsId], let spsUnit = spsUnits[spsId], let ppsUnit = ppsUnits[ppsId]
        else { return nil }
        return (vpsUnit, spsUnit, ppsUnit)
    }

    public mutating func removeAll() {
        self = ParameterSets()
    }
}
