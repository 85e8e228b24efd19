import Containers
import Decoding
import VideoCoding

/// The session's two halves of decoding, with its history between them: `AccessUnitIngest`
/// reads every byte into access units (each goes to the caller, which keeps it in the
/// session's `CompressedHistory`), and `AccessUnitDecoder` decodes them into numbered pictures
/// while `decodesLive` — always in `all` and `keyframes` mode; in `on-demand` mode only from
/// the end of a catch-up (fed from the history by `decodeCatchUp`) until the decoder is
/// released. Without a decoder nothing is decoded and no decoder memory is held.
///
/// Not thread-safe, like the decoders it owns: only the session's decode worker touches it.
final class DecoderPipeline {
    let backendChoice: DecoderBackendChoice
    /// The codec the session was told its stream is; nil: detected from the stream.
    let statedCodec: VideoCodec?
    private let ingest: AccessUnitIngest
    /// Where decoders' options and factory come from.
    private let configuration: ServerConfiguration
    private(set) var decoder: AccessUnitDecoder?
    /// Access units go to the decoder as ingest hands them on.
    var decodesLive: Bool
    /// The decoder was attached in the middle of a stream: it gets nothing before a keyframe.
    private var waitsForKeyframe = false
    /// Bytes pushed since the last `finish()`: a new back end or codec may only take over
    /// between streams.
    private(set) var midStream = false
    /// Counts and fallbacks of decoders released so far (on-demand), so neither goes backwards.
    private var released = StreamDecoder.Counters()
    private var releasedFallbacks: [BackendFallback] = []
    /// The last decoder's back end, shown while none runs.
    private var lastBackend: (backend: DecoderBackend, reason: String, device: HardwareDeviceID?)

    /// Opens the live decoder now, except in on-demand mode (so a back end that cannot open
    /// fails the caller's request then); there the back end is only checked for availability.
    init(
        configuration: ServerConfiguration, backend: DecoderBackendChoice, codec: VideoCodec?, mode: DecodeMode,
        firstIndex: Int64 = 0
    ) throws(DecodeError) {
        backendChoice = backend
        statedCodec = codec
        self.configuration = configuration
        let liveOptions = configuration.decoderOptions(backend: backend, mode: mode)
        ingest = try AccessUnitIngest(
            maxNALBytes: configuration.maxNALBytes, keyframesOnly: mode == .keyframes, codec: codec,
            emulateFFmpegProbe: liveOptions.emulateFFmpegProbe, firstIndex: firstIndex)
        if mode == .onDemand {
            let plan = try BackendSelection.plan(options: try liveOptions.validated())
            lastBackend = (.software, "on-demand: no decoder runs until a picture is asked for (\(plan.reason))", nil)
            decodesLive = false
        } else {
            let decoder = try AccessUnitDecoder(
                options: liveOptions, keyframesOnly: mode == .keyframes, codec: codec,
                factory: configuration.decoderFactory)
            lastBackend = (decoder.backend, decoder.backendReason, decoder.device)
            self.decoder = decoder
            decodesLive = true
        }
    }

    /// The stream's codec: stated, or detected from its first parameter set; nil until then.
    var codec: VideoCodec? { ingest.codec }

    var backend: DecoderBackend { decoder?.backend ?? lastBackend.backend }
    var backendReason: String { decoder?.backendReason ?? lastBackend.reason }
    /// The hardware device decoding now; nil in software or without a decoder.
    var device: HardwareDeviceID? { decoder?.device }
    /// Every switch to another back end so far, oldest first.
    var fallbacks: [BackendFallback] { releasedFallbacks + (decoder?.fallbacks ?? []) }
    var format: StreamFormat? { ingest.format }
    /// The index the next access unit gets: a replacement pipeline goes on from its predecessor's.
    var nextIndex: Int64 {
        get { ingest.nextIndex }
        set { ingest.nextIndex = newValue }
    }

    var keyframesOnly: Bool {
        get { ingest.keyframesOnly }
        set {
            ingest.keyframesOnly = newValue
            decoder?.keyframesOnly = newValue
        }
    }

    /// Pictures libavcodec output with concealed damage (`DecodedFrame.hasDecodeErrors`), each
    /// also reported as an `invalid_data` error of its step and counted in `decodeErrors`.
    private var damagedPictures = 0

    typealias PictureHandler = (DecodedFrame, UInt64) -> Void

    /// Reads the next bytes; each access unit goes to `onAccessUnit`, then (while `decodesLive`)
    /// to the decoder, whose pictures go to `onPicture` as they come out. Returns the errors, a
    /// damaged picture being one too.
    func push(
        _ bytes: [UInt8], onAccessUnit: (IndexedAccessUnit) -> Void, onPicture: PictureHandler
    ) -> [DecodeError] {
        midStream = true
        var damaged: [DecodeError] = []
        let errors = bytes.withUnsafeBytes { bytes in
            ingest.push(bytes) { unit in
                onAccessUnit(unit)
                return decodeLive(unit) { picture(handing: $0, $1, to: onPicture, damaged: &damaged) }
            }
        }
        return errors + damaged
    }

    /// Reads one sample of a container's or a source's video track (a whole access unit: it
    /// goes on now, see `AccessUnitIngest.push(sample:)`), like `push(_:)`.
    func push(
        sample: DemuxedSample, onAccessUnit: (IndexedAccessUnit) -> Void, onPicture: PictureHandler
    ) -> [DecodeError] {
        midStream = true
        var damaged: [DecodeError] = []
        let errors = sample.payload.withUnsafeBytes { payload in
            ingest.push(sample: payload, described: sample.description) { unit in
                onAccessUnit(unit)
                return decodeLive(unit) { picture(handing: $0, $1, to: onPicture, damaged: &damaged) }
            }
        }
        return errors + damaged
    }

    /// End of stream: what ingest still held, then every delayed picture of a live decoder;
    /// afterwards a fresh stream is expected.
    func finish(onAccessUnit: (IndexedAccessUnit) -> Void, onPicture: PictureHandler) -> [DecodeError] {
        midStream = false
        var damaged: [DecodeError] = []
        var errors = ingest.finish { unit in
            onAccessUnit(unit)
            return decodeLive(unit) { picture(handing: $0, $1, to: onPicture, damaged: &damaged) }
        }
        if decodesLive, let decoder {
            errors += decoder.drain { picture(handing: $0, $1, to: onPicture, damaged: &damaged) }
        }
        return errors + damaged
    }

    private func decodeLive(_ unit: IndexedAccessUnit, onPicture: PictureHandler) -> [DecodeError] {
        guard decodesLive, let decoder else { return [] }
        if waitsForKeyframe {
            guard unit.unit.isKeyframe else { return [] }
            waitsForKeyframe = false
        }
        return decoder.decode(unit, onPicture: onPicture)
    }

    // MARK: - On demand

    /// Opens a decoder: for keyframes, a live one; otherwise with a catch-up decoder's threads,
    /// for it may catch up first. `waitsForKeyframe`: it joins the stream where it is, so it
    /// gets nothing before a keyframe.
    func openDecoder(keyframesOnly: Bool, waitsForKeyframe: Bool) throws(DecodeError) {
        let options =
            keyframesOnly
            ? configuration.decoderOptions(backend: backendChoice, mode: .keyframes)
            : configuration.catchUpDecoderOptions(backend: backendChoice)
        let decoder = try AccessUnitDecoder(
            options: options, keyframesOnly: keyframesOnly, codec: ingest.codec ?? statedCodec,
            factory: configuration.decoderFactory)
        lastBackend = (decoder.backend, decoder.backendReason, decoder.device)
        self.decoder = decoder
        self.waitsForKeyframe = waitsForKeyframe
    }

    /// From now on access units go to the decoder as they arrive (after a catch-up, or at once
    /// when there was nothing to catch up from: then from the next keyframe).
    func startLive(waitsForKeyframe: Bool) {
        guard decoder != nil else { return }
        self.waitsForKeyframe = waitsForKeyframe
        decodesLive = true
    }

    /// Frees the decoder, its codec context and its share of the decoder memory budget.
    func releaseDecoder() {
        guard let decoder else { return }
        released.add(decoder.counters)
        releasedFallbacks += decoder.fallbacks
        lastBackend = (decoder.backend, decoder.backendReason, decoder.device)
        self.decoder = nil
        decodesLive = false
    }

    /// Decodes one access unit of a catch-up, read from the history.
    func decodeCatchUp(_ unit: IndexedAccessUnit, onPicture: PictureHandler) -> [DecodeError] {
        guard let decoder else { return [] }
        var damaged: [DecodeError] = []
        let errors = decoder.decode(unit) { picture(handing: $0, $1, to: onPicture, damaged: &damaged) }
        return errors + damaged
    }

    /// The stream ended inside a catch-up: every delayed picture, then a fresh start.
    func drainDecoder(onPicture: PictureHandler) -> [DecodeError] {
        guard let decoder else { return [] }
        var damaged: [DecodeError] = []
        let errors = decoder.drain { picture(handing: $0, $1, to: onPicture, damaged: &damaged) }
        return errors + damaged
    }

    // MARK: - Stream bookkeeping

    /// A push begins, saying it carries `codec` (nil: it says nothing); see `AccessUnitIngest.beginPush`.
    func beginPush(saying codec: VideoCodec?) {
        ingest.beginPush(saying: codec)
    }

    /// A push ended, the stream goes on: what it sent that was skipped is its error.
    func endPush() -> [DecodeError] {
        ingest.endPush()
    }

    /// The upload broke off: its last NAL unit is incomplete and must not be decoded.
    func abandonIncompleteUnit() {
        ingest.abandonIncompleteUnit()
    }

    /// A damaged picture is still a picture of the step (multipart answers send every picture,
    /// like the ffmpeg CLI), but it is an error for the session, which never makes it the latest.
    private func picture(
        handing frame: DecodedFrame, _ number: UInt64, to onPicture: PictureHandler, damaged: inout [DecodeError]
    ) {
        if frame.hasDecodeErrors {
            damagedPictures += 1
            damaged.append(
                DecodeError(
                    .invalidData,
                    "a damaged \(frame.pictureType.rawValue) picture was decoded with concealed errors; "
                        + "the last good picture stays the latest"))
        }
        onPicture(frame, number)
    }

    var counters: SessionCounters {
        var counters = SessionCounters()
        counters.stream = ingest.counters
        counters.stream.add(released)
        if let decoder { counters.stream.add(decoder.counters) }
        counters.decodeErrors += damagedPictures
        return counters
    }
}
