/// What a session's input measures now, over the last few seconds (status `rates`).
public struct SessionRates: Sendable, Equatable {
    public var picturesPerSecond: Double
    public var bitsPerSecond: Double
    /// Seconds the rates are measured over: the window, or less for a session younger than that.
    public var windowSeconds: Double
}

/// Pictures decoded and bytes received in one-second buckets over a short sliding window, so
/// reading a rate never walks per-picture history. Owned by the session's `DecodeReporter`.
struct InputRateMeter: Sendable {
    static let windowSeconds: UInt64 = 5
    private static let second: UInt64 = 1_000_000_000

    private struct Bucket {
        var second: UInt64
        var bytes = 0
        var pictures = 0
    }

    /// Oldest first; at most `windowSeconds + 1` buckets.
    private var buckets: [Bucket] = []
    private let startedAt: UInt64

    init(startedAt: UInt64) { self.startedAt = startedAt }

    mutating func record(bytes: Int, pictures: Int, at uptime: UInt64) {
        guard bytes > 0 || pictures > 0 else { return }
        let second = uptime / Self.second
        if buckets.last?.second != second { buckets.append(Bucket(second: second)) }
        buckets[buckets.count - 1].bytes += bytes
        buckets[buckets.count - 1].pictures += pictures
        buckets.removeAll { $0.second + Self.windowSeconds <= second }
    }

    /// The rates over the window ending at `uptime`: the current partial second and the full
    /// seconds before it, `windowSeconds` in all, divided by the time they cover (less for a
    /// session younger than the window).
    func rates(at uptime: UInt64) -> SessionRates {
        let second = uptime / Self.second
        let firstSecond = second >= Self.windowSeconds - 1 ? second - (Self.windowSeconds - 1) : 0
        let covered = uptime &- max(firstSecond * Self.second, startedAt)
        let seconds = max(1, Double(covered) / Double(Self.second))
        let recent = buckets.filter { $0.second >= firstSecond }
        let bytes = recent.reduce(0) { $0 + $1.bytes }
        let pictures = recent.reduce(0) { $0 + $1.pictures }
        return SessionRates(
            picturesPerSecond: Self.rounded(Double(pictures) / seconds),
            bitsPerSecond: Self.rounded(Double(bytes) * 8 / seconds), windowSeconds: Self.rounded(seconds))
    }

    /// Two decimals: the JSON stays short and readable.
    private static func rounded(_ value: Double) -> Double { (value * 100).rounded() / 100 }
}
