/// A picture decoder for one stream, on one back end: what `StreamDecoder` drives. The
/// production one is `H264Decoder`; tests inject others through a `PictureDecoderFactory`
/// (one that fails to open, or fails mid-stream while reporting itself as CUDA) to check the
/// fallback without a GPU.
///
/// Not thread-safe, like `H264Decoder`: owned by one worker.
public protocol PictureDecoder: AnyObject {
    var options: DecoderOptions { get }
    /// The back end decoding now.
    var backend: DecoderBackend { get }
    /// Why `backend` is what it is, e.g. "NVDEC on cuda:0 (NVIDIA H100 80GB HBM3)" or
    /// "software: NVDEC cannot decode High 10 (10-bit)".
    var backendReason: String { get }
    /// The device decoding now; nil in software.
    var device: HardwareDeviceID? { get }
    /// What the hardware decoding now accepts; nil in software. `StreamDecoder` checks each
    /// new SPS against it before the first picture that uses it is sent.
    var hardwareCapability: HardwareCapability? { get }
    /// Every fallback this decoder made or inherited from its selection, oldest first.
    var fallbacks: [BackendFallback] { get }
    var framesDecoded: UInt64 { get }
    var decodeErrors: Int { get }
    var lastError: DecodeError? { get }
    /// True while the first access units go to the reorder-delay probe (see `DecoderOptions.emulateFFmpegProbe`).
    var isProbingReorderDelay: Bool { get }
    /// Ends the reorder-delay probe now and returns what the buffered units decode to.
    func endReorderProbe() -> DecodeOutput
    /// Sends one complete access unit (Annex B) as one packet.
    func decode(accessUnit bytes: UnsafeRawBufferPointer, pts: Int64?) -> DecodeOutput
    /// End of stream: every picture still inside; the decoder then expects a fresh stream.
    func drain() -> DecodeOutput
}

extension PictureDecoder {
    public func decode(accessUnit bytes: [UInt8], pts: Int64? = nil) -> DecodeOutput {
        bytes.withUnsafeBytes { decode(accessUnit: $0, pts: pts) }
    }
}

/// Where `StreamDecoder` gets its decoders: at creation, and when it falls back to software.
public protocol PictureDecoderFactory: Sendable {
    /// Opens a decoder on `plan.backend` (over `plan.lease` for hardware). Throwing for a
    /// hardware plan with `backend: .auto` makes the caller try the next back end.
    func makeDecoder(_ plan: DecoderPlan, options: DecoderOptions) throws(DecodeError) -> any PictureDecoder
}

/// The production factory: libavcodec's H.264 decoder.
public struct LibavDecoderFactory: PictureDecoderFactory {
    public init() {}

    public func makeDecoder(_ plan: DecoderPlan, options: DecoderOptions) throws(DecodeError) -> any PictureDecoder {
        try H264Decoder(options: options, plan: plan)
    }
}

/// What a new decoder should be: the back end, the device lease for hardware, and why.
public struct DecoderPlan: Sendable {
    public var backend: DecoderBackend
    /// The device for a hardware plan; released when the decoder (or the plan) is dropped.
    public var lease: HardwareDeviceLease?
    public var reason: String
    /// The caller asked for this hardware back end (`cuda`/`vaapi`): refusing a stream is an
    /// error, never a silent switch to software.
    public var required: Bool
    /// Fallbacks that happened while choosing (devices that did not open...).
    public var fallbacks: [BackendFallback]
    /// The decoder numbers its pictures from `firstSequence + 1`, so a replacement decoder
    /// continues its predecessor's numbering.
    public var firstSequence: UInt64

    public init(
        backend: DecoderBackend, lease: HardwareDeviceLease? = nil, reason: String, required: Bool = false,
        fallbacks: [BackendFallback] = [], firstSequence: UInt64 = 0
    ) {
        self.backend = backend
        self.lease = lease
        self.reason = reason
        self.required = required
        self.fallbacks = fallbacks
        self.firstSequence = firstSequence
    }

    public static func software(reason: String = "software decoding requested") -> DecoderPlan {
        DecoderPlan(backend: .software, reason: reason)
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
