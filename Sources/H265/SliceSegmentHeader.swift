import VideoCoding

/// slice_type (Table 7-7). H.265 numbers them differently from H.264.
public enum SliceType: Int, Sendable, CaseIterable, Codable {
    case b = 0
    case p = 1
    case i = 2

    public var name: String {
        switch self {
        case .b: "B"
        case .p: "P"
        case .i: "I"
        }
    }
}

/// The start of slice_segment_header() (§7.3.6.1) up to slice_pic_order_cnt_lsb: where the
/// segment lies in its picture and, for a segment that is not dependent, the picture's slice
/// type and POC bits. Access-unit boundaries need only the first bit; the rest describes the
/// picture.
public struct SliceSegmentHeader: Sendable, Equatable {
    public var nalType: NALUnitType
    public var firstSliceSegmentInPicture: Bool
    /// Only in IRAP pictures; false elsewhere.
    public var noOutputOfPriorPics: Bool
    public var ppsId: Int
    public var spsId: Int
    public var dependentSliceSegment: Bool
    /// In coding tree blocks; 0 for the first segment of a picture.
    public var sliceSegmentAddress: Int
    /// Fields a dependent segment takes from the segment before it: nil in a dependent one.
    public var sliceType: SliceType?
    /// pic_output_flag (1 when the PPS does not code it).
    public var picOutput: Bool?
    public var colourPlaneId: Int?
    /// slice_pic_order_cnt_lsb; 0 for IDR pictures, which do not code it.
    public var picOrderCntLsb: Int?

    /// The header is far shorter than this, so there is no need to unescape a whole segment.
    private static let headerBytesToUnescape = 64

    /// Throws `.invalidData` for a malformed header, a NAL type without a slice segment header,
    /// or a PPS/SPS that `parameterSets` does not hold.
    public init(nal: NALUnit, parameterSets: ParameterSets) throws(BitstreamError) {
        var reader = try Self.reader(for: nal)
        nalType = nal.type
        firstSliceSegmentInPicture = try reader.readFlag()
        noOutputOfPriorPics = nal.type.isIRAP ? try reader.readFlag() : false
        ppsId = try reader.readUE(max: 63, "slice_pic_parameter_set_id")
        guard let pps = parameterSets.pps[ppsId] else {
            throw BitstreamError(.invalidData, "slice segment refers to PPS \(ppsId), which has not been received")
        }
        guard let sps = parameterSets.sps[pps.spsId] else {
            throw BitstreamError(.invalidData, "PPS \(ppsId) refers to SPS \(pps.spsId), which has not been received")
        }
        spsId = sps.id
        dependentSliceSegment = false
        sliceSegmentAddress = 0
        if !firstSliceSegmentInPicture {
            if pps.dependentSliceSegmentsEnabled { dependentSliceSegment = try reader.readFlag() }
            // Ceil(Log2(PicSizeInCtbsY)) bits.
            let addressBits = Int.bitWidth - (sps.picSizeInCodingTreeBlocks - 1).leadingZeroBitCount
            sliceSegmentAddress = Int(try reader.readBits(addressBits))
            guard sliceSegmentAddress < sps.picSizeInCodingTreeBlocks else {
                throw BitstreamError(
                    .invalidData,
                    "slice_segment_address \(sliceSegmentAddress) is outside the picture's \(sps.picSizeInCodingTreeBlocks) coding tree blocks")
            }
        }
        sliceType = nil
        picOutput = nil
        colourPlaneId = nil
        picOrderCntLsb = nil
        guard !dependentSliceSegment else { return }
        try reader.skipBits(pps.numExtraSliceHeaderBits)  // slice_reserved_flag
        sliceType = SliceType(rawValue: try reader.readUE(max: 2, "slice_type"))
        picOutput = pps.outputFlagPresent ? try reader.readFlag() : true
        if sps.separateColourPlane { colourPlaneId = Int(try reader.readBits(2)) }
        picOrderCntLsb = nal.type.isIDR ? 0 : Int(try reader.readBits(sps.log2MaxPicOrderCntLsb))
    }

    /// first_slice_segment_in_pic_flag: the first bit after the two-byte header, which is never
    /// an emulation prevention byte (the second header byte is not zero in a valid unit).
    /// nil for a unit that ends with its header or that holds no slice segment.
    public static func startsPicture(_ nal: NALUnit) -> Bool? {
        guard nal.type.isSliceSegment, nal.bytes.count > 2 else { return nil }
        return nal.bytes[2] & 0x80 != 0
    }

    private static func reader(for nal: NALUnit) throws(BitstreamError) -> BitReader {
        guard nal.type.isSliceSegment else {
            throw BitstreamError(.invalidData, "NAL unit type \(nal.type.name) has no slice segment header")
        }
        let end = min(nal.bytes.count, 2 + headerBytesToUnescape)
        return BitReader(RBSP.unescape(nal.bytes.region(2..<end)))
    }
}
