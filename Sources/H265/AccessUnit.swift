import VideoCoding

/// One access unit (§7.4.2.4.4) of the base layer: the NAL units of one coded picture plus the
/// non-VCL units that belong to it. This is what a decoder is fed as one packet.
public struct AccessUnit: Sendable, NALUnitSequence {
    public var nalUnits: [NALUnit]
    /// Holds at least one slice segment.
    public var hasPicture: Bool
    /// The NAL type of the picture's slice segments (they all share it); nil without a picture.
    public var pictureType: NALUnitType?
    /// Of the picture's first slice segment; nil when that header could not be read (unknown
    /// PPS or SPS, malformed) or the unit holds no picture.
    public var sliceType: SliceType?
    public var ppsId: Int?
    public var spsId: Int?
    /// TemporalId of the picture.
    public var temporalId: Int?
    public var picOrderCntLsb: Int?
    /// The parameter sets as of this unit's end, its own included: the ones its picture uses.
    public var parameterSets: ParameterSets
    /// Offset of its first NAL unit's header in the stream.
    public var streamOffset: Int

    public init(nalUnits: [NALUnit], parameterSets: ParameterSets = ParameterSets()) {
        self.nalUnits = nalUnits
        let firstSegment = nalUnits.first { $0.type.isSliceSegment }
        hasPicture = firstSegment != nil
        pictureType = firstSegment?.type
        sliceType = nil
        ppsId = nil
        spsId = nil
        temporalId = firstSegment?.temporalId
        picOrderCntLsb = nil
        self.parameterSets = parameterSets
        streamOffset = nalUnits.first?.streamOffset ?? 0
    }

    public var isIRAP: Bool { pictureType?.isIRAP ?? false }
    public var isIDR: Bool { pictureType?.isIDR ?? false }
    public var isCRA: Bool { pictureType?.isCRA ?? false }
    public var isBLA: Bool { pictureType?.isBLA ?? false }
    public var isRASL: Bool { pictureType?.isRASL ?? false }
    public var isRADL: Bool { pictureType?.isRADL ?? false }

    /// Ends a coded video sequence: the next picture starts a new one (and must be an IRAP).
    public var endsSequence: Bool { nalUnits.contains { $0.type == .endOfSequence || $0.type == .endOfBitstream } }

    /// The PPS and SPS its picture uses, when known.
    public var pps: PictureParameterSet? { ppsId.flatMap { parameterSets.pps[$0] } }
    public var sps: SequenceParameterSet? { spsId.flatMap { parameterSets.sps[$0] } }
}

/// Groups NAL units into access units (§7.4.2.4.4) as they arrive, and tracks the parameter
/// sets on the way.
///
/// A new access unit begins at the first AUD, VPS, SPS, PPS, prefix SEI, type 41...44 or
/// 48...55 unit, or slice segment with first_slice_segment_in_pic_flag, after a picture; suffix
/// SEI, filler data and the other reserved and unspecified types stay with the picture before.
/// End of sequence ends its access unit (the next unit starts a new one), end of bitstream is
/// its last unit. That is libavcodec's parser too (so its packets are these access units),
/// except that it puts an end of sequence or of bitstream at the start of the next packet,
/// which its decoder takes either way.
///
/// "After a picture" means after a slice segment that starts one, as libavcodec's parser has
/// it: segments of a picture whose first segment is missing (a stream that begins mid-picture)
/// do not end the access unit, they join the next picture's, and the decoder drops them.
/// Multiple slices, dependent slice segments, tiles and wavefronts change only slice headers,
/// never where a picture begins.
///
/// Only the base layer is assembled: units with nuh_layer_id above 0 are counted and left
/// out, as libavcodec ignores them. Nothing else is thrown away: a slice whose PPS or SPS is
/// unknown, or whose header is malformed, still goes into its access unit (the decoder will
/// judge it); such events are counted instead.
public struct AccessUnitAssembler: Sendable {
    public private(set) var parameterSets = ParameterSets()
    /// Access units emitted with a picture.
    public private(set) var accessUnitCount = 0
    /// Units with nuh_layer_id above 0, left out.
    public private(set) var unitsOutsideBaseLayer = 0
    /// Slice segments assembled although their PPS or SPS had not been received.
    public private(set) var slicesWithUnknownParameterSets = 0
    /// Units whose header, parameter set or slice segment header could not be parsed (they
    /// were still passed on).
    public private(set) var malformedUnits = 0
    /// The most recent parse problem, for diagnostics.
    public private(set) var lastError: BitstreamError?
    /// Base-layer VPS, SPS and PPS units that could not be parsed (also in `malformedUnits`),
    /// and the newest one's problem.
    public private(set) var unreadableParameterSets = 0
    public private(set) var lastParameterSetError: BitstreamError?

    private var pending: [NALUnit] = []
    /// A slice segment starting a picture has joined the pending access unit.
    private var pictureStarted = false
    /// An end of sequence has joined it: whatever comes next but an end of bitstream starts a new one.
    private var endedBySequenceEnd = false
    private var current = AccessUnit(nalUnits: [])

    public init() {}

    public mutating func push(_ nal: NALUnit, _ emit: (AccessUnit) -> Void) {
        guard nal.layerId == 0 else {
            unitsOutsideBaseLayer += 1
            return
        }
        if !nal.header.isWellFormed {
            record(BitstreamError(.invalidData, "NAL unit at stream offset \(nal.streamOffset) has a forbidden header"))
        }
        if endsAccessUnit(nal.type, startsPicture: SliceSegmentHeader.startsPicture(nal)) { flush(emit) }

        switch nal.type {
        case .vps, .sps, .pps:
            do {
                try parameterSets.update(with: nal)
            } catch {
                record(error)
                unreadableParameterSets += 1
                lastParameterSetError = BitstreamError(
                    error.code, "the \(nal.type.name.uppercased()) at stream offset \(nal.streamOffset) cannot be read: \(error.message)")
            }
        case .endOfSequence:
            endedBySequenceEnd = true
        default:
            if nal.type.isSliceSegment { place(nal) }
        }
        pending.append(nal)
        if nal.type == .endOfBitstream { flush(emit) }
    }

    /// Whether a NAL unit beginning with `prefix` (its header and whatever of the rest has
    /// arrived) will end the pending access unit once it arrives whole. A live decoder can then
    /// pass a picture on when the next unit *starts* (`endAccessUnit`), instead of when that unit
    /// ends, which for a single-slice stream is one picture interval later.
    ///
    /// Its header decides, and for a slice segment the bit after it: `push` flushes on exactly
    /// these. False when those bytes have not all arrived yet (the unit then decides when it is
    /// complete, as before).
    public func nextUnitEndsAccessUnit(prefix: ArraySlice<UInt8>) -> Bool {
        guard prefix.count >= 2 else { return false }
        let header = NALHeader(prefix[prefix.startIndex], prefix[prefix.startIndex + 1])
        guard header.layerId == 0 else { return false }
        var startsPicture: Bool?
        if header.type.isSliceSegment {
            guard prefix.count >= 3 else { return false }
            startsPicture = prefix[prefix.startIndex + 2] & 0x80 != 0
        }
        return endsAccessUnit(header.type, startsPicture: startsPicture)
    }

    /// Emits the pending access unit now, when `nextUnitEndsAccessUnit` said the next unit will
    /// end it; that unit then starts the next access unit exactly as it would have.
    public mutating func endAccessUnit(_ emit: (AccessUnit) -> Void) {
        flush(emit)
    }

    /// The splitter dropped a unit beginning with `prefix` (`SplitterEvent.dropped`): ends the
    /// pending access unit if that unit would have, as far as its first bytes tell, so that
    /// where access units end does not depend on how the stream was chunked. A dropped first
    /// slice segment still starts its picture: the rest of that picture's segments make an
    /// access unit of their own instead of joining the next picture's.
    public mutating func unitDropped(prefix: ArraySlice<UInt8>, _ emit: (AccessUnit) -> Void) {
        if nextUnitEndsAccessUnit(prefix: prefix) { flush(emit) }
        if prefix.count >= 3, NALHeader(prefix[prefix.startIndex], prefix[prefix.startIndex + 1]).layerId == 0,
            NALUnitType(headerByte: prefix[prefix.startIndex]).isSliceSegment, prefix[prefix.startIndex + 2] & 0x80 != 0
        {
            pictureStarted = true
        }
    }

    /// End of stream: emits what is pending and forgets the picture state. Parameter sets are
    /// kept, since a following stream on the same session usually repeats them anyway.
    public mutating func finish(_ emit: (AccessUnit) -> Void) {
        flush(emit)
    }

    /// Forgets parameter sets too, for a stream that has nothing to do with the previous one.
    public mutating func reset() {
        self = AccessUnitAssembler()
    }

    /// The input broke off (a push cut short): the rest of the access unit under way will never
    /// come, so it is dropped whole rather than completed by whatever the next push starts with,
    /// which starts that access unit again. Parameter sets stay known.
    public mutating func abandonAccessUnit() {
        pending = []
        pictureStarted = false
        endedBySequenceEnd = false
        current = AccessUnit(nalUnits: [])
    }

    /// The one rule `push` and `nextUnitEndsAccessUnit` share, for a base-layer unit.
    private func endsAccessUnit(_ type: NALUnitType, startsPicture: Bool?) -> Bool {
        if endedBySequenceEnd { return type != .endOfBitstream }
        guard pictureStarted else { return false }
        switch type.rawValue {
        case 32...35, 39, 41...44, 48...55:
            return true
        default:
            return startsPicture == true
        }
    }

    /// Records the picture's properties from the segment that starts it.
    private mutating func place(_ nal: NALUnit) {
        let startsPicture = SliceSegmentHeader.startsPicture(nal) == true
        if !current.hasPicture {
            current.hasPicture = true
            current.pictureType = nal.type
            current.temporalId = nal.temporalId
        }
        guard startsPicture, !pictureStarted else { return }
        pictureStarted = true
        current.pictureType = nal.type
        current.temporalId = nal.temporalId
        do {
            let header = try SliceSegmentHeader(nal: nal, parameterSets: parameterSets)
            current.sliceType = header.sliceType
            current.ppsId = header.ppsId
            current.spsId = header.spsId
            current.picOrderCntLsb = header.picOrderCntLsb
        } catch {
            if let ppsId = Self.ppsId(of: nal), parameterSets.sps(forPPS: ppsId) == nil {
                slicesWithUnknownParameterSets += 1
                current.ppsId = ppsId
            } else {
                record(error)
            }
        }
    }

    /// slice_pic_parameter_set_id, which needs no parameter set to read.
    private static func ppsId(of nal: NALUnit) -> Int? {
        var reader = BitReader(RBSP.unescape(nal.bytes.region(2..<min(nal.bytes.count, 16))))
        guard (try? reader.skipBits(nal.type.isIRAP ? 2 : 1)) != nil else { return nil }
        return try? reader.readUE(max: 63, "slice_pic_parameter_set_id")
    }

    private mutating func record(_ error: BitstreamError) {
        malformedUnits += 1
        lastError = error
    }

    private mutating func flush(_ emit: (AccessUnit) -> Void) {
        pictureStarted = false
        endedBySequenceEnd = false
        guard !pending.isEmpty else { return }
        var unit = current
        unit.nalUnits = pending
        unit.parameterSets = parameterSets
        unit.streamOffset = pending[0].streamOffset
        pending = []
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
