import Dispatch
import FoundationEssentials

/// Time as a session sees it: a monotonic reading for ages, deadlines and rates, the wall clock
/// for what people read, and one-shot timers. Injected into every part of a session, so long
/// polls, MJPEG pacing and idle eviction run in tests without sleeping.
public protocol SessionClock: Sendable {
    /// Monotonic nanoseconds from an arbitrary origin.
    var uptime: UInt64 { get }
    /// Wall-clock time, for status pages and logs.
    var now: Date { get }
    /// Runs `action` once, at or after `deadline` (an `uptime` value), on a thread of the clock's
    /// choosing. `action` must be cheap: it hands work over, it does not do it.
    func schedule(at deadline: UInt64, _ action: @escaping @Sendable () -> Void)
}

/// The real clock: DispatchTime and one serial timer queue for every session.
public struct SystemClock: SessionClock {
    /// Timer work is a lock and a hand-off, so one queue serves every session.
    private static let timers = DispatchQueue(label: "frametap.sessions.timers")

    public init() {}

    public var uptime: UInt64 { DispatchTime.now().uptimeNanoseconds }
    public var now: Date { Date() }

    public func schedule(at deadline: UInt64, _ action: @escaping @Sendable () -> Void) {
        Self.timers.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: deadline), execute: action)
    }
}

extension Duration {
    /// Whole nanoseconds, 0 for negative durations.
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}
