/// One side of a producer/consumer handshake: whether it waits for the other side, and the
/// wake-up that lets it go on. Kept under its owner's lock with the state the two sides share;
/// a wake-up it hands out is run once that lock is released (it may call straight back).
///
/// A side that finds nothing to do calls `wait()` in the same critical section, so the other
/// side's next change cannot slip in between and be missed; the other side then takes the
/// wake-up with `wakeIfWaiting()`, which hands it out once per wait.
public struct WaitingSide: Sendable {
    public typealias Wake = @Sendable () -> Void

    private var wake: Wake?
    public private(set) var isWaiting: Bool

    public init(waiting: Bool = false) {
        isWaiting = waiting
    }

    /// The wake-up to run from now on; it stays until `release()`.
    public mutating func setWake(_ wake: @escaping Wake) {
        self.wake = wake
    }

    /// This side has nothing to do until it is woken.
    public mutating func wait() {
        isWaiting = true
    }

    /// This side may go on: its wake-up if it waited (it waits no more), nil otherwise.
    public mutating func wakeIfWaiting() -> Wake? {
        guard isWaiting else { return nil }
        isWaiting = false
        return wake
    }

    /// This side must learn something now (it was refused, the queue closed): its wake-up,
    /// whether it waited or not.
    public mutating func wakeNow() -> Wake? {
        isWaiting = false
        return wake
    }

    /// Nothing will wake this side any more: its wake-up, which usually captures the other
    /// side, is let go.
    public mutating func release() {
        wake = nil
    }
}
