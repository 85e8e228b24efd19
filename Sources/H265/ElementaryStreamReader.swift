import VideoCoding

/// An H.265 elementary stream read for a decoder: NAL units → access units of the base layer
/// (§7.4.2.4.4) → random access (`RandomAccess`: nothing before the first IRAP, and the RASL
/// pictures of an IRAP that starts decoding are skipped) → decodable access units with the
/// VPS, SPS and PPS they use.
public struct ElementaryStreamReader: AccessUnitReader {
    public var codec: VideoCodec { .h265 }
    public var keyframesOnly = false
    public var hasParameterSets: Bool {
        !assembler.parameterSets.vps.isEmpty && !assembler.parameterSets.sps.isEmpty
            && !assembler.parameterSets.pps.isEmpty
    }

    public var accessUnitsAssembled: Int { assembler.accessUnitCount }

    private var assembler = AccessUnitAssembler()
    private var wait: ParameterSetWait<AccessUnit>
    private var randomAccess = RandomAccess()
    private var outsideBaseLayerReported = 0
    /// The facts of each SPS id as last built (building a format names things: once per SPS).
    private var facts: [Int: (sps: SequenceParameterSet, vps: VideoParameterSet?, facts: SequenceFacts)] = [:]

    /// `emulateFFmpegProbe`: hold pictures until the stream's first parameter sets arrive, as
    /// the ffmpeg CLI's stream probe finds them before its decoder starts.
    public init(emulateFFmpegProbe: Bool = false) {
        wait = ParameterSetWait(active: emulateFFmpegProbe)
    }

    public mutating func push(_ unit: AnnexBUnit, _ report: (ReaderEvent) -> Void) {
        guard let nal = NALUnit(unit) else { return }  // a lone header byte: nothing to read
        var units: [AccessUnit] = []
        assembler.push(nal) { units.append($0) }
        for unit in units { handle(unit, report) }
        reportUnitsOutsideBaseLayer(report)
    }

    public mutating func unitDropped(prefix: ArraySlice<UInt8>, _ report: (ReaderEvent) -> Void) {
        var units: [AccessUnit] = []
        assembler.unitDropped(prefix: prefix) { units.append($0) }
        for unit in units { handle(unit, report) }
    }

    public func nextUnitEndsAccessUnit(prefix: ArraySlice<UInt8>) -> Bool {
        assembler.nextUnitEndsAccessUnit(prefix: prefix)
    }

    public mutating func endAccessUnit(_ report: (ReaderEvent) -> Void) {
        var units: [AccessUnit] = []
        assembler.endAccessUnit { units.append($0) }
        for unit in units { handle(unit, report) }
    }

    public mutating func finish(_ report: (ReaderEvent) -> Void) {
        var units: [AccessUnit] = []
        assembler.finish { units.append($0) }
        for unit in units { handle(unit, report) }
        for unit in wait.release() { pass(unit, report) }
        randomAccess.restart()
        wait.restart()
    }

    public func typeName(of unit: AnnexBUnit) -> String {
        NALUnitType(headerByte: unit.bytes.first ?? 0).name
    }

    // MARK: - Access unit → wait → random access

    private mutating func handle(_ unit: AccessUnit, _ report: (ReaderEvent) -> Void) {
        // Without a picture, its parameter sets and SEI already did their work in the assembler;
        // the random-access state still sees its end of sequence.
        guard unit.hasPicture else {
            _ = randomAccess.verdict(for: unit)
            return
        }
        for unit in wait.pass(unit, bytes: unit.byteCount, haveParameterSets: hasParameterSets) { pass(unit, report) }
    }

    private mutating func pass(_ unit: AccessUnit, _ report: (ReaderEvent) -> Void) {
        guard let coded = coded(unit) else {
            // Its parameter sets are unknown: libavcodec could not decode it either.
            report(.droppedBeforeKeyframe(count: 1))
            return
        }
        switch randomAccess.verdict(for: unit) {
        case .skipBeforeRandomAccessPoint:
            report(.droppedBeforeKeyframe(count: 1))
        case .skipRASL:
            report(.skippedLeading(count: 1))
        case .decode:
            if keyframesOnly && !coded.isIntra {
                report(.skippedNotKeyframe(count: 1))
            } else {
                report(.accessUnit(coded))
            }
        }
    }

    /// `unit` as a decoder takes it: with the VPS, SPS and PPS it uses (in that order, the
    /// order libavcodec accepts them in) and its sequence's facts.
    private mutating func coded(_ unit: AccessUnit) -> CodedAccessUnit? {
        guard let ppsId = unit.ppsId, let units = unit.parameterSets.units(forPPS: ppsId),
            let pps = unit.parameterSets.pps[ppsId], let sps = unit.parameterSets.sps[pps.spsId]
        else { return nil }
        func set(_ kind: ParameterSetKey.Kind, _ id: Int, _ nal: NALUnit) -> ParameterSetUnit {
            ParameterSetUnit(
                key: ParameterSetKey(kind, id), bytes: nal.bytes,
                carriedByAccessUnit: unit.nalUnits.contains { $0.type == nal.type && $0.bytes == nal.bytes })
        }
        let vps = unit.parameterSets.vps[sps.vpsId]
        return CodedAccessUnit(
            codec: .h265, nalUnits: unit.nalUnits.map { AnnexBUnit(bytes: $0.bytes, streamOffset: $0.streamOffset) },
            parameterSets: [set(.vps, sps.vpsId, units.vps), set(.sps, sps.id, units.sps), set(.pps, ppsId, units.pps)],
            sequence: sequenceFacts(sps, vps: vps), isKeyframe: unit.isIRAP,
            isIntra: unit.isIRAP || unit.sliceType == .i, isLeading: unit.isRASL)
    }

    private mutating func sequenceFacts(_ sps: SequenceParameterSet, vps: VideoParameterSet?) -> SequenceFacts {
        if let known = facts[sps.id], known.sps == sps, known.vps == vps { return known.facts }
        // Every H.265 SPS states its buffer and reordering (sps_max_dec_pic_buffering,
        // sps_max_num_reorder_pics), so the CLI's reorder probe has nothing to learn.
        let made = SequenceFacts(
            id: sps.id, format: StreamFormat(sps: sps, vps: vps), bufferedPictures: sps.maxDecPicBuffering,
            reorderDelayAnnounced: true, lossless: false, reorderedPictures: sps.maxNumReorderPics)
        facts[sps.id] = (sps, vps, made)
        return made
    }

    private mutating func reportUnitsOutsideBaseLayer(_ report: (ReaderEvent) -> Void) {
        let new = assembler.unitsOutsideBaseLayer - outsideBaseLayerReported
        guard new > 0 else { return }
        outsideBaseLayerReported = assembler.unitsOutsideBaseLayer
        report(.outsideBaseLayer(count: new))
    }
}
