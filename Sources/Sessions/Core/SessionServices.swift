import Decoding
import Imaging
import Ingest
import Timekeeping

/// What every session shares at run time: the clock, the hardware devices, where decoders and
/// encoders come from, the budgets of decoder memory, history and spool, and the catch-up
/// decoders.
/// Built once at start-up (by `frametap serve`, or a test), from a `ServerConfiguration`'s
/// values, and handed to the registry, which hands it to each session.
public struct SessionServices: Sendable {
    /// The one clock of the service: uptime, wall clock and timers for every session.
    public var clock: any ServiceClock
    /// One device context per device for the whole process, shared by every session's decoder.
    public var devicePool: HardwareDevicePool
    /// Counts downloads of hardware-decoded pictures to system memory.
    public var frameDownloads: FrameDownloadCounter
    /// Where session decoders come from: libavcodec's, or a test's pretend hardware.
    public var decoderFactory: any PictureDecoderFactory
    /// Where each session's picture encoder comes from: `PictureEncoders.standard()`, or a test's.
    public var encoderFactory: any PictureEncoderFactory
    /// What every session's decoder may hold together (`--max-decoder-memory`).
    public var decoderMemory: DecoderMemoryBudget
    /// What every spooled upload may hold together (`--max-spool-total-bytes`).
    public var spoolBudget: SpoolBudget
    /// What every session's history may keep alive together (`--max-history-memory`).
    public var historyMemory: HistoryMemoryBudget
    /// The catch-up decoders every session shares (`--max-catchup-decoders`, `--max-catchup-queue`).
    public var catchUpPool: CatchUpPool

    public init(
        clock: any ServiceClock, devicePool: HardwareDevicePool, frameDownloads: FrameDownloadCounter,
        decoderFactory: any PictureDecoderFactory, encoderFactory: any PictureEncoderFactory,
        decoderMemory: DecoderMemoryBudget, spoolBudget: SpoolBudget, historyMemory: HistoryMemoryBudget,
        catchUpPool: CatchUpPool
    ) {
        self.clock = clock
        self.devicePool = devicePool
        self.frameDownloads = frameDownloads
        self.decoderFactory = decoderFactory
        self.encoderFactory = encoderFactory
        self.decoderMemory = decoderMemory
        self.spoolBudget = spoolBudget
        self.historyMemory = historyMemory
        self.catchUpPool = catchUpPool
    }

    /// The budgets and the catch-up pool as `configuration` sizes them, on `clock`.
    public init(
        configuration: ServerConfiguration, clock: any ServiceClock, devicePool: HardwareDevicePool,
        frameDownloads: FrameDownloadCounter, decoderFactory: any PictureDecoderFactory,
        encoderFactory: any PictureEncoderFactory
    ) {
        self.init(
            clock: clock, devicePool: devicePool, frameDownloads: frameDownloads, decoderFactory: decoderFactory,
            encoderFactory: encoderFactory, decoderMemory: DecoderMemoryBudget(limit: configuration.decoderMemoryLimit),
            spoolBudget: SpoolBudget(limit: configuration.maxSpoolTotalBytes),
            historyMemory: HistoryMemoryBudget(limit: configuration.historyMemoryLimit),
            catchUpPool: CatchUpPool(
                slots: configuration.catchUpDecoders, queueLimit: configuration.catchUpQueueLimit, clock: clock))
        devicePool.engines.setOverrides(configuration.engineCapacities)
    }

    /// A live decoder's options: one thread by default (see `ServerConfiguration.decoderThreads`).
    /// Streams that reorder pictures without saying so in their SPS lose pictures unless the
    /// reorder delay is probed first, as the ffmpeg CLI does; the probe holds back a stream's
    /// first pictures, so it runs only for those streams, and never in keyframes mode (each
    /// keyframe is drained at once).
    public func decoderOptions(
        _ configuration: ServerConfiguration, backend: DecoderBackendChoice, mode: DecodeMode
    ) -> DecoderOptions {
        var options = DecoderOptions.lowLatency(backend: backend)
        options.hardwareDevices = configuration.hardwareDevices
        options.cudaStreams = configuration.cudaStreams
        options.devicePool = devicePool
        options.frameDownloads = frameDownloads
        options.threads = configuration.decoderThreads
        options.sizeLimit = configuration.pictureSizeLimit
        options.memoryBudget = decoderMemory
        options.emulateFFmpegProbe = mode != .keyframes
        options.probeOnlyUnannouncedReordering = true
        options.placedByCapacity = true
        return options
    }

    /// A catch-up decoder's options: a live decoder's, with `catchUpDecoderThreads` frame
    /// threads (slice threads gain nothing on the one-slice pictures cameras send).
    func catchUpDecoderOptions(_ configuration: ServerConfiguration, backend: DecoderBackendChoice) -> DecoderOptions {
        var options = decoderOptions(configuration, backend: backend, mode: .onDemand)
        options.threads = configuration.catchUpDecoderThreads
        if configuration.catchUpDecoderThreads != 1 { options.threadType = .frame }
        options.placedByCapacity = false
        return options
    }
}
