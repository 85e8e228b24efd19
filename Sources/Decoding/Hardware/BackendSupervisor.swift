import H264

/// Which back end decodes one stream, and when that changes: the one place hardware fallback
/// is decided. It holds the decoder, the device lease it decodes on, the capability check,
/// the health count and a pending switch.
///
/// Fallback is per stream, never per process, and one-way: once a stream is in software it
/// stays there. With `auto` the stream moves to a software decoder when
/// - the hardware decoder does not open (`hwaccel_init_failed`): at creation, trying the next
///   kind (`BackendSelection`: CUDA, then VA-API, then software);
/// - a new SPS asks for what the hardware cannot decode (`HardwareCapability`: High 10, 4:2:2,
///   4:4:4, too large...): before the first picture using that SPS is sent;
/// - libavcodec turns the hardware down itself (no hardware format offered, hwaccel init
///   failed; `DecodeOutput.hardwareRefusal`): the refused access unit is sent again to the
///   software decoder;
/// - `DecoderOptions.hardwareFailureLimit` access units in a row fail on the device
///   (`device_errors`): from the next keyframe (IDR or recovery point) on; until then the
///   hardware decoder keeps going.
/// Each switch drains the decoder given up first, so no picture it decoded is lost, and the
/// software decoder numbers its pictures on from the last one. Each is recorded in
/// `fallbacks`. A required back end (`cuda`/`vaapi`) never switches: pictures it cannot
/// decode are `.decoderUnavailable` errors.
///
/// Not thread-safe: owned by one worker, like the decoder inside it.
public final class BackendSupervisor {
    /// The decoder in use now.
    private var decoder: any PictureDecoder
    /// The device `decoder` decodes on; nil in software. Dropped at a switch, which gives the
    /// device's slot in the pool back.
    private var lease: HardwareDeviceLease?
    private var required: Bool
    /// Why `backend` is what it is, e.g. "NVDEC on cuda:0 (NVIDIA H100 80GB HBM3)" or
    /// "software: NVDEC cannot decode High 10 (10-bit)".
    public private(set) var backendReason: String
    /// Every switch so far, oldest first: at selection and mid-stream.
    public private(set) var fallbacks: [BackendFallback]
    private let options: DecoderOptions
    private let factory: any PictureDecoderFactory
    /// Access units in a row that failed on the hardware decoder.
    private var consecutiveHardwareFailures = 0
    /// Set when the hardware failed too often: the switch waits for the next keyframe.
    private var pendingSwitch: HardwareCapability.Refusal?
    /// The newest picture's sequence number, so a replacement decoder continues the numbering.
    private var lastSequence: UInt64 = 0
    /// The parameter set units the current decoder has been given, so each goes out once per
    /// decoder (and again to a replacement, which has seen none).
    private var parameterSetsSent: [ParameterSetKey: [UInt8]] = [:]

    /// Opens the first back end that gives a working decoder: with `auto`, a hardware decoder
    /// that does not open makes the next kind (then software) take over.
    public init(options: DecoderOptions, factory: any PictureDecoderFactory) throws(DecodeError) {
        self.options = options
        self.factory = factory
        var skipping: [HardwareDeviceKind: String] = [:]
        var failedOpens: [BackendFallback] = []
        while true {
            var plan = try BackendSelection.plan(options: options, skipping: skipping)
            plan.fallbacks = failedOpens + plan.fallbacks
            do throws(DecodeError) {
                decoder = try factory.makeDecoder(plan, options: options)
                lease = plan.lease
                required = plan.required
                backendReason = plan.reason
                fallbacks = plan.fallbacks
                return
            } catch {
                guard let device = plan.lease?.device else { throw error }
                let message = "the \(plan.reason) decoder did not open: \(error.message)"
                guard !plan.required else { throw DecodeError(.decoderUnavailable, message) }
                skipping[device.kind] = message
                failedOpens.append(BackendFallback(
                    reason: .hwaccelInitFailed, from: plan.backend, to: .software, device: device, message: message))
            }
        }
    }

    public var backend: DecoderBackend { decoder.backend }
    /// The hardware device decoding now; nil in software.
    public var device: HardwareDeviceID? { lease?.device }

    /// Decodes one picture's access unit. `parameterSets` are the SPS/PPS units it uses (each
    /// marked when the access unit carries it itself), sent ahead of it to a decoder that has
    /// not seen them in this form; `sps` is checked against the hardware first.
    public func decode(
        _ accessUnit: [UInt8], parameterSets: [ParameterSetUnit], sps: SequenceParameterSet?, isKeyframe: Bool
    ) -> DecodeOutput {
        var output = DecodeOutput()
        if let sps, let refusal = lease?.capability.refusal(for: sps) {
            guard !required else {
                output.errors.append(refused(refusal))
                return output
            }
            switchToSoftware(refusal, into: &output)
        } else if let pending = pendingSwitch, isKeyframe {
            switchToSoftware(pending, into: &output)
        }
        var decoded = decoder.decode(accessUnit: packet(accessUnit, parameterSets: parameterSets))
        if let refusal = decoded.hardwareRefusal {
            if required {
                decoded.errors.append(refused(refusal))
            } else {
                switchToSoftware(refusal, into: &output)
                decoded = decoder.decode(accessUnit: packet(accessUnit, parameterSets: parameterSets))
            }
        }
        noteHardwareHealth(decoded)
        append(decoded, to: &output)
        return output
    }

    /// End of stream: every picture still inside the decoder.
    public func drain() -> DecodeOutput {
        var output = DecodeOutput()
        append(decoder.drain(), to: &output)
        return output
    }

    /// With `DecoderOptions.emulateFFmpegProbe`: whether the decoder still probes the reorder
    /// delay, and ending that probe (see `H264Decoder`).
    public var isProbingReorderDelay: Bool { decoder.isProbingReorderDelay }

    public func endReorderProbe() -> DecodeOutput {
        var output = DecodeOutput()
        append(decoder.endReorderProbe(), to: &output)
        return output
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
        guard !required, let device = lease?.device, pendingSwitch == nil else { return }
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
    /// decoder that numbers pictures on from the last one and is given the parameter sets again.
    private func switchToSoftware(_ why: HardwareCapability.Refusal, into output: inout DecodeOutput) {
        pendingSwitch = nil
        consecutiveHardwareFailures = 0
        append(decoder.drain(), to: &output)
        var softwareOptions = options
        softwareOptions.backend = .software
        var plan = DecoderPlan.software(reason: "software: \(why.message)")
        plan.firstSequence = lastSequence
        let replacement: any PictureDecoder
        do throws(DecodeError) {
            replacement = try factory.makeDecoder(plan, options: softwareOptions)
        } catch {
            output.errors.append(DecodeError(error.code, "switching to software decoding failed: \(error.message)"))
            return
        }
        fallbacks.append(BackendFallback(
            reason: why.reason, from: decoder.backend, to: .software, device: lease?.device, message: why.message,
            afterFrames: lastSequence))
        decoder = replacement
        lease = nil
        backendReason = plan.reason
        parameterSetsSent = [:]
    }

    // MARK: - Packets

    /// The access unit, preceded by the parameter sets it uses that the decoder has not been
    /// given in this form (they arrived in a dropped, skipped or picture-less access unit, or
    /// went to a decoder since replaced).
    private func packet(_ accessUnit: [UInt8], parameterSets: [ParameterSetUnit]) -> [UInt8] {
        var bytes: [UInt8] = []
        for set in parameterSets {
            if !set.carriedByAccessUnit && parameterSetsSent[set.key] != set.bytes {
                bytes += [0, 0, 0, 1] + set.bytes
            }
            parameterSetsSent[set.key] = set.bytes
        }
        return bytes.isEmpty ? accessUnit : bytes + accessUnit
    }

    private func append(_ decoded: DecodeOutput, to output: inout DecodeOutput) {
        if let newest = decoded.frames.last { lastSequence = max(lastSequence, newest.sequence) }
        output.frames += decoded.frames
        output.errors += decoded.errors
    }
}

/// A parameter set unit (SPS, PPS) a picture uses, as `BackendSupervisor.decode` takes it.
public struct ParameterSetUnit: Sendable {
    public var key: ParameterSetKey
    /// The NAL unit, without a start code.
    public var bytes: [UInt8]
    /// The picture's access unit holds this unit itself, so it needs no copy in front.
    public var carriedByAccessUnit: Bool

    public init(key: ParameterSetKey, bytes: [UInt8], carriedByAccessUnit: Bool) {
        self.key = key
        self.bytes = bytes
        self.carriedByAccessUnit = carriedByAccessUnit
    }
}

/// Which parameter set a unit is: its NAL unit type and its id.
public struct ParameterSetKey: Hashable, Sendable {
    public var nalType: UInt8
    public var id: Int

    public init(nalType: UInt8, id: Int) {
        self.nalType = nalType
        self.id = id
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
    /// e.g. when the decoder on the leased device did not open.
    public static func plan(
        options: DecoderOptions, skipping: [HardwareDeviceKind: String] = [:]
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
                fallbacks.append(BackendFallback(reason: .deviceUnavailable, from: kind.backend, message: note))
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
