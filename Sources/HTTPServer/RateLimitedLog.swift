import Logging
import Synchronization
import Timekeeping

/// Log lines a client can cause by the thousand, at most one per kind every `interval`: the
/// first of a kind is written at once, the next one after a quiet spell says how many were
/// left out. Whatever is counted (`/metrics`) is counted elsewhere, every time.
public final class RateLimitedLog: Sendable {
    public static let interval = Duration.seconds(10)

    private let logger: Logger
    private let clock: any ServiceClock
    private let gate = Mutex(RepeatGate<String>(interval: interval))

    public init(logger: Logger, clock: any ServiceClock) {
        self.logger = logger
        self.clock = clock
    }

    /// Writes the line unless one of `kind` (what stays the same from one to the next) was
    /// written within the interval.
    public func write(_ kind: String, _ message: String, level: Logger.Level, metadata: Logger.Metadata? = nil) {
        let now = clock.uptime
        guard let leftOut = gate.withLock({ $0.admit(kind, at: now) }) else { return }
        let suffix = leftOut > 0 ? " (and \(leftOut) more like it since the last such line)" : ""
        logger.log(level: level, "\(message)\(suffix)", metadata: metadata)
    }
}
