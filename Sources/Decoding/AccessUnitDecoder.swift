import FoundationEssentials
import VideoCoding

/// The second half of `StreamDecoder`: access units in (from `AccessUnitIngest`, or from a
/// session's compressed history), numbered pictures out.
///
/// 4. check: each new sequence against the picture-size limit, the bit depths libavcodec decodes
///    and the memory budget, before
///    any picture of it is sent (the reservation is held for as long as this object lives);
/// 5. decode: `BackendSupervisor`, which owns the decoder, its back end and every fallback;
/// 6. number: each picture gets its `PictureNumbering` number, the same whichever keyframe
///    this decoder started at.
///
/// A session makes one for its live decoding, and on-demand sessions make one for each
/// catch-up and each picture from the past; each may start at any keyframe.
///
/// Not thread-safe: owned by one worker, like the decoder inside it.
public final class AccessUnitDecoder {
    /// A picture as it comes out, with its number (`PictureNumbering`).
    public typealias PictureHandler = (DecodedFrame, UInt64) -> Void

    /// The decoding counts: pictures decoded, rejected as too large, leading pictures not
    /// decoded, and the errors of decoding.
    public private(set) var counters = StreamDecoder.Counters()
    public private(set) var lastError: DecodeError?
    /// Decode only intra pictures, each drained at once so it comes out immediately.
    public var keyframesOnly: Bool

    /// The sequences already checked against the size limit and the memory budget, by SPS id,
    /// and whether each passed.
    private var checkedSequences: [Int: (sequence: SequenceFacts, fits: Bool)] = [:]
    /// This decoder's share of `DecoderOptions.memoryBudget`: the largest estimate of its sequences.
    private var memory: DecoderMemoryReservation?
    /// Sequences refused for want of memory: unlike a size refusal, that may change, so each is
    /// judged again when the stream sends its parameter sets again.
    private var refusedForMemory: Set<Int> = []
    /// The size of the last picture held back for passing the size limit (its error is
    /// recorded once per size).
    private var oversizeHeldBack: (width: Int, height: Int)?
    private let backends: BackendSupervisor
    private let options: DecoderOptions
    private var numbering = PictureNumbering()
    /// Access units whose pictures this decoder hides when they come out: those below the
    /// picture order count an H.265 recovery point it started at recovers from (H.264 flags its
    /// pictures itself), and that count, until an IRAP.
    private var hiddenUnits: Set<Int64> = []
    private var shownFromPictureOrder: Int?
    /// The last keyframe sent recovers gradually.
    private var inGradualGOP = false
    /// Where pictures go during a `decode` or `drain` (set only for the call's duration).
    private var pictureHandler: ((DecodedFrame, UInt64) -> Void)?

    /// `codec`: the stream's codec when known (the decoder then opens now, so a back end that
    /// does not open shows at once); nil to open it with the first access unit. `factory` makes
    /// the decoders; tests inject failing ones.
    public init(
        options: DecoderOptions = DecoderOptions(), keyframesOnly: Bool = false, codec: VideoCodec? = nil,
        factory: any PictureDecoderFactory = LibavDecoderFactory()
    ) throws(DecodeError) {
        let options = try options.validated()
        if let codec {
            backends = try BackendSupervisor(codec: codec, options: options, factory: factory)
        } else {
            backends = try BackendSupervisor(options: options, factory: factory)
        }
        self.options = options
        self.keyframesOnly = keyframesOnly
    }

    /// The back end decoding now, why, and on which device (nil in software).
    public var backend: DecoderBackend { backends.backend }
    public var backendReason: String { backends.backendReason }
    public var device: HardwareDeviceID? { backends.device }
    /// The stream's fallbacks so far, oldest first: at selection, and the switches to software.
    public var fallbacks: FallbackRecord { backends.fallbacks }

    /// This decoder takes over a stream whose earlier decoders recorded `earlier`.
    public func carryOver(_ earlier: FallbackRecord) {
        backends.carryOver(earlier)
    }
    /// The decoder memory this decoder holds (0 before its first sequence was admitted).
    public var reservedMemory: Int { memory?.bytes ?? 0 }
    /// The number the last picture out got (0 before the first).
    public var lastPictureNumber: UInt64 { numbering.lastNumber }

    /// Decodes one access unit; each picture that comes out goes to `onPicture` with its
    /// number, in output order. Returns the errors.
    public func decode(_ unit: IndexedAccessUnit, onPicture: (DecodedFrame, UInt64) -> Void) -> [DecodeError] {
        handingOut(to: onPicture) { errors in
            if unit.unit.parameterSets.contains(where: \.carriedByAccessUnit) { judgeMemoryRefusalsAgain() }
            guard admits(unit.unit.sequence, into: &errors) else {
                counters.framesRejectedTooLarge += 1
                return
            }
            guard numbering.admit(unit) else {
                counters.framesSkippedLeading += 1
                return
            }
            let announced = options.probeOnlyUnannouncedReordering && unit.unit.sequence.reorderDelayAnnounced
            if backends.isProbingReorderDelay, announced {
                // The SPS says how much the stream reorders: nothing left for the CLI's probe to learn.
                append(backends.endReorderProbe(), to: &errors)
            }
            let decodersBefore = backends.decodersMade
            let decoded = backends.decode(unit.unit, index: unit.index, pts: unit.pts)
            // Its picture may be among them: judged before they are handed out. A decoder that
            // took over at this unit (a switch, a move) started afresh here too.
            followRecovery(unit, startedHere: numbering.lastGOPStartedFresh || backends.decodersMade != decodersBefore)
            append(decoded, to: &errors)
            // The stream's first picture opened the decoder, whose probe took it: it comes out now,
            // not with the second picture.
            if backends.isProbingReorderDelay, announced { append(backends.endReorderProbe(), to: &errors) }
            // An intra picture comes out at once. A GOP that recovers gradually (which keyframes-only
            // reading passes on whole) is decoded as one run, its intra pictures included: no drain.
            if unit.unit.isKeyframe { inGradualGOP = unit.unit.recoversGradually }
            if keyframesOnly && unit.unit.isIntra && !inGradualGOP { drain(into: &errors) }
        }
    }

    /// End of stream: every picture still inside the decoder; the next access unit starts a
    /// fresh stream (at a keyframe).
    public func drain(onPicture: (DecodedFrame, UInt64) -> Void) -> [DecodeError] {
        handingOut(to: onPicture) { errors in drain(into: &errors) }
    }

    private func drain(into errors: inout [DecodeError]) {
        append(backends.drain(), to: &errors)
        numbering.streamEnded()
        hiddenUnits = []
        shownFromPictureOrder = nil
    }

    /// H.265 recovery points (H.264's decoder judges recovery itself): from a keyframe that
    /// recovers gradually, which the decoder `startedHere`, the pictures below the count it
    /// recovers from are hidden, until a keyframe that needs no recovery.
    private func followRecovery(_ unit: IndexedAccessUnit, startedHere: Bool) {
        if unit.unit.isKeyframe && !unit.unit.recoversGradually {
            shownFromPictureOrder = nil
        } else if unit.unit.isKeyframe && startedHere {
            shownFromPictureOrder = unit.unit.shownFromPictureOrder
        }
        if let shownFrom = shownFromPictureOrder, let order = unit.unit.pictureOrder, order < shownFrom { hide(unit.index) }
    }

    /// Marks a unit whose picture is not to be shown. Bounded: a unit libavcodec never outputs
    /// a picture for (a damaged one) would otherwise stay marked until the next drain.
    private func hide(_ index: Int64) {
        if hiddenUnits.count >= 256, let oldest = hiddenUnits.min() { hiddenUnits.remove(oldest) }
        hiddenUnits.insert(index)
    }

    private func handingOut(
        to onPicture: (DecodedFrame, UInt64) -> Void, _ body: (inout [DecodeError]) -> Void
    ) -> [DecodeError] {
        withoutActuallyEscaping(onPicture) { onPicture in
            pictureHandler = onPicture
            defer { pictureHandler = nil }
            var errors: [DecodeError] = []
            body(&errors)
            return errors
        }
    }

    // MARK: - 4: check

    /// Whether pictures of `sequence` may be decoded: checked once per new or changed sequence
    /// against the size limit, what libavcodec decodes (bit depths) and the memory budget,
    /// before any of its pictures reaches libavcodec; each refusal is an error once.
    private func admits(_ sequence: SequenceFacts, into errors: inout [DecodeError]) -> Bool {
        if let checked = checkedSequences[sequence.id], checked.sequence == sequence { return checked.fits }
        do throws(DecodeError) {
            try options.sizeLimit.check(width: sequence.format.codedWidth, height: sequence.format.codedHeight)
            try sequence.format.checkDecodable()
            try reserveMemory(for: sequence)
            checkedSequences[sequence.id] = (sequence, true)
            return true
        } catch {
            checkedSequences[sequence.id] = (sequence, false)
            if error.code == .decoderMemoryExceeded { refusedForMemory.insert(sequence.id) }
            record(error, in: &errors)
            return false
        }
    }

    /// Grows this decoder's reservation to what `sequence` needs, when it needs more.
    private func reserveMemory(for sequence: SequenceFacts) throws(DecodeError) {
        guard let budget = options.memoryBudget else { return }
        let estimate = DecoderMemoryEstimate(sequence: sequence, options: options, onHardware: backends.device != nil)
        guard estimate.bytes > memory?.bytes ?? 0 else { return }
        memory = try budget.reserve(estimate, replacing: memory)
    }

    /// Parameter sets arrived again: sequences refused for memory are judged again.
    private func judgeMemoryRefusalsAgain() {
        for id in refusedForMemory { checkedSequences[id] = nil }
        refusedForMemory = []
    }

    // MARK: - 5, 6: decode, number

    private func append(_ decoded: DecodeOutput, to errors: inout [DecodeError]) {
        for frame in decoded.frames {
            let number = numbering.number(frame)
            // Numbered, so the pictures after it keep their numbers, but never shown: what it
            // shows is not yet the stream's picture.
            let hidden = frame.accessUnitIndex.map { hiddenUnits.remove($0) != nil } ?? false
            if frame.precedesRecovery || hidden {
                counters.framesDroppedBeforeKeyframe += 1
                continue
            }
            counters.framesDecoded += 1
            // The sequence was admitted from FrameTap's reading of its SPS, but libavcodec reads
            // the parameter sets itself: one FrameTap could not read (and so never checked) can
            // give it another size. A picture past the limit is never handed on.
            do throws(DecodeError) {
                try options.sizeLimit.check(width: frame.width, height: frame.height)
            } catch {
                if oversizeHeldBack?.width != frame.width || oversizeHeldBack?.height != frame.height {
                    oversizeHeldBack = (frame.width, frame.height)
                    record(error, in: &errors)
                }
                continue
            }
            pictureHandler?(frame, number)
        }
        for error in decoded.errors {
            record(error, in: &errors)
        }
    }

    private func record(_ error: DecodeError, in errors: inout [DecodeError]) {
        counters.decodeErrors += 1
        lastError = error
        errors.append(error)
    }
}
