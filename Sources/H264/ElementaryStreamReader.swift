import VideoCoding

/// An H.264 elementary stream read for a decoder: NAL units → access units (§7.4.1.2.3) →
/// the random-access gate → decodable access units with the parameter sets they use.
///
/// The parameter sets a unit is judged with are the ones known when it ended (an SPS may
/// replace one with the same id right after it).
public struct ElementaryStreamReader: AccessUnitReader {
    public var codec: VideoCodec { .h264 }
    public var keyframesOnly = false
    public var hasParameterSets: Bool { !parameterSets.sps.isEmpty && !parameterSets.pps.isEmpty }

    public var accessUnitsAssembled: Int { assembler.accessUnitCount }

    private var assembler = AccessUnitAssembler()
    /// The assembler's parameter sets as of the access units being handled.
    private var parameterSets = ParameterSets()
    private var wait: ParameterSetWait<AccessUnit>
    private var gate = RandomAccessGate()
    /// The facts of each SPS id as last built (building a format names things: once per SPS).
    private var facts: [Int: (sps: SequenceParameterSet, facts: SequenceFacts)] = [:]
    /// The picture order count of the last recovery point that is not an IDR, while the pictures
    /// right after it may still be its leading pictures (see `isLeading(_:sps:)`).
    private var openKeyframe: (picOrderCntLsb: Int, maxPicOrderCntLsb: Int)?
    /// The last keyframe recovers gradually (intra refresh): no picture of its GOP decodes
    /// alone, so keyframes-only mode decodes all of them rather than show nothing.
    private var decodesThroughRecovery = false

    /// `emulateFFmpegProbe`: hold pictures until the stream's first SPS and PPS arrive, as the
    /// ffmpeg CLI's stream probe finds them before its decoder starts (see `ParameterSetWait`).
    public init(emulateFFmpegProbe: Bool = false) {
        wait = ParameterSetWait(active: emulateFFmpegProbe)
    }

    public mutating func push(_ unit: AnnexBUnit, _ report: (ReaderEvent) -> Void) {
        let nal = NALUnit(unit)
        // SVC and MVC: what only layers or views above the base layer use; never decoded.
        if [.prefix, .subsetSPS, .sliceExtension, .sliceExtensionDepth].contains(nal.type) { report(.outsideBaseLayer(count: 1)) }
        // The units emitted end before `nal`, so they are handled with the parameter sets as
        // they were before it.
        assemble({ $0.push(nal, $1) }, report)
        guard nal.type == .sps || nal.type == .pps else { return }
        do {
            try parameterSets.update(with: nal)
        } catch {
            report(
                .unreadableParameterSet(
                    BitstreamError(
                        error.code,
                        "the \(nal.type.name.uppercased()) at stream offset \(nal.streamOffset) cannot be read: \(error.message)")))
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
        for unit in wait.release() { pass(unit, report) }
        // Never reached a start point: libavcodec would not have output them either.
        let waited = gate.streamEnded()
        if waited > 0 { report(.droppedBeforeKeyframe(count: waited)) }
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

    // MARK: - Access unit → wait → gate

    private mutating func handle(_ unit: AccessUnit, _ report: (ReaderEvent) -> Void) {
        // A unit without a picture (parameter sets or SEI at the end of a stream) would only make
        // libavcodec report "no frame"; its parameter sets go out with the next picture instead.
        guard unit.hasPicture else { return }
        for unit in wait.pass(unit, bytes: unit.byteCount, haveParameterSets: hasParameterSets) { pass(unit, report) }
    }

    private mutating func pass(_ unit: AccessUnit, _ report: (ReaderEvent) -> Void) {
        let decodable = unit.ppsId.flatMap { parameterSets.sps(forPPS: $0) } != nil
        let verdict = gate.pass(unit, decodable: decodable)
        if verdict.dropped > 0 { report(.droppedBeforeKeyframe(count: verdict.dropped)) }
        for earlier in verdict.earlier {
            // Keyframes only skips them, keeping their places: the numbers stay `all`'s.
            guard let coded = coded(earlier) else { continue }
            report(keyframesOnly ? .skippedNotKeyframe(count: 1) : .accessUnit(coded))
        }
        guard verdict.decodeThis, let coded = coded(unit) else { return }
        if coded.isKeyframe { decodesThroughRecovery = coded.recoversGradually }
        // Keyframes that decode alone: not an I picture inside a GOP (its number, its place in
        // the GOP's output order, only a decoder of the whole GOP knows), nor a P or B picture
        // marked as a recovery point that is exact at once (its references are not decoded).
        if keyframesOnly && !(coded.isKeyframe && coded.isIntra) && !decodesThroughRecovery {
            report(.skippedNotKeyframe(count: 1))
            return
        }
        report(.accessUnit(coded))
    }

    /// `unit` as a decoder takes it: with the SPS and PPS it uses and its sequence's facts.
    private mutating func coded(_ unit: AccessUnit) -> CodedAccessUnit? {
        guard let ppsId = unit.ppsId, let spsId = parameterSets.pps[ppsId]?.spsId,
            let sps = parameterSets.sps[spsId], let spsUnit = parameterSets.spsUnits[spsId],
            let ppsUnit = parameterSets.ppsUnits[ppsId]
        else { return nil }
        // Carried means this very set is in the access unit: one of another id (or a changed
        // copy) there does not spare sending the one the picture uses.
        let sets = [
            ParameterSetUnit(
                key: ParameterSetKey(.sps, spsId), bytes: spsUnit.bytes,
                carriedByAccessUnit: unit.nalUnits.contains { $0.type == .sps && $0.bytes == spsUnit.bytes }),
            ParameterSetUnit(
                key: ParameterSetKey(.pps, ppsId), bytes: ppsUnit.bytes,
                carriedByAccessUnit: unit.nalUnits.contains { $0.type == .pps && $0.bytes == ppsUnit.bytes }),
        ]
        let sequence = sequenceFacts(sps)
        return CodedAccessUnit(
            codec: .h264, nalUnits: unit.nalUnits.map { AnnexBUnit(bytes: $0.bytes, streamOffset: $0.streamOffset) },
            parameterSets: sets, sequence: sequence, isKeyframe: unit.isIDR || unit.isRandomAccessPoint,
            isIntra: unit.isIDR || unit.primarySliceType == .i, isLeading: isLeading(unit, sps: sps),
            recoveryDistance: Self.recoveryDistance(unit, reordered: sequence.reorderedPictures))
    }

    /// `CodedAccessUnit.recoveryDistance` of a recovery point that is not an IDR: libavcodec
    /// shows its pictures from `recovery_frame_cnt` reference pictures after it (an I picture
    /// with a count of 0 at once), and between two reference pictures come at most as many
    /// others as the stream reorders (its B pictures).
    private static func recoveryDistance(_ unit: AccessUnit, reordered: Int) -> Int {
        guard !unit.isIDR, unit.isRandomAccessPoint else { return 0 }
        let count = unit.recoveryPoint?.recoveryFrameCount ?? 0
        guard count > 0 || unit.primarySliceType != .i else { return 0 }
        return (count + 1) * (1 + reordered)
    }

    /// Whether `unit` is a leading picture of the recovery point before it: H.264 has no NAL type
    /// for them, so it is told by picture order count (type 0 only), for the pictures right
    /// after the recovery point until the first that follows it in output order (as in x264's
    /// open GOPs, and as H.265 requires of its leading pictures). A decoder starting at the
    /// recovery point does not output them (libavcodec drops them, measured on x264
    /// `open-gop=1` streams cut there).
    private mutating func isLeading(_ unit: AccessUnit, sps: SequenceParameterSet) -> Bool {
        if unit.isIDR {
            openKeyframe = nil
            return false
        }
        if unit.isRandomAccessPoint {
            openKeyframe = nil
            if case .type0(let log2) = sps.picOrderCount, let lsb = unit.picOrderCntLsb {
                openKeyframe = (lsb, 1 << log2)
            }
            return false
        }
        guard let key = openKeyframe, let lsb = unit.picOrderCntLsb else { return false }
        // The signed distance in output order, modulo MaxPicOrderCntLsb (§8.2.1.1).
        var distance = (lsb - key.picOrderCntLsb) % key.maxPicOrderCntLsb
        if distance < 0 { distance += key.maxPicOrderCntLsb }
        if distance >= key.maxPicOrderCntLsb / 2 { distance -= key.maxPicOrderCntLsb }
        guard distance < 0 else {
            openKeyframe = nil
            return false
        }
        return true
    }

    private mutating func sequenceFacts(_ sps: SequenceParameterSet) -> SequenceFacts {
        if let known = facts[sps.id], known.sps == sps { return known.facts }
        let made = SequenceFacts(sps: sps)
        facts[sps.id] = (sps, made)
        return made
    }
}

extension SequenceFacts {
    /// An H.264 SPS's facts. The buffer is max_dec_frame_buffering when the VUI states it (it
    /// bounds references and reordering together), else the reference frames plus the pictures
    /// the profile may reorder.
    public init(sps: SequenceParameterSet) {
        let references = sps.maxNumRefFrames
        let buffered: Int
        if let stated = sps.vui?.maxDecFrameBuffering {
            buffered = max(stated, references)
        } else {
            let reorder = sps.announcesReorderDelay ? (sps.vui?.maxNumReorderFrames ?? 0) : references
            buffered = references + reorder
        }
        // Announced: the VUI's count, or none for the profiles without B slices or inter pictures.
        let reordered = sps.announcesReorderDelay ? (sps.vui?.maxNumReorderFrames ?? 0) : nil
        self.init(
            id: sps.id, format: StreamFormat(sps: sps), bufferedPictures: buffered,
            reorderDelayAnnounced: sps.announcesReorderDelay, lossless: sps.qpprimeYZeroTransformBypass,
            reorderedPictures: reordered)
    }
}

/// The random-access gate. `pass` says which pictures to decode.
///
/// libavcodec cannot decode a picture without its SPS and PPS, and outputs nothing before a
/// picture it can start from: an IDR, a recovery point, or an I picture (its
/// FRAME_RECOVERED_HEURISTIC; whether it then outputs that I picture depends on the PPS
/// reference counts, so it is sent and libavcodec decides). Measured against the ffmpeg CLI
/// on streams cut mid-GOP (StreamDecoderTests): pictures before the start point are never
/// output, but when the start point is not an IDR, libavcodec still keeps the ones it could
/// decode as references, and in intra-refresh streams with parameter sets on every picture
/// the "recovered" pictures then differ if they were dropped. So decodable pictures before
/// the start point wait here: an IDR makes them irrelevant (dropped and counted, the usual
/// case and the saving), any other start point sends them first.
struct RandomAccessGate {
    /// Decoding has reached a start point since the stream began.
    private var started = false
    private var waiting: [AccessUnit] = []
    private var waitingBytes = 0
    /// Bounded like the CLI probe's held units: past this the oldest waiting pictures are dropped.
    static let maxWaitingBytes = 8 << 20

    struct Verdict {
        /// Pictures that waited for the start point, to decode before this one.
        var earlier: [AccessUnit] = []
        var decodeThis = false
        /// Pictures given up (counted as dropped before a keyframe).
        var dropped = 0
    }

    /// `decodable`: the unit's SPS and PPS are known. The same for every decode mode, so that a
    /// picture's number does not depend on it.
    mutating func pass(_ unit: AccessUnit, decodable: Bool) -> Verdict {
        var verdict = Verdict()
        guard !started else {
            verdict.decodeThis = true
            return verdict
        }
        guard decodable else {
            verdict.dropped = 1
            return verdict
        }
        if unit.isIDR {
            verdict.dropped = waiting.count
        } else if unit.isRandomAccessPoint || unit.primarySliceType == .i {
            verdict.earlier = waiting
        } else {
            // Held where no history counts its slabs: its bytes are copied out of them.
            waiting.append(unit.detached())
            waitingBytes += unit.byteCount
            while waitingBytes > Self.maxWaitingBytes, let oldest = waiting.first {
                waiting.removeFirst()
                waitingBytes -= oldest.byteCount
                verdict.dropped += 1
            }
            return verdict
        }
        waiting = []
        waitingBytes = 0
        started = true
        verdict.decodeThis = true
        return verdict
    }

    /// End of stream: the next stream starts at a start point again. Returns how many waiting
    /// pictures never reached one.
    mutating func streamEnded() -> Int {
        defer { self = RandomAccessGate() }
        return waiting.count
    }
}
