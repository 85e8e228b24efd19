import Bitstream
import FoundationEssentials
import VideoCoding

/// Bytes in, pictures out, read top to bottom like FFmpeg's doc/examples decode loops:
///
/// 1. split: `AnnexBSplitter` cuts NAL units out of bytes in any chunking;
/// 2. which codec: stated, or detected from the stream's first parameter set (`CodecDetector`);
///    a parameter set of another codec in a stream whose codec is known is `codec_mismatch`;
/// 3. read: the codec's `AccessUnitReader` assembles access units, tracks the parameter sets
///    and judges each at the random-access gate (nothing before a point decoding can start
///    from; H.265 RASL pictures of that point skipped; keyframes-only mode);
/// 4. check: each new sequence against the picture-size limit, the bit depths libavcodec decodes
///    and the memory budget, before any picture of it is sent;
/// 5. decode: `BackendSupervisor`, which owns the decoder, its back end and every fallback.
///
/// Each complete access unit is sent to libavcodec as one packet, so a picture comes out as
/// soon as the first NAL unit after it arrives. The access units are cut as libavcodec's parser
/// cuts them (checked on every conformance stream and fixture), so with
/// `DecoderOptions.emulateFFmpegProbe` the pictures equal the ffmpeg CLI's for the same bytes
/// (for damaged streams: with the same thread count; libavcodec conceals errors differently
/// with frame threading). Without it (live), the differences measured are that pictures
/// before the stream's first in-band parameter sets cannot be decoded, where the CLI's probe
/// looks ahead for them, and that H.265 pictures before the first IRAP are dropped, where
/// libavcodec decodes them against reference pictures it makes up (see H265's reader).
///
/// Not thread-safe: owned by one worker, like the decoder inside it.
public final class StreamDecoder {
    public struct Counters: Sendable, Equatable {
        /// Bytes pushed.
        public var bytes = 0
        /// NAL units by their codec's type name (`unrecognized` while no codec is known).
        public var nalUnits: [String: Int] = [:]
        public var accessUnits = 0
        public var framesDecoded = 0
        /// Pictures not decoded because their parameter sets were unknown, or because they came
        /// before the first point decoding could start from. libavcodec would not have output
        /// any of them.
        public var framesDroppedBeforeKeyframe = 0
        /// Leading pictures (H.265 RASL) of the random access point decoding started at: they
        /// refer to pictures before it.
        public var framesSkippedLeading = 0
        /// Pictures not decoded because their SPS exceeds the size limit or the memory budget, or
        /// has a bit depth libavcodec does not decode.
        public var framesRejectedTooLarge = 0
        /// Pictures skipped in keyframes-only mode.
        public var framesSkippedNotKeyframe = 0
        /// NAL units of layers above the base layer (H.265 nuh_layer_id > 0), left out.
        public var unitsOutsideBaseLayer = 0
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
            framesSkippedLeading += other.framesSkippedLeading
            framesRejectedTooLarge += other.framesRejectedTooLarge
            framesSkippedNotKeyframe += other.framesSkippedNotKeyframe
            unitsOutsideBaseLayer += other.unitsOutsideBaseLayer
            decodeErrors += other.decodeErrors
        }
    }

    public private(set) var counters = Counters()
    public private(set) var lastError: DecodeError?
    /// From the sequence of the last access unit passed to the decoder (or rejected as too large).
    public private(set) var format: StreamFormat?
    /// Decode only intra pictures (IDR/IRAP or I), each drained at once so it comes out
    /// immediately (thumbnails, previews). Can be switched between pushes. Pair it with
    /// `DecoderOptions.lowLatency`: each drain would restart the CLI-probe emulation.
    public var keyframesOnly: Bool {
        didSet { reader?.keyframesOnly = keyframesOnly }
    }
    /// The codec being read: stated by the caller, or detected from the stream's first
    /// parameter set; nil until then.
    public private(set) var codec: VideoCodec?
    /// The caller said which codec the stream is: a parameter set of another is a mismatch.
    public let codecIsStated: Bool

    /// Units held while no codec is known (at most `maxUndetectedBytes`).
    static let maxUndetectedBytes = 8 << 20

    private var splitter: AnnexBSplitter
    /// Where the current stream began, for the end-of-stream check of unsplittable input.
    private var bytesAtStreamStart = 0
    private var unitsAtStreamStart = 0
    private var discardedBytesReported = 0
    private var reader: (any AccessUnitReader)?
    private var accessUnitsReported = 0
    /// Units waiting for the codec to be known, and their bytes.
    private var undetected: [AnnexBUnit] = []
    private var undetectedBytes = 0
    private var unknownCodecReported = false
    /// What the current push says it carries (`beginPush(saying:)`); nil when it says nothing.
    private var pushCodec: VideoCodec?
    /// The current stream had a picture decoded: a detected codec no longer changes in it.
    private var streamHasPictures = false
    /// After a codec mismatch, the rest of the push is refused (until `abandonIncompleteUnit`
    /// or `finish`), so none of it reaches the decoder.
    private var refusingPush = false
    /// The sequences already checked against the size limit and the memory budget, by SPS id,
    /// and whether each passed.
    private var checkedSequences: [Int: (sequence: SequenceFacts, fits: Bool)] = [:]
    /// This stream's share of `DecoderOptions.memoryBudget`: the largest estimate of its sequences.
    private var memory: DecoderMemoryReservation?
    /// Sequences refused for want of memory: unlike a size refusal, that may change, so each is
    /// judged again when the stream sends its parameter sets again.
    private var refusedForMemory: Set<Int> = []
    private let backends: BackendSupervisor
    private let options: DecoderOptions
    /// Where pictures go during a `push` or `finish` (set only for the call's duration).
    private var pictureHandler: ((DecodedFrame) -> Void)?
    /// The sample description of a container's samples being pushed, and its converter.
    private var samples: SampleConverter?
    /// A description whose configuration could not be read (reported once; its samples are left out).
    private var unreadableDescription: SampleDescription?

    /// `codec`: the stream's codec when the caller knows it (the decoder then opens now);
    /// nil to detect it from the stream. `factory` makes the decoders; tests inject failing ones.
    public init(
        options: DecoderOptions = DecoderOptions(), maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes, keyframesOnly: Bool = false,
        codec: VideoCodec? = nil, factory: any PictureDecoderFactory = LibavDecoderFactory()
    ) throws(DecodeError) {
        guard maxNALBytes > 0 else { throw DecodeError(.invalidOptions, "maxNALBytes must be positive") }
        let options = try options.validated()
        if let codec {
            backends = try BackendSupervisor(codec: codec, options: options, factory: factory)
        } else {
            backends = try BackendSupervisor(options: options, factory: factory)
        }
        self.options = options
        splitter = AnnexBSplitter(maxNALBytes: maxNALBytes)
        self.keyframesOnly = keyframesOnly
        codecIsStated = codec != nil
        if let codec { read(codec) }
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

    /// Feeds one sample of a container's video track (`push(sample:)` of a demuxer's output). Its
    /// NAL units go to the codec's reader as the splitter's would, after the parameter sets of
    /// its description whenever the description is new. A sample that is a whole access unit
    /// ends it: its picture goes to the decoder now, not when the next sample starts (for a
    /// camera, one picture interval sooner). Samples that are pieces of an Annex B stream (RTP)
    /// go through the splitter like pushed bytes. Returns the errors: a sample whose units
    /// cannot be read (a length running past its end) is left out and counted as `invalid_data`.
    public func push(
        sample: UnsafeRawBufferPointer, described description: SampleDescription, onPicture: (DecodedFrame) -> Void
    ) -> [DecodeError] {
        handingOut(to: onPicture) { output in
            if samples?.description != description && unreadableDescription != description {
                adopt(description, into: &output)
            }
            guard description.samplesAreAccessUnits else {
                counters.bytes += sample.count
                var events: [SplitterEvent] = []
                splitter.push(sample) { events.append($0) }
                for event in events { handle(event, into: &output) }
                endAccessUnitEarly(into: &output)
                return
            }
            // A unit an Annex B push left open ends where this sample begins.
            completeSplitterUnit(into: &output)
            let offset = counters.bytes
            counters.bytes += sample.count
            // Not bytes without a start code: the end-of-stream check of unsplittable input skips them.
            bytesAtStreamStart += sample.count
            guard let converter = samples else { return }
            let units: [AnnexBUnit]
            do throws(BitstreamError) {
                units = try converter.units(of: sample, streamOffset: offset)
            } catch {
                record(DecodeError(error), in: &output)
                return
            }
            for unit in units { handle(unit, into: &output) }
            guard !refusingPush, var reader else { return }
            self.reader = nil
            reader.endAccessUnit { report($0, into: &output) }
            self.reader = reader
        }
    }

    /// A new sample description: its codec is what follows (unless a codec is known already,
    /// which its parameter sets must then match), and its parameter sets go to the reader.
    private func adopt(_ description: SampleDescription, into output: inout DecodeOutput) {
        do throws(BitstreamError) {
            let converter = try SampleConverter(description, maxNALBytes: splitter.maxNALBytes)
            samples = converter
            unreadableDescription = nil
            pushCodec = description.codec
            completeSplitterUnit(into: &output)
            for unit in converter.parameterSets { handle(unit, into: &output) }
        } catch {
            samples = nil
            unreadableDescription = description
            record(
                DecodeError(
                    error.code == .invalidArgument ? .invalidData : DecodeError.Code(error.code),
                    "the \(description.codec.displayName) track's configuration cannot be read: \(error.message)"),
                in: &output)
        }
    }

    /// Emits the unit the splitter holds (its end would otherwise come with the next start code).
    private func completeSplitterUnit(into output: inout DecodeOutput) {
        guard splitter.pendingUnitPrefix != nil else { return }
        var events: [SplitterEvent] = []
        splitter.finish { events.append($0) }
        for event in events { handle(event, into: &output) }
    }

    /// End of stream: decodes what is still buffered, hands out every remaining picture, and
    /// gets ready for a new stream (which must start at a random access point again; with a
    /// detected codec, it may be another codec). Parameter sets stay known, as a following
    /// stream on the same session usually repeats them.
    public func finish(onPicture: (DecodedFrame) -> Void) -> [DecodeError] {
        handingOut(to: onPicture) { output in
            var events: [SplitterEvent] = []
            splitter.finish { events.append($0) }
            for event in events { handle(event, into: &output) }
            reportUnsplittableBytes(into: &output)
            reader?.finish { report($0, into: &output) }
            reportUnknownCodec(into: &output)
            append(backends.drain(), to: &output)
            countAccessUnits()
            streamHasPictures = false
            refusingPush = false
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

    /// A push begins; `codec` is what it says it carries (its `?codec=` or Content-Type), nil
    /// when it says nothing. While the stream's codec is unknown, the push is read as that codec;
    /// a parameter set of another codec in it contradicts the push itself and is
    /// `codec_mismatch`, like one that contradicts the stream's codec.
    public func beginPush(saying codec: VideoCodec?) {
        pushCodec = codec
    }

    /// A push broke off or was refused: the NAL unit it was sending is cut short. Dropping it
    /// keeps the next push's first start code from closing it as if it were whole. Decoded
    /// pictures, parameter sets and the access unit assembled so far stay.
    public func abandonIncompleteUnit() {
        splitter.abandonIncompleteUnit()
        // A push refused for its codec was dropped on purpose, its cut last unit with it: that
        // is no damage for the end of the stream to report (the refusal was the push's answer).
        if refusingPush { discardedBytesReported = splitter.discardedBytes }
        refusingPush = false
    }

    /// Runs `body` with pictures going to `onPicture` as they come (see `append`).
    private func handingOut(to onPicture: (DecodedFrame) -> Void, _ body: (inout DecodeOutput) -> Void) -> [DecodeError] {
        withoutActuallyEscaping(onPicture) { onPicture in
            pictureHandler = onPicture
            defer { pictureHandler = nil }
            var output = DecodeOutput()
            body(&output)
            countAccessUnits()
            return output.errors
        }
    }

    // MARK: - 1, 2: split, and which codec

    private func handle(_ event: SplitterEvent, into output: inout DecodeOutput) {
        switch event {
        case .unit(let unit):
            handle(unit, into: &output)
        case .dropped(let error, let prefix):
            record(DecodeError(error), in: &output)
            reader?.unitDropped(prefix: prefix) { report($0, into: &output) }
        }
    }

    private func handle(_ unit: AnnexBUnit, into output: inout DecodeOutput) {
        guard !refusingPush else { return }
        let parameterSetCodec = CodecDetector.codec(ofParameterSet: unit)
        if let said = pushCodec, let other = parameterSetCodec, other != said {
            refusingPush = true
            record(
                DecodeError(
                    .codecMismatch,
                    "this push says it is \(said.displayName) (its codec parameter or Content-Type) but carries "
                        + "\(other.displayName) parameter sets; nothing of it was decoded"),
                in: &output)
            return
        }
        guard let codec else {
            guard let detected = parameterSetCodec ?? pushCodec else {
                holdUndetected(unit, into: &output)
                return
            }
            read(detected)
            let held = undetected
            undetected = []
            undetectedBytes = 0
            for unit in held { read(unit, into: &output) }
            read(unit, into: &output)
            return
        }
        if let other = parameterSetCodec, other != codec {
            guard codecIsStated || streamHasPictures else {
                // A new stream of another codec, before any picture of it: read it as that.
                read(other)
                read(unit, into: &output)
                return
            }
            refusingPush = true
            let why = codecIsStated ? "stated" : "detected"
            record(
                DecodeError(
                    .codecMismatch,
                    "this push carries \(other.displayName) parameter sets, but the session's stream is "
                        + "\(codec.displayName) (\(why)); nothing of it was decoded"),
                in: &output)
            return
        }
        if parameterSetCodec != nil { judgeMemoryRefusalsAgain() }
        read(unit, into: &output)
    }

    /// Starts reading the stream as `codec`.
    private func read(_ codec: VideoCodec) {
        countAccessUnits()
        self.codec = codec
        var reader = Codecs.reader(for: codec, emulateFFmpegProbe: options.emulateFFmpegProbe)
        reader.keyframesOnly = keyframesOnly
        self.reader = reader
        accessUnitsReported = 0
    }

    private func read(_ unit: AnnexBUnit, into output: inout DecodeOutput) {
        guard var reader else { return }
        counters.nalUnits[reader.typeName(of: unit), default: 0] += 1
        self.reader = nil  // the reader's events touch this object's state while it reads
        reader.push(unit) { report($0, into: &output) }
        self.reader = reader
    }

    /// Holds a unit until a parameter set tells the codec; past the bound the oldest go.
    private func holdUndetected(_ unit: AnnexBUnit, into output: inout DecodeOutput) {
        undetected.append(unit)
        undetectedBytes += unit.bytes.count
        while undetectedBytes > Self.maxUndetectedBytes, let oldest = undetected.first {
            undetected.removeFirst()
            undetectedBytes -= oldest.bytes.count
            counters.nalUnits["unrecognized", default: 0] += 1
        }
        if undetectedBytes >= Self.maxUndetectedBytes { reportUnknownCodec(into: &output) }
    }

    /// No parameter set of either codec in what arrived: an error of the input, once per stream.
    private func reportUnknownCodec(into output: inout DecodeOutput) {
        guard codec == nil, !undetected.isEmpty || counters.nalUnits["unrecognized"] != nil else { return }
        counters.nalUnits["unrecognized", default: 0] += undetected.count
        let units = counters.nalUnits["unrecognized"] ?? 0
        undetected = []
        undetectedBytes = 0
        guard !unknownCodecReported else { return }
        unknownCodecReported = true
        record(
            DecodeError(
                .unknownCodec,
                "neither H.264 nor H.265: \(units) NAL units and no parameter set of either codec; nothing was decoded"),
            in: &output)
    }

    /// A picture's last NAL unit ends only where the next start code begins, and the access unit
    /// only where the next unit shows it belongs to another picture. When the first bytes of
    /// that next unit are already here and settle it, the picture goes to the decoder now
    /// rather than when the next unit is complete: for a camera sending one slice per picture,
    /// that is one picture interval sooner. The access units are the same either way.
    private func endAccessUnitEarly(into output: inout DecodeOutput) {
        guard !refusingPush, let prefix = splitter.pendingUnitPrefix, var reader,
            reader.nextUnitEndsAccessUnit(prefix: prefix)
        else { return }
        self.reader = nil
        reader.endAccessUnit { report($0, into: &output) }
        self.reader = reader
    }

    // MARK: - 3: what the reader says

    private func report(_ event: ReaderEvent, into output: inout DecodeOutput) {
        switch event {
        case .accessUnit(let unit):
            pass(unit, into: &output)
        case .droppedBeforeKeyframe(let count):
            counters.framesDroppedBeforeKeyframe += count
        case .skippedLeading(let count):
            counters.framesSkippedLeading += count
        case .skippedNotKeyframe(let count):
            counters.framesSkippedNotKeyframe += count
        case .outsideBaseLayer(let count):
            counters.unitsOutsideBaseLayer += count
        case .unreadableParameterSet(let error):
            record(DecodeError(error), in: &output)
        }
    }

    private func countAccessUnits() {
        guard let reader else { return }
        counters.accessUnits += reader.accessUnitsAssembled - accessUnitsReported
        accessUnitsReported = reader.accessUnitsAssembled
    }

    // MARK: - 4: check

    private func pass(_ unit: CodedAccessUnit, into output: inout DecodeOutput) {
        format = unit.sequence.format
        guard admits(unit.sequence, into: &output) else {
            counters.framesRejectedTooLarge += 1
            return
        }
        decode(unit, into: &output)
        if keyframesOnly { append(backends.drain(), to: &output) }
    }

    /// Whether pictures of `sequence` may be decoded: checked once per new or changed sequence
    /// against the size limit, what libavcodec decodes (bit depths) and the memory budget,
    /// before any of its pictures reaches libavcodec; each refusal is an error once.
    private func admits(_ sequence: SequenceFacts, into output: inout DecodeOutput) -> Bool {
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
            record(error, in: &output)
            return false
        }
    }

    /// Grows this stream's reservation to what `sequence` needs, when it needs more.
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

    // MARK: - 5: decode

    private func decode(_ unit: CodedAccessUnit, into output: inout DecodeOutput) {
        streamHasPictures = true
        let announced = options.probeOnlyUnannouncedReordering && unit.sequence.reorderDelayAnnounced
        if backends.isProbingReorderDelay, announced {
            // The SPS says how much the stream reorders: nothing left for the CLI's probe to learn.
            append(backends.endReorderProbe(), to: &output)
        }
        append(backends.decode(unit), to: &output)
        // The stream's first picture opened the decoder, whose probe took it: it comes out now,
        // not with the second picture.
        if backends.isProbingReorderDelay, announced { append(backends.endReorderProbe(), to: &output) }
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
                DecodeError(.invalidData, "not an H.264 or H.265 Annex B stream: no start code in \(bytes) bytes"),
                in: &output)
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
