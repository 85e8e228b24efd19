import Decoding
import FoundationEssentials
import Logging
import Synchronization
import Timekeeping

/// What a session's parts share: configuration, services (the clock among them), metrics,
/// logger, activity, events.
struct SessionContext: Sendable {
    let configuration: ServerConfiguration
    let services: SessionServices
    let metrics: FrameTapMetrics
    let logger: Logger
    let activity: SessionActivity
    let events: SessionEventSink

    var clock: any ServiceClock { services.clock }

    func decoderOptions(backend: DecoderBackendChoice, mode: DecodeMode) -> DecoderOptions {
        services.decoderOptions(configuration, backend: backend, mode: mode)
    }

    func catchUpDecoderOptions(backend: DecoderBackendChoice) -> DecoderOptions {
        services.catchUpDecoderOptions(configuration, backend: backend)
    }
}

/// When a session was last used (an upload byte, a picture, a request, a viewer leaving),
/// for idle eviction and the status page.
final class SessionActivity: Sendable {
    private let clock: any ServiceClock
    private let last: Mutex<(uptime: UInt64, date: Date)>

    init(clock: any ServiceClock) {
        self.clock = clock
        last = Mutex((clock.uptime, clock.now))
    }

    func touch() {
        let now = (clock.uptime, clock.now)
        last.withLock { $0 = now }
    }

    var lastUptime: UInt64 { last.withLock { $0.uptime } }
    var lastDate: Date { last.withLock { $0.date } }
}
