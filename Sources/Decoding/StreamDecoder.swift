import FoundationEssentials
import H264

/// Bytes in, pictures out: Annex B splitter → access-unit assembler → random-access gate →
/// picture-size check → hardware check → a `PictureDecoder`, with the counters a session reports.
///
/// Hardware fallback is per decoder (per stream), never per process, and one-way: once a
/// stream is in software it stays there. The decoder comes from `BackendSelection` (`auto`:
/// CUDA, then VA-API, then software) through a `PictureDecoderFactory`, and with `auto` the
/// stream moves to a software decoder when
/// - its SPS asks for what the hardware cannot decode (`HardwareCapability`: High 10, 4:2:2,
///   4:4:4, too large...): before the first picture using that SPS is sent;
/// - libavcodec turns the hardware down itself (no hardware format offered, hwaccel init
///   failed): inside `H264Decoder`, same codec context;
/// - `DecoderOptions.hardwareFailureLimit` access units in a row fail on the hardware: from the
///   next keyframe (IDR or recovery point) on. Until then the hardware decoder keeps going;
///   at the switch it is drained first, so no picture it decoded is lost, and the software
///   decoder starts from that keyframe with the parameter sets sent again.
/// Each switch is recorded in `fallbacks` (reason code, message) and shows in
/// `decoder.backend`/`decoder.backendReason`. A required back end (`cuda`/`vaapi`) never
/// switches: pictures it cannot decode are `.decoderUnavailable` errors.
///
/// Each complete access unit is sent to libavcodec as one packet (`H264Decoder.decode(accessUnit:)`),
/// so a picture comes out as soon as the first NAL unit after it arrives. The access units are
/// cut as libavcodec's parser cuts them (checked on every conformance stream and fixture), so
/// with `DecoderOptions.emulateFFmpegProbe` the pictures equal the ffmpeg CLI's for the same
/// bytes (for damaged streams: with the same thread count; libavcodec conceals errors
/// differently with frame threading). Without it (live), the only difference measured is that
/// pictures before the stream's first in-band SPS/PPS cannot be decoded, where the CLI's probe
/// looks ahead for them.
///
/// Not thread-safe: owned by one worker, like the `H264Decoder` inside it.
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
        /// Pictures not decoded because their SPS exceeds the size limit.
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

    public struct ErrorEvent: Sendable {
        public let error: DecodeError
        public let at: Date
    }

    /// The decoder in use now; replaced when the stream falls back to software.
    public private(set) var decoder: any PictureDecoder
    public private(set) var counters = Counters()
    public private(set) var lastError: ErrorEvent?
    /// From the SPS of the last access unit passed to the decoder (or rejected as too large).
    public private(set) var format: VideoFormat?
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
    /// The SPSs already checked against the size limit, by id, and whether each passed.
    private var checkedSPS: [Int: (sps: SequenceParameterSet, fits: Bool)] = [:]
    /// Decoding has reached a start point with its parameter sets since the stream began.
    private var started = false
    /// Parameter set units the decoder has been given (by SPS/PPS id), so ones seen only in
    /// dropped access units can be sent ahead of the first decoded one.
    private var sentSPS: [Int: [UInt8]] = [:]
    private var sentPPS: [Int: [UInt8]] = [:]
    /// With `DecoderOptions.emulateFFmpegProbe`: picture units held until the stream's first
    /// SPS and PPS arrive, as the CLI's probe finds them before its decoder starts.
    private var awaitingParameterSets: Bool
    private var held: [AccessUnit] = []
    private var heldBytes = 0
    /// Decodable pictures before the first start point (see `startDecoding`).
    private var waitingForStart: [AccessUnit] = []
    private var waitingBytes = 0

    private let options: DecoderOptions
    private let factory: any PictureDecoderFactory
    /// Fallbacks of decoders replaced so far, and the switches themselves.
    private var earlierFallbacks: [BackendFallback] = []
    /// Access units in a row that failed on the hardware decoder.
    private var consecutiveHardwareFailures = 0
    /// Set when the hardware failed too often: the switch waits for the next keyframe.
    private var pendingSwitch: HardwareCapability.Refusal?
    /// The newest picture's sequence number, so a replacement decoder continues the numbering.
    private var lastSequence: UInt64 = 0

    /// `factory` makes the decoders (the first one now, a software one at a fallback); tests
    /// inject failing ones.
    public init(
        options: DecoderOptions = DecoderOptions(), maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes, keyframesOnly: Bool = false,
        factory: any PictureDecoderFactory = LibavDecoderFactory()
    ) throws(DecodeError) {
        guard maxNALBytes > 0 else { throw DecodeError(.invalidOptions, "maxNALBytes must be positive") }
        let options = try options.validated()
        decoder = try Self.openDecoder(options: options, factory: factory)
        self.options = options
        self.factory = factory
        splitter = AnnexBSplitter(maxNALBytes: maxNALBytes)
        self.keyframesOnly = keyframesOnly
        awaitingParameterSets = options.emulateFFmpegProbe
    }

    /// The first back end that gives a working decoder. A hardware decoder that does not open
    /// under `auto` makes the next kind (then software) take over, recorded as `hwaccel_init_failed`.
    private static func openDecoder(
        options: DecoderOptions, factory: any PictureDecoderFactory
    ) throws(DecodeError) -> any PictureDecoder {
        var skipping: [HardwareDeviceKind: String] = [:]
        var failedOpens: [BackendFallback] = []
        while true {
            var plan = try BackendSelection.plan(options: options, skipping: skipping)
            plan.fallbacks = failedOpens + plan.fallbacks
            do throws(DecodeError) {
                return try factory.makeDecoder(plan, options: options)
            } catch {
                guard let device = plan.lease?.device, !plan.required, skipping[device.kind] == nil else { throw error }
                let message = "the \(plan.reason) decoder did not open: \(error.message)"
                skipping[device.kind] = message
                failedOpens.append(BackendFallback(
                    reason: .hwaccelInitFailed, from: plan.backend, to: .software, device: device, message: message))
            }
        }
    }

    /// Every fallback of this stream, oldest first: at selection, inside a decoder, and the
    /// switches to software. The session layer counts them by `reason`.
    public var fallbacks: [BackendFallback] { earlierFallbacks + decoder.fallbacks }

    /// Feeds the next bytes of the stream, in any chunking.
    public func push(_ bytes: UnsafeRawBufferPointer) -> DecodeOutput {
        var output = DecodeOutput()
        counters.bytes += bytes.count
        // Events are collected first and handled after the call: handling them touches other
        // state of this object, which must not happen while `splitter` is being mutated.
        var events: [SplitterEvent] = []
        splitter.push(bytes) { events.append($0) }
        for event in events { handle(event, into: &output) }
        endAccessUnitEarly(into: &output)
        return output
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

    public func push(_ bytes: [UInt8]) -> DecodeOutput {
        bytes.withUnsafeBytes { push($0) }
    }

    /// End of stream: decodes what is still buffered, returns every remaining picture, and
    /// gets ready for a new stream (which must start at a random access point again).
    /// Parameter sets stay known, as a following stream on the same session usually repeats them.
    public func finish() -> DecodeOutput {
        var output = DecodeOutput()
        var events: [SplitterEvent] = []
        splitter.finish { events.append($0) }
        for event in events { handle(event, into: &output) }
        reportUnsplittableBytes(into: &output)
        var units: [AccessUnit] = []
        assembler.finish { units.append($0) }
        for unit in units { handle(unit, into: &output) }
        releaseHeldUnits(into: &output)
        // Never reached a start point: libavcodec would not have output them either.
        counters.framesDroppedBeforeKeyframe += waitingForStart.count
        waitingForStart = []
        waitingBytes = 0
        append(decoder.drain(), to: &output)
        started = false
        awaitingParameterSets = decoder.options.emulateFFmpegProbe
        return output
    }

    // MARK: - Pipeline

    private func handle(_ event: SplitterEvent, into output: inout DecodeOutput) {
        switch event {
        case .unit(let nal):
            counters.nalUnits[nal.type.name, default: 0] += 1
            var units: [AccessUnit] = []
            assembler.push(nal) { units.append($0) }
            // The units emitted end before `nal`, so they are handled with the parameter sets
            // as they were before it (an SPS may replace one with the same id).
            for unit in units { handle(unit, into: &output) }
            if nal.type == .sps || nal.type == .pps {
                _ = try? parameterSets.update(with: nal)  // a malformed set is the assembler's to count
            }
        case .dropped(let error, let prefix):
            record(DecodeError(error), in: &output)
            var units: [AccessUnit] = []
            assembler.unitDropped(prefix: prefix) { units.append($0) }
            for unit in units { handle(unit, into: &output) }
        }
    }

    private func handle(_ unit: AccessUnit, into output: inout DecodeOutput) {
        counters.accessUnits += 1
        checkNewParameterSets(into: &output)
        // A unit without a picture (parameter sets or SEI at the end of a stream) would only make
        // libavcodec report "no frame"; its parameter sets go out with the next picture instead.
        guard unit.hasPicture else { return }
        if awaitingParameterSets {
            if parameterSets.sps.isEmpty || parameterSets.pps.isEmpty {
                held.append(unit)
                heldBytes += unit.byteCount
                // The CLI's probe gives up at 5 MB (probesize) too.
                if heldBytes >= 5_000_000 { releaseHeldUnits(into: &output) }
                return
            }
            releaseHeldUnits(into: &output)
        }
        decodeIfWanted(unit, into: &output)
    }

    /// Ends the wait for parameter sets: the held units are judged with the sets known now,
    /// which is what the CLI's decoder sees when the probe passed them as extradata.
    private func releaseHeldUnits(into output: inout DecodeOutput) {
        awaitingParameterSets = false
        let units = held
        held = []
        heldBytes = 0
        for unit in units { decodeIfWanted(unit, into: &output) }
    }

    /// The gate, the size check and keyframes-only mode, then the decoder.
    private func decodeIfWanted(_ unit: AccessUnit, into output: inout DecodeOutput) {
        let sps = unit.ppsId.flatMap { parameterSets.sps(forPPS: $0) }
        if let sps {
            format = VideoFormat(sps: sps)
            if checkedSPS[sps.id]?.fits == false {
                counters.framesRejectedTooLarge += 1
                return
            }
            guard hardwareAccepts(sps, into: &output) else { return }
        }
        if !started {
            guard startDecoding(at: unit, into: &output) else { return }
        }
        if let pending = pendingSwitch, unit.isIDR || unit.isRandomAccessPoint {
            switchToSoftware(pending, into: &output)
        }
        if keyframesOnly {
            guard unit.isIDR || unit.primarySliceType == .i else {
                counters.framesSkippedNotKeyframe += 1
                return
            }
            send(unit, into: &output)
            append(decoder.drain(), to: &output)
        } else {
            send(unit, into: &output)
        }
    }

    /// Checks the SPS of the next picture against the hardware decoding now. With `auto` a
    /// refusal moves the stream to software before the picture is sent (a new SPS takes effect
    /// at an IDR, so the software decoder starts cleanly there); a required back end refuses
    /// the picture instead. Returns false when the picture must not be sent.
    private func hardwareAccepts(_ sps: SequenceParameterSet, into output: inout DecodeOutput) -> Bool {
        guard let capability = decoder.hardwareCapability, let refusal = capability.refusal(for: sps) else { return true }
        guard options.backend == .auto else {
            record(
                DecodeError(
                    .decoderUnavailable,
                    "\(refusal.message) (\(refusal.reason.rawValue)); backend auto decodes such streams in software"),
                in: &output)
            return false
        }
        switchToSoftware(refusal, into: &output)
        return true
    }

    /// Counts access units in a row that failed on the hardware decoder (errors libavcodec
    /// reports for the device, not for the bitstream); at the limit, the stream moves to
    /// software from its next keyframe.
    private func noteHardwareHealth(_ decoded: DecodeOutput) {
        guard options.backend == .auto, decoder.backend != .software, pendingSwitch == nil else { return }
        guard let failure = decoded.errors.last(where: \.suggestsDeviceFailure) else {
            if !decoded.frames.isEmpty || decoded.errors.isEmpty { consecutiveHardwareFailures = 0 }
            return
        }
        consecutiveHardwareFailures += 1
        guard consecutiveHardwareFailures >= options.hardwareFailureLimit else { return }
        let engine = decoder.backend.hardwareKind?.engineName ?? decoder.backend.rawValue
        let on = decoder.device.map { " on \($0)" } ?? ""
        pendingSwitch = HardwareCapability.Refusal(
            reason: .deviceErrors,
            message: "\(engine)\(on) failed \(consecutiveHardwareFailures) access units in a row (last: \(failure.message))")
    }

    /// Drains the hardware decoder (its pictures come out first) and continues in a software
    /// decoder that numbers pictures on from the last one. The software decoder has seen no
    /// parameter sets, so `send` gives it the current ones again.
    private func switchToSoftware(_ why: HardwareCapability.Refusal, into output: inout DecodeOutput) {
        pendingSwitch = nil
        consecutiveHardwareFailures = 0
        append(decoder.drain(), to: &output)
        let previous = decoder
        var softwareOptions = options
        softwareOptions.backend = .software
        var plan = DecoderPlan.software(reason: "software: \(why.message)")
        plan.firstSequence = lastSequence
        do throws(DecodeError) {
            decoder = try factory.makeDecoder(plan, options: softwareOptions)
        } catch {
            record(DecodeError(error.code, "switching to software decoding failed: \(error.message)"), in: &output)
            return
        }
        earlierFallbacks += previous.fallbacks
        earlierFallbacks.append(BackendFallback(
            reason: why.reason, from: previous.backend, to: .software, device: previous.device, message: why.message,
            afterFrames: lastSequence))
        sentSPS = [:]
        sentPPS = [:]
    }

    /// The random-access gate. Returns true when `unit` is the first picture to decode.
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
    private func startDecoding(at unit: AccessUnit, into output: inout DecodeOutput) -> Bool {
        let hasParameterSets = unit.ppsId.flatMap { parameterSets.sps(forPPS: $0) } != nil
        guard hasParameterSets else {
            counters.framesDroppedBeforeKeyframe += 1
            return false
        }
        if unit.isIDR || keyframesOnly {
            counters.framesDroppedBeforeKeyframe += waitingForStart.count
            waitingForStart = []
            waitingBytes = 0
        } else if unit.isRandomAccessPoint || unit.primarySliceType == .i {
            let earlier = waitingForStart
            waitingForStart = []
            waitingBytes = 0
            for picture in earlier { send(picture, into: &output) }
        } else {
            waitingForStart.append(unit)
            waitingBytes += unit.byteCount
            // Bounded like the held units: past 8 MB the oldest are dropped (and counted).
            while waitingBytes > 8 << 20, let oldest = waitingForStart.first {
                waitingForStart.removeFirst()
                waitingBytes -= oldest.byteCount
                counters.framesDroppedBeforeKeyframe += 1
            }
            return false
        }
        started = true
        return true
    }

    /// Sends the unit, preceded by the parameter sets it uses when the decoder has not been
    /// given them in this form (they arrived in a dropped, skipped or picture-less access unit).
    private func send(_ unit: AccessUnit, into output: inout DecodeOutput) {
        var bytes: [UInt8] = []
        let sets = parameterSets
        if let ppsId = unit.ppsId, let spsId = sets.pps[ppsId]?.spsId,
            let spsUnit = sets.spsUnits[spsId], let ppsUnit = sets.ppsUnits[ppsId]
        {
            if !unit.nalUnits.contains(where: { $0.type == .sps }) && sentSPS[spsId] != spsUnit.bytes {
                bytes += [0, 0, 0, 1] + spsUnit.bytes
            }
            if !unit.nalUnits.contains(where: { $0.type == .pps }) && sentPPS[ppsId] != ppsUnit.bytes {
                bytes += [0, 0, 0, 1] + ppsUnit.bytes
            }
            sentSPS[spsId] = spsUnit.bytes
            sentPPS[ppsId] = ppsUnit.bytes
        }
        bytes += unit.annexB()
        if decoder.isProbingReorderDelay, decoder.options.probeOnlyUnannouncedReordering,
            let sps = unit.ppsId.flatMap({ sets.sps(forPPS: $0) }), sps.announcesReorderDelay
        {
            append(decoder.endReorderProbe(), to: &output)
        }
        let decoded = decoder.decode(accessUnit: bytes)
        noteHardwareHealth(decoded)
        append(decoded, to: &output)
    }

    /// Checks every SPS that is new or changed against the size limit, before any picture
    /// using it reaches libavcodec.
    private func checkNewParameterSets(into output: inout DecodeOutput) {
        for (id, sps) in parameterSets.sps where checkedSPS[id]?.sps != sps {
            do {
                try decoder.options.sizeLimit.check(width: sps.codedWidth, height: sps.codedHeight)
                checkedSPS[id] = (sps, true)
            } catch {
                checkedSPS[id] = (sps, false)
                record(error, in: &output)
            }
        }
    }

    private func append(_ decoded: DecodeOutput, to output: inout DecodeOutput) {
        if let newest = decoded.frames.last { lastSequence = max(lastSequence, newest.sequence) }
        output.frames += decoded.frames
        counters.framesDecoded += decoded.frames.count
        for error in decoded.errors {
            record(error, in: &output)
        }
    }

    /// A client disconnected mid-upload: the NAL unit it was sending is cut short. Dropping it
    /// keeps the next upload's first start code from closing it as if it were whole. Decoded
    /// pictures, parameter sets and the access unit assembled so far stay.
    public func abandonIncompleteUnit() {
        splitter.abandonIncompleteUnit()
    }

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
        lastError = ErrorEvent(error: error, at: Date())
        output.errors.append(error)
    }
}
