import VideoCoding

/// The decoder back end a caller asks for.
public enum DecoderBackendChoice: String, Sendable, CaseIterable {
    /// The first that works: CUDA (NVDEC), then VA-API, then software. Each decoder falls back
    /// to software on its own when its hardware cannot take the stream (see `StreamDecoder`).
    case auto
    /// NVDEC through CUDA or nothing: creating the decoder fails with `.decoderUnavailable`
    /// without a device, and a stream NVDEC cannot decode is refused, never decoded in software.
    case cuda
    /// VA-API or nothing, like `cuda`.
    case vaapi
    /// libavcodec's software H.264 decoder.
    case software
}

/// The decoder back end actually in use.
public enum DecoderBackend: String, Sendable, CaseIterable {
    case software, cuda, vaapi

    /// The hardware kind behind this back end; nil for software.
    public var hardwareKind: HardwareDeviceKind? {
        switch self {
        case .software: nil
        case .cuda: .cuda
        case .vaapi: .vaapi
        }
    }
}

/// Largest picture a decoder accepts, checked from the SPS before any pixel memory is allocated,
/// so a hostile or broken stream cannot make the service allocate gigabytes.
public struct PictureSizeLimit: Sendable, Equatable {
    public var maxWidth: Int
    public var maxHeight: Int
    public var maxPixels: Int

    /// The default bound of each side: 8192, the largest side libavcodec's H.264 levels reach.
    public static let defaultMaxSide = 8192
    /// The default bound of the area: 36 Mpixels (8K UHD is 33.2 Mpixels).
    public static let defaultMaxPixels = 36_000_000

    public init(
        maxWidth: Int = PictureSizeLimit.defaultMaxSide, maxHeight: Int = PictureSizeLimit.defaultMaxSide,
        maxPixels: Int = PictureSizeLimit.defaultMaxPixels
    ) {
        self.maxWidth = maxWidth
        self.maxHeight = maxHeight
        self.maxPixels = maxPixels
    }

    /// Throws `.pictureTooLarge` when a `width`x`height` picture exceeds the limit.
    /// Pass the coded size: that is what the decoder allocates.
    public func check(width: Int, height: Int) throws(DecodeError) {
        guard width > maxWidth || height > maxHeight || width * height > maxPixels else { return }
        throw DecodeError(
            .pictureTooLarge,
            "picture \(width)x\(height) exceeds the limit of \(maxWidth)x\(maxHeight), \(maxPixels) pixels")
    }
}

/// How libavcodec spreads one stream over several threads.
public enum DecoderThreadType: String, Sendable, CaseIterable {
    /// Several pictures at once: scales with any stream, but each extra thread delays output by one picture.
    case frame
    /// Several slices of one picture at once: no added delay, but only helps multi-slice streams.
    case slice
    /// Let libavcodec use frame threading where it can, slice threading otherwise.
    case auto
}

/// Everything that configures an `LibavDecoder` or `StreamDecoder`.
///
/// Thread defaults were chosen by measurement on this project's 2-core build host (other
/// builds running, load ~2), software-decoding a 1920x1080 30 fps libx264 stream (High, one
/// slice per picture, B-frames, 300 pictures), alternating each run with
/// `ffmpeg -threads 1 -i F -f null -` (214-257 fps, process start and demuxing included):
///
/// | configuration                 | pictures/s | first picture out after | access units in flight |
/// |-------------------------------|-----------:|------------------------:|-----------------------:|
/// | 1 thread                      |   270-273  | 3 access units          | 2                      |
/// | 2 threads, frame              |   367-487  | 4                       | 3                      |
/// | 2 threads, slice              |   264-272  | (no gain: one slice per picture)                 |
/// | 0 = auto (3 threads), frame+slice | 334-399 | 5 (9 with the probe)  | 4                      |
///
/// Frame threading gains 1.4-1.8x for one stream, but each extra thread holds back one more
/// picture, and a server runs many sessions on the same two cores, where extra threads only add
/// contention. So the default (and `lowLatency`, for the server) is one thread; the CLI decodes
/// one file as fast as it can and uses `throughput` (automatic frame threading plus the CLI's
/// probe). A GPU back end does the work itself: hardware codec contexts always get one thread.
/// `AV_CODEC_FLAG_LOW_DELAY` is not offered: its effect here is switching frame threading off,
/// and with one thread there is no frame-threading delay left for it to remove.
public struct DecoderOptions: Sendable {
    public var backend: DecoderBackendChoice
    /// Decoder threads; 0 lets libavcodec pick (one per core, plus one).
    public var threads: Int
    public var threadType: DecoderThreadType
    /// Do what the ffmpeg CLI's stream probe (avformat_find_stream_info) does before it
    /// decodes, so the output equals the CLI's frame for frame:
    ///
    /// - Reorder delay: the probe decodes up to 7 pictures with a throwaway decoder and opens
    ///   the real one with the reorder delay (`has_b_frames`) it learned. For streams that
    ///   reorder pictures without announcing it in the SPS (no VUI `bitstream_restriction`), a
    ///   decoder starting at 0 drops the pictures that come out "too late" until it has learned
    ///   the delay: measured on the conformance stream Cisco_Men_whisper_640x320_CABAC_Bframe_9,
    ///   2 of 9 pictures instead of the CLI's 9. `LibavDecoder` does this (first access units,
    ///   until 7 pictures or 5 MB, decoded once by a one-thread software probe, then for real).
    /// - Parameter sets: the probe hands the first SPS/PPS it finds to the decoder as
    ///   extradata, so pictures *before* them in the stream (e.g. an IDR whose SPS/PPS were cut
    ///   off) still decode. `StreamDecoder` does this by holding access units until the first
    ///   SPS and PPS (at most 5 MB), then sending those ahead of the held units.
    ///
    /// The cost is latency at the start of each stream (the held-back pictures), so the CLI
    /// turns it on and a live server does not. Streams that begin with their parameter sets and
    /// announce their reordering (x264 always does) decode identically either way.
    public var emulateFFmpegProbe: Bool
    /// With `emulateFFmpegProbe`: skip the reorder-delay probe when the stream's SPS already
    /// says how much it reorders (VUI `max_num_reorder_frames`) or cannot reorder (Baseline,
    /// intra-only profiles). libavcodec then sets the delay from the SPS, so the probe would
    /// learn nothing and only hold back the first pictures. A server wants this; the CLI keeps
    /// the full emulation for byte-exact parity even with streams whose SPS understates it.
    public var probeOnlyUnannouncedReordering: Bool = false
    public var sizeLimit: PictureSizeLimit
    /// The hardware devices decoders may use (`--hw-devices`); nil: every CUDA device the
    /// driver reports, then every `/dev/dri/renderD*`.
    public var hardwareDevices: HardwareDeviceList?
    /// Where hardware decoders get their device context; tests inject their own.
    public var devicePool: HardwareDevicePool
    /// Counts downloads of hardware-decoded pictures to system memory (`/metrics`).
    public var frameDownloads: FrameDownloadCounter
    /// What every decoder of the process may hold together; nil: no budget (the CLI decodes one
    /// file, whose size limit is `sizeLimit`).
    public var memoryBudget: DecoderMemoryBudget?
    /// Pictures of one hardware decoder that may stay in GPU memory at once before the oldest
    /// is downloaded to free its surface (see `DeviceFrameBudget`); the codec context gets one
    /// more than this as `extra_hw_frames`.
    public var deviceFramesHeld: Int = 3
    /// With `auto`: this many access units in a row failing on the hardware decoder make the
    /// stream continue in software from its next keyframe (see `StreamDecoder`).
    public var hardwareFailureLimit: Int = 3
    /// Whether each CUDA decoder queues its GPU work on a stream of its own (`CUDAStreams`).
    public var cudaStreams: CUDAStreamMode = .perDecoder
    /// The decoder counts in its engine's load (`HardwareDevicePool.engines`), and with `auto`
    /// is placed, and moved, by the engines' headroom: a server's live decoders. Off for the
    /// CLI's one file (decoded as fast as it goes, on the first back end that works) and for
    /// catch-ups, short bursts whose rate says nothing of a live stream's.
    public var placedByCapacity: Bool = false

    public init(
        backend: DecoderBackendChoice = .auto,
        threads: Int = 1,
        threadType: DecoderThreadType = .slice,
        emulateFFmpegProbe: Bool = false,
        sizeLimit: PictureSizeLimit = PictureSizeLimit(),
        hardwareDevices: HardwareDeviceList? = nil,
        devicePool: HardwareDevicePool = .shared,
        frameDownloads: FrameDownloadCounter = .shared
    ) {
        self.backend = backend
        self.threads = threads
        self.threadType = threadType
        self.emulateFFmpegProbe = emulateFFmpegProbe
        self.sizeLimit = sizeLimit
        self.hardwareDevices = hardwareDevices
        self.devicePool = devicePool
        self.frameDownloads = frameDownloads
    }

    /// For a server session: one thread and no probe, so a picture comes out as soon as it is
    /// decodable and many sessions share the cores without oversubscription.
    public static func lowLatency(backend: DecoderBackendChoice = .auto) -> DecoderOptions {
        DecoderOptions(backend: backend, threads: 1, threadType: .slice, emulateFFmpegProbe: false)
    }

    /// For batch decoding (the CLI): every core, frame threading, and the CLI's reorder probe so
    /// the output equals ffmpeg's; output delay does not matter.
    public static func throughput(backend: DecoderBackendChoice = .auto) -> DecoderOptions {
        DecoderOptions(backend: backend, threads: 0, threadType: .auto, emulateFFmpegProbe: true)
    }

    /// Rejects values libavcodec would misbehave with.
    public func validated() throws(DecodeError) -> DecoderOptions {
        guard (0...64).contains(threads) else {
            throw DecodeError(.invalidOptions, "decoder threads must be 0...64, got \(threads)")
        }
        guard sizeLimit.maxWidth > 0, sizeLimit.maxHeight > 0, sizeLimit.maxPixels > 0 else {
            throw DecodeError(.invalidOptions, "picture size limits must be positive")
        }
        guard (1...16).contains(deviceFramesHeld) else {
            throw DecodeError(.invalidOptions, "pictures held on the device must be 1...16, got \(deviceFramesHeld)")
        }
        guard hardwareFailureLimit >= 1 else {
            throw DecodeError(.invalidOptions, "the hardware failure limit must be at least 1, got \(hardwareFailureLimit)")
        }
        return self
    }
}
