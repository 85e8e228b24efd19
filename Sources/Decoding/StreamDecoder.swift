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
/// pictures, see `PictureNumbering`); this type joins the two for callers that decode every
/// access unit as it arrives (the CLI, tests). A session uses the two halves itself, with its
/// compressed history between them.
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

    /// Counts of both halves: what was read (ingest) and what was decoded.
    public var counters: Counters {
        var total = ingest.counters
        total.add(decoder.counters)
        return total
    }
    public private(set) var lastError: DecodeError?
    /// From the sequence of the last access unit passed to the decoder (or rejected as too large).
    public var format: StreamFormat? { ingest.format }
    /// Decode only intra pictures (IDR/IRAP or I), each drained at once so it comes out
    /// immediately (thumbnails, previews). Can be switched between pushes. Pair it with
    /// `DecoderOptions.lowLatency`: each drain would restart the CLI-probe emulation.
    public var keyframesOnly: Bool {
        didSet {
            ingest.keyframesOnly = keyframesOnly
            decoder.keyframesOnly = keyframesOnly
        }
    }
    /// The codec being read: stated by the caller, or detected from the stream's first
    /// parameter set; nil until then.
    public var codec: VideoCodec? { ingest.codec }
    /// The caller said which codec the stream is: a parameter set of another is a mismatch.
    public var codecIsStated: Bool { ingest.codecIsStated }

    private let ingest: AccessUnitIngest
    private let decoder: AccessUnitDecoder

    /// `codec`: the stream's codec when the caller knows it (the decoder then opens now);
    /// nil to detect it from the stream. `factory` makes the decoders; tests inject failing ones.
    public init(
        options: DecoderOptions = DecoderOptions(), maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes, keyframesOnly: Bool = false,
        codec: VideoCodec? = nil, factory: any PictureDecoderFactory = LibavDecoderFactory()
    ) throws(DecodeError) {
        let options = try options.validated()
        ingest = try AccessUnitIngest(
            maxNALBytes: maxNALBytes, keyframesOnly: keyframesOnly, codec: codec,
            emulateFFmpegProbe: options.emulateFFmpegProbe)
        decoder = try AccessUnitDecoder(options: options, keyframesOnly: keyframesOnly, codec: codec, factory: factory)
        self.keyframesOnly = keyframesOnly
    }

    /// The back end decoding now, why, and on which device (nil in software).
    public var backend: DecoderBackend { decoder.backend }
    public var backendReason: String { decoder.backendReason }
    public var device: HardwareDeviceID? { decoder.device }
    /// Every fallback of this stream, oldest first: at selection, and the switches to software.
    /// The session layer counts them by `reason`.
    public var fallbacks: FallbackRecord { decoder.fallbacks }

    /// Feeds the next bytes of the stream, in any chunking. Each picture goes to `onPicture` as
    /// soon as the decoder outputs it, in output order: a push that holds many pictures never
    /// keeps them all alive at once (libavcodec's frame pool grows to as many pictures as are
    /// alive together, and keeps that memory until the decoder closes). Returns the push's errors.
    public func push(_ bytes: UnsafeRawBufferPointer, onPicture: (DecodedFrame) -> Void) -> [DecodeError] {
        remembering(ingest.push(bytes) { unit in decoder.decode(unit) { frame, _ in onPicture(frame) } })
    }

    /// `push(_:onPicture:)`, each picture with its number (`PictureNumbering`).
    public func push(_ bytes: UnsafeRawBufferPointer, onPicture: (DecodedFrame, UInt64) -> Void) -> [DecodeError] {
        remembering(ingest.push(bytes) { unit in decoder.decode(unit, onPicture: onPicture) })
    }

    /// `finish(onPicture:)`, each picture with its number (`PictureNumbering`).
    public func finish(onPicture: (DecodedFrame, UInt64) -> Void) -> [DecodeError] {
        var errors = ingest.finish { unit in decoder.decode(unit, onPicture: onPicture) }
        errors += decoder.drain(onPicture: onPicture)
        return remembering(errors)
    }

    /// End of stream: decodes what is still buffered, hands out every remaining picture, and
    /// gets ready for a new stream (which must start at a random access point again; with a
    /// detected codec, it may be another codec). Parameter sets stay known, as a following
    /// stream on the same session usually repeats them.
    public func finish(onPicture: (DecodedFrame) -> Void) -> [DecodeError] {
        var errors = ingest.finish { unit in decoder.decode(unit) { frame, _ in onPicture(frame) } }
        errors += decoder.drain { frame, _ in onPicture(frame) }
        return remembering(errors)
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

    /// Feeds one sample of a container's video track; see `AccessUnitIngest.push(sample:)`.
    public func push(
        sample: UnsafeRawBufferPointer, described description: SampleDescription, onPicture: (DecodedFrame) -> Void
    ) -> [DecodeError] {
        remembering(
            ingest.push(sample: sample, described: description) { unit in
                decoder.decode(unit) { frame, _ in onPicture(frame) }
            })
    }

    /// A push begins; `codec` is what it says it carries; see `AccessUnitIngest.beginPush`.
    public func beginPush(saying codec: VideoCodec?) {
        ingest.beginPush(saying: codec)
    }

    /// A push broke off or was refused: the NAL unit it was sending is cut short. Dropping it
    /// keeps the next push's first start code from closing it as if it were whole. Decoded
    /// pictures, parameter sets and the access unit assembled so far stay.
    public func abandonIncompleteUnit() {
        ingest.abandonIncompleteUnit()
    }

    private func remembering(_ errors: [DecodeError]) -> [DecodeError] {
        if let last = errors.last { lastError = last }
        return errors
    }
}
