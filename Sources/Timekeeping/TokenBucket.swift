/// A budget of `burst` things at once and `perSecond` on average, that never drops silently:
/// the first thing admitted after some were dropped learns how many (and pays one more token, for
/// saying so). Session events and the process's log lines are held to one each.
///
/// A value: its owner keeps it under whatever lock guards the rest of its state.
public struct TokenBucket: Sendable {
    public let burst: Double
    public let perSecond: Double
    private var tokens: Double
    private var at: UInt64
    /// Dropped since the last one admitted.
    private var dropped = 0

    /// Full at `uptime`.
    public init(burst: Double, perSecond: Double, at uptime: UInt64) {
        self.burst = burst
        self.perSecond = perSecond
        tokens = burst
        at = uptime
    }

    /// Whether a thing costing `cost` goes at `uptime`, and how many were dropped before it.
    public mutating func admit(cost: Int = 1, at uptime: UInt64) -> (admitted: Bool, droppedBefore: Int) {
        // Callers read the clock before taking their lock, so a time may come in earlier than
        // the last one: it adds nothing (a wrapped difference would refill the bucket).
        if uptime > at {
            tokens = min(burst, tokens + Double(uptime - at) / 1e9 * perSecond)
            at = uptime
        }
        let price = Double(cost + (dropped > 0 ? 1 : 0))
        guard tokens >= price else {
            dropped += 1
            return (false, 0)
        }
        tokens -= price
        defer { dropped = 0 }
        return (true, dropped)
    }

    /// Something dropped along with another (which paid for both): counted with the rest.
    public mutating func countDropped() {
        dropped += 1
    }

    /// How many were dropped since the last one admitted, said now by something outside the
    /// budget (which pays nothing for it): the count starts again from 0.
    public mutating func takeDropped() -> Int {
        defer { dropped = 0 }
        return dropped
    }
}
