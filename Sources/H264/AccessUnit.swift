import VideoCoding

/// One access unit (§7.4.1.2.3): the NAL units of one primary coded picture plus the
/// non-VCL units that belong to it. This is what a decoder is fed as one packet.
///
/// A field pair is two access units (each field is a primary coded picture of its own, and
/// §7.4.1.2.4 separates them by bottom_field_flag). libavcodec accepts the fields as separate
/// packets and outputs one frame for the pair, so a consumer counting "frames out per AU in"
/// sees one frame for two field AUs; `isField` tells them apart.
public struct AccessUnit: Sendable, NALUnitSequence {
    public var nalUnits: [NALUnit]
    /// Contains an IDR slice.
    public var isIDR: Bool
    /// Decoding can start here: an IDR picture or a recovery-point SEI.
    public var isRandomAccessPoint: Bool
    public var recoveryPoint: RecoveryPoint?
    /// Of the first slice of the primary coded picture; nil when that header could not be read
    /// or the unit holds no picture (e.g. parameter sets left over at the end of a stream).
    public var primarySliceType: SliceType?
    public var ppsId: Int?
    public var spsId: Int?
    public var frameNum: Int?
    /// pic_order_cnt_lsb of the first slice, for picture order count type 0; nil otherwise.
    public var picOrderCntLsb: Int?
    public var isField: Bool
    public var isBottomField: Bool
    /// Holds at least one VCL NAL unit (types 1...5).
    public var hasPicture: Bool
    /// Offset of its first NAL unit's header byte in the stream.
    public var streamOffset: Int

    public init(nalUnits: [NALUnit]) {
        self.nalUnits = nalUnits
        isIDR = nalUnits.contains { $0.type == .idr }
        isRandomAccessPoint = isIDR
        recoveryPoint = nil
        primarySliceType = nil
        ppsId = nil
        spsId = nil
        frameNum = nil
        picOrderCntLsb = nil
        isField = false
        isBottomField = false
        hasPicture = nalUnits.contains { $0.type.isVCL }
        streamOffset = nalUnits.first?.streamOffset ?? 0
    }
}

/// Groups NAL units into access units (§7.4.1.2.3) as they arrive, and tracks the parameter
/// sets on the way.
///
/// A unit is emitted when the first NAL unit of the next one arrives (or at `finish()`), since
/// only that tells where a picture ends. Nothing is thrown away: a slice whose PPS or SPS is
/// unknown, or whose header is malformed, still goes into an access unit (the decoder will
/// judge it); such events are counted instead.
///
/// Picture boundaries follow §7.4.1.2.4. In addition, like libavcodec, a slice with
/// first_mb_in_slice == 0 starts a new picture, but only when the current picture already has
/// a slice starting at macroblock 0 (of the same colour plane): that catches encoders that
/// break §7.4.1.2.4 without splitting the arbitrary-slice-order pictures of Baseline streams,
/// whose first slice need not come first.
public struct AccessUnitAssembler: Sendable {
    public private(set) var parameterSets = ParameterSets()
    /// Access units emitted with a picture.
    public private(set) var accessUnitCount = 0
    /// Slices assembled although their PPS or SPS had not been received.
    public private(set) var slicesWithUnknownParameterSets = 0
    /// SPS, PPS, SEI or slice headers that could not be parsed (the units were still passed on).
    public private(set) var malformedUnits = 0
    /// The most recent parse problem, for diagnostics.
    public private(set) var lastError: BitstreamError?

    private var pending: [NALUnit] = []
    /// Types 14...18 after a slice, waiting to learn which access unit they open or continue.
    private var held: [NALUnit] = []
    private var pendingHasPicture = false
    private var endedBySequenceEnd = false
    private var lastPrimarySlice: SliceHeaderPrefix?
    /// Of the last primary slice, for slices whose full header cannot be read.
    private var lastLeadingFields: (ppsId: Int, isIDR: Bool)?
    /// Bit n set: the current picture has a slice at macroblock 0 of colour plane n.
    private var planesStartedAtFirstMb: UInt8 = 0
    private var current = AccessUnit(nalUnits: [])

    public init() {}

    public mutating func push(_ nal: NALUnit, _ emit: (AccessUnit) -> Void) {
        if endedBySequenceEnd && nal.type != .endOfStream { flush(emit) }

        switch nal.type {
        case .sps, .pps:
            if pendingHasPicture { flush(emit) }
            do {
                try parameterSets.update(with: nal)
            } catch {
                record(error)
            }
        case .aud, .sei:
            if pendingHasPicture { flush(emit) }
            if nal.type == .sei { readSEI(nal) }
        case .prefix, .subsetSPS, .dps, .reserved17, .reserved18:
            // These start a new access unit only when they follow the *last* VCL unit of a
            // picture; SVC and MVC streams put a prefix unit before every base-layer slice. Hold
            // them until the next unit shows whether the picture goes on.
            if pendingHasPicture {
                held.append(nal)
                return
            }
        case .slice, .idr, .sliceDataA:
            placeSlice(nal, emit)
        case .sliceDataB, .sliceDataC:
            // Partitions B and C carry no slice header; they follow partition A of their picture.
            pendingHasPicture = true
        case .endOfSequence:
            endedBySequenceEnd = true
        default:
            break
        }

        pending.append(contentsOf: held)
        held.removeAll()
        pending.append(nal)
        if nal.type == .endOfStream { flush(emit) }
    }

    /// Whether a NAL unit beginning with `prefix` (its header byte and whatever of the rest has
    /// arrived) will end the pending access unit once it arrives whole. A live decoder can then
    /// pass a picture on when the next unit *starts* (`endAccessUnit`), instead of when that unit
    /// ends, which for a single-slice stream is one picture interval later.
    ///
    /// True only where `push` is certain to flush, whatever the rest of the unit holds: an AUD,
    /// SEI, SPS or PPS after a picture, or a slice at macroblock 0 of a picture that already has
    /// one at macroblock 0, whose (known) PPS rules out redundant pictures and whose SPS rules
    /// out separate colour planes. Anything else (a few bytes more may still be needed, or an
    /// unusual stream) answers false and the unit decides when it is complete, as before.
    public func nextUnitEndsAccessUnit(prefix: ArraySlice<UInt8>) -> Bool {
        guard pendingHasPicture, held.isEmpty, !endedBySequenceEnd, let first = prefix.first else { return false }
        switch NALUnitType(headerByte: first) {
        case .aud, .sei, .sps, .pps:
            return true
        case .slice, .idr:
            guard planesStartedAtFirstMb & 1 != 0, prefix.count >= 2,
                let leading = try? SliceHeaderPrefix.leadingFields(of: NALUnit(bytes: Array(prefix))),
                leading.firstMbInSlice == 0,
                let pps = parameterSets.pps[leading.ppsId], !pps.redundantPicCntPresent,
                let sps = parameterSets.sps[pps.spsId], !sps.separateColourPlane
            else { return false }
            return true
        default:
            return false
        }
    }

    /// Emits the pending access unit now, when `nextUnitEndsAccessUnit` said the next unit will
    /// end it; that unit then starts the next access unit exactly as it would have.
    public mutating func endAccessUnit(_ emit: (AccessUnit) -> Void) {
        guard pendingHasPicture, held.isEmpty else { return }
        flush(emit)
    }

    /// The splitter dropped a unit beginning with `prefix` (`SplitterEvent.dropped`): ends the
    /// pending access unit if that unit would have, as far as its first bytes tell. Otherwise
    /// the units after a dropped one would join the picture before it or not depending on
    /// whether its first bytes had arrived, and been acted on, before the bytes that made it too
    /// large: on how the stream was chunked.
    public mutating func unitDropped(prefix: ArraySlice<UInt8>, _ emit: (AccessUnit) -> Void) {
        if nextUnitEndsAccessUnit(prefix: prefix) { flush(emit) }
    }

    /// End of stream: emits what is pending and forgets the picture state. Parameter sets are
    /// kept, since a following stream on the same session usually repeats them anyway.
    public mutating func finish(_ emit: (AccessUnit) -> Void) {
        pending.append(contentsOf: held)
        held.removeAll()
        flush(emit)
        lastPrimarySlice = nil
        lastLeadingFields = nil
    }

    /// Forgets parameter sets too, for a stream that has nothing to do with the previous one.
    public mutating func reset() {
        self = AccessUnitAssembler()
    }

    /// The input broke off (a push cut short): the rest of the access unit under way will never
    /// come, so it is dropped whole rather than completed by whatever the next push starts with,
    /// which starts that access unit again (its delimiter, its SEI: a recovery point must not
    /// carry over to another picture). Parameter sets stay known.
    public mutating func abandonAccessUnit() {
        pending = []
        held = []
        pendingHasPicture = false
        endedBySequenceEnd = false
        planesStartedAtFirstMb = 0
        lastPrimarySlice = nil
        lastLeadingFields = nil
        current = AccessUnit(nalUnits: [])
    }

    private mutating func placeSlice(_ nal: NALUnit, _ emit: (AccessUnit) -> Void) {
        let header: SliceHeaderPrefix
        do {
            header = try SliceHeaderPrefix(nal: nal, parameterSets: parameterSets)
        } catch {
            // Find out why, from the fields that need no parameter sets.
            guard let leading = try? SliceHeaderPrefix.leadingFields(of: nal) else {
                record(error)
                // Unreadable: keep it with the current picture rather than guess a boundary.
                startPictureIfNeeded(nal, nil, sliceType: nil, ppsId: nil)
                return
            }
            if parameterSets.sps(forPPS: leading.ppsId) == nil {
                slicesWithUnknownParameterSets += 1
            } else {
                record(error)
            }
            placeWithoutHeader(nal, leading, emit)
            return
        }
        // A redundant coded picture belongs to the access unit of its primary picture and
        // says nothing about where that picture ends.
        if header.isRedundant { return }
        let planeBit = UInt8(1) << UInt8(header.colourPlaneId)
        if pendingHasPicture {
            let differs = lastPrimarySlice.map { header.startsNewPicture(after: $0) }
                ?? (header.ppsId != lastLeadingFields?.ppsId || header.isIDR != lastLeadingFields?.isIDR)
            let repeatedFirstMb = header.firstMbInSlice == 0 && planesStartedAtFirstMb & planeBit != 0
            if differs || repeatedFirstMb { flush(emit) }
        }
        if header.firstMbInSlice == 0 { planesStartedAtFirstMb |= planeBit }
        lastPrimarySlice = header
        lastLeadingFields = (header.ppsId, header.isIDR)
        startPictureIfNeeded(nal, header, sliceType: header.sliceType, ppsId: header.ppsId)
    }

    /// Without a full header only first_mb_in_slice, the PPS id and the NAL type can tell
    /// pictures apart.
    private mutating func placeWithoutHeader(
        _ nal: NALUnit, _ leading: (firstMbInSlice: Int, sliceType: SliceType, ppsId: Int), _ emit: (AccessUnit) -> Void
    ) {
        let isIDR = nal.type == .idr
        if pendingHasPicture
            && (leading.firstMbInSlice == 0 || leading.ppsId != lastLeadingFields?.ppsId
                || isIDR != lastLeadingFields?.isIDR)
        {
            flush(emit)
        }
        lastPrimarySlice = nil
        lastLeadingFields = (leading.ppsId, isIDR)
        startPictureIfNeeded(nal, nil, sliceType: leading.sliceType, ppsId: leading.ppsId)
    }

    /// Records the picture's metadata from its first slice.
    private mutating func startPictureIfNeeded(
        _ nal: NALUnit, _ header: SliceHeaderPrefix?, sliceType: SliceType?, ppsId: Int?
    ) {
        if nal.type == .idr {
            current.isIDR = true
            current.isRandomAccessPoint = true
        }
        guard !pendingHasPicture else { return }
        pendingHasPicture = true
        current.primarySliceType = sliceType
        current.ppsId = ppsId
        current.spsId = ppsId.flatMap { parameterSets.pps[$0]?.spsId }
        current.frameNum = header?.frameNum
        current.picOrderCntLsb = header.flatMap { $0.pocType == 0 ? $0.picOrderCntLsb : nil }
        current.isField = header?.fieldPic ?? false
        current.isBottomField = header?.bottomField ?? false
    }

    private mutating func readSEI(_ nal: NALUnit) {
        do {
            if let payload = try SEIMessage.payload(ofType: SEIMessage.recoveryPointType, inRBSP: nal.rbsp()) {
                current.recoveryPoint = try RecoveryPoint(payload: payload)
                current.isRandomAccessPoint = true
            }
        } catch {
            record(error)
        }
    }

    private mutating func record(_ error: BitstreamError) {
        malformedUnits += 1
        lastError = error
    }

    private mutating func flush(_ emit: (AccessUnit) -> Void) {
        endedBySequenceEnd = false
        guard !pending.isEmpty else { return }
        var unit = current
        unit.nalUnits = pending
        unit.hasPicture = pendingHasPicture
        unit.streamOffset = pending[0].streamOffset
        pending = []
        pendingHasPicture = false
        planesStartedAtFirstMb = 0
        current = AccessUnit(nalUnits: [])
        // Units with no picture (a delimiter that ended the stream's last picture, parameter
        // sets at its end) are handed on but not counted: the count is of pictures sent.
        if unit.hasPicture { accessUnitCount += 1 }
        emit(unit)
    }
}

extension AccessUnit: SlabDetachable {
    public func detached() -> AccessUnit {
        var copy = self
        copy.nalUnits = nalUnits.map { $0.detached() }
        return copy
    }
}
