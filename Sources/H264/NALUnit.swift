import VideoCoding

/// `nal_unit_type` (H.264 Table 7-1), with the RTP packetization types 24...29 of RFC 6184.
///
/// `name` is a stable snake_case string: it is used as a JSON key in counters, so never change one.
public enum NALUnitType: UInt8, CaseIterable, Sendable, Hashable, NALUnitTypeName {
    case unspecified0 = 0
    case slice = 1
    case sliceDataA = 2
    case sliceDataB = 3
    case sliceDataC = 4
    case idr = 5
    case sei = 6
    case sps = 7
    case pps = 8
    case aud = 9
    case endOfSequence = 10
    case endOfStream = 11
    case filler = 12
    case spsExtension = 13
    case prefix = 14
    case subsetSPS = 15
    case dps = 16
    case reserved17 = 17
    case reserved18 = 18
    case auxiliarySlice = 19
    case sliceExtension = 20
    case sliceExtensionDepth = 21
    case reserved22 = 22
    case reserved23 = 23
    case stapA = 24
    case stapB = 25
    case mtap16 = 26
    case mtap24 = 27
    case fuA = 28
    case fuB = 29
    case unspecified30 = 30
    case unspecified31 = 31

    /// The five-bit field of a header byte; every value 0...31 has a case.
    @inlinable
    public init(headerByte: UInt8) {
        self = NALUnitType(rawValue: headerByte & 0x1F)!
    }

    public var name: String {
        switch self {
        case .unspecified0: "unspecified0"
        case .slice: "slice"
        case .sliceDataA: "slice_data_a"
        case .sliceDataB: "slice_data_b"
        case .sliceDataC: "slice_data_c"
        case .idr: "idr"
        case .sei: "sei"
        case .sps: "sps"
        case .pps: "pps"
        case .aud: "aud"
        case .endOfSequence: "end_of_sequence"
        case .endOfStream: "end_of_stream"
        case .filler: "filler"
        case .spsExtension: "sps_extension"
        case .prefix: "prefix"
        case .subsetSPS: "subset_sps"
        case .dps: "dps"
        case .reserved17: "reserved17"
        case .reserved18: "reserved18"
        case .auxiliarySlice: "auxiliary_slice"
        case .sliceExtension: "slice_extension"
        case .sliceExtensionDepth: "slice_extension_depth"
        case .reserved22: "reserved22"
        case .reserved23: "reserved23"
        case .stapA: "stap_a"
        case .stapB: "stap_b"
        case .mtap16: "mtap16"
        case .mtap24: "mtap24"
        case .fuA: "fu_a"
        case .fuB: "fu_b"
        case .unspecified30: "unspecified30"
        case .unspecified31: "unspecified31"
        }
    }

    /// VCL NAL units of the primary/redundant coded picture of the base layer (types 1...5).
    /// Types 19...21 carry slices too, but H.264 §7.4.1.2.3 orders them as non-VCL of the AVC base.
    public var isVCL: Bool { (1...5).contains(rawValue) }

    /// Types that carry a `slice_header()` a picture boundary can be read from (§7.3.2.8, §7.3.2.9.1).
    public var hasSliceHeader: Bool { self == .slice || self == .idr || self == .sliceDataA }
}

/// The one-byte NAL unit header (§7.3.1).
public struct NALHeader: Sendable, Equatable, Hashable {
    public var forbiddenZeroBit: Bool
    public var refIdc: UInt8
    public var type: NALUnitType

    public init(forbiddenZeroBit: Bool = false, refIdc: UInt8, type: NALUnitType) {
        self.forbiddenZeroBit = forbiddenZeroBit
        self.refIdc = refIdc & 3
        self.type = type
    }

    @inlinable
    public init(byte: UInt8) {
        forbiddenZeroBit = byte & 0x80 != 0
        refIdc = (byte >> 5) & 3
        type = NALUnitType(headerByte: byte)
    }

    public var byte: UInt8 { (forbiddenZeroBit ? 0x80 : 0) | (refIdc << 5) | type.rawValue }
}

/// One NAL unit as it travels through the pipeline: the header byte and the escaped payload.
public struct NALUnit: Sendable, Equatable, HeaderedNALUnit {
    /// From the header byte on; no start code, no trailing zero bytes; emulation prevention kept.
    public let bytes: SlabBytes
    /// Offset of the header byte since the start of the stream (the last `finish()` of the splitter).
    public let streamOffset: Int
    public let header: NALHeader

    /// `bytes` must hold at least the header byte.
    @inlinable
    public init(bytes: SlabBytes, streamOffset: Int = 0) {
        precondition(!bytes.isEmpty, "a NAL unit has at least its header byte")
        self.bytes = bytes
        self.streamOffset = streamOffset
        self.header = NALHeader(byte: bytes[0])
    }

    /// A unit of these bytes, copied into memory of their own (tests, tools, descriptions).
    public init(bytes: [UInt8], streamOffset: Int = 0) {
        self.init(bytes: SlabBytes(bytes), streamOffset: streamOffset)
    }

    public func detached() -> NALUnit {
        NALUnit(bytes: bytes.detached(), streamOffset: streamOffset)
    }

    /// The unit the splitter found; its bytes are shared, not copied. Inlinable, as every unit
    /// of every push goes through it.
    @inlinable
    public init(_ unit: AnnexBUnit) {
        self.init(bytes: unit.bytes, streamOffset: unit.streamOffset)
    }

    public var type: NALUnitType { header.type }
    public var refIdc: UInt8 { header.refIdc }

    /// The escaped bytes after the header byte (the payload `RBSP.unescape` takes).
    public var payload: SlabBytes { bytes.region(1..<bytes.count) }
}
