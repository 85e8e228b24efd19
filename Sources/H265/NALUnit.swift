import VideoCoding

/// `nal_unit_type` (H.265 Table 7-1): every value of the six-bit field has a case.
///
/// `name` is the table's mnemonic in lower case without its `_NUT` suffix (`TRAIL_N` is
/// "trail_n", `CRA_NUT` "cra", `PREFIX_SEI_NUT` "prefix_sei", `RSV_VCL_N10` "rsv_vcl_n10",
/// `UNSPEC48` "unspec48"). It is used as a JSON key in counters, so never change one.
public enum NALUnitType: UInt8, CaseIterable, Sendable, Hashable, NALUnitTypeName {
    case trailN = 0
    case trailR = 1
    case tsaN = 2
    case tsaR = 3
    case stsaN = 4
    case stsaR = 5
    case radlN = 6
    case radlR = 7
    case raslN = 8
    case raslR = 9
    case reservedVCLN10 = 10
    case reservedVCLR11 = 11
    case reservedVCLN12 = 12
    case reservedVCLR13 = 13
    case reservedVCLN14 = 14
    case reservedVCLR15 = 15
    case blaWithLeadingPictures = 16
    case blaWithRADL = 17
    case blaNoLeadingPictures = 18
    case idrWithRADL = 19
    case idrNoLeadingPictures = 20
    case cra = 21
    case reservedIRAP22 = 22
    case reservedIRAP23 = 23
    case reservedVCL24 = 24
    case reservedVCL25 = 25
    case reservedVCL26 = 26
    case reservedVCL27 = 27
    case reservedVCL28 = 28
    case reservedVCL29 = 29
    case reservedVCL30 = 30
    case reservedVCL31 = 31
    case vps = 32
    case sps = 33
    case pps = 34
    case aud = 35
    case endOfSequence = 36
    case endOfBitstream = 37
    case fillerData = 38
    case prefixSEI = 39
    case suffixSEI = 40
    case reservedNonVCL41 = 41
    case reservedNonVCL42 = 42
    case reservedNonVCL43 = 43
    case reservedNonVCL44 = 44
    case reservedNonVCL45 = 45
    case reservedNonVCL46 = 46
    case reservedNonVCL47 = 47
    case unspecified48 = 48
    case unspecified49 = 49
    case unspecified50 = 50
    case unspecified51 = 51
    case unspecified52 = 52
    case unspecified53 = 53
    case unspecified54 = 54
    case unspecified55 = 55
    case unspecified56 = 56
    case unspecified57 = 57
    case unspecified58 = 58
    case unspecified59 = 59
    case unspecified60 = 60
    case unspecified61 = 61
    case unspecified62 = 62
    case unspecified63 = 63

    /// The six-bit field of the first header byte.
    @inlinable
    public init(headerByte: UInt8) {
        self = NALUnitType(rawValue: (headerByte >> 1) & 0x3F)!
    }

    public var name: String {
        switch self {
        case .trailN: "trail_n"
        case .trailR: "trail_r"
        case .tsaN: "tsa_n"
        case .tsaR: "tsa_r"
        case .stsaN: "stsa_n"
        case .stsaR: "stsa_r"
        case .radlN: "radl_n"
        case .radlR: "radl_r"
        case .raslN: "rasl_n"
        case .raslR: "rasl_r"
        case .reservedVCLN10: "rsv_vcl_n10"
        case .reservedVCLR11: "rsv_vcl_r11"
        case .reservedVCLN12: "rsv_vcl_n12"
        case .reservedVCLR13: "rsv_vcl_r13"
        case .reservedVCLN14: "rsv_vcl_n14"
        case .reservedVCLR15: "rsv_vcl_r15"
        case .blaWithLeadingPictures: "bla_w_lp"
        case .blaWithRADL: "bla_w_radl"
        case .blaNoLeadingPictures: "bla_n_lp"
        case .idrWithRADL: "idr_w_radl"
        case .idrNoLeadingPictures: "idr_n_lp"
        case .cra: "cra"
        case .reservedIRAP22: "rsv_irap_vcl22"
        case .reservedIRAP23: "rsv_irap_vcl23"
        case .reservedVCL24: "rsv_vcl24"
        case .reservedVCL25: "rsv_vcl25"
        case .reservedVCL26: "rsv_vcl26"
        case .reservedVCL27: "rsv_vcl27"
        case .reservedVCL28: "rsv_vcl28"
        case .reservedVCL29: "rsv_vcl29"
        case .reservedVCL30: "rsv_vcl30"
        case .reservedVCL31: "rsv_vcl31"
        case .vps: "vps"
        case .sps: "sps"
        case .pps: "pps"
        case .aud: "aud"
        case .endOfSequence: "eos"
        case .endOfBitstream: "eob"
        case .fillerData: "fd"
        case .prefixSEI: "prefix_sei"
        case .suffixSEI: "suffix_sei"
        case .reservedNonVCL41: "rsv_nvcl41"
        case .reservedNonVCL42: "rsv_nvcl42"
        case .reservedNonVCL43: "rsv_nvcl43"
        case .reservedNonVCL44: "rsv_nvcl44"
        case .reservedNonVCL45: "rsv_nvcl45"
        case .reservedNonVCL46: "rsv_nvcl46"
        case .reservedNonVCL47: "rsv_nvcl47"
        case .unspecified48: "unspec48"
        case .unspecified49: "unspec49"
        case .unspecified50: "unspec50"
        case .unspecified51: "unspec51"
        case .unspecified52: "unspec52"
        case .unspecified53: "unspec53"
        case .unspecified54: "unspec54"
        case .unspecified55: "unspec55"
        case .unspecified56: "unspec56"
        case .unspecified57: "unspec57"
        case .unspecified58: "unspec58"
        case .unspecified59: "unspec59"
        case .unspecified60: "unspec60"
        case .unspecified61: "unspec61"
        case .unspecified62: "unspec62"
        case .unspecified63: "unspec63"
        }
    }

    /// Types 0...31: coded slice segments, reserved ones included (§7.4.2.2).
    public var isVCL: Bool { rawValue < 32 }

    /// The slice segment types this edition of H.265 defines (the reserved VCL types 10...15
    /// and 22...31 carry nothing a decoder may read; libavcodec skips them).
    public var isSliceSegment: Bool { rawValue <= 9 || (16...21).contains(rawValue) }

    /// Intra random access point: BLA, IDR, CRA and the reserved IRAP types 22 and 23.
    public var isIRAP: Bool { (16...23).contains(rawValue) }
    public var isIDR: Bool { self == .idrWithRADL || self == .idrNoLeadingPictures }
    public var isBLA: Bool { (16...18).contains(rawValue) }
    public var isCRA: Bool { self == .cra }
    /// Random access skipped leading: may refer to pictures before its IRAP in decoding order.
    public var isRASL: Bool { self == .raslN || self == .raslR }
    /// Random access decodable leading.
    public var isRADL: Bool { self == .radlN || self == .radlR }
    /// The `_N` types below 16: no picture of the same temporal sub-layer refers to this one.
    public var isSubLayerNonReference: Bool { rawValue <= 14 && rawValue % 2 == 0 }
}

/// The two-byte NAL unit header (§7.3.1.2).
public struct NALHeader: Sendable, Equatable, Hashable {
    public var forbiddenZeroBit: Bool
    public var type: NALUnitType
    /// nuh_layer_id: 0 for the base layer, which is all FrameTap decodes.
    public var layerId: UInt8
    /// nuh_temporal_id_plus1; 0 is forbidden (a decoder drops such a unit).
    public var temporalIdPlus1: UInt8

    public init(forbiddenZeroBit: Bool = false, type: NALUnitType, layerId: UInt8 = 0, temporalIdPlus1: UInt8 = 1) {
        self.forbiddenZeroBit = forbiddenZeroBit
        self.type = type
        self.layerId = layerId & 0x3F
        self.temporalIdPlus1 = temporalIdPlus1 & 7
    }

    @inlinable
    public init(_ first: UInt8, _ second: UInt8) {
        forbiddenZeroBit = first & 0x80 != 0
        type = NALUnitType(headerByte: first)
        layerId = (first & 1) << 5 | second >> 3
        temporalIdPlus1 = second & 7
    }

    /// TemporalId; -1 for the forbidden temporal id plus 1 of 0.
    public var temporalId: Int { Int(temporalIdPlus1) - 1 }

    /// What a decoder accepts: forbidden_zero_bit 0 and a temporal id plus 1 above 0.
    public var isWellFormed: Bool { !forbiddenZeroBit && temporalIdPlus1 != 0 }

    public var bytes: [UInt8] {
        [(forbiddenZeroBit ? 0x80 : 0) | type.rawValue << 1 | layerId >> 5, (layerId & 0x1F) << 3 | temporalIdPlus1]
    }
}

/// One NAL unit as it travels through the pipeline: the two header bytes and the escaped payload.
public struct NALUnit: Sendable, Equatable, HeaderedNALUnit {
    /// From the first header byte on; no start code, no trailing zero bytes; emulation prevention kept.
    public let bytes: SlabBytes
    /// Offset of the first header byte since the start of the stream (the last `finish()` of the splitter).
    public let streamOffset: Int
    public let header: NALHeader

    /// nil when `bytes` is shorter than the two-byte header.
    @inlinable
    public init?(bytes: SlabBytes, streamOffset: Int = 0) {
        guard bytes.count >= 2 else { return nil }
        self.bytes = bytes
        self.streamOffset = streamOffset
        header = NALHeader(bytes[0], bytes[1])
    }

    /// A unit of these bytes, copied into memory of their own (tests, tools, descriptions).
    public init?(bytes: [UInt8], streamOffset: Int = 0) {
        self.init(bytes: SlabBytes(bytes), streamOffset: streamOffset)
    }

    public func detached() -> NALUnit {
        NALUnit(bytes: bytes.detached(), streamOffset: streamOffset)!
    }

    /// The unit the splitter found (its bytes are shared, not copied); nil when it is shorter
    /// than the two-byte header, which no decoder can read. Inlinable, as every unit of every
    /// push goes through it.
    @inlinable
    public init?(_ unit: AnnexBUnit) {
        self.init(bytes: unit.bytes, streamOffset: unit.streamOffset)
    }

    public var type: NALUnitType { header.type }
    public var layerId: UInt8 { header.layerId }
    public var temporalId: Int { header.temporalId }

    /// The escaped bytes after the header (the payload `RBSP.unescape` takes).
    public var payload: SlabBytes { bytes.region(2..<bytes.count) }
}
