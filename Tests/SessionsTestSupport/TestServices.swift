import Decoding
import Imaging
import Sessions
import Timekeeping

extension SessionServices {
    /// What a test's sessions share, built as `frametap serve` builds it (the budgets and the
    /// catch-up pool sized by `configuration`, of the test's own, so that their counts are the
    /// test's). `clock` is the real one unless the test moves its own; the devices, the downloads
    /// counter and the factories are the process's unless it injects others.
    public static func forTests(
        _ configuration: ServerConfiguration = ServerConfiguration(), clock: any ServiceClock = SystemClock(),
        devicePool: HardwareDevicePool = .shared, frameDownloads: FrameDownloadCounter = .shared,
        decoderFactory: any PictureDecoderFactory = LibavDecoderFactory(),
        encoderFactory: any PictureEncoderFactory = PictureEncoders.standard()
    ) -> SessionServices {
        SessionServices(
            configuration: configuration, clock: clock, devicePool: devicePool,
            frameDownloads: frameDownloads, decoderFactory: decoderFactory, encoderFactory: encoderFactory)
    }
}
