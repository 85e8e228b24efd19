import VideoCoding

/// An H.265 elementary stream read for a decoder: NAL units → access units of the base layer
/// (§7.4.2.4.4) → random access (`RandomAccess`: nothing before the first IRAP or recovery
/// point, and the RASL pictures of an IRAP that starts decoding are skipped) → decodable access
/// units with the VPS, SPS and PPS they use.
///
/// A picture with a recovery point SEI is a keyframe too: a stream without IRAP pictures (intra
/// refresh, intra pictures of another NAL type) marks where decoding can start with it. Its
/// pictures before recovery (by picture order count) are not shown by a decoder that starts
/// there (see `markRecovery`).
///
/// Pictures before the first IRAP (a stream joined mid-GOP, or after an end of sequence):
/// libavcodec decodes every one that is not RASL against reference pictures it makes up (grey,
/// "Could not find ref with POC"), and the ffmpeg CLI outputs them. Emulating the CLI
/// (`emulateFFmpegProbe`, what `frametap decode` does), they are passed on too, so the CLI's
/// promise holds for such streams: the same pictures as `ffmpeg -f hevc` for the same bytes.
/// Live (sessions), they are dropped and counted as `droppedBeforeKeyframe`: a picture
/// predicted from invented references is not one to serve, and H.264's live path drops its
/// pictures before a keyframe too (there libavcodec outputs none either).
public struct ElementaryStreamReader: AccessUnitReader {
    public var codec: VideoCodec { .h265 }
    public var keyframesOnly = false
    public var hasParameterSets: Bool { assembler.parameterSets.hasEachKind }

    public var accessUnitsAssembled: Int { assembler.accessUnitCount }

    private var assembler = AccessUnitAssembler()
    private var wait: ParameterSetWait<AccessUnit>
    private var randomAccess = RandomAccess()
    private var pictureOrder = PictureOrderCounter()
    /// The last keyframe recovers gradually: keyframes-only mode decodes its whole GOP, since no
    /// picture of it decodes alone.
    private var decodesThroughRecovery = false
    /// Pictures before the first IRAP (but RASL) go to the decoder, as libavcodec decodes them.
    private let decodesBeforeRandomAccessPoint: Bool
    private var outsideBaseLayerReported = 0
    private var unreadableParameterSetsReported = 0
    /// The facts of each SPS id as last built (building a format names things: once per SPS).
    private var facts: [Int: (sps: SequenceParameterSet, vps: VideoParameterSet?, facts: SequenceFacts)] = [:]

    /// `emulateFFmpegProbe`: read as the ffmpeg CLI does: pictures are held until the stream's
    /// first parameter sets arrive, as the CLI's stream probe finds them before its decoder
    /// starts, and those before the first IRAP are decoded (see above), unless `live`: a
    /// session's stream, whose pictures before its first IRAP are dropped whatever else it
    /// emulates.
    public init(emulateFFmpegProbe: Bool = false, live: Bool = false) {
        wait = ParameterSetWait(active: emulateFFmpegProbe)
        decodesBeforeRandomAccessPoint = emulateFFmpegProbe && !live
    }

    public mutating func push(_ unit: AnnexBUnit, _ report: (ReaderEvent) -> Void) {
        guard let nal = NALUnit(unit) else { return }  // a lone header byte: nothing to read
        assemble({ $0.push(nal, $1) }, report)
        reportUnitsOutsideBaseLayer(report)
        if assembler.unreadableParameterSets > unreadableParameterSetsReported, let error = assembler.lastParameterSetError {
            unreadableParameterSetsReported = assembler.unreadableParameterSets
            report(.unreadableParameterSet(error))
        }
    }

    public mutating func unitDropped(prefix: ArraySlice<UInt8>, _ report: (ReaderEvent) -> Void) {
        assemble({ $0.unitDropped(prefix: prefix, $1) }, report)
    }

    public func nextUnitEndsAccessUnit(prefix: ArraySlice<UInt8>) -> Bool {
        assembler.nextUnitEndsAccessUnit(prefix: prefix)
    }

    public mutating func abandonAccessUnit() {
        assembler.abandonAccessUnit()
    }

    public mutating func endAccessUnit(_ report: (ReaderEvent) -> Void) {
        assemble({ $0.endAccessUnit($1) }, report)
    }

    public mutating func finish(_ report: (ReaderEvent) -> Void) {
        assemble({ $0.finish($1) }, report)
        let sets = assembler.parameterSets
        for unit in wait.release() { pass(unit, with: sets, report) }
        randomAccess.restart()
        wait.restart()
    }

    public func typeName(of unit: AnnexBUnit) -> String {
        NALUnitType(headerByte: unit.bytes.first ?? 0).name
    }

    /// Runs one step of the assembler, then handles the access units that step ended.
    private mutating func assemble(
        _ step: (inout AccessUnitAssembler, (AccessUnit) -> Void) -> Void, _ report: (ReaderEvent) -> Void
    ) {
        for unit in accessUnitsEnded(by: step, in: &assembler) { handle(unit, report) }
    }

    // MARK: - Access unit → wait → random access

    private mutating func handle(_ unit: AccessUnit, _ report: (ReaderEvent) -> Void) {
        // Without a picture, its parameter sets and SEI already did their work in the assembler;
        // the random-access state still sees its end of sequence.
        guard unit.hasPicture else {
            _ = randomAccess.verdict(for: unit)
            return
        }
        // The sets as of the unit's end (not the reader's, which already took the unit that ended
        // it): the same whether that unit arrived whole or only its first bytes ended the
        // access unit early.
        let batch = wait.pass(unit, bytes: unit.byteCount, haveParameterSets: unit.parameterSets.hasEachKind)
        guard let last = batch.last else { return }
        // Pictures held until the first parameter sets arrived are judged with those sets, as
        // the ffmpeg CLI's decoder gets them from its probe before the first picture.
        for held in batch.dropLast() { pass(held, with: last.parameterSets, report) }
        pass(last, with: last.parameterSets, report)
    }

    /// `sets`: the parameter sets the picture is decoded with.
    private mutating func pass(_ unit: AccessUnit, with sets: ParameterSets, _ report: (ReaderEvent) -> Void) {
        let order = pictureOrder.count(unit)
        guard var coded = coded(unit, with: sets) else {
            // Its parameter sets are unknown: libavcodec could not decode it either.
            report(.droppedBeforeKeyframe(count: 1))
            return
        }
        // A leading picture belongs to the IRAP before it: no point to start from.
        let recoveryPoint = unit.isIRAP || unit.isRASL || unit.isRADL ? nil : RecoveryPoint(in: unit)
        markRecovery(&coded, at: recoveryPoint, order: order)
        switch randomAccess.verdict(for: unit, atRecoveryPoint: recoveryPoint != nil) {
        case .skipBeforeRandomAccessPoint where decodesBeforeRandomAccessPoint && !unit.isRASL && !keyframesOnly:
            report(.accessUnit(coded))
        case .skipBeforeRandomAccessPoint:
            report(.droppedBeforeKeyframe(count: 1))
        case .skipRASL:
            report(.skippedLeading(count: 1))
        case .decode:
            // Keyframes that decode alone: not an I picture inside a GOP (its number, its place in
            // the GOP's output order, only a decoder of the whole GOP knows), nor a P or B picture
            // marked as a recovery point that is exact at once (its references are not decoded).
            if keyframesOnly && !(coded.isKeyframe && coded.isIntra) && !decodesThroughRecovery {
                report(.skippedNotKeyframe(count: 1))
            } else {
                report(.accessUnit(coded))
            }
        }
    }

    /// A recovery point SEI makes its picture a keyframe. When it recovers gradually (the correct
    /// pictures begin `recovery_poc_cnt` after it in output order), it carries the count they
    /// begin at (`CodedAccessUnit.shownFromPictureOrder`), which a decoder starting there holds
    /// its pictures against; libavcodec 5.1 decodes the ones below it against the references it
    /// makes up for the missing ones, and outputs them. Emulating the CLI, which shows them,
    /// nothing is marked.
    private mutating func markRecovery(_ coded: inout CodedAccessUnit, at point: RecoveryPoint?, order: Int?) {
        if let point, !coded.isKeyframe {
            coded.isKeyframe = true
            if point.recoveryPOCCount > 0, let order {
                // Picture order counts grow by at least 1 a picture; reordering may bring pictures
                // of lower counts after it.
                coded.recoveryDistance = point.recoveryPOCCount + coded.sequence.reorderedPictures + 1
                if !decodesBeforeRandomAccessPoint { coded.shownFromPictureOrder = order + point.recoveryPOCCount }
            }
        }
        if coded.isKeyframe { decodesThroughRecovery = coded.recoversGradually }
        if !decodesBeforeRandomAccessPoint { coded.pictureOrder = order }
    }

    /// `unit` as a decoder takes it: with the VPS, SPS and PPS of `sets` it uses (in that
    /// order, the order libavcodec accepts them in) and its sequence's facts.
    private mutating func coded(_ unit: AccessUnit, with sets: ParameterSets) -> CodedAccessUnit? {
        guard let ppsId = unit.ppsId, let units = sets.units(forPPS: ppsId), let pps = sets.pps[ppsId],
            let sps = sets.sps[pps.spsId]
        else { return nil }
        func set(_ kind: ParameterSetKey.Kind, _ id: Int, _ nal: NALUnit) -> ParameterSetUnit {
            ParameterSetUnit(
                key: ParameterSetKey(kind, id), bytes: nal.bytes,
                carriedByAccessUnit: unit.nalUnits.contains { $0.type == nal.type && $0.bytes == nal.bytes })
        }
        let vps = sets.vps[sps.vpsId]
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
