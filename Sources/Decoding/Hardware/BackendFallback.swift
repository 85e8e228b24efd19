import VideoCoding


/// One time a decoder gave up hardware for another back end (software, or VA-API after CUDA).
/// The session layer counts these by `reason` and shows `message`.
public struct BackendFallback: Sendable, Equatable {
    /// Stable, machine-readable reasons (metric labels). Never rename a raw value.
    public enum Reason: String, Sendable, CaseIterable {
        /// The SPS asks for a profile or bit depth the hardware does not decode (High 10, Extended, lossless).
        case unsupportedProfile = "unsupported_profile"
        /// 4:2:2, 4:4:4 or monochrome where the hardware decodes 4:2:0 only.
        case unsupportedChroma = "unsupported_chroma"
        /// The coded picture exceeds the hardware's largest size.
        case tooLarge = "too_large"
        /// libavcodec did not offer the hardware pixel format for this stream.
        case noHardwareFormat = "no_hw_format"
        /// The hardware decoder did not start (libavcodec's hwaccel init, or the decoder did not open).
        case hwaccelInitFailed = "hwaccel_init_failed"
        /// Several access units in a row failed on the hardware decoder mid-stream.
        case deviceErrors = "device_errors"
        /// Hardware devices exist but none could be opened.
        case deviceUnavailable = "device_unavailable"
        /// The device does not decode the stream's codec at all.
        case unsupportedCodec = "unsupported_codec"
        /// The hardware decoder put out pictures libavcodec decoded in software inside it: the
        /// device refused the stream without libavcodec saying so.
        case decodedInSoftware = "decoded_in_software"
    }

    public var reason: Reason
    /// The codec of the stream that fell back; nil when the fallback came before the stream's
    /// codec was known (a device that did not open when a session without a stated codec started).
    public var codec: VideoCodec?
    /// The back end given up.
    public var from: DecoderBackend
    /// The back end that took over.
    public var to: DecoderBackend
    /// The device given up, when one was in use.
    public var device: HardwareDeviceID?
    /// Human-readable, e.g. "NVDEC cannot decode High 10 (10-bit)".
    public var message: String
    /// Pictures the stream's decoders had output before the fallback (0: before the first).
    public var afterFrames: UInt64

    public init(
        reason: Reason, codec: VideoCodec? = nil, from: DecoderBackend, to: DecoderBackend = .software,
        device: HardwareDeviceID? = nil, message: String, afterFrames: UInt64 = 0
    ) {
        self.reason = reason
        self.codec = codec
        self.from = from
        self.to = to
        self.device = device
        self.message = message
        self.afterFrames = afterFrames
    }
}

/// A stream's fallbacks: the one record of them, from the `BackendSupervisor` that decides
/// them to the status a session publishes. It holds the latest `kept`, oldest first, and counts
/// every one. When a stream's decoder is replaced (released on demand, or a new back end takes
/// over), the record goes on to the next decoder's supervisor (`BackendSupervisor.carryOver`),
/// so no one keeps a second list; a reader that reports each fallback once remembers how many
/// it has seen (`total`) and asks for the rest (`since`).
public struct FallbackRecord: Sendable, Equatable, RandomAccessCollection {
    /// How many of the latest a record holds.
    public static let kept = 8

    private var latest: [BackendFallback] = []
    /// Every fallback recorded, also those no longer held.
    public private(set) var total = 0

    public init() {}

    public init(_ fallbacks: [BackendFallback]) {
        append(contentsOf: fallbacks)
    }

    mutating func append(_ fallback: BackendFallback) {
        latest.append(fallback)
        total += 1
        if latest.count > Self.kept { latest.removeFirst(latest.count - Self.kept) }
    }

    mutating func append(contentsOf fallbacks: some Sequence<BackendFallback>) {
        for fallback in fallbacks { append(fallback) }
    }

    /// `earlier`, then this record's own.
    public func following(_ earlier: FallbackRecord) -> FallbackRecord {
        var record = earlier
        record.append(contentsOf: latest)
        record.total = earlier.total + total
        return record
    }

    /// The fallbacks recorded after the first `seen` of them, as far as they are still held.
    public func since(_ seen: Int) -> ArraySlice<BackendFallback> {
        latest.suffix(Swift.max(0, Swift.min(total - seen, latest.count)))
    }

    public var startIndex: Int { latest.startIndex }
    public var endIndex: Int { latest.endIndex }
    public subscript(position: Int) -> BackendFallback { latest[position] }
}
