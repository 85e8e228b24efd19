import Logging
import Synchronization
import Timekeeping

/// The lines the whole process may write: `burst` at once and `perSecond` on average. A client
/// can cause lines by the thousand (a session made, failed and removed per request); past the
/// budget lines are left out, and the next line written is preceded by one that says how many.
/// Two levels go outside the budget: `notice`, the process's own life (listening, reloads of the
/// configuration, the TLS certificate and the log level, stopping), which no client can cause,
/// and errors and critical lines (the server's own failures); such a line also says how many
/// were left out before it. So do the lines a caller says are outside (a pulled source's: see
/// `ServiceLogHandler`).
public final class LogLineBudget: Sendable {
    public static let burst = 200.0
    public static let perSecond = 20.0

    private let clock: any ServiceClock
    private let bucket: Mutex<TokenBucket>
    /// Told of each line left out (the server counts them in `/metrics`), once it is set.
    private let leftOutCounter = Mutex<(@Sendable (Int) -> Void)?>(nil)
    /// The line that says how many were left out.
    private let leftOutReason: String

    public init(clock: any ServiceClock, burst: Double = LogLineBudget.burst, perSecond: Double = LogLineBudget.perSecond) {
        self.clock = clock
        bucket = Mutex(TokenBucket(burst: burst, perSecond: perSecond, at: clock.uptime))
        leftOutReason = "the log takes \(Int(burst)) lines at once and \(Int(perSecond)) a second after that"
    }

    /// nil: leave the line out (it is counted); otherwise write it, after a line saying how
    /// many were left out before it when that is not 0.
    public func admit(_ level: Logger.Level, outsideBudget: Bool = false) -> Int? {
        guard level < .error, level != .notice, !outsideBudget else { return bucket.withLock { $0.takeDropped() } }
        let now = clock.uptime
        let (admitted, droppedBefore) = bucket.withLock { $0.admit(at: now) }
        if !admitted { leftOutCounter.withLock { $0 }?(1) }
        return admitted ? droppedBefore : nil
    }

    /// `count` is told of every line left out from now on.
    public func countLeftOut(_ count: @escaping @Sendable (Int) -> Void) {
        leftOutCounter.withLock { $0 = count }
    }

    /// The line that says how many were left out.
    public func leftOutMessage(_ count: Int) -> String {
        "\(count) log lines left out: \(leftOutReason)"
    }
}
