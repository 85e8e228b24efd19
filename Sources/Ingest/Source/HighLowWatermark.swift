/// When a producer must pause and when it may go on, as SwiftNIO's `HighLowWatermark`: the
/// producer stops once `high` bytes wait and is woken once the consumer has brought them down
/// to `low`, not at the first free byte, so a connection is not suspended and resumed for
/// every small piece.
public struct HighLowWatermark: Sendable, Equatable {
    public let low: Int
    public let high: Int

    public init(low: Int, high: Int) {
        precondition(low >= 0 && low < high, "a watermark needs 0 <= low < high")
        self.low = low
        self.high = high
    }

    /// Pause at `capacity` bytes, resume at half of it.
    public init(capacity: Int) {
        self.init(low: capacity / 2, high: max(capacity, 1))
    }
}
