import Containers
import Decoding
import VideoCoding

/// The session's view of its `StreamDecoder`: one place that adapts the Decoding module's
/// API to what a session needs (frames and errors per step, counters, format, backend).
///
/// Not thread-safe, like the decoder it owns: only the session's decode worker touches it.
final class DecoderPipeline {
    let backendChoice: DecoderBackendChoice
    /// The codec the session was told its stream is; nil: detected from the stream.
    let statedCodec: VideoCodec?
    private let decoder: StreamDecoder
    /// Bytes pushed since the last `finish()`: a new back end or codec may only take over
    /// between streams.
    private(set) var midStream = false

    init(
        configuration: ServerConfiguration, backend: DecoderBackendChoice, codec: VideoCodec?, mode: DecodeMode
    ) throws(DecodeError) {
        backendChoice = backend
        statedCodec = codec
        decoder = try StreamDecoder(
            options: configuration.decoderOptions(backend: backend, mode: mode), maxNALBytes: configuration.maxNALBytes,
            keyframesOnly: mode == .keyframes, codec: codec, factory: configuration.decoderFactory)
    }

    /// The stream's codec: stated, or detected from its first parameter set; nil until then.
    var codec: VideoCodec? { decoder.codec }

    var backend: DecoderBackend { decoder.backend }
    var backendReason: String { decoder.backendReason }
    /// The hardware device decoding now; nil in software.
    var device: HardwareDeviceID? { decoder.device }
    /// Every switch to another back end so far, oldest first.
    var fallbacks: [BackendFallback] { decoder.fallbacks }
    var format: StreamFormat? { decoder.format }

    var keyframesOnly: Bool {
        get { decoder.keyframesOnly }
        set { decoder.keyframesOnly = newValue }
    }

    /// Pictures libavcodec output with concealed damage (`DecodedFrame.hasDecodeErrors`), each
    /// also reported as an `invalid_data` error of its step and counted in `decodeErrors`.
    private var damagedPictures = 0

    /// Decodes the next bytes; each picture goes to `onPicture` as it comes out. Returns the
    /// errors, a damaged picture being one too.
    func push(_ bytes: [UInt8], onPicture: (DecodedFrame) -> Void) -> [DecodeError] {
        midStream = true
        var damaged: [DecodeError] = []
        let errors = bytes.withUnsafeBytes { decoder.push($0) { picture(handing: $0, to: onPicture, damaged: &damaged) } }
        return errors + damaged
    }

    /// Decodes one sample of a container's or a source's video track (a whole access unit:
    /// its picture comes out now, see `StreamDecoder.push(sample:)`).
    func push(sample: DemuxedSample, onPicture: (DecodedFrame) -> Void) -> [DecodeError] {
        midStream = true
        var damaged: [DecodeError] = []
        let errors = sample.payload.withUnsafeBytes { payload in
            decoder.push(sample: payload, described: sample.description) { picture(handing: $0, to: onPicture, damaged: &damaged) }
        }
        return errors + damaged
    }

    /// End of stream: every delayed picture; afterwards the decoder expects a fresh stream.
    func finish(onPicture: (DecodedFrame) -> Void) -> [DecodeError] {
        midStream = false
        var damaged: [DecodeError] = []
        let errors = decoder.finish { picture(handing: $0, to: onPicture, damaged: &damaged) }
        return errors + damaged
    }

    /// A push begins, saying it carries `codec` (nil: it says nothing); see `StreamDecoder.beginPush`.
    func beginPush(saying codec: VideoCodec?) {
        decoder.beginPush(saying: codec)
    }

    /// The upload broke off: its last NAL unit is incomplete and must not be decoded.
    func abandonIncompleteUnit() {
        decoder.abandonIncompleteUnit()
    }

    /// A damaged picture is still a picture of the step (multipart answers send every picture,
    /// like the ffmpeg CLI), but it is an error for the session, which never makes it the latest.
    private func picture(handing frame: DecodedFrame, to onPicture: (DecodedFrame) -> Void, damaged: inout [DecodeError]) {
        if frame.hasDecodeErrors {
            damagedPictures += 1
            damaged.append(
                DecodeError(
                    .invalidData,
                    "a damaged \(frame.pictureType.rawValue) picture was decoded with concealed errors; "
                        + "the last good picture stays the latest"))
        }
        onPicture(frame)
    }

    var counters: SessionCounters {
        var counters = SessionCounters()
        counters.stream = decoder.counters
        counters.decodeErrors += damagedPictures
        return counters
    }
}
