import Decoding
import H264
import VideoCoding

/// The session's view of its `StreamDecoder`: one place that adapts the Decoding module's
/// API to what a session needs (frames and errors per step, counters, format, backend).
///
/// Not thread-safe, like the decoder it owns: only the session's decode worker touches it.
final class DecoderPipeline {
    struct Step {
        var frames: [DecodedFrame] = []
        var errors: [DecodeError] = []
    }

    let backendChoice: DecoderBackendChoice
    private let decoder: StreamDecoder
    /// Bytes pushed since the last `finish()`: a new back end may only take over between streams.
    private(set) var midStream = false

    init(configuration: ServerConfiguration, backend: DecoderBackendChoice, mode: DecodeMode) throws(DecodeError) {
        backendChoice = backend
        decoder = try StreamDecoder(
            options: configuration.decoderOptions(backend: backend, mode: mode), maxNALBytes: configuration.maxNALBytes,
            keyframesOnly: mode == .keyframes, factory: configuration.decoderFactory)
    }

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

    func push(_ bytes: [UInt8]) -> Step {
        midStream = true
        return step(decoder.push(bytes))
    }

    /// End of stream: every delayed picture; afterwards the decoder expects a fresh stream.
    func finish() -> Step {
        midStream = false
        return step(decoder.finish())
    }

    /// The upload broke off: its last NAL unit is incomplete and must not be decoded.
    func abandonIncompleteUnit() {
        decoder.abandonIncompleteUnit()
    }

    /// A damaged picture is still a step's frame (multipart answers send every picture, like
    /// the ffmpeg CLI), but it is an error for the session, which never makes it the latest.
    private func step(_ output: DecodeOutput) -> Step {
        var errors = output.errors
        for frame in output.frames where frame.hasDecodeErrors {
            damagedPictures += 1
            errors.append(
                DecodeError(
                    .invalidData,
                    "a damaged \(frame.pictureType.rawValue) picture was decoded with concealed errors; "
                        + "the last good picture stays the latest"))
        }
        return Step(frames: output.frames, errors: errors)
    }

    var counters: SessionCounters {
        var counters = SessionCounters()
        counters.stream = decoder.counters
        counters.decodeErrors += damagedPictures
        return counters
    }
}
