import Dispatch

/// A value that belongs to one serial queue: every access checks, in debug builds, that it
/// runs on that queue (the way SwiftNIO's `NIOLoopBound` checks its event loop). It is how a
/// session's decoder and encoder, which are not thread-safe, cross into `Sendable` types
/// without resting on a comment.
final class QueueBound<Value>: @unchecked Sendable {
    // @unchecked: `value` is only reachable through `withValue`, which (checked in debug builds)
    // runs on `queue`, a serial queue, so no two accesses overlap.
    let queue: DispatchQueue
    private var value: Value

    init(_ value: Value, queue: DispatchQueue) {
        self.value = value
        self.queue = queue
    }

    /// Runs `body` with the value. Call it on `queue` only.
    func withValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        #if DEBUG
            dispatchPrecondition(condition: .onQueue(queue))
        #endif
        return try body(&value)
    }
}
