import H264
import VideoCoding

/// H.264's side of `StreamProbe`: `frametap probe` has always printed these lines and JSON
/// fields for H.264, and scripts read them, so they stay as they are.
struct H264Describer: CodecDescriber {
    var codec: VideoCodec { .h264 }
    static let headerFields = [NALHeaderField(column: "ref", key: "refIdc")]
    static let parameterSetKinds: [ParameterSetKey.Kind] = [.sps, .pps]

    private var assembler = H264.AccessUnitAssembler()
    private var newest: [ParameterSetKey: (bytes: [UInt8], record: Int)] = [:]

    mutating func push(_ unit: AnnexBUnit, into description: inout StreamDescription) {
        let nal = H264.NALUnit(unit)
        description.nalUnits.append(
            NALUnitDescription(
                offset: nal.streamOffset, size: nal.bytes.count, type: Int(nal.type.rawValue), name: nal.type.name,
                header: [Int(nal.refIdc)]))
        let described = Result { () throws(BitstreamError) in try Self.describeParameterSet(nal) }
        description.record(described, bytes: Array(nal.bytes), at: nal.streamOffset, newest: &newest)
        assembler.push(nal) { Self.record($0, into: &description) }
    }

    func list(offset: Int, size: Int, header: [UInt8], into description: inout StreamDescription) {
        let header = H264.NALHeader(byte: header.first ?? 0)
        description.nalUnits.append(
            NALUnitDescription(
                offset: offset, size: size, type: Int(header.type.rawValue), name: header.type.name,
                header: [Int(header.refIdc)]))
    }

    mutating func unitDropped(prefix: ArraySlice<UInt8>, into description: inout StreamDescription) {
        assembler.unitDropped(prefix: prefix) { Self.record($0, into: &description) }
    }

    mutating func finish(into description: inout StreamDescription) {
        assembler.finish { Self.record($0, into: &description) }
    }

    private static func record(_ unit: H264.AccessUnit, into description: inout StreamDescription) {
        let kind: String? = unit.isIDR ? "IDR" : (unit.isRandomAccessPoint ? "recovery point" : nil)
        description.recordAccessUnit(hasPicture: unit.hasPicture, keyframe: kind, offset: unit.streamOffset)
    }

    /// The description of a parameter set unit; nil for other units.
    private static func describeParameterSet(_ nal: H264.NALUnit) throws(BitstreamError) -> ParameterSetDescription? {
        switch nal.type {
        case .sps: describe(try H264.SequenceParameterSet(nal: nal), at: nal.streamOffset)
        case .pps: describe(try H264.PictureParameterSet(nal: nal), at: nal.streamOffset)
        default: nil
        }
    }

    static func describe(_ sps: H264.SequenceParameterSet, at offset: Int) -> ParameterSetDescription {
        let format = StreamFormat(sps: sps)
        let reorder = sps.vui?.maxNumReorderFrames
        var fields: [KeyedFact] = [
            KeyedFact("maxNumRefFrames", .integer(sps.maxNumRefFrames)),
            KeyedFact("frameMbsOnly", .flag(sps.frameMbsOnly)),
            KeyedFact("mbAdaptiveFrameField", .flag(sps.mbAdaptiveFrameField)),
        ]
        if let reorder { fields.append(KeyedFact("maxNumReorderFrames", .integer(reorder))) }
        let scan = sps.frameMbsOnly ? "progressive" : (sps.mbAdaptiveFrameField ? "interlaced (MBAFF)" : "interlaced (fields)")
        return ParameterSetDescription(
            kind: .sps, id: sps.id, offset: offset, format: format,
            facts: SharedFacts.picture(format) + [
                LabelledFact("profile", "\(format.profile) (profile_idc \(format.profileIdc)), level \(format.level)"),
                SharedFacts.chroma(format),
                LabelledFact("scan", scan),
            ] + SharedFacts.display(format) + [
                LabelledFact("ref frames", "\(sps.maxNumRefFrames), reorder \(reorder.map(String.init) ?? "not signalled")")
            ],
            fields: fields)
    }

    static func describe(_ pps: H264.PictureParameterSet, at offset: Int) -> ParameterSetDescription {
        let entropyCoding = pps.entropyCodingModeCABAC ? "CABAC" : "CAVLC"
        return ParameterSetDescription(
            kind: .pps, id: pps.id, offset: offset,
            summary: ["SPS \(pps.spsId)", entropyCoding, "\(pps.numSliceGroups) slice group(s)"],
            fields: [
                KeyedFact("spsId", .integer(pps.spsId)), KeyedFact("entropyCoding", .text(entropyCoding)),
                KeyedFact("sliceGroups", .integer(pps.numSliceGroups)),
            ])
    }
}

/// The facts of a `StreamFormat` both codecs show, worded the same way.
enum SharedFacts {
    /// Display size, coded size and crop.
    static func picture(_ format: StreamFormat) -> [LabelledFact] {
        [
            LabelledFact("display size", "\(format.width)x\(format.height)"),
            LabelledFact("coded size", "\(format.codedWidth)x\(format.codedHeight)"),
            LabelledFact(
                "crop",
                "left \(format.crop.left) right \(format.crop.right) top \(format.crop.top) bottom \(format.crop.bottom)"),
        ]
    }

    static func chroma(_ format: StreamFormat) -> LabelledFact {
        LabelledFact("chroma", "\(format.chromaFormat), \(format.bitDepth)-bit luma, \(format.bitDepthChroma)-bit chroma")
    }

    /// Frame rate, sample aspect ratio, range and colour description.
    static func display(_ format: StreamFormat) -> [LabelledFact] {
        [
            LabelledFact("frame rate", format.frameRate.map { "\(fixed($0, 3)) fps" } ?? "not signalled"),
            LabelledFact("SAR", format.sampleAspectRatio ?? "not signalled"),
            LabelledFact(
                "range, colour",
                "\(format.fullRange ? "full" : "limited"), primaries \(format.colorPrimaries), "
                    + "transfer \(format.transfer), matrix \(format.matrix)"),
        ]
    }
}
