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
/// Steps 1-3 are `AccessUnitIngest`, steps 4-5 `AccessUnitDecoder` (which also numbers the
/// pictures, see `PictureNumbering`); this type joins the two, the one place they are joined:
/// for the CLI and tests, which decode every access unit as it arrives, and for a session,
/// which keeps each access unit in its history on the way (`onAccessUnit`) and may run without
/// a decoder (on demand) or feed one from its history (`decode(_:onPicture:)`). A picture that
/// libavcodec output with concealed damage (`DecodedFrame.hasDecodeErrors`) is handed on like
/// any other and counted as an error of its step, whoever decodes.
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
    /// A picture as it comes out, with its number (`PictureNumbering`).
    public typealias PictureHandler = (DecodedFrame, UInt64) -> Void

    public struct Counters: Sendable, Equatable {
        /// Bytes pushed.
        public var bytes = 0
        /// NAL units by their codec's type name (`unrecognized` while no codec is known).
        public var nalUnits: [String: Int] = [:]
        public var accessUnits = 0
        public var framesDecoded = 0
        /// Pictures not decoded because their parameter sets were unknown, or because they came
        /// before the first point decoding could start from, and pictures decoded but not shown
        /// because the stream had not yet recovered at that point (intra refresh). The
        /// ffmpeg CLI would not have output any of them.
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

    /// Counts of both halves: what was read (ingest) and what was decoded, by this stream's
    /// decoders (also those released) and the streams it took over from; the damaged pictures
    /// among the errors.
    public var counters: Counters {
        var total = ingest.counters
        total.add(earlier)
        if let decoder { total.add(decoder.counters) }
        total.decodeErrors += damagedPictures
        return total
    }
    public private(set) var lastError: DecodeError?
    /// The stream offset the next pushed byte will have (`AnnexBUnit.streamOffset`).
    public var nextStreamOffset: Int { ingest.nextStreamOffset }
    /// From the sequence of the last access unit passed to the decoder (or rejected as too large).
    public var format: StreamFormat? { ingest.format }
    /// Decode only intra pictures (IDR/IRAP or I), each drained at once so it comes out
    /// immediately (thumbnails, previews). Can be switched between pushes. Pair it with
    /// `DecoderOptions.lowLatency`: each drain would restart the CLI-probe emulation.
    public var keyframesOnly: Bool {
        get { ingest.keyframesOnly }
        set {
            ingest.keyframesOnly = newValue
            decoder?.keyframesOnly = newValue
        }
    }
    /// The codec being read: stated by the caller, or detected from the stream's first
    /// parameter set; nil until then.
    public var codec: VideoCodec? { ingest.codec }
    /// The caller said which codec the stream is: a parameter set of another is a mismatch.
    public var codecIsStated: Bool { ingest.codecIsStated }

    private let ingest: AccessUnitIngest
    /// The decoder; nil while none runs (a session on demand).
    public private(set) var decoder: AccessUnitDecoder?
    /// Access units go to the decoder as ingest hands them on (otherwise the caller feeds it).
    public private(set) var decodesLive: Bool
    /// The decoder joined the stream where it was: it gets nothing before a keyframe.
    private var waitsForKeyframe = false
    /// Bytes were pushed since the last `finish()`: a stream is under way.
    public private(set) var midStream = false
    /// Counts of decoders released, and of the streams this one took over from.
    private var earlier = Counters()
    /// The stream's fallback record while no decoder holds it.
    private var fallbacksWithoutDecoder = FallbackRecord()
    /// The last decoder's back end, shown while none runs.
    private var lastBackend: (backend: DecoderBackend, reason: String, device: HardwareDeviceID?)
    private var damagedPictures = 0

    /// `codec`: the stream's codec when the caller knows it (the decoder then opens now);
    /// nil to detect it from the stream. `factory` makes the decoders; tests inject failing ones.
    public convenience init(
        options: DecoderOptions = DecoderOptions(), maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes, keyframesOnly: Bool = false,
        codec: VideoCodec? = nil, factory: any PictureDecoderFactory = LibavDecoderFactory()
    ) throws(DecodeError) {
        let options = try options.validated()
        let ingest = try AccessUnitIngest(
            maxNALBytes: maxNALBytes, keyframesOnly: keyframesOnly, codec: codec,
            emulateFFmpegProbe: options.emulateFFmpegProbe)
        self.init(
            ingest: ingest,
            decoder: try AccessUnitDecoder(options: options, keyframesOnly: keyframesOnly, codec: codec, factory: factory))
    }

    /// The two halves, decoding every access unit as it arrives.
    public init(ingest: AccessUnitIngest, decoder: AccessUnitDecoder) {
        self.ingest = ingest
        self.decoder = decoder
        decodesLive = true
        lastBackend = (decoder.backend, decoder.backendReason, decoder.device)
    }

    /// Ingest alone: access units are read (and handed to `onAccessUnit`), nothing is decoded
    /// until a decoder is attached. `backendReason` says why, meanwhile.
    public init(ingest: AccessUnitIngest, backendReason: String) {
        self.ingest = ingest
        decodesLive = false
        lastBackend = (.software, backendReason, nil)
    }

    /// The back end decoding now, why, and on which device (nil in software or without a decoder).
    public var backend: DecoderBackend { decoder?.backend ?? lastBackend.backend }
    public var backendReason: String { decoder?.backendReason ?? lastBackend.reason }
    public var device: HardwareDeviceID? { decoder?.device }
    /// The stream's fallbacks, oldest first: at selection, and the switches to software.
    /// The session layer counts them by `reason`.
    public var fallbacks: FallbackRecord { decoder?.fallbacks ?? fallbacksWithoutDecoder }

    // MARK: - Reading

    /// Feeds the next bytes of the stream, in any chunking. Each access unit goes to
    /// `onAccessUnit`, then (while `decodesLive`) to the decoder, whose pictures go to
    /// `onPicture` as soon as they come out, in output order: a push that holds many pictures
    /// never keeps them all alive at once (libavcodec's frame pool grows to as many pictures as
    /// are alive together, and keeps that memory until the decoder closes). Returns the push's
    /// errors, a damaged picture being one.
    public func push(
        _ bytes: UnsafeRawBufferPointer, onAccessUnit: (IndexedAccessUnit) -> Void = { _ in },
        onPicture: PictureHandler
    ) -> [DecodeError] {
        midStream = true
        return remembering(
            ingest.push(bytes) { unit in
                onAccessUnit(unit)
                return decodeLive(unit, onPicture: onPicture)
            })
    }

    /// `push(_:onAccessUnit:onPicture:)` of bytes that landed in a slab already (an upload's):
    /// the access units are cut from it without a copy.
    public func push(
        _ bytes: SlabBytes, onAccessUnit: (IndexedAccessUnit) -> Void = { _ in },
        onPicture: PictureHandler
    ) -> [DecodeError] {
        midStream = true
        return remembering(
            ingest.push(bytes) { unit in
                onAccessUnit(unit)
                return decodeLive(unit, onPicture: onPicture)
            })
    }

    /// Feeds one sample of a container's or a source's video track (a whole access unit: it
    /// goes on now, see `AccessUnitIngest.push(sample:)`), like `push(_:)`. `pts`: its
    /// presentation time in the samples' time base (`DemuxedSample.ptsPerSecond`), when the
    /// container gave one.
    public func push(
        sample: UnsafeRawBufferPointer, described description: SampleDescription, pts: Int64? = nil,
        onAccessUnit: (IndexedAccessUnit) -> Void = { _ in }, onPicture: PictureHandler
    ) -> [DecodeError] {
        midStream = true
        return remembering(
            ingest.push(sample: sample, described: description, pts: pts) { unit in
                onAccessUnit(unit)
                return decodeLive(unit, onPicture: onPicture)
            })
    }

    /// End of stream: what ingest still held, then every picture still inside a live decoder;
    /// afterwards a new stream is expected (which must start at a random access point again;
    /// with a detected codec, it may be another codec). Parameter sets stay known, as a
    /// following stream on the same session usually repeats them.
    public func finish(onAccessUnit: (IndexedAccessUnit) -> Void = { _ in }, onPicture: PictureHandler) -> [DecodeError] {
        midStream = false
        var errors = ingest.finish { unit in
            onAccessUnit(unit)
            return decodeLive(unit, onPicture: onPicture)
        }
        if decodesLive { errors += drainDecoder(onPicture: onPicture) }
        return remembering(errors)
    }

    /// A push begins; `codec` is what it says it carries; see `AccessUnitIngest.beginPush`.
    public func beginPush(saying codec: VideoCodec?) {
        ingest.beginPush(saying: codec)
    }

    /// A push ended, the stream goes on: what it sent that was skipped is its error (see
    /// `AccessUnitIngest.endPush`).
    public func endPush() -> [DecodeError] {
        remembering(ingest.endPush())
    }

    /// A push broke off or was refused: the NAL unit it was sending and the picture it
    /// belonged to are dropped (`AccessUnitIngest.abandonIncompleteAccessUnit`). Decoded
    /// pictures and parameter sets stay.
    public func abandonIncompleteAccessUnit() {
        ingest.abandonIncompleteAccessUnit()
    }

    // MARK: - Decoding

    /// Decodes one access unit the caller read back (a session's history); its pictures go to
    /// `onPicture`. Nothing without a decoder.
    public func decode(_ unit: IndexedAccessUnit, onPicture: PictureHandler) -> [DecodeError] {
        guard let decoder else { return [] }
        var damaged: [DecodeError] = []
        let errors = decoder.decode(unit) { frame, number in picture(frame, number, to: onPicture, damaged: &damaged) }
        return remembering(errors + damaged)
    }

    /// Every picture still inside the decoder; it then starts afresh at the next keyframe.
    public func drainDecoder(onPicture: PictureHandler) -> [DecodeError] {
        guard let decoder else { return [] }
        var damaged: [DecodeError] = []
        let errors = decoder.drain { frame, number in picture(frame, number, to: onPicture, damaged: &damaged) }
        return remembering(errors + damaged)
    }

    private func decodeLive(_ unit: IndexedAccessUnit, onPicture: PictureHandler) -> [DecodeError] {
        guard decodesLive, let decoder else { return [] }
        if waitsForKeyframe {
            guard unit.unit.isKeyframe else { return [] }
            waitsForKeyframe = false
        }
        var damaged: [DecodeError] = []
        let errors = decoder.decode(unit) { frame, number in picture(frame, number, to: onPicture, damaged: &damaged) }
        return errors + damaged
    }

    /// A damaged picture is still a picture of the step (a multipart answer sends every
    /// picture, as the ffmpeg CLI writes them), but it is an error of the step, counted in
    /// `decodeErrors`.
    private func picture(
        _ frame: DecodedFrame, _ number: UInt64, to onPicture: PictureHandler, damaged: inout [DecodeError]
    ) {
        if frame.hasDecodeErrors {
            damagedPictures += 1
            damaged.append(.concealedPicture(frame.pictureType))
        }
        onPicture(frame, number)
    }

    private func remembering(_ errors: [DecodeError]) -> [DecodeError] {
        if let last = errors.last { lastError = last }
        return errors
    }

    // MARK: - Attaching and releasing a decoder

    /// `decoder` decodes this stream from now on: what the caller feeds it (`decode`), and what
    /// ingest hands on once `startLive` says so. It goes on with the stream's fallback record.
    public func attach(_ decoder: AccessUnitDecoder) {
        decoder.carryOver(fallbacksWithoutDecoder)
        decoder.keyframesOnly = ingest.keyframesOnly
        lastBackend = (decoder.backend, decoder.backendReason, decoder.device)
        self.decoder = decoder
        decodesLive = false
    }

    /// From now on access units go to the decoder as they arrive; `waitsForKeyframe`: from the
    /// next keyframe on (it joins the stream where it is).
    public func startLive(waitsForKeyframe: Bool) {
        guard decoder != nil else { return }
        self.waitsForKeyframe = waitsForKeyframe
        decodesLive = true
    }

    /// Frees the decoder, its codec context and its share of the decoder memory budget; its
    /// counts and the stream's fallback record stay.
    public func releaseDecoder() {
        guard let decoder else { return }
        earlier.add(decoder.counters)
        fallbacksWithoutDecoder = decoder.fallbacks
        lastBackend = (decoder.backend, decoder.backendReason, decoder.device)
        self.decoder = nil
        decodesLive = false
    }

    /// This stream takes over from `previous` (a new back end or codec, between streams):
    /// access units are numbered on from its, its counts stay in this one's, and its fallback
    /// record goes on here.
    public func takeOver(from previous: StreamDecoder) {
        ingest.nextIndex = previous.ingest.nextIndex
        earlier.add(previous.counters)
        if let decoder {
            decoder.carryOver(previous.fallbacks)
        } else {
            fallbacksWithoutDecoder = fallbacksWithoutDecoder.following(previous.fallbacks)
        }
    }
}

extension StreamDecoder {
    /// `push(_:onPicture:)` for callers that do not need the numbers.
    public func push(_ bytes: UnsafeRawBufferPointer, onPicture: (DecodedFrame) -> Void) -> [DecodeError] {
        push(bytes) { frame, _ in onPicture(frame) }
    }

    /// `finish(onPicture:)` for callers that do not need the numbers.
    public func finish(onPicture: (DecodedFrame) -> Void) -> [DecodeError] {
        finish { frame, _ in onPicture(frame) }
    }

    /// `push(sample:described:onPicture:)` for callers that do not need the numbers.
    public func push(
        sample: UnsafeRawBufferPointer, described description: SampleDescription, onPicture: (DecodedFrame) -> Void
    ) -> [DecodeError] {
        push(sample: sample, described: description) { frame, _ in onPicture(frame) }
    }

    /// The pictures of a push, collected (tests, tools, small inputs).
    public func push(_ bytes: [UInt8]) -> DecodeOutput {
        bytes.withUnsafeBytes { push($0) }
    }

    public func push(_ bytes: UnsafeRawBufferPointer) -> DecodeOutput {
        var output = DecodeOutput()
        output.errors = push(bytes) { frame, _ in output.frames.append(frame) }
        return output
    }

    public func finish() -> DecodeOutput {
        var output = DecodeOutput()
        output.errors = finish { frame, _ in output.frames.append(frame) }
        return output
    }
}

extension DecodeError {
    /// The error of a step that decoded a picture with concealed damage.
    static func concealedPicture(_ type: PictureType) -> DecodeError {
        DecodeError(
            .invalidData,
            "\(concealedPicturePrefix)\(type.rawValue) picture was decoded with concealed errors; "
                + "the last good picture stays the latest")
    }

    private static let concealedPicturePrefix = "a damaged "

    /// Whether this error reports a picture decoded with concealed damage (which was handed on
    /// like any other), rather than something that was not decoded.
    public var reportsConcealedPicture: Bool {
        code == .invalidData && message.hasPrefix(Self.concealedPicturePrefix)
    }
}
