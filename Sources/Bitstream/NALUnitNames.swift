import H264
import H265
import VideoCoding

/// What the layers above the bitstream may know of a codec's NAL unit types, by the names its
/// reader gives them (`AccessUnitReader.typeName`, the keys of the decoder's unit counts): which
/// carry parameter sets, base-layer slices, pictures decoding can start from, and other layers.
/// Enough to say why a stream gave no picture without knowing the codec.
public struct NALUnitNames: Sendable {
    /// The parameter sets every picture needs, in the order a decoder needs them.
    public let parameterSets: [(name: String, title: String)]
    /// Types of coded slices of the base layer.
    public let slices: Set<String>
    /// Types of the pictures decoding can start from, and what they are called.
    public let randomAccess: Set<String>
    public let randomAccessTitle: String
    /// Types that only carry layers or views above the base layer (H.264 SVC and MVC; H.265
    /// tells those by their layer id instead, counted apart by the decoder).
    public let extensions: Set<String>
    public let extensionTitle: String

    public static func of(_ codec: VideoCodec) -> NALUnitNames {
        switch codec {
        case .h264: h264
        case .h265: h265
        }
    }

    static let h264 = NALUnitNames(
        parameterSets: [
            (H264.NALUnitType.sps.name, "sequence parameter set (SPS)"),
            (H264.NALUnitType.pps.name, "picture parameter set (PPS)"),
        ],
        slices: Set(H264.NALUnitType.allCases.filter(\.hasSliceHeader).map(\.name)),
        randomAccess: [H264.NALUnitType.idr.name], randomAccessTitle: "IDR or recovery point",
        extensions: Set([H264.NALUnitType.prefix, .subsetSPS, .sliceExtension, .sliceExtensionDepth].map(\.name)),
        extensionTitle: "SVC/MVC extension data")

    static let h265 = NALUnitNames(
        parameterSets: [
            (H265.NALUnitType.vps.name, "video parameter set (VPS)"),
            (H265.NALUnitType.sps.name, "sequence parameter set (SPS)"),
            (H265.NALUnitType.pps.name, "picture parameter set (PPS)"),
        ],
        slices: Set(H265.NALUnitType.allCases.filter(\.isSliceSegment).map(\.name)),
        randomAccess: Set(H265.NALUnitType.allCases.filter { $0.isIRAP && $0.isSliceSegment }.map(\.name)),
        randomAccessTitle: "IRAP picture (IDR, CRA or BLA)", extensions: [], extensionTitle: "")
}
