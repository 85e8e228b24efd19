import FoundationEssentials
import H264
import VideoCoding

/// Bytes in, pictures out, read top to bottom like FFmpeg's doc/examples decode loops:
///
/// 1. split: `AnnexBSplitter` cuts NAL units out of bytes in any chunking;
/// 2. assemble: `AccessUnitAssembler` groups them into access units and tracks the parameter sets;
/// 3. check: each new SPS against the picture-size limit, before any picture using it is sent;
/// 4. wait: with `DecoderOptions.emulateFFmpegProbe`, for the first SPS and PPS (`ParameterSetWait`);
/// 5. gate: nothing before the first point decoding can start from (`RandomAccessGate`), and in
///    keyframes-only mode nothing but intra pictures;
/// 6. decode: `BackendSupervisor`, which owns the decoder, its back end and every fallback.
///
/// Each complete access unit is sent to libavcodec as one packet, so a picture comes out as
/// soon as the first NAL unit after it arrives. The access units are cut as libavcodec's parser
/// cuts them (checked on every conformance stream and fixture), so with
/// `DecoderOptions.emulateFFmpegProbe` the pictures equal the ffmpeg CLI's for the same bytes
/// (for damaged streams: with the same thread count; libavcodec conceals errors differently
/// with frame threading). Without it (live), the only difference measured is that pictures
/// before the stream's first in-band SPS/PPS cannot be decoded, where the CLI's probe looks
/// ahead for them.
///
/// Not thread-safe: owned by one worker, like the decoder inside it.
public final class StreamDecoder {
    public struct Counters: Sendable, Equatable {
        /// Bytes pushed.
        public var bytes = 0
        /// NAL units by `NALUnitType.name`.
        public var nalUnits: [String: Int] = [:]
        public var accessUnits = 0
        public var framesDecoded = 0
        /// Pictures not decoded because their SPS/PPS were unknown, or because they came before
        /// the first start point (IDR, recovery point or I picture) and an IDR made them
        /// irrelevant. libavcodec would not have output any of them.
        public var framesDroppedBeforeKeyframe = 0
        /// Pictures not decoded because their SPS exceeds the size limit or the memory budget.
        public var framesRejectedTooLarge = 0
        /// Pictures skipped in keyframes-only mode.
        public var framesSkippedNotKeyframe = 0
        /// Errors of every kind: libavcodec failures, oversized NAL units and pictures.
        public var decodeErrors = 0

        public init() {}

        /// Sums two decoders' counts (a session that replaced its decoder reports both).
        public mutating func add(_ other: Counters) {
            bytes += other.bytes
            for (name, count) in other.nalUnits { nalUnits[name, default: 0] += count }
            accessUnits += other.accessUnits
            framesDecoded += other.framesDecoded
            framesDroppedBeforeKeyframe += other.framesDroppedBeforeKeyframe
            framesRejectedTooLarge += other.framesRejectedTooLarge
            framesSkippedNotKeyframe += other.framesSkippedNotKeyframe
            decodeErrors += other.decodeErrors
        }
    }

    public private(set) var counters = Counters()
    public private(set) var lastError: DecodeError?
    /// From the SPS of the last access unit passed to the decoder (or rejected as too large).
    public private(set) var format: StreamFormat?
    /// Decode only intra pictures (IDR or I), each drained at once so it comes out immediately
    /// (thumbnails, previews). Can be switched between pushes. Pair it with
    /// `DecoderOptions.lowLatency`: each drain would restart the CLI-probe emulation.
    public var keyframesOnly: Bool

    private var splitter: AnnexBSplitter
    /// Where the current stream began, for the end-of-stream check of unsplittable input.
    private var bytesAtStreamStart = 0
    private var unitsAtStreamStart = 0
    private var discardedBytesReported = 0
    private var assembler = AccessUnitAssembler()
    /// The assembler's parameter sets as of the access units being handled.
    private var parameterSets = ParameterSets()
    /// The SPSs already checked against the size limit and the memory budget, by id, and
    /// whether each passed.
    private var checkedSPS: [Int: (sps: SequenceParameterSet, fits: Bool)] = [:]
    /// This stream's share of `DecoderOptions.memoryBudget`: the largest estimate of its SPSs.
    private var memory: DecoderMemoryReservation?
    /// SPSs refused for want of memory: unlike a size refusal that may change, so each is
    /// judged again when the stream sends it again.
    private var refusedForMemory: Set<Int> = []
    private var parameterSetWait: ParameterSetWait
    private var gate = RandomAccessGate()
    private let backends: BackendSupervisor
    private let options: DecoderOptions
    /// Where pictures go during a `push` or `finish` (set only for the call's duration).
    private var pictureHandler: ((DecodedFrame) -> Void)?

    /// `factory` makes the decoders (the first one now, a software one at a fallback); tests
    /// inject failing ones.
    public init(
        options: DecoderOptions = DecoderOptions(), maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes, keyframesOnly: Bool = false,
        factory: any PictureDecoderFactory = LibavDecoderFactory()
    ) throws(DecodeError) {
        guard maxNALBytes > 0 else { throw DecodeError(.invalidOptions, "maxNALBytes must be positive") }
        let options = try options.validated()
        backends = try BackendSupervisor(options: options, factory: factory)
        self.options = options
        splitter = AnnexBSplitter(maxNALBytes: maxNALBytes)
        self.keyframesOnly = keyframesOnly
        parameterSetWait = ParameterSetWait(active: options.emulateFFmpegProbe)
    }

    /// The back end decoding now, why, and on which device (nil in software).
    public var backend: DecoderBackend { backends.backend }
    public var backendReason: String { backends.backendReason }
    public var device: HardwareDeviceID? { backends.device }
    /// Every fallback of this stream, oldest first: at selection, and the switches to software.
    /// The session layer counts them by `reason`.
    public var fallbacks: [BackendFallback] { backends.fallbacks }

    /// Feeds the next bytes of the stream, in any chunking. Each picture goes to `onPicture` as
    /// soon as the decoder outputs it, in output order: a push that holds many pictures never
    /// keeps them all alive at once (libavcodec's frame pool grows to as many pictures as are
    /// alive together, and keeps that memory until the decoder closes). Returns the push's errors.
    public func push(_ bytes: UnsafeRawBufferPointer, onPicture: (DecodedFrame) -> Void) -> [DecodeError] {
        handingOut(to: onPicture) { output in
            counters.bytes += bytes.count
            // Events are collected first and handled after the call: handling them touches other
            // state of this object, which must not happen while `splitter` is being mutated.
            var events: [SplitterEvent] = []
            splitter.push(bytes) { events.append($0) }
            for event in events { handle(event, into: &output) }
            endAccessUnitEarly(into: &output)
        }
    }

    /// End of stream: decodes what is still buffered, hands out every remaining picture, and
    /// gets ready for a new stream (which must start at a random access point again).
    /// Parameter sets stay known, as a following stream on the same session usually repeats them.
    public func finish(onPicture: (DecodedFrame) -> Void) -> [DecodeError] {
        handingOut(to: onPicture) { output in
            var events: [SplitterEvent] = []
            splitter.finish { events.append($0) }
            for event in events { handle(event, into: &output) }
            reportUnsplittableBytes(into: &output)
            var units: [AccessUnit] = []
            assembler.finish { units.append($0) }
            for unit in units { handle(unit, into: &output) }
            for unit in parameterSetWait.release() { pass(unit, into: &output) }
            // Never reached a start point: libavcodec would not have output them either.
            counters.framesDroppedBeforeKeyframe += gate.streamEnded()
            append(backends.drain(), to: &output)
            parameterSetWait = ParameterSetWait(active: options.emulateFFmpegProbe)
        }
    }

    /// The pictures of a push, collected (tests, tools, small inputs).
    public func push(_ bytes: [UInt8]) -> DecodeOutput {
        var output = DecodeOutput()
        output.errors = bytes.withUnsafeBytes { push($0) { output.frames.append($0) } }
        return output
    }

    public func push(_ bytes: UnsafeRawBufferPointer) -> DecodeOutput {
        var output = DecodeOutput()
        output.errors = push(bytes) { output.frames.append($0) }
        return output
    }

    public func finish() -> DecodeOutput {
        var output = DecodeOutput()
        output.errors = finish { output.frames.append($0) }
        return output
    }

    /// Runs `body` with pictures going to `onPicture` as they come (see `append`).
    private func handingOut(to onPicture: (DecodedFrame) -> Void, _ body: (inout DecodeOutput) -> Void) -> [DecodeError] {
        withoutActuallyEscaping(onPicture) { onPicture in
            pictureHandler = onPicture
            defer { pictureHandler = nil }
            var output = DecodeOutput()
            body(&output)
            return output.errors
        }
    }

    /// A client disconnected mid-upload: the NAL unit it was sending is cut short. Dropping it
    /// keeps the next upload's first start code from closing it as if it were whole. Decoded
    /// pictures, parameter sets and the access unit assembled so far stay.
    public func abandonIncompleteUnit() {
        splitter.abandonIncompleteUnit()
    }

    // MARK: - 1, 2: split and assemble

    private func handle(_ event: SplitterEvent, into output: inout DecodeOutput) {
        switch event {
        case .unit(let unit):
            let nal = NALUnit(unit)
            counters.nalUnits[nal.type.name, default: 0] += 1
            var units: [AccessUnit] = []
            assembler.push(nal) { units.append($0) }
            // The units emitted end before `nal`, so they are handled with the parameter sets
            // as they were before it (an SPS may replace one with the same id).
            for unit in units { handle(unit, into: &output) }
            if nal.type == .sps || nal.type == .pps {
                _ = try? parameterSets.update(with: nal)  // a malformed set is the assembler's to count
            }
            if nal.type == .sps {
                for id in refusedForMemory { checkedSPS[id] = nil }
                refusedForMemory = []
            }
        case .dropped(let error, let prefix):
            record(DecodeError(error), in: &output)
            var units: [AccessUnit] = []
            assembler.unitDropped(prefix: prefix) { units.append($0) }
            for unit in units { handle(unit, into: &output) }
        }
    }

    /// A picture's last NAL unit ends only where the next start code begins, and the access unit
    /// only where the next unit shows it belongs to another picture. When the first bytes of
    /// that next unit are already here and settle it, the picture goes to the decoder now
    /// rather than when the next unit is complete: for a camera sending one slice per picture,
    /// that is one picture interval sooner. The access units are the same either way.
    private func endAccessUnitEarly(into output: inout DecodeOutput) {
        guard let prefix = splitter.pendingUnitPrefix, assembler.nextUnitEndsAccessUnit(prefix: prefix) else { return }
        var units: [AccessUnit] = []
        assembler.endAccessUnit { units.append($0) }
        for unit in units { handle(unit, into: &output) }
    }

    // MARK: - 3, 4: check and wait

    private func handle(_ unit: AccessUnit, into output: inout DecodeOutput) {
        counters.accessUnits += 1
        checkNewParameterSets(into: &output)
        // A unit without a picture (parameter sets or SEI at the end of a stream) would only make
        // libavcodec report "no frame"; its parameter sets go out with the next picture instead.
        guard unit.hasPicture else { return }
        let haveParameterSets = !parameterSets.sps.isEmpty && !parameterSets.pps.isEmpty
        for unit in parameterSetWait.pass(unit, haveParameterSets: haveParameterSets) { pass(unit, into: &output) }
    }

    /// Checks every SPS that is new or changed against the size limit and the memory budget,
    /// before any picture using it reaches libavcodec.
    private func checkNewParameterSets(into output: inout DecodeOutput) {
        for (id, sps) in parameterSets.sps where checkedSPS[id]?.sps != sps {
            do throws(DecodeError) {
                try options.sizeLimit.check(width: sps.codedWidth, height: sps.codedHeight)
                try reserveMemory(for: sps)
                checkedSPS[id] = (sps, true)
            } catch {
                checkedSPS[id] = (sps, false)
                if error.code == .decoderMemoryExceeded { refusedForMemory.insert(id) }
                record(error, in: &output)
            }
        }
    }

    /// Grows this stream's reservation to what `sps` needs, when it needs more.
    private func reserveMemory(for sps: SequenceParameterSet) throws(DecodeError) {
        guard let budget = options.memoryBudget else { return }
        let estimate = DecoderMemoryEstimate(sps: sps, options: options, onHardware: backends.device != nil)
        guard estimate.bytes > memory?.bytes ?? 0 else { return }
        memory = try budget.reserve(estimate, replacing: memory)
    }

    // MARK: - 5: gate

    /// The size verdict, the random-access gate and keyframes-only mode, then the decoder.
    private func pass(_ unit: AccessUnit, into output: inout DecodeOutput) {
        let sps = unit.ppsId.flatMap { parameterSets.sps(forPPS: $0) }
        if let sps {
            format = StreamFormat(sps: sps)
            if checkedSPS[sps.id]?.fits == false {
                counters.framesRejectedTooLarge += 1
                return
            }
        }
        let opened = gate.pass(unit, decodable: sps != nil, keyframesOnly: keyframesOnly)
        counters.framesDroppedBeforeKeyframe += opened.dropped
        for earlier in opened.earlier { decode(earlier, into: &output) }
        guard opened.decodeThis else { return }
        if keyframesOnly {
            guard unit.isIDR || unit.primarySliceType == .i else {
                counters.framesSkippedNotKeyframe += 1
                return
            }
            decode(unit, into: &output)
            append(backends.drain(), to: &output)
        } else {
            decode(unit, into: &output)
        }
    }

    // MARK: - 6: decode

    private func decode(_ unit: AccessUnit, into output: inout DecodeOutput) {
        let sps = unit.ppsId.flatMap { parameterSets.sps(forPPS: $0) }
        if backends.isProbingReorderDelay, options.probeOnlyUnannouncedReordering, let sps, sps.announcesReorderDelay {
            // The SPS says how much the stream reorders: nothing left for the CLI's probe to learn.
            append(backends.endReorderProbe(), to: &output)
        }
        let decoded = backends.decode(
            unit.annexB(), parameterSets: parameterSetUnits(for: unit), sps: sps,
            isKeyframe: unit.isIDR || unit.isRandomAccessPoint)
        append(decoded, to: &output)
    }

    /// The SPS and PPS `unit` uses, for the decoder that has not been given them.
    private func parameterSetUnits(for unit: AccessUnit) -> [ParameterSetUnit] {
        guard let ppsId = unit.ppsId, let spsId = parameterSets.pps[ppsId]?.spsId,
            let spsUnit = parameterSets.spsUnits[spsId], let ppsUnit = parameterSets.ppsUnits[ppsId]
        else { return [] }
        return [
            ParameterSetUnit(
                key: ParameterSetKey(nalType: NALUnitType.sps.rawValue, id: spsId), bytes: spsUnit.bytes,
                carriedByAccessUnit: unit.nalUnits.contains { $0.type == .sps }),
            ParameterSetUnit(
                key: ParameterSetKey(nalType: NALUnitType.pps.rawValue, id: ppsId), bytes: ppsUnit.bytes,
                carriedByAccessUnit: unit.nalUnits.contains { $0.type == .pps }),
        ]
    }

    private func append(_ decoded: DecodeOutput, to output: inout DecodeOutput) {
        counters.framesDecoded += decoded.frames.count
        for frame in decoded.frames { pictureHandler?(frame) }
        for error in decoded.errors {
            record(error, in: &output)
        }
    }

    // MARK: - Errors

    /// At the end of a stream: bytes that were never part of a NAL unit are an error of the
    /// input (garbage before the first start code, or no start code at all), not silence.
    private func reportUnsplittableBytes(into output: inout DecodeOutput) {
        let discarded = splitter.discardedBytes - discardedBytesReported
        discardedBytesReported = splitter.discardedBytes
        let units = splitter.emittedUnits + splitter.droppedUnits
        defer { unitsAtStreamStart = units }
        if units == unitsAtStreamStart && counters.bytes > bytesAtStreamStart {
            let bytes = counters.bytes - bytesAtStreamStart
            bytesAtStreamStart = counters.bytes
            record(
                DecodeError(.invalidData, "not an H.264 Annex B stream: no start code in \(bytes) bytes"), in: &output)
        } else if discarded > 0 {
            record(DecodeError(.invalidData, "\(discarded) bytes that belong to no NAL unit were skipped"), in: &output)
        }
        bytesAtStreamStart = counters.bytes
    }

    private func record(_ error: DecodeError, in output: inout DecodeOutput) {
        counters.decodeErrors += 1
        lastError = error
        output.errors.append(error)
    }
}

/// The random-access gate: nothing is decoded before the stream reaches a point decoding can
/// start from.
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

    /// `decodable`: the unit's SPS and PPS are known.
    mutating func pass(_ unit: AccessUnit, decodable: Bool, keyframesOnly: Bool) -> Verdict {
        var verdict = Verdict()
        guard !started else {
            verdict.decodeThis = true
            return verdict
        }
        guard decodable else {
            verdict.dropped = 1
            return verdict
        }
        if unit.isIDR || keyframesOnly {
            verdict.dropped = waiting.count
        } else if unit.isRandomAccessPoint || unit.primarySliceType == .i {
            verdict.earlier = waiting
        } else {
            waiting.append(unit)
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

/// With `DecoderOptions.emulateFFmpegProbe`: picture units held until the stream's first SPS
/// and PPS arrive, as the CLI's probe finds them before its decoder starts (it hands them to
/// the decoder as extradata, so pictures before them in the stream still decode). At most
/// 5 MB are held, the CLI probe's own limit. Inactive, it passes every unit straight on.
struct ParameterSetWait {
    private var waiting: Bool
    private var held: [AccessUnit] = []
    private var heldBytes = 0
    static let maxHeldBytes = 5_000_000

    init(active: Bool) {
        waiting = active
    }

    /// The units to go on with now, in stream order: none while waiting (`unit` is held).
    mutating func pass(_ unit: AccessUnit, haveParameterSets: Bool) -> [AccessUnit] {
        guard waiting else { return [unit] }
        held.append(unit)
        heldBytes += unit.byteCount
        guard haveParameterSets || heldBytes >= Self.maxHeldBytes else { return [] }
        return release()
    }

    /// Ends the wait: the held units are judged with the sets known now, which is what the
    /// CLI's decoder sees when the probe passed them as extradata.
    mutating func release() -> [AccessUnit] {
        waiting = false
        defer {
            held = []
            heldBytes = 0
        }
        return held
    }
}
