import Dispatch

/// A value that belongs to one serial queue: every access checks, in release builds too, that it
/// runs on that queue (the way SwiftNIO's `NIOLoopBound` checks its event loop), and traps when
/// it does not. It is how a session's decoder and encoder, which are not thread-safe, cross
/// into `Sendable` types without resting on a comment. The check is one queue-specific lookup
/// per access; the decoder and encoder are reached once per decoder step or encode.
final class QueueBound<Value>: @unchecked Sendable {
    // @unchecked: `value` is only reachable through `withValue`, which checks (in every build)
    // that it runs on `queue`, a serial queue, so no two accesses overlap.
    let queue: DispatchQueue
    private var value: Value

    init(_ value: Value, queue: DispatchQueue) {
        self.value = value
        self.queue = queue
    }

    /// Runs `body` with the value. Call it on `queue` only: anywhere else traps.
    func withValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        dispatchPrecondition(condition: .onQueue(queue))
        return try body(&value)
    }
}
