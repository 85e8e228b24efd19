/// What every layer above the bitstream knows of a stream, whatever its codec: access units
/// ready for a decoder, with the facts of the sequence they belong to. Each codec's target
/// implements `AccessUnitReader`; `Bitstream` picks the one a stream needs.

/// One access unit the reader judged decodable: its NAL units, the parameter sets its picture
/// uses, and the facts of its sequence.
public struct CodedAccessUnit: Sendable, NALUnitSequence {
    public var codec: VideoCodec
    /// Its NAL units, in stream order, without start codes.
    public var nalUnits: [AnnexBUnit]
    /// The parameter set units (VPS, SPS, PPS) its picture uses, in the order a decoder must
    /// see them.
    public var parameterSets: [ParameterSetUnit]
    /// Its active sequence parameter set's facts.
    public var sequence: SequenceFacts
    /// Decoding can restart here with nothing before it: H.264 IDR or recovery point, H.265 IRAP.
    public var isKeyframe: Bool
    /// Every slice is intra: IDR/IRAP, or an I picture.
    public var isIntra: Bool
    /// A leading picture of the keyframe before it that a decoder starting at that keyframe
    /// cannot output: it precedes the keyframe in output order and may refer to pictures before
    /// it (H.265 RASL; H.264 pictures right after a recovery point whose picture order count
    /// precedes it). Such pictures come first in their keyframe's output order, right after the
    /// keyframe in decoding order; an IDR has none.
    public var isLeading: Bool
    /// For a keyframe after which the pictures become exact only some pictures later (a
    /// recovery point of intra refresh): how many access units after it a decoder that starts
    /// here may still not show, at most (from the recovery point SEI's count; libavcodec decides
    /// exactly for H.264). A decoder after a picture within them starts at a keyframe before.
    /// 0 for a keyframe whose pictures are exact at once, and for every other unit.
    public var recoveryDistance: Int
    public var recoversGradually: Bool { recoveryDistance > 0 }
    /// H.265, set by its reader (H.264's decoder in libavcodec judges recovery itself,
    /// `DecodedFrame.precedesRecovery`): the picture's order count (PicOrderCntVal, counted from
    /// the stream's start or its last IRAP that resets it), and on a keyframe that recovers
    /// gradually, the count from which its pictures are correct. A decoder that starts at such a
    /// keyframe does not show the pictures below that count, up to the next IRAP.
    public var pictureOrder: Int?
    public var shownFromPictureOrder: Int?

    public init(
        codec: VideoCodec, nalUnits: [AnnexBUnit], parameterSets: [ParameterSetUnit], sequence: SequenceFacts,
        isKeyframe: Bool, isIntra: Bool, isLeading: Bool = false, recoveryDistance: Int = 0
    ) {
        self.codec = codec
        self.nalUnits = nalUnits
        self.parameterSets = parameterSets
        self.sequence = sequence
        self.isKeyframe = isKeyframe
        self.isIntra = isIntra
        self.isLeading = isLeading
        self.recoveryDistance = recoveryDistance
    }
}

extension CodedAccessUnit {
    /// Appends the access unit in Annex B to `output` (a buffer a caller reuses), preceded by the
    /// parameter sets a decoder needs in front of it: every set its picture uses up to the last
    /// one that it neither carries itself nor `decoderHas`. A set before that one in decoding
    /// order (VPS, SPS, PPS) goes in front even when the decoder has it or the access unit
    /// carries it: libavcodec refuses a PPS whose SPS it does not have yet (an SPS whose VPS),
    /// so a PPS sent alone in front of an access unit that carries its SPS would be lost, with
    /// every picture after it. A decoder given a set it already has takes it again unchanged.
    public func appendAnnexB(to output: inout [UInt8], parameterSetsUnless decoderHas: (ParameterSetUnit) -> Bool) {
        if let last = parameterSets.lastIndex(where: { !$0.carriedByAccessUnit && !decoderHas($0) }) {
            parameterSets[...last].appendAnnexB(to: &output)
        }
        nalUnits.appendAnnexB(to: &output)
    }
}

/// The facts of one sequence parameter set that decide how its pictures are decoded: their
/// format, and what a decoder holds for them.
public struct SequenceFacts: Sendable, Equatable {
    /// The SPS id: facts are judged once per SPS (size limit, memory budget, hardware).
    public var id: Int
    public var format: StreamFormat
    /// Pictures the decoded picture buffer holds for references and reordering, at most 16.
    public var bufferedPictures: Int
    /// A decoder knows the stream's reorder delay from this SPS alone (the ffmpeg CLI's reorder
    /// probe has nothing to learn).
    public var reorderDelayAnnounced: Bool
    /// Lossless coding is possible (H.264 qpprime_y_zero_transform_bypass, H.265
    /// transquant_bypass): some hardware refuses it.
    public var lossless: Bool
    /// Pictures that may come before another in output order while following it in decoding
    /// order (H.264 max_num_reorder_frames, H.265 sps_max_num_reorder_pics): how many access
    /// units a decoder holds a picture back; `bufferedPictures` when the SPS does not say.
    public var reorderedPictures: Int

    public init(
        id: Int, format: StreamFormat, bufferedPictures: Int, reorderDelayAnnounced: Bool, lossless: Bool,
        reorderedPictures: Int? = nil
    ) {
        self.id = id
        self.format = format
        self.bufferedPictures = min(16, max(1, bufferedPictures))
        self.reorderDelayAnnounced = reorderDelayAnnounced
        self.lossless = lossless
        self.reorderedPictures = min(self.bufferedPictures, max(0, reorderedPictures ?? self.bufferedPictures))
    }
}

/// A parameter set unit (VPS, SPS, PPS) a picture uses, as a decoder is given it.
public struct ParameterSetUnit: Sendable, NALUnitBytes {
    public var key: ParameterSetKey
    /// The NAL unit, without a start code.
    public var bytes: SlabBytes
    /// The picture's access unit holds this unit itself, so it needs no copy in front.
    public var carriedByAccessUnit: Bool

    public init(key: ParameterSetKey, bytes: SlabBytes, carriedByAccessUnit: Bool) {
        self.key = key
        self.bytes = bytes
        self.carriedByAccessUnit = carriedByAccessUnit
    }

    public init(key: ParameterSetKey, bytes: [UInt8], carriedByAccessUnit: Bool) {
        self.init(key: key, bytes: SlabBytes(bytes), carriedByAccessUnit: carriedByAccessUnit)
    }

    public func detached() -> ParameterSetUnit {
        ParameterSetUnit(key: key, bytes: bytes.detached(), carriedByAccessUnit: carriedByAccessUnit)
    }
}

/// Which parameter set a unit is: its kind and its id.
public struct ParameterSetKey: Hashable, Sendable {
    public enum Kind: Sendable, Hashable { case vps, sps, pps }
    public var kind: Kind
    public var id: Int

    public init(_ kind: Kind, _ id: Int) {
        self.kind = kind
        self.id = id
    }
}

/// What an access-unit reader says about the stream as it reads it.
public enum ReaderEvent: Sendable {
    /// A picture to decode, in decoding order.
    case accessUnit(CodedAccessUnit)
    /// Pictures that cannot be decoded where the stream was joined: before its first random
    /// access point, or without their parameter sets. libavcodec would not output them either.
    case droppedBeforeKeyframe(count: Int)
    /// Leading pictures (H.265 RASL) of the random access point decoding started at: they
    /// refer to pictures before it.
    case skippedLeading(count: Int)
    /// Pictures skipped because keyframes-only mode decodes intra pictures only.
    case skippedNotKeyframe(count: Int)
    /// Units of layers above the base layer (H.265 nuh_layer_id > 0), left out.
    case outsideBaseLayer(count: Int)
    /// A parameter set that cannot be read (malformed, or out of the ranges the standard
    /// allows: a bit depth past 16, chroma_format_idc 4, a size past 65536...): the pictures
    /// that would use it cannot be decoded, and the one known before stays.
    case unreadableParameterSet(BitstreamError)
}

/// A codec's reading of an elementary stream: NAL units in (as the Annex B splitter cuts them),
/// access units out, each judged at the random-access gate (nothing is decoded before a point
/// decoding can start from) and given the parameter sets its picture uses.
///
/// Like the splitter, a reader emits an access unit when the first unit of the next one
/// arrives; `nextUnitEndsAccessUnit(prefix:)` and `endAccessUnit` let its caller end one as
/// soon as the next unit's first bytes settle it.
public protocol AccessUnitReader: Sendable {
    var codec: VideoCodec { get }
    /// Decode only intra pictures (each drained at once by the caller).
    var keyframesOnly: Bool { get set }
    /// At least one picture's parameter sets are known.
    var hasParameterSets: Bool { get }
    /// Access units assembled so far, with or without a picture, decodable or not.
    var accessUnitsAssembled: Int { get }

    /// Takes the next NAL unit and reports what it completes (the access units that end before it).
    mutating func push(_ unit: AnnexBUnit, _ report: (ReaderEvent) -> Void)
    /// The splitter dropped a unit too large to hold; `prefix` is its first bytes.
    mutating func unitDropped(prefix: ArraySlice<UInt8>, _ report: (ReaderEvent) -> Void)
    /// Whether a unit starting with `prefix` ends the access unit under way.
    func nextUnitEndsAccessUnit(prefix: ArraySlice<UInt8>) -> Bool
    /// Ends the access unit under way now (see `nextUnitEndsAccessUnit`).
    mutating func endAccessUnit(_ report: (ReaderEvent) -> Void)
    /// The input broke off: drops the access unit under way (its rest will never come; the
    /// input resumes at its start); parameter sets stay known.
    mutating func abandonAccessUnit()
    /// End of stream: the last access unit, then a fresh start at the next random access point
    /// (parameter sets stay known).
    mutating func finish(_ report: (ReaderEvent) -> Void)
    /// The stable snake_case name of a unit's NAL type (a JSON key in counters).
    func typeName(of unit: AnnexBUnit) -> String
}

/// Runs one step of a codec's access unit assembler and returns the access units that step
/// ended. A reader handles them only after the step: handling one mutates the reader, which
/// holds the assembler that is still inside its own mutating call while it emits.
@inlinable
public func accessUnitsEnded<Assembler, Unit>(
    by step: (inout Assembler, (Unit) -> Void) -> Void, in assembler: inout Assembler
) -> [Unit] {
    var units: [Unit] = []
    step(&assembler) { units.append($0) }
    return units
}

/// With the ffmpeg CLI's stream probe emulated: pictures held until the stream's first
/// parameter sets arrive, as the CLI's probe finds them before its decoder starts (it hands them
/// to the decoder as extradata, so pictures before them in the stream still decode). At most
/// 5 MB are held, the CLI probe's own limit. Inactive, it passes every unit straight on.
public struct ParameterSetWait<Unit: Sendable & SlabDetachable>: Sendable {
    private let active: Bool
    private var waiting: Bool
    private var held: [Unit] = []
    private var heldBytes = 0
    public static var maxHeldBytes: Int { 5_000_000 }

    public init(active: Bool) {
        self.active = active
        waiting = active
    }

    /// The units to go on with now, in stream order: none while waiting (`unit` is held).
    public mutating func pass(_ unit: Unit, bytes: Int, haveParameterSets: Bool) -> [Unit] {
        guard waiting else { return [unit] }
        // Held where no history counts its slabs: its bytes are copied out of them.
        held.append(unit.detached())
        heldBytes += bytes
        guard haveParameterSets || heldBytes >= Self.maxHeldBytes else { return [] }
        return release()
    }

    /// Ends the wait: the held units are judged with the sets known now, which is what the
    /// CLI's decoder sees when the probe passed them as extradata.
    public mutating func release() -> [Unit] {
        waiting = false
        defer {
            held = []
            heldBytes = 0
        }
        return held
    }

    /// A new stream waits again (each drain restarts the CLI's probe).
    public mutating func restart() {
        waiting = active
    }
}
