/// Bytes a source may send between two signs of progress (a picture handed on, an access unit
/// made) before its connection is given up: what a protocol or a reader gathers without handing
/// anything on is bounded by it. One per connection, on the thread that reads it.
public struct ProgressBudget: Sendable {
    /// What every source gets: a real stream's largest picture is a few MiB.
    public static let standardLimit = 64 << 20

    public let limit: Int
    private var progressSeen: Int
    private var spent = 0

    /// `progress`: the count of signs of progress so far (any counter that only grows).
    public init(limit: Int, progress: Int) {
        self.limit = limit
        progressSeen = progress
    }

    /// Counts `count` more bytes, `progress` being the counter now; false once more than `limit`
    /// came since it last moved.
    public mutating func spend(_ count: Int, progress: Int) -> Bool {
        if progress != progressSeen {
            progressSeen = progress
            spent = 0
        }
        spent += count
        return spent <= limit
    }
}
