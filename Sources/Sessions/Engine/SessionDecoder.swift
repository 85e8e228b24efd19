import Decoding
import VideoCoding

/// A session's decoding, on its decode queue (`QueueBound`): the stream every push is read into
/// (`StreamDecoder`: ingest and decoder joined, each access unit kept in the session's history on
/// the way), the decoder it opens on demand and releases, a new back end waiting for the
/// stream's end, and the on-demand catch-up under way.
///
/// One stream at a time: a replacement (`PUT` with another back end or codec) takes over
/// between streams and goes on from its predecessor (access unit indices, counters that never
/// go backwards, the fallback record: `StreamDecoder.takeOver`).
///
/// Not thread-safe, like the decoders it owns: only the session's decode queue touches it.
struct SessionDecoder {
    /// A stream and the choices it was made with.
    struct Stream {
        /// Ingest and (while one runs) the decoder, joined.
        let streamDecoder: StreamDecoder
        let backendChoice: DecoderBackendChoice
        /// The codec the session was told its stream is; nil: detected from the stream.
        let statedCodec: VideoCodec?
    }

    /// The stream being read; nil once the session closed.
    private(set) var current: Stream?
    /// A back end chosen while a stream was under way; it takes over at the next stream start.
    private var pending: Stream?
    /// The on-demand catch-up under way, if any: where it reads the history next.
    private(set) var catchUp: CatchUpRun?
    /// The catch-up slot held, from its grant until the on-demand decoder gives it back.
    private var catchUpSlot: CatchUpPermit?
    private let context: SessionContext
    /// The session whose stream this decodes, as the warm catch-up decoders know it: they are
    /// lent only within it.
    private let warmDecoderOwner: WarmDecoderPool.Owner
    /// Where every access unit goes; a catch-up reads it (and pins what it reads).
    let history: CompressedHistory

    init(_ stream: Stream, warmDecoderOwner: WarmDecoderPool.Owner, context: SessionContext, history: CompressedHistory) {
        self.warmDecoderOwner = warmDecoderOwner
        current = stream
        self.context = context
        self.history = history
    }

    /// Makes a session's stream: ingest, and a live decoder opened now, except in on-demand
    /// mode (so a back end that cannot open fails the caller's request then); there the back
    /// end is only checked for availability. Runs on the caller's thread.
    static func stream(
        context: SessionContext, backend: DecoderBackendChoice, codec: VideoCodec?, mode: DecodeMode
    ) throws(DecodeError) -> Stream {
        let options = context.decoderOptions(backend: backend, mode: mode)
        let ingest = try AccessUnitIngest(
            maxNALBytes: context.configuration.maxNALBytes, keyframesOnly: mode == .keyframes, codec: codec,
            emulateFFmpegProbe: options.emulateFFmpegProbe, live: true)
        let streamDecoder: StreamDecoder
        if mode == .onDemand {
            let plan = try BackendSelection.plan(options: try options.validated())
            streamDecoder = StreamDecoder(
                ingest: ingest, backendReason: "on-demand: no decoder runs until a picture is asked for (\(plan.reason))")
        } else {
            streamDecoder = StreamDecoder(
                ingest: ingest,
                decoder: try AccessUnitDecoder(
                    options: options, keyframesOnly: mode == .keyframes, codec: codec,
                    factory: context.services.decoderFactory))
        }
        return Stream(streamDecoder: streamDecoder, backendChoice: backend, statedCodec: codec)
    }

    var stream: StreamDecoder? { current?.streamDecoder }

    /// Whether a decoder is open (on demand: woken).
    var hasDecoder: Bool { current?.streamDecoder.decoder != nil }

    // MARK: - Opening and releasing (on demand)

    /// Opens a decoder for the stream: for keyframes, a live one; otherwise with a catch-up
    /// decoder's threads, for it may catch up first. Nothing decodes live until `startLive`.
    func openDecoder(keyframesOnly: Bool) throws(DecodeError) {
        guard let current else {
            throw DecodeError(.decoderUnavailable, "the session's decoder was released")
        }
        let options =
            keyframesOnly
            ? context.decoderOptions(backend: current.backendChoice, mode: .keyframes)
            : context.catchUpDecoderOptions(backend: current.backendChoice)
        // A catch-up's decoder is a warm one when the pool holds one for this stream's shape; it
        // goes back when released.
        let factory =
            keyframesOnly
            ? context.services.decoderFactory
            : context.services.catchUpPool.warmDecoders.lender(
                making: context.services.decoderFactory, for: current.streamDecoder.format, owner: warmDecoderOwner)
        current.streamDecoder.attach(
            try AccessUnitDecoder(
                options: options, keyframesOnly: keyframesOnly, codec: current.streamDecoder.codec ?? current.statedCodec,
                factory: factory))
    }

    /// From now on each access unit is decoded as it arrives (from the next keyframe when
    /// `waitsForKeyframe`).
    func startLive(waitsForKeyframe: Bool) {
        current?.streamDecoder.startLive(waitsForKeyframe: waitsForKeyframe)
    }

    /// Frees the decoder and its memory; returns whether one was open. A catch-up under way
    /// ends with it.
    mutating func releaseDecoder() -> Bool {
        endCatchUp()
        guard let stream, stream.decoder != nil else { return false }
        stream.releaseDecoder()
        return true
    }

    /// A catch-up slot was granted: held until `releaseCatchUpSlot` (or the session closes).
    mutating func holdCatchUpSlot(_ permit: CatchUpPermit) {
        catchUpSlot?.release()
        catchUpSlot = permit
    }

    mutating func releaseCatchUpSlot() {
        catchUpSlot?.release()
        catchUpSlot = nil
    }

    /// A catch-up starts reading the history at its last keyframe (one GOP earlier for an open
    /// GOP): what it reads is kept from the bounds. Returns false when the history holds no
    /// keyframe to start from. `delay`: the units a catch-up decoder holds back.
    mutating func beginCatchUp(delay: Int) -> Bool {
        guard let start = history.pinCatchUpStart(delay: delay) else { return false }
        catchUp = CatchUpRun(replay: HistoryReplay(from: start), answerAt: history.endIndex)
        return true
    }

    /// How the catch-up stands after a turn that said whether it `caughtUp`; `answering` is
    /// reported once, when it has decoded what was newest as it started.
    mutating func catchUpProgress(caughtUp: Bool) -> CatchUpRun.Progress? {
        guard var run = catchUp else { return nil }
        defer { catchUp = run }
        // Nothing arrived while the turn decoded: caught up now, without another turn.
        if caughtUp || run.cursor >= history.endIndex {
            return .done(lostItsPlace: run.lostItsPlace, units: run.replay.unitsFed)
        }
        guard !run.answered, run.cursor >= run.answerAt else { return .reading }
        run.answered = true
        return .answering
    }

    /// Decodes up to `unitsAtMost` units of the catch-up from the history. `caughtUp`: it has
    /// decoded the newest unit (or lost its place: then live decoding starts at the next
    /// keyframe). Nil when no catch-up runs. `delay`: the units a catch-up decoder holds back.
    mutating func catchUp(unitsAtMost: Int, delay: Int) -> (caughtUp: Bool, errors: [DecodeError])? {
        guard var run = catchUp, let stream, stream.decoder != nil else { return nil }
        defer { catchUp = run }
        var errors: [DecodeError] = []
        var best = run.best
        let keep: StreamDecoder.PictureHandler = { [context, history] frame, number in
            guard !frame.hasDecodeErrors, number > best?.sequence ?? 0 else { return }
            best = PublishedFrame(
                frame: frame, sequence: number, backend: frame.decodedBy, at: context.clock,
                arrival: frame.accessUnitIndex.flatMap(history.arrival))
        }
        defer { run.best = best }
        switch history.read(from: run.cursor, limit: unitsAtMost) {
        case .gap:
            // The bounds dropped what it was reading (a stream faster than the catch-up): start
            // again at the newest GOP, or go live from the next keyframe.
            errors += stream.drainDecoder { _, _ in }
            guard let start = history.pinCatchUpStart(delay: delay), start > run.cursor else {
                run.lostItsPlace = true
                return (true, errors)
            }
            run.replay.restart(at: start)
            return (false, errors)
        case .units(let units, let drainAfter):
            guard !units.isEmpty else { return (true, errors) }
            run.replay.feed(
                units, drainAfter: drainAfter, decode: { stream.decode($0, onPicture: keep) },
                drain: { stream.drainDecoder(onPicture: keep) }, onErrors: { errors += $0 })
            if let refusal = errors.first(where: { $0.code == .decoderMemoryExceeded }) { run.refusal = refusal }
            return (false, errors)
        }
    }

    /// Ends the catch-up under way, if any: what it pinned is given back. Returns it.
    @discardableResult
    mutating func endCatchUp() -> CatchUpRun? {
        guard let run = catchUp else { return nil }
        catchUp = nil
        history.unpin()
        return run
    }

    // MARK: - Modes and replacement

    mutating func setMode(_ mode: DecodeMode) {
        current?.streamDecoder.keyframesOnly = mode == .keyframes
        pending?.streamDecoder.keyframesOnly = mode == .keyframes
    }

    /// Returns whether `replacement` took over now (no stream under way); otherwise it waits
    /// for the stream's end.
    mutating func replace(with replacement: Stream) -> Bool {
        guard let current else { return false }
        if current.streamDecoder.midStream {
            pending = replacement
            return false
        }
        take(replacement, from: current)
        return true
    }

    /// After a flush: a pending back end takes over now that no stream is under way. Returns
    /// whether one did.
    mutating func streamEnded() -> Bool {
        guard let replacement = pending, let current else { return false }
        take(replacement, from: current)
        pending = nil
        return true
    }

    private mutating func take(_ replacement: Stream, from previous: Stream) {
        replacement.streamDecoder.takeOver(from: previous.streamDecoder)
        current = replacement
    }

    /// The session closed: everything goes, the decoder's memory and any catch-up slot with it.
    mutating func close() {
        endCatchUp()
        releaseCatchUpSlot()
        current = nil
        pending = nil
    }

    // MARK: - What it reports

    /// What the decoder says now.
    func snapshot() -> DecoderSnapshot? {
        guard let stream else { return nil }
        var counters = SessionCounters()
        counters.stream = stream.counters
        return DecoderSnapshot(
            counters: counters, codec: stream.codec, codecIsStated: stream.codecIsStated, backend: stream.backend, backendReason: stream.backendReason,
            device: stream.device, format: stream.format, fallbacks: stream.fallbacks)
    }
}

/// What the decode queue tells the rest of the session after a step.
struct DecoderSnapshot: Sendable {
    let counters: SessionCounters
    let codec: VideoCodec?
    let codecIsStated: Bool
    let backend: DecoderBackend
    let backendReason: String
    let device: HardwareDeviceID?
    let format: StreamFormat?
    let fallbacks: FallbackRecord
}

/// An on-demand catch-up under way on the decode queue: where it reads next in the history, and
/// the newest good picture so far (published when it ends).
struct CatchUpRun {
    /// How it stands after a turn.
    enum Progress: Equatable {
        /// More to decode.
        case reading
        /// It decoded what was newest as it started: the requests that woke it may go on.
        case answering
        /// It decoded the newest unit (or lost its place in the history).
        case done(lostItsPlace: Bool, units: Int)
    }

    var replay: HistoryReplay
    /// The index after the newest access unit when the catch-up started: once decoded through
    /// it, the requests that woke the session are answered (with the picture that was newest
    /// when they asked), while the units that arrived meanwhile are still caught up on.
    let answerAt: Int64
    var answered = false
    var best: PublishedFrame?
    /// The history lost what the catch-up read: live decoding starts at the next keyframe.
    var lostItsPlace = false
    /// The decoder memory budget had no room for the stream's decoder: nothing will decode.
    var refusal: DecodeError?

    /// Why the catch-up can give its requests nothing: the budget refused its decoder and no
    /// picture came before.
    var failure: DecodeError? { best == nil ? refusal : nil }

    /// Where it reads the history next.
    var cursor: Int64 { replay.cursor }
}
