import Containers
import Decoding
import FoundationEssentials
import Imaging
import Ingest
import VideoCoding

/// What a server is configured with: values only (numbers, durations, choices, paths), each
/// one an option of `frametap serve`. What runs (the device pool, the budgets, the catch-up
/// pool, the factories, the clock) is `SessionServices`, built from these once at start-up.
public struct ServerConfiguration: Sendable {
    /// The decoder back end new sessions ask for (a session may override it with `PUT`).
    public var backend: DecoderBackendChoice
    /// The hardware devices sessions may decode on (`--hw-devices`); nil: every CUDA device,
    /// then every render node. New sessions go to the least loaded usable device.
    public var hardwareDevices: HardwareDeviceList?
    /// Whether each CUDA decoder has a stream of its own on the device's shared context
    /// (`--cuda-streams`, see `CUDAStreams`).
    public var cudaStreams: CUDAStreamMode = .perDecoder
    /// CUDA contexts per CUDA device, taken by new decoders in turn (`--cuda-contexts`).
    public var cudaContextsPerDevice: Int = 1
    /// Decoding capacities that replace the defaults (`--engine-capacity`), by which `auto`
    /// places sessions on the devices and the CPU (`EnginePlacement`).
    public var engineCapacities = EngineCapacityOverrides()
    /// libavcodec threads per session decoder; 1 keeps latency at the stream's own delay and
    /// lets many sessions share the cores (see `DecoderOptions.lowLatency`).
    public var decoderThreads: Int
    public var maxSessions: Int
    /// Most sessions the pushes of one scoped token (or of tokens for the same sessions) may
    /// make (`--max-sessions-per-token`); nil: no bound but `maxSessions`.
    public var maxSessionsPerToken: Int? = nil
    /// Largest body one upload request may carry; nil means unlimited (a live camera push
    /// is one endless chunked request).
    public var maxBodyBytes: Int?
    /// Largest NAL unit accepted; bigger ones are dropped and counted as `nal_too_large`.
    public var maxNALBytes: Int
    /// Largest picture decoded (from the SPS) and produced (thumbnail size requests).
    public var pictureSizeLimit: PictureSizeLimit
    /// Bytes every session's decoder may hold together (`--max-decoder-memory`): the limit of
    /// `SessionServices.decoderMemory`.
    public var decoderMemoryLimit: Int
    /// A session with no upload, no viewer and no request for this long is removed.
    public var idleTimeout: Duration
    public var defaultQuality: Int
    /// Upload bytes waiting for the decoder, per session; beyond this the uploader is paused.
    public var uploadQueueBytes: Int
    /// Longest `?wait=` a picture request may ask for.
    public var maxLongPoll: Duration
    /// An MJPEG viewer with no new picture gets the last one again after this long, which
    /// also lets a suspended connection notice that its client left.
    public var mjpegRepeatInterval: Duration
    /// How often a quiet `GET /events` reader gets a keepalive comment: it keeps proxies from
    /// closing the connection, and a write is how a reader that vanished is noticed.
    public var eventKeepaliveInterval: Duration = .seconds(15)
    /// Where multipart-answer uploads are spooled (files are unlinked as soon as they are opened).
    public var spoolDirectory: String
    /// Largest body a multipart-answer upload may spool, even when `maxBodyBytes` is unlimited:
    /// the spool is disk (or RAM where the temporary directory is a tmpfs), so it needs a bound.
    public var maxSpoolBytes: Int
    /// Bytes every spooled upload may hold together (`--max-spool-total-bytes`): the limit of
    /// `SessionServices.spoolBudget`; the upload that would pass it is answered 413 `spool_full`.
    public var maxSpoolTotalBytes: Int
    /// The most bytes of a container push kept for its demuxer to seek back in (see
    /// `SeekWindow`): an MP4 whose moov follows its media data needs all of that data.
    public var containerSeekWindow: Int = 32 << 20
    /// Which sources pull sessions may pull from (`--allow-sources`); none: pulling is off.
    public var sourcePolicy: SourcePolicy = .none
    /// Sessions that pull at once, at most.
    public var maxPullSessions: Int = 16
    /// A pull's connection and header must come within this.
    public var sourceConnectTimeout: Duration = .seconds(10)
    /// A live pull that sends nothing for this long is lost (and retried).
    public var sourceReadTimeout: Duration = .seconds(10)
    /// The longest wait between a pull's attempts (the back-off doubles from 0.5 s up to it).
    public var sourceRetryMax: Duration = .seconds(30)
    /// The decode mode of sessions that do not set one (`--default-decode`).
    public var defaultDecode: DecodeMode
    /// Each session's compressed history: at most this much time from its oldest held access
    /// unit to its newest (`--history-seconds`) ...
    public var historySeconds: Duration
    /// ... and at most this many bytes (`--history-bytes`), in whole GOPs.
    public var historyBytes: Int
    /// What every session's history may keep alive together (`--max-history-memory`): the limit
    /// of `SessionServices.historyMemory`.
    public var historyMemoryLimit: Int
    /// An on-demand session keeps decoding this long after the last request for a picture
    /// (and its last MJPEG viewer), then releases its decoder (`--on-demand-linger`).
    public var onDemandLinger: Duration
    /// Catch-ups decoding at once (`--max-catchup-decoders`): the slots of `SessionServices.catchUpPool`.
    public var catchUpDecoders: Int
    /// Catch-ups waiting for a slot, at most (`--max-catchup-queue`); nil: 8 per slot.
    public var catchUpQueue: Int?
    /// libavcodec threads of a catch-up decoder (0 = automatic). A catch-up decodes a GOP as
    /// fast as it can while someone waits, so it uses frame threads where live decoders use
    /// one; the pool bounds how many run at once.
    public var catchUpDecoderThreads: Int

    public init(
        backend: DecoderBackendChoice = .auto,
        hardwareDevices: HardwareDeviceList? = nil,
        decoderThreads: Int = 1,
        maxSessions: Int = 64,
        maxBodyBytes: Int? = nil,
        maxNALBytes: Int = 8 << 20,
        pictureSizeLimit: PictureSizeLimit = PictureSizeLimit(),
        decoderMemoryLimit: Int = DecoderMemoryBudget.defaultLimit(),
        idleTimeout: Duration = .seconds(300),
        defaultQuality: Int = PictureOptions.defaultQuality,
        uploadQueueBytes: Int = 1 << 20,
        maxLongPoll: Duration = .seconds(30),
        mjpegRepeatInterval: Duration = .seconds(1),
        spoolDirectory: String = FileManager.default.temporaryDirectory.path,
        maxSpoolBytes: Int = 2 << 30,
        maxSpoolTotalBytes: Int = 4 << 30,
        defaultDecode: DecodeMode = .all,
        historySeconds: Duration = ServerConfiguration.defaultHistorySeconds,
        historyBytes: Int = ServerConfiguration.defaultHistoryBytes,
        historyMemoryLimit: Int = HistoryMemoryBudget.defaultLimit(),
        onDemandLinger: Duration = .seconds(10),
        catchUpDecoders: Int = ServerConfiguration.defaultCatchUpDecoders,
        catchUpQueue: Int? = nil,
        catchUpDecoderThreads: Int = ServerConfiguration.defaultCatchUpDecoderThreads
    ) {
        self.backend = backend
        self.hardwareDevices = hardwareDevices
        self.decoderThreads = decoderThreads
        self.maxSessions = maxSessions
        self.maxBodyBytes = maxBodyBytes
        self.maxNALBytes = maxNALBytes
        self.pictureSizeLimit = pictureSizeLimit
        self.decoderMemoryLimit = decoderMemoryLimit
        self.idleTimeout = idleTimeout
        self.defaultQuality = defaultQuality
        self.uploadQueueBytes = uploadQueueBytes
        self.maxLongPoll = maxLongPoll
        self.mjpegRepeatInterval = mjpegRepeatInterval
        self.spoolDirectory = spoolDirectory
        self.maxSpoolBytes = maxSpoolBytes
        self.maxSpoolTotalBytes = maxSpoolTotalBytes
        self.defaultDecode = defaultDecode
        self.historySeconds = historySeconds
        self.historyBytes = historyBytes
        self.historyMemoryLimit = historyMemoryLimit
        self.onDemandLinger = onDemandLinger
        self.catchUpDecoders = catchUpDecoders
        self.catchUpQueue = catchUpQueue
        self.catchUpDecoderThreads = catchUpDecoderThreads
    }

    /// 10 s: at the usual 1-4 s GOP of cameras that is several GOPs, enough to look at what just
    /// happened (an alarm that fired a few seconds ago) and to start a catch-up one GOP early
    /// for open GOPs; longer pasts are a recorder's job. At 6 Mbit/s (1080p30) it is 7.5 MB.
    public static let defaultHistorySeconds: Duration = .seconds(10)
    /// 64 MiB: 10 s of a 50 Mbit/s stream (4K cameras at their highest rates), so the time
    /// bound is the one that binds for real cameras and this one bounds a hostile or
    /// mis-configured stream (times `--max-sessions`, it bounds the whole server's history).
    public static let defaultHistoryBytes = 64 << 20
    /// One per core: catch-ups then use the machine when nothing else does, and never more.
    public static var defaultCatchUpDecoders: Int { max(1, ProcessInfo.processInfo.activeProcessorCount) }
    /// Waiting catch-ups past the running ones: 8 per slot, about 1-2 s of waiting for 1080p GOPs.
    public static func defaultCatchUpQueue(slots: Int) -> Int { 8 * slots }

    /// Catch-ups that may wait for a slot: `catchUpQueue`, or 8 per slot.
    public var catchUpQueueLimit: Int { catchUpQueue ?? Self.defaultCatchUpQueue(slots: catchUpDecoders) }
    /// Two frame threads, capped at the cores.
    public static var defaultCatchUpDecoderThreads: Int { min(2, max(1, ProcessInfo.processInfo.activeProcessorCount)) }

    /// How a session's pull connects, waits and retries.
    var pullSettings: PullSettings {
        PullSettings(
            policy: sourcePolicy, connectTimeout: sourceConnectTimeout, readTimeout: sourceReadTimeout,
            seekWindow: containerSeekWindow, retryMax: sourceRetryMax, queueBytes: uploadQueueBytes)
    }

    /// The bounds of each session's compressed history.
    var historyLimits: CompressedHistory.Limits {
        CompressedHistory.Limits(seconds: historySeconds, bytes: historyBytes)
    }

    /// Rejects values that would make the server misbehave rather than fail loudly later.
    public func validated() throws(SessionError) -> ServerConfiguration {
        func require(_ condition: Bool, _ message: String) throws(SessionError) {
            if !condition { throw SessionError(.invalidParameter, message) }
        }
        try require((0...64).contains(decoderThreads), "decoder threads must be 0...64")
        try require((1...16).contains(cudaContextsPerDevice), "CUDA contexts per device must be 1...16")
        try require(maxSessions >= 1, "max sessions must be at least 1")
        try require(maxBodyBytes.map { $0 >= 1 } ?? true, "max body bytes must be positive")
        try require(maxSpoolBytes >= 1, "max spool bytes must be positive")
        try require(maxSpoolTotalBytes >= 1, "max spool total bytes must be positive")
        try require(maxNALBytes >= 1024, "max NAL bytes must be at least 1024")
        try require(idleTimeout > .zero, "idle timeout must be positive")
        try require(PictureOptions.qualityRange.contains(defaultQuality), "quality must be 1...100")
        try require(uploadQueueBytes >= 64 << 10, "upload queue must hold at least 64 KiB")
        try require(maxLongPoll >= .zero, "long-poll limit must not be negative")
        try require(mjpegRepeatInterval > .zero, "MJPEG repeat interval must be positive")
        try require(containerSeekWindow >= 0, "the container seek window must not be negative")
        try require(maxPullSessions >= 0, "max pull sessions must not be negative")
        try require(sourceConnectTimeout > .zero && sourceReadTimeout > .zero, "source timeouts must be positive")
        try require(sourceRetryMax >= PullSettings.firstRetryDelay, "the source retry maximum must be at least 0.5 s")
        try require(eventKeepaliveInterval > .zero, "event keepalive interval must be positive")
        try require(historySeconds > .zero, "history seconds must be positive")
        try require(historyBytes >= 1 << 20, "history bytes must be at least 1048576")
        try require(onDemandLinger >= .zero, "on-demand linger must not be negative")
        try require((0...64).contains(catchUpDecoderThreads), "catch-up decoder threads must be 0...64")
        try require(catchUpDecoders >= 1, "catch-up decoders must be at least 1")
        try require(catchUpQueueLimit >= 0, "the catch-up queue must not be negative")
        try require(
            pictureSizeLimit.maxWidth > 0 && pictureSizeLimit.maxHeight > 0 && pictureSizeLimit.maxPixels > 0,
            "picture size limits must be positive")
        return self
    }
}
