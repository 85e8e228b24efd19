import VideoCoding

/// slice_type % 5 (Table 7-6).
public enum SliceType: Int, Sendable, CaseIterable, Codable {
    case p = 0
    case b = 1
    case i = 2
    case sp = 3
    case si = 4

    public var name: String {
        switch self {
        case .p: "P"
        case .b: "B"
        case .i: "I"
        case .sp: "SP"
        case .si: "SI"
        }
    }
}

/// The start of slice_header() (§7.3.3) up to redundant_pic_cnt: every field that decides
/// whether a slice begins a new primary coded picture (§7.4.1.2.4).
///
/// Fields that are absent from a slice hold the value the spec infers for them (0, false), so
/// two headers compare the way §7.4.1.2.4 asks.
public struct SliceHeaderPrefix: Sendable, Equatable {
    public var nalType: NALUnitType
    public var nalRefIdc: UInt8
    public var firstMbInSlice: Int
    public var sliceType: SliceType
    /// slice_type 5...9: every slice of the picture has this type.
    public var sliceTypeFixedForPicture: Bool
    public var ppsId: Int
    public var spsId: Int
    public var colourPlaneId: Int
    public var frameNum: Int
    public var fieldPic: Bool
    public var bottomField: Bool
    /// nil unless IDR.
    public var idrPicId: Int?
    public var pocType: Int
    public var picOrderCntLsb: Int
    public var deltaPicOrderCntBottom: Int32
    public var deltaPicOrderCnt0: Int32
    public var deltaPicOrderCnt1: Int32
    public var redundantPicCnt: Int

    /// IdrPicFlag.
    public var isIDR: Bool { nalType == .idr }
    /// Redundant coded pictures (redundant_pic_cnt > 0) never start an access unit.
    public var isRedundant: Bool { redundantPicCnt > 0 }

    /// Throws `.invalidData` for a malformed header, a NAL type without a slice header, or a
    /// PPS/SPS that `parameterSets` does not hold.
    public init(nal: NALUnit, parameterSets: ParameterSets) throws(BitstreamError) {
        var reader = try Self.reader(for: nal)
        nalType = nal.type
        nalRefIdc = nal.refIdc
        firstMbInSlice = try reader.readUE(max: 1 << 20, "first_mb_in_slice")
        let rawSliceType = try reader.readUE(max: 9, "slice_type")
        sliceType = SliceType(rawValue: rawSliceType % 5)!
        sliceTypeFixedForPicture = rawSliceType >= 5
        ppsId = try reader.readUE(max: 255, "pic_parameter_set_id")
        guard let pps = parameterSets.pps[ppsId] else {
            throw BitstreamError(.invalidData, "slice refers to PPS \(ppsId), which has not been received")
        }
        guard let sps = parameterSets.sps[pps.spsId] else {
            throw BitstreamError(.invalidData, "PPS \(ppsId) refers to SPS \(pps.spsId), which has not been received")
        }
        spsId = sps.id
        colourPlaneId = sps.separateColourPlane ? Int(try reader.readBits(2)) : 0
        frameNum = Int(try reader.readBits(sps.log2MaxFrameNum))
        fieldPic = false
        bottomField = false
        if !sps.frameMbsOnly {
            fieldPic = try reader.readFlag()
            if fieldPic { bottomField = try reader.readFlag() }
        }
        idrPicId = nal.type == .idr ? try reader.readUE(max: 65535, "idr_pic_id") : nil
        pocType = sps.pocType
        picOrderCntLsb = 0
        deltaPicOrderCntBottom = 0
        deltaPicOrderCnt0 = 0
        deltaPicOrderCnt1 = 0
        switch sps.picOrderCount {
        case .type0(let log2MaxLsb):
            picOrderCntLsb = Int(try reader.readBits(log2MaxLsb))
            if pps.bottomFieldPicOrderInFramePresent && !fieldPic { deltaPicOrderCntBottom = try reader.readSE() }
        case .type1(let alwaysZero, _, _, _):
            if !alwaysZero {
                deltaPicOrderCnt0 = try reader.readSE()
                if pps.bottomFieldPicOrderInFramePresent && !fieldPic { deltaPicOrderCnt1 = try reader.readSE() }
            }
        case .type2:
            break
        }
        redundantPicCnt = pps.redundantPicCntPresent ? try reader.readUE(max: 127, "redundant_pic_cnt") : 0
    }

    /// first_mb_in_slice, slice_type and pic_parameter_set_id: the fields readable without
    /// parameter sets, for slices whose PPS is missing.
    public static func leadingFields(of nal: NALUnit) throws(BitstreamError)
        -> (firstMbInSlice: Int, sliceType: SliceType, ppsId: Int)
    {
        var reader = try reader(for: nal)
        let firstMb = try reader.readUE(max: 1 << 20, "first_mb_in_slice")
        let rawSliceType = try reader.readUE(max: 9, "slice_type")
        let ppsId = try reader.readUE(max: 255, "pic_parameter_set_id")
        return (firstMb, SliceType(rawValue: rawSliceType % 5)!, ppsId)
    }

    /// H.264 §7.4.1.2.4: whether this slice is the first VCL NAL unit of a new primary coded
    /// picture, given the previous slice of the current primary picture.
    public func startsNewPicture(after previous: SliceHeaderPrefix) -> Bool {
        if isRedundant { return false }
        if frameNum != previous.frameNum { return true }
        if ppsId != previous.ppsId { return true }
        if fieldPic != previous.fieldPic { return true }
        if fieldPic && bottomField != previous.bottomField { return true }
        if (nalRefIdc == 0) != (previous.nalRefIdc == 0) { return true }
        if pocType == 0 && previous.pocType == 0
            && (picOrderCntLsb != previous.picOrderCntLsb || deltaPicOrderCntBottom != previous.deltaPicOrderCntBottom)
        {
            return true
        }
        if pocType == 1 && previous.pocType == 1
            && (deltaPicOrderCnt0 != previous.deltaPicOrderCnt0 || deltaPicOrderCnt1 != previous.deltaPicOrderCnt1)
        {
            return true
        }
        if isIDR != previous.isIDR { return true }
        if isIDR && previous.isIDR && idrPicId != previous.idrPicId { return true }
        return false
    }

    /// The header is far shorter than this, so there is no need to unescape a whole slice.
    private static let headerBytesToUnescape = 128

    private static func reader(for nal: NALUnit) throws(BitstreamError) -> BitReader {
        guard nal.type.hasSliceHeader else {
            throw BitstreamError(.invalidData, "NAL unit type \(nal.type.name) has no slice header")
        }
        let end = min(nal.bytes.count, 1 + headerBytesToUnescape)
        return BitReader(RBSP.unescape(nal.bytes.region(1..<end)))
    }
}
