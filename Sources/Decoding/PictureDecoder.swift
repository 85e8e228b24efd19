import VideoCoding

/// A picture decoder for one stream, of one codec, on one back end, fixed for its life: what
/// `BackendSupervisor` drives, and replaces when the stream moves to another back end or codec.
/// The production one is `LibavDecoder`; tests inject others through a `PictureDecoderFactory`
/// (one that fails to open, or fails mid-stream while reporting itself as CUDA) to check the
/// fallback without a GPU.
///
/// Not thread-safe, like `LibavDecoder`: owned by one worker.
public protocol PictureDecoder: AnyObject {
    var codec: VideoCodec { get }
    var options: DecoderOptions { get }
    /// The back end this decoder decodes on.
    var backend: DecoderBackend { get }
    var framesDecoded: UInt64 { get }
    var decodeErrors: Int { get }
    var lastError: DecodeError? { get }
    /// True while the first access units go to the reorder-delay probe (see `DecoderOptions.emulateFFmpegProbe`).
    var isProbingReorderDelay: Bool { get }
    /// Ends the reorder-delay probe now and returns what the buffered units decode to.
    func endReorderProbe() -> DecodeOutput
    /// Sends one complete access unit (Annex B) as one packet. A hardware decoder that
    /// libavcodec will not run this stream on says so in `DecodeOutput.hardwareRefusal` and
    /// decodes nothing; what happens next is `BackendSupervisor`'s decision. `index` comes out
    /// with the picture as `DecodedFrame.accessUnitIndex`.
    func decode(accessUnit bytes: UnsafeRawBufferPointer, pts: Int64?, index: Int64?) -> DecodeOutput
    /// End of stream: every picture still inside; the decoder then expects a fresh stream.
    func drain() -> DecodeOutput
    /// The decoder, drained, serves another stream of the same shape (a warm catch-up decoder):
    /// it keeps its codec context, and the hardware decoder inside, wherever the result is the same.
    func reuseForAnotherStream()
}

extension PictureDecoder {
    public func reuseForAnotherStream() {}
}

extension PictureDecoder {
    public func decode(accessUnit bytes: [UInt8], pts: Int64? = nil, index: Int64? = nil) -> DecodeOutput {
        bytes.withUnsafeBytes { decode(accessUnit: $0, pts: pts, index: index) }
    }
}

/// Where `BackendSupervisor` gets its decoders: at creation, and when it falls back to software.
public protocol PictureDecoderFactory: Sendable {
    /// Opens a decoder of `codec` on `plan.backend` (over `plan.lease` for hardware), or throws.
    func makeDecoder(_ plan: DecoderPlan, codec: VideoCodec, options: DecoderOptions) throws(DecodeError)
        -> any PictureDecoder
}

/// The production factory: libavcodec's decoders.
public struct LibavDecoderFactory: PictureDecoderFactory {
    public init() {}

    public func makeDecoder(_ plan: DecoderPlan, codec: VideoCodec, options: DecoderOptions) throws(DecodeError)
        -> any PictureDecoder
    {
        try LibavDecoder(codec: codec, options: options, plan: plan)
    }
}

/// What a new decoder should be: the back end, the device lease for hardware, and why.
public struct DecoderPlan: Sendable {
    public var backend: DecoderBackend
    /// The device for a hardware plan. `BackendSupervisor` keeps it for as long as a decoder
    /// of this plan decodes on the device (the pool counts sessions per device by leases).
    public var lease: HardwareDeviceLease?
    public var reason: String
    /// The caller asked for this hardware back end (`cuda`/`vaapi`): refusing a stream is an
    /// error, never a silent switch to software.
    public var required: Bool
    /// Fallbacks that happened while choosing (devices that did not open...).
    public var fallbacks: [BackendFallback]

    public init(
        backend: DecoderBackend, lease: HardwareDeviceLease? = nil, reason: String, required: Bool = false,
        fallbacks: [BackendFallback] = []
    ) {
        self.backend = backend
        self.lease = lease
        self.reason = reason
        self.required = required
        self.fallbacks = fallbacks
    }

    public static func software(reason: String = "software decoding requested") -> DecoderPlan {
        DecoderPlan(backend: .software, reason: reason)
    }
}

/// What one `decode` or `drain` call produced. A packet that fails does not stop the call:
/// the frames decoded before and after it are still here, and each failure is in `errors`.
public struct DecodeOutput: Sendable {
    public var frames: [DecodedFrame] = []
    public var errors: [DecodeError] = []
    /// Set by a hardware decoder when libavcodec would not decode this stream on the device
    /// (it offered no hardware format for it, or the hwaccel did not start); the access unit
    /// was not decoded.
    public var hardwareRefusal: HardwareCapability.Refusal?
    /// Set by a hardware decoder, once, when libavcodec put out a picture it decoded in software
    /// inside it (the hwaccel did not start and libavcodec went on without it, naming nothing):
    /// the picture is in `frames` and correct, but the device did not decode it.
    public var decodedInSoftware: HardwareCapability.Refusal?

    public init() {}
}
