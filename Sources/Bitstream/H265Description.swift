import H265
import VideoCoding

/// H.265's side of `StreamProbe`: the facts `ffprobe -show_streams` shows of an HEVC stream
/// (profile, tier, level, size after the conformance window, coded size, bit depth and chroma,
/// colour description, frame rate, field coding), and what decides how the pictures are held
/// and cut (sub-layers, buffering, coding tree blocks, tiles, wavefronts).
struct H265Describer: CodecDescriber {
    var codec: VideoCodec { .h265 }
    static let headerFields = [
        NALHeaderField(column: "layer", key: "layerId"), NALHeaderField(column: "tid", key: "temporalId"),
    ]
    static let parameterSetKinds: [ParameterSetKey.Kind] = [.vps, .sps, .pps]

    private var assembler = H265.AccessUnitAssembler()
    private var newest: [ParameterSetKey: (bytes: [UInt8], record: Int)] = [:]
    /// The newest VPS of each id: an SPS takes its frame rate from its VPS's timing first, as libavcodec does.
    private var videoParameterSets: [Int: H265.VideoParameterSet] = [:]

    mutating func push(_ unit: AnnexBUnit, into description: inout StreamDescription) {
        list(offset: unit.streamOffset, size: unit.bytes.count, header: Array(unit.bytes.prefix(2)), into: &description)
        guard let nal = H265.NALUnit(unit) else {
            description.problems.append(
                ProbeProblem(
                    offset: unit.streamOffset, code: BitstreamError.Code.invalidData.rawValue,
                    message: "a 1-byte NAL unit: shorter than the two-byte H.265 NAL unit header"))
            return
        }
        // Parameter sets of other layers have syntax of their own (and libavcodec ignores them).
        if nal.layerId == 0 {
            let described = Result { () throws(BitstreamError) in try describeParameterSet(nal) }
            description.record(described, bytes: Array(nal.bytes), at: nal.streamOffset, newest: &newest)
        }
        assembler.push(nal) { Self.record($0, into: &description) }
    }

    func list(offset: Int, size: Int, header: [UInt8], into description: inout StreamDescription) {
        let header = H265.NALHeader(header.first ?? 0, header.count > 1 ? header[1] : 0)
        description.nalUnits.append(
            NALUnitDescription(
                offset: offset, size: size, type: Int(header.type.rawValue), name: header.type.name,
                header: [Int(header.layerId), header.temporalId]))
    }

    mutating func unitDropped(prefix: ArraySlice<UInt8>, into description: inout StreamDescription) {
        assembler.unitDropped(prefix: prefix) { Self.record($0, into: &description) }
    }

    mutating func finish(into description: inout StreamDescription) {
        assembler.finish { Self.record($0, into: &description) }
    }

    private static func record(_ unit: H265.AccessUnit, into description: inout StreamDescription) {
        var kind: String?
        if unit.isIRAP {
            kind = unit.isIDR ? "IDR" : unit.isCRA ? "CRA" : unit.isBLA ? "BLA" : "IRAP"
        } else if unit.hasPicture && H265.RecoveryPoint(in: unit) != nil {
            kind = "recovery point"
        }
        description.recordAccessUnit(hasPicture: unit.hasPicture, keyframe: kind, offset: unit.streamOffset)
    }

    /// The description of a parameter set unit; nil for other units.
    private mutating func describeParameterSet(_ nal: H265.NALUnit) throws(BitstreamError) -> ParameterSetDescription? {
        switch nal.type {
        case .vps:
            let vps = try H265.VideoParameterSet(nal: nal)
            videoParameterSets[vps.id] = vps
            return Self.describe(vps, at: nal.streamOffset)
        case .sps:
            let sps = try H265.SequenceParameterSet(nal: nal)
            return Self.describe(sps, vps: videoParameterSets[sps.vpsId], at: nal.streamOffset)
        case .pps:
            return Self.describe(try H265.PictureParameterSet(nal: nal), at: nal.streamOffset)
        default:
            return nil
        }
    }

    static func describe(_ vps: H265.VideoParameterSet, at offset: Int) -> ParameterSetDescription {
        let ptl = vps.profileTierLevel
        var summary = [
            ptl.profileName, "\(ptl.tierName) tier", "level \(ptl.levelName)", "\(vps.maxLayers) layer(s)",
            "\(vps.maxSubLayers) sub-layer(s)",
        ]
        var fields: [KeyedFact] = [
            KeyedFact("profile", .text(ptl.profileName)), KeyedFact("profileIdc", .integer(ptl.effectiveProfileIdc)),
            KeyedFact("tier", .text(ptl.tierName)), KeyedFact("level", .text(ptl.levelName)),
            KeyedFact("levelIdc", .integer(ptl.levelIdc)), KeyedFact("maxLayers", .integer(vps.maxLayers)),
            KeyedFact("maxSubLayers", .integer(vps.maxSubLayers)),
        ]
        if let frameRate = vps.frameRate {
            summary.append("\(fixed(frameRate, 3)) fps")
            fields.append(KeyedFact("frameRate", .number(frameRate)))
        }
        return ParameterSetDescription(kind: .vps, id: vps.id, offset: offset, summary: summary, fields: fields)
    }

    static func describe(
        _ sps: H265.SequenceParameterSet, vps: H265.VideoParameterSet?, at offset: Int
    ) -> ParameterSetDescription {
        let format = StreamFormat(sps: sps, vps: vps)
        let ptl = sps.profileTierLevel
        let codingTree = 1 << sps.log2CodingTreeBlockSize
        let minimumCodingBlock = 1 << sps.log2MinLumaCodingBlockSize
        // H.265 codes fields as separate pictures (field_seq_flag); libavcodec outputs them as such.
        let scan = format.interlaced ? "fields (field_seq_flag), each output as a picture" : "progressive"
        return ParameterSetDescription(
            kind: .sps, id: sps.id, offset: offset, format: format,
            facts: [LabelledFact("VPS", "\(sps.vpsId)")] + SharedFacts.picture(format) + [
                LabelledFact(
                    "profile",
                    "\(format.profile) (profile_idc \(format.profileIdc)), \(ptl.tierName) tier, "
                        + "level \(format.level) (level_idc \(ptl.levelIdc))"),
                SharedFacts.chroma(format),
                LabelledFact("scan", scan),
            ] + SharedFacts.display(format) + [
                LabelledFact("sub-layers", "\(sps.maxSubLayers)"),
                LabelledFact("buffering", "\(sps.maxDecPicBuffering) pictures, reorder \(sps.maxNumReorderPics)"),
                LabelledFact("coding blocks", "tree \(codingTree)x\(codingTree), minimum \(minimumCodingBlock)x\(minimumCodingBlock)"),
            ],
            fields: [
                KeyedFact("vpsId", .integer(sps.vpsId)), KeyedFact("levelIdc", .integer(ptl.levelIdc)),
                KeyedFact("maxSubLayers", .integer(sps.maxSubLayers)),
                KeyedFact("maxDecPicBuffering", .integer(sps.maxDecPicBuffering)),
                KeyedFact("maxNumReorderPics", .integer(sps.maxNumReorderPics)),
                KeyedFact("fieldSeq", .flag(format.interlaced)),
                KeyedFact("codingTreeBlockSize", .integer(codingTree)),
                KeyedFact("minCodingBlockSize", .integer(minimumCodingBlock)),
            ])
    }

    static func describe(_ pps: H265.PictureParameterSet, at offset: Int) -> ParameterSetDescription {
        var summary = ["SPS \(pps.spsId)"]
        if let tiles = pps.tiles {
            summary.append("\(tiles.columns)x\(tiles.rows) tiles\(tiles.uniformSpacing ? " (uniform)" : "")")
        } else {
            summary.append("no tiles")
        }
        summary.append(pps.entropyCodingSyncEnabled ? "wavefronts" : "no wavefronts")
        if pps.dependentSliceSegmentsEnabled { summary.append("dependent slice segments") }
        if pps.transquantBypassEnabled { summary.append("transquant bypass") }
        summary.append("init QP \(pps.initQp)")
        return ParameterSetDescription(
            kind: .pps, id: pps.id, offset: offset, summary: summary,
            fields: [
                KeyedFact("spsId", .integer(pps.spsId)),
                KeyedFact("tileColumns", .integer(pps.tiles?.columns ?? 1)),
                KeyedFact("tileRows", .integer(pps.tiles?.rows ?? 1)),
                KeyedFact("wavefronts", .flag(pps.entropyCodingSyncEnabled)),
                KeyedFact("dependentSliceSegments", .flag(pps.dependentSliceSegmentsEnabled)),
                KeyedFact("transquantBypass", .flag(pps.transquantBypassEnabled)),
                KeyedFact("initQp", .integer(pps.initQp)),
            ])
    }
}
