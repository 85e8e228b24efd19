import VideoCoding

/// Which back end decodes one stream, and when that changes: the one place hardware fallback
/// is decided. It holds the decoder, the device lease it decodes on, the capability check,
/// the health count and a pending switch.
///
/// The back end is chosen when the supervisor is made (a required back end without a device
/// fails then); the decoder itself opens when the stream's codec is known, and is replaced
/// when a later stream is of another codec.
///
/// Fallback is per stream, never per process, and one-way: once a stream is in software it
/// stays there. With `auto` the stream moves to a software decoder when
/// - the hardware decoder does not open (`hwaccel_init_failed`), or the device does not decode
///   the codec (`unsupported_codec`): trying the next kind (`BackendSelection`: CUDA, then
///   VA-API, then software);
/// - a new SPS asks for what the hardware cannot decode (`HardwareCapability`: High 10, 4:2:2,
///   4:4:4, too large...): before the first picture using that SPS is sent;
/// - libavcodec turns the hardware down itself (no hardware format offered, hwaccel init
///   failed; `DecodeOutput.hardwareRefusal`): the access units the hardware decoder took without
///   putting out a picture yet are sent again to the software decoder, the refused one last
///   (with frame threads libavcodec reports the first picture's refusal only when the next
///   packet is sent, so that first picture would otherwise be lost: seen on NVDEC with 64x64
///   H.265, below its smallest size);
/// - libavcodec decodes in software inside the hardware decoder without refusing anything
///   (`DecodeOutput.decodedInSoftware`): no switch, the pictures are right, but the stream's
///   record and reason say so (`decoded_in_software`), with a required back end too;
/// - `DecoderOptions.hardwareFailureLimit` access units in a row fail on the device
///   (`device_errors`): from the next keyframe on; until then the hardware decoder keeps going.
/// Placement (`EnginePlacement`, the pool's `engines`): with `auto`, at the stream's first access
/// unit (when its codec, size and frame rate are known) the stream goes to the planned device or
/// the CPU, whichever has more headroom for it; at a keyframe it moves when its engine is
/// overloaded and another has room. A move is not a fallback: nothing failed, and the stream may
/// move back. A required back end only counts in its engine's load.
/// Each switch drains the decoder given up first, so no picture it decoded is lost. Each is
/// recorded in `fallbacks`, the stream's one record of them. A required back end (`cuda`/`vaapi`) never switches: pictures it cannot
/// decode are `.decoderUnavailable` errors.
///
/// Not thread-safe: owned by one worker, like the decoder inside it.
public final class BackendSupervisor {
    /// The decoder in use now; nil until the stream's codec is known.
    private var decoder: (any PictureDecoder)?
    /// The plan the next decoder opens with: the back end, its device lease (nil in software)
    /// and why. A switch gives the lease back, which frees the device's slot in the pool.
    private var plan: DecoderPlan
    /// Why `backend` is what it is, e.g. "NVDEC on cuda:0 (NVIDIA H100 80GB HBM3)" or
    /// "software: NVDEC cannot decode High 10 (10-bit)".
    public private(set) var backendReason: String
    /// The switches so far, oldest first: at selection and mid-stream (and those of the
    /// stream's earlier decoders, see `carryOver`).
    public private(set) var fallbacks: FallbackRecord
    private let options: DecoderOptions
    private let factory: any PictureDecoderFactory
    /// Access units in a row that failed on the hardware decoder.
    private var consecutiveHardwareFailures = 0
    /// Set when the hardware failed too often: the switch waits for the next keyframe.
    private var pendingSwitch: HardwareCapability.Refusal?
    /// Pictures put out so far, by every decoder of the stream: what a fallback comes after.
    private var picturesOut: UInt64 = 0
    /// The access units a hardware decoder took since it opened, while it has put out no picture
    /// (at most `maxUnconfirmed`): what a refusal that comes late must send to software again.
    private var unconfirmed: [(unit: CodedAccessUnit, index: Int64?, pts: Int64?)] = []
    /// A refusal comes within libavcodec's frame threads' packets of the first picture; past
    /// this many units without a picture, the decoder has accepted the stream.
    static let maxUnconfirmed = 16
    /// The current decoder put out a picture (or took `maxUnconfirmed` units): it runs the stream.
    private var decoderHasOutput = false
    /// The parameter set units the current decoder has been given, so each goes out once per
    /// decoder (and again to a replacement, which has seen none).
    private var parameterSetsSent: [ParameterSetKey: SlabBytes] = [:]
    /// The bytes of the packet being decoded, rebuilt in place for each access unit: the decoder
    /// copies them into its own packet, so one warm buffer serves every picture. (Fresh buffers
    /// each time landed on fresh pages, as the session's history keeps the access units.)
    private var packetBytes: [UInt8] = []
    /// The stream's place on an engine (`EnginePlacement`): taken at its first access unit, when
    /// its codec and size are known; nil before, and without `DecoderOptions.placedByCapacity`.
    private var ticket: EngineTicket?
    /// What the stream asks of its engine, from its current sequence.
    private var demand: EngineDemand?
    /// Why placement kept the planned device, added to its reason while the plan holds.
    private var placementNote: String?
    private static let packetCapacityKept = 4 << 20

    /// Chooses the back end (with `auto`: CUDA, then VA-API, then software, by the devices that
    /// open); throws when a required one has no device.
    public convenience init(options: DecoderOptions, factory: any PictureDecoderFactory) throws(DecodeError) {
        try self.init(options: options, factory: factory, knownCodec: nil)
    }

    /// `knownCodec`: the stream's codec when stated, so fallbacks at selection name it.
    private init(options: DecoderOptions, factory: any PictureDecoderFactory, knownCodec: VideoCodec?) throws(DecodeError) {
        self.options = options
        self.factory = factory
        plan = try BackendSelection.plan(options: options, codec: knownCodec)
        backendReason = plan.reason
        fallbacks = FallbackRecord(plan.fallbacks)
    }

    /// Like `init(options:factory:)`, and opens the decoder for `codec` now, so a hardware
    /// decoder that does not open shows at once.
    public convenience init(codec: VideoCodec, options: DecoderOptions, factory: any PictureDecoderFactory) throws(DecodeError) {
        try self.init(options: options, factory: factory, knownCodec: codec)
        var output = DecodeOutput()
        guard useDecoder(for: codec, into: &output) != nil else {
            throw output.errors.last ?? DecodeError(.decoderUnavailable, "no \(codec.displayName) decoder opened")
        }
    }

    public var backend: DecoderBackend { decoder?.backend ?? plan.backend }
    /// The hardware device decoding now; nil in software.
    public var device: HardwareDeviceID? { plan.lease?.device }
    /// The codec the decoder decodes; nil before the first picture.
    public var codec: VideoCodec? { decoder?.codec }

    /// This supervisor takes over a stream whose earlier decoders recorded `earlier`: the
    /// stream's record goes on from there (see `FallbackRecord`).
    public func carryOver(_ earlier: FallbackRecord) {
        fallbacks = fallbacks.following(earlier)
    }

    /// Decodes one picture's access unit: its sequence is checked against the hardware first,
    /// and the parameter sets it uses go ahead of it to a decoder that has not been given them
    /// in this form (they arrived in a dropped, skipped or picture-less access unit, or went to
    /// a decoder since replaced). `index` and `pts` come out with its picture
    /// (`DecodedFrame.accessUnitIndex`, `DecodedFrame.pts`).
    public func decode(_ unit: CodedAccessUnit, index: Int64? = nil, pts: Int64? = nil) -> DecodeOutput {
        var output = DecodeOutput()
        followPlacement(unit, into: &output)
        guard useDecoder(for: unit.codec, into: &output) != nil else { return output }
        if let refusal = plan.lease?.capability(for: unit.codec)?.refusal(for: unit.sequence) {
            guard !plan.required else {
                output.errors.append(refused(refusal))
                return output
            }
            switchToSoftware(refusal, into: &output)
        } else if let pending = pendingSwitch, unit.isKeyframe {
            switchToSoftware(pending, into: &output)
        }
        guard let decoder else { return output }
        var decoded = decoder.decode(accessUnit: packet(unit), pts: pts, index: index)
        if let refusal = decoded.hardwareRefusal {
            if plan.required {
                decoded.errors.append(refused(refusal))
            } else {
                let taken = unconfirmed
                switchToSoftware(refusal, into: &output)
                // Only a decoder that replaced the refusing one takes the units again (a software
                // decoder that could not be made left the drained hardware one in place).
                if let software = self.decoder, software !== decoder {
                    for earlier in taken {
                        append(
                            software.decode(accessUnit: packet(earlier.unit), pts: earlier.pts, index: earlier.index),
                            to: &output)
                    }
                    decoded = software.decode(accessUnit: packet(unit), pts: pts, index: index)
                }
            }
        } else if plan.lease != nil, !decoderHasOutput {
            if decoded.frames.isEmpty && unconfirmed.count < Self.maxUnconfirmed {
                unconfirmed.append((unit, index, pts))
            } else {
                decoderHasOutput = true
                unconfirmed = []
            }
        }
        noteHardwareHealth(decoded)
        append(decoded, to: &output)
        return output
    }

    /// End of stream: every picture still inside the decoder. The next stream's parameter sets
    /// go to the decoder again with its first access unit: a drained decoder may start the next
    /// stream in a fresh context (the reorder-delay probe of `DecoderOptions.emulateFFmpegProbe`
    /// opens one), which knows none of them, and a container's sets arrive only in its sample
    /// description, never in the stream.
    public func drain() -> DecodeOutput {
        var output = DecodeOutput()
        if let decoder { append(decoder.drain(), to: &output) }
        parameterSetsSent = [:]
        return output
    }

    /// Decoders made for the stream so far: a new one (a switch, a move, another codec) starts
    /// afresh at the access unit it is given first.
    public private(set) var decodersMade = 0

    /// With `DecoderOptions.emulateFFmpegProbe`: whether the decoder still probes the reorder
    /// delay, and ending that probe (see `LibavDecoder`).
    public var isProbingReorderDelay: Bool { decoder?.isProbingReorderDelay ?? false }

    public func endReorderProbe() -> DecodeOutput {
        var output = DecodeOutput()
        if let decoder { append(decoder.endReorderProbe(), to: &output) }
        return output
    }

    // MARK: - Opening

    /// The decoder for `codec`: the one in use, or (for the first picture, or a stream of
    /// another codec, after draining the previous decoder) a new one. With `auto`, a device that
    /// does not decode the codec, or whose decoder does not open, gives way to the next kind.
    private func useDecoder(for codec: VideoCodec, into output: inout DecodeOutput) -> (any PictureDecoder)? {
        if let decoder, decoder.codec == codec { return decoder }
        if let previous = decoder { append(previous.drain(), to: &output) }
        decoder = nil
        parameterSetsSent = [:]
        decoderHasOutput = false
        unconfirmed = []
        var skipping: [HardwareDeviceKind: String] = [:]
        while true {
            if let lease = plan.lease, lease.capability(for: codec) == nil {
                let message = "\(lease.summary) does not decode \(codec.displayName)"
                guard !plan.required else {
                    output.errors.append(DecodeError(.decoderUnavailable, message))
                    return nil
                }
                skipping[lease.device.kind] = message
                reselect(skipping: skipping, after: .unsupportedCodec, message, codec: codec)
                continue
            }
            do throws(DecodeError) {
                let opened = try factory.makeDecoder(plan, codec: codec, options: options)
                decoder = opened
                decodersMade += 1
                backendReason = placementNote.map { "\(plan.reason), \($0)" } ?? plan.reason
                return opened
            } catch {
                guard let device = plan.lease?.device, !plan.required else {
                    output.errors.append(
                        plan.lease == nil
                            ? error : DecodeError(.decoderUnavailable, "the \(plan.reason) decoder did not open: \(error.message)"))
                    return nil
                }
                let message = "the \(plan.reason) decoder did not open: \(error.message)"
                skipping[device.kind] = message
                reselect(skipping: skipping, after: .hwaccelInitFailed, message, codec: codec)
            }
        }
    }

    /// The next back end after the current plan's device was given up for `reason`, for a
    /// stream of `codec`.
    private func reselect(
        skipping: [HardwareDeviceKind: String], after reason: BackendFallback.Reason, _ message: String, codec: VideoCodec
    ) {
        let given = plan
        placementNote = nil
        do throws(DecodeError) {
            plan = try BackendSelection.plan(options: options, skipping: skipping, codec: codec)
        } catch {
            plan = .software(reason: "software: \(message)")
        }
        fallbacks.append(BackendFallback(
            reason: reason, codec: codec, from: given.backend, to: plan.backend, device: given.lease?.device,
            message: message, afterFrames: picturesOut))
        fallbacks.append(contentsOf: plan.fallbacks)
        backendReason = plan.reason
        ticket?.settle(on: plan.lease.map { .device($0.device) } ?? .cpu, pinned: plan.lease == nil)
    }

    // MARK: - Placing

    /// Places the stream at its first access unit (its codec and size are known then), follows
    /// its sequence's size, and moves it at a keyframe when its engine says so. With `auto` the
    /// candidates are the planned device (when it decodes this sequence) and the CPU; a required
    /// back end only counts in its engine's load.
    private func followPlacement(_ unit: CodedAccessUnit, into output: inout DecodeOutput) {
        guard options.placedByCapacity else { return }
        let format = unit.sequence.format
        let described = EngineDemand(codec: unit.codec, width: format.width, height: format.height, frameRate: format.frameRate)
        guard let ticket else {
            place(described, sequence: unit.sequence, into: &output)
            return
        }
        if let demand, demand.codec != described.codec || demand.width != described.width || demand.height != described.height {
            ticket.describe(described)
            self.demand = described
        }
        guard case .move(let engine, let reason) = ticket.accessUnit(isKeyframe: unit.isKeyframe) else { return }
        move(to: engine, reason, codec: unit.codec, into: &output)
    }

    private func place(_ demand: EngineDemand, sequence: SequenceFacts, into output: inout DecodeOutput) {
        self.demand = demand
        let pool = options.devicePool
        let current: EngineID = plan.lease.map { .device($0.device) } ?? .cpu
        guard options.backend == .auto else {
            ticket = pool.engines.place(demand, candidates: [current], movable: false).0
            return
        }
        var candidates: [EngineID] = [.cpu]
        if let lease = plan.lease, let capability = lease.capability(for: demand.codec), capability.refusal(for: sequence) == nil {
            candidates.insert(current, at: 0)
        }
        let (placed, decision) = pool.engines.place(demand, candidates: candidates)
        ticket = placed
        guard candidates.count > 1 else { return }
        if decision.engine == current {
            placementNote = decision.reason
            backendReason = "\(plan.reason), \(decision.reason)"
        } else {
            move(to: decision.engine, decision.reason, codec: demand.codec, into: &output)
        }
    }

    /// Continues the stream on `engine` from this access unit (a keyframe, or the first):
    /// the decoder in use is drained first, the new one is given the parameter sets again.
    /// When the device cannot be had, the stream stays where it is.
    private func move(to engine: EngineID, _ reason: String, codec: VideoCodec, into output: inout DecodeOutput) {
        let destination: DecoderPlan
        switch engine {
        case .cpu:
            destination = .software(reason: "software: \(reason)")
        case .device(let device):
            guard case .success(let lease) = options.devicePool.lease(among: [device]) else {
                ticket?.settle(on: plan.lease.map { .device($0.device) } ?? .cpu, pinned: false)
                return
            }
            destination = DecoderPlan(backend: device.kind.backend, lease: lease, reason: "\(lease.summary), \(reason)")
        }
        placementNote = nil
        guard let previous = decoder else {
            plan = destination
            backendReason = destination.reason
            return
        }
        var movedOptions = options
        if destination.backend == .software { movedOptions.backend = .software }
        let replacement: any PictureDecoder
        do throws(DecodeError) {
            replacement = try factory.makeDecoder(destination, codec: codec, options: movedOptions)
        } catch {
            ticket?.settle(on: plan.lease.map { .device($0.device) } ?? .cpu, pinned: false)
            return
        }
        append(previous.drain(), to: &output)
        decoder = replacement
        decodersMade += 1
        plan = destination
        backendReason = destination.reason
        parameterSetsSent = [:]
        decoderHasOutput = false
        unconfirmed = []
        consecutiveHardwareFailures = 0
        pendingSwitch = nil
    }

    // MARK: - Switching

    /// A refusal of a required back end, as the error each refused picture gets.
    private func refused(_ refusal: HardwareCapability.Refusal) -> DecodeError {
        DecodeError(
            .decoderUnavailable,
            "\(refusal.message) (\(refusal.reason.rawValue)); backend auto decodes such streams in software")
    }

    /// Counts access units in a row that failed on the hardware decoder (errors libavcodec
    /// reports for the device, not for the bitstream); at the limit, the stream moves to
    /// software from its next keyframe.
    private func noteHardwareHealth(_ decoded: DecodeOutput) {
        guard !plan.required, let device = plan.lease?.device, pendingSwitch == nil else { return }
        guard let failure = decoded.errors.last(where: \.suggestsDeviceFailure) else {
            if !decoded.frames.isEmpty || decoded.errors.isEmpty { consecutiveHardwareFailures = 0 }
            return
        }
        consecutiveHardwareFailures += 1
        guard consecutiveHardwareFailures >= options.hardwareFailureLimit else { return }
        pendingSwitch = HardwareCapability.Refusal(
            reason: .deviceErrors,
            message: "\(device.kind.engineName) on \(device) failed \(consecutiveHardwareFailures) access units in a "
                + "row (last: \(failure.message))")
    }

    /// Drains the hardware decoder (its pictures come out first) and continues in a software
    /// decoder that is given the parameter sets again.
    private func switchToSoftware(_ why: HardwareCapability.Refusal, into output: inout DecodeOutput) {
        pendingSwitch = nil
        unconfirmed = []
        consecutiveHardwareFailures = 0
        guard let previous = decoder else { return }
        append(previous.drain(), to: &output)
        var softwareOptions = options
        softwareOptions.backend = .software
        let software = DecoderPlan.software(reason: "software: \(why.message)")
        let replacement: any PictureDecoder
        do throws(DecodeError) {
            replacement = try factory.makeDecoder(software, codec: previous.codec, options: softwareOptions)
        } catch {
            output.errors.append(DecodeError(error.code, "switching to software decoding failed: \(error.message)"))
            return
        }
        fallbacks.append(BackendFallback(
            reason: why.reason, codec: previous.codec, from: previous.backend, to: .software, device: plan.lease?.device,
            message: why.message, afterFrames: picturesOut))
        decoder = replacement
        decodersMade += 1
        plan = software
        placementNote = nil
        backendReason = software.reason
        parameterSetsSent = [:]
        ticket?.settle(on: .cpu, pinned: true)
    }

    /// libavcodec decoded in software inside the hardware decoder, refusing the device without
    /// a word (`DecodeOutput.decodedInSoftware`). The pictures are right and kept, and the stream
    /// goes on in that decoder (a switch now would lose its references), but the record and the
    /// reason say the device did not decode it, for a required back end too: its caller then
    /// knows to try `auto`.
    private func noteDecodedInSoftware(_ refusal: HardwareCapability.Refusal) {
        fallbacks.append(BackendFallback(
            reason: refusal.reason, codec: decoder?.codec, from: plan.backend, to: .software, device: plan.lease?.device,
            message: refusal.message, afterFrames: picturesOut))
        backendReason = "software inside the \(plan.backend.rawValue) decoder: \(refusal.message)"
        // The cores decode it now, whatever the lease says.
        ticket?.settle(on: .cpu, pinned: true)
    }

    // MARK: - Packets

    /// The access unit, preceded by the parameter sets it uses that the decoder has not been
    /// given in this form (and those before them, see `CodedAccessUnit.appendAnnexB`), so a
    /// decoder that took over mid-stream has every set it needs.
    private func packet(_ unit: CodedAccessUnit) -> [UInt8] {
        // One unusually large access unit (a 4K keyframe) need not be held for the session's life.
        if packetBytes.capacity > Self.packetCapacityKept { packetBytes = [] }
        packetBytes.removeAll(keepingCapacity: true)
        unit.appendAnnexB(to: &packetBytes, parameterSetsUnless: { parameterSetsSent[$0.key] == $0.bytes })
        for set in unit.parameterSets { parameterSetsSent[set.key] = set.bytes }
        return packetBytes
    }

    private func append(_ decoded: DecodeOutput, to output: inout DecodeOutput) {
        if let inside = decoded.decodedInSoftware { noteDecodedInSoftware(inside) }
        picturesOut += UInt64(decoded.frames.count)
        output.frames += decoded.frames
        output.errors += decoded.errors
    }
}

/// Chooses the back end for a new decoder: `auto` tries CUDA, then VA-API, then software;
/// `cuda`/`vaapi` try only that kind and fail with `.decoderUnavailable`; `software` is software.
public enum BackendSelection {
    /// The order `choice` tries hardware kinds in.
    public static func kinds(for choice: DecoderBackendChoice) -> [HardwareDeviceKind] {
        switch choice {
        case .auto: [.cuda, .vaapi]
        case .cuda: [.cuda]
        case .vaapi: [.vaapi]
        case .software: []
        }
    }

    /// A plan holding a lease on the first kind with a device that opens (the least-loaded
    /// device of that kind). `skipping` names kinds already tried by the caller, with why,
    /// e.g. when the decoder on the leased device did not open. `codec`, when known, goes into
    /// the fallbacks the plan records.
    public static func plan(
        options: DecoderOptions, skipping: [HardwareDeviceKind: String] = [:], codec: VideoCodec? = nil
    ) throws(DecodeError) -> DecoderPlan {
        let kinds = kinds(for: options.backend)
        guard !kinds.isEmpty else { return .software() }
        let pool = options.devicePool
        var notes: [String] = []
        var fallbacks: [BackendFallback] = []
        for kind in kinds {
            if let why = skipping[kind] {
                notes.append("\(kind.displayName) unavailable: \(why)")
                continue
            }
            let devices: [HardwareDeviceID]
            switch pool.devices(kind, in: options.hardwareDevices) {
            case .failure(let error):
                notes.append("\(kind.displayName) unavailable: \(error.message)")
                continue
            case .success(let found):
                devices = found
            }
            switch pool.lease(among: devices) {
            case .success(let lease):
                return DecoderPlan(
                    backend: kind.backend, lease: lease, reason: lease.summary, required: options.backend != .auto,
                    fallbacks: chain(fallbacks, landingOn: kind.backend))
            case .failure(let error):
                let note = "\(kind.displayName) unavailable: \(error.message)"
                notes.append(note)
                fallbacks.append(BackendFallback(reason: .deviceUnavailable, codec: codec, from: kind.backend, message: note))
            }
        }
        if options.backend != .auto {
            throw DecodeError(.decoderUnavailable, notes.joined(separator: "; "))
        }
        return DecoderPlan(
            backend: .software, reason: "software: " + notes.joined(separator: "; "),
            fallbacks: chain(fallbacks, landingOn: .software))
    }

    /// Each fallback goes to the next one's back end; the last to where the selection landed.
    private static func chain(_ fallbacks: [BackendFallback], landingOn backend: DecoderBackend) -> [BackendFallback] {
        fallbacks.indices.map { index in
            var fallback = fallbacks[index]
            fallback.to = index + 1 < fallbacks.count ? fallbacks[index + 1].from : backend
            return fallback
        }
    }
}
