import Dispatch
import FoundationEssentials

/// Time as the service sees it: a monotonic reading for ages, deadlines and rates, the wall
/// clock for what people read, and one-shot timers. Injected into every part that reads time
/// (sessions, the device pool, access control, the HTTP edge), so long polls, MJPEG pacing,
/// idle eviction, token expiry and connection deadlines run in tests without sleeping.
public protocol ServiceClock: Sendable {
    /// Monotonic nanoseconds from an arbitrary origin.
    var uptime: UInt64 { get }
    /// Wall-clock time, for status pages, logs and token expiry.
    var now: Date { get }
    /// Runs `action` once, at or after `deadline` (an `uptime` value), on a thread of the clock's
    /// choosing. `action` must be cheap: it hands work over, it does not do it.
    ///
    /// There is no cancelling: an action that may have become pointless checks for itself (and
    /// captures its owner weakly), which costs less than a handle per timer and is all a
    /// Dispatch-based clock could offer anyway (a cancelled work item still waits for its time).
    func schedule(at deadline: UInt64, _ action: @escaping @Sendable () -> Void)
}

extension ServiceClock {
    /// The `uptime` `delay` from now; a delay too long to count saturates instead of wrapping.
    public func deadline(after delay: Duration) -> UInt64 {
        let (sum, overflow) = uptime.addingReportingOverflow(delay.nanoseconds)
        return overflow ? .max : sum
    }
}

/// The real clock: DispatchTime and one serial timer queue for every timer of the process.
public struct SystemClock: ServiceClock {
    /// Timer work is a lock and a hand-off, so one queue serves everything.
    private static let timers = DispatchQueue(label: "SystemClock.timers")

    public init() {}

    public var uptime: UInt64 { DispatchTime.now().uptimeNanoseconds }
    public var now: Date { Date() }

    public func schedule(at deadline: UInt64, _ action: @escaping @Sendable () -> Void) {
        Self.timers.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: deadline), execute: action)
    }
}

extension Duration {
    /// Whole nanoseconds: 0 for negative durations, `UInt64.max` for those too long to count.
    public var nanoseconds: UInt64 {
        guard self > .zero else { return 0 }
        let (seconds, attoseconds) = components
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        let (sum, carry) = whole.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
        return overflow || carry ? .max : sum
    }
}
