/// One occurrence of each kind per interval, and a count of the others: what keeps something a
/// client can cause thousands of times a second (a refused connection, a stream that fails on
/// every picture) to one log line or one event per kind and interval.
///
/// A value: its owner keeps it under whatever lock guards the rest of its state.
public struct RepeatGate<Kind: Hashable & Sendable>: Sendable {
    public let interval: Duration
    private var kinds: [Kind: Admitted] = [:]

    private struct Admitted: Sendable {
        var at: UInt64
        var heldBack: Int
    }

    public init(interval: Duration) {
        self.interval = interval
    }

    /// nil when one of `kind` was admitted less than the interval before `uptime` (this one is
    /// counted); otherwise this one is admitted, and the answer is how many of `kind` were held
    /// back since the one admitted before it.
    public mutating func admit(_ kind: Kind, at uptime: UInt64) -> Int? {
        // A time earlier than the last one admitted (callers read the clock before their lock)
        // is within the interval.
        if let previous = kinds[kind], uptime < previous.at || uptime - previous.at < interval.nanoseconds {
            kinds[kind]?.heldBack += 1
            return nil
        }
        defer { kinds[kind] = Admitted(at: uptime, heldBack: 0) }
        return kinds[kind]?.heldBack ?? 0
    }
}
