import Synchronization
import Timekeeping

/// When libavformat's blocking I/O must give up, checked by its `AVIOInterruptCB` (every 100 ms
/// or so while it waits on a socket, and between reads): the demuxer is to stop (its session was
/// deleted), the current step passed its deadline (connect or read timeout), or the RTSP relay
/// refused what the camera said (a redirect or media address the policy does not allow) or
/// could not reach it, or its pull lets the connection go (an on-demand pull nobody asks for).
/// Any thread may stop, let go or refuse it; the deadline is set on the demuxer's thread.
public final class DemuxInterrupt: Sendable {
    public enum Reason: Sendable, Equatable {
        case stopped
        /// The connection is let go on purpose; another may follow (after `rearm()`).
        case letGo
        case timedOut
        case refused(ContainerError)
    }

    private let clock: any ServiceClock
    private let state = Mutex(State())

    private struct State {
        var stopped = false
        var deadline: UInt64?
        var reason: Reason?
    }

    public init(clock: any ServiceClock) {
        self.clock = clock
    }

    /// Ends every blocking call now and keeps the demuxer from starting another.
    public func stop() {
        state.withLock { state in
            state.stopped = true
            if state.reason == nil { state.reason = .stopped }
        }
    }

    public var isStopped: Bool { state.withLock { $0.stopped } }

    /// Ends the blocking calls of the current connection now; unlike `stop()`, `rearm()` lets
    /// the next connection go ahead.
    public func letGo() {
        state.withLock { state in
            if state.reason == nil || state.reason == .timedOut { state.reason = .letGo }
        }
    }

    /// Blocking calls from now on give up after `timeout` (nil: never, unless stopped).
    public func setTimeout(_ timeout: Duration?) {
        let deadline = timeout.map { clock.uptime + $0.nanoseconds }
        state.withLock { $0.deadline = deadline }
    }

    /// `setTimeout(timeout)`, but never later than `latest` (uptime).
    public func setTimeout(_ timeout: Duration, notAfter latest: UInt64) {
        let deadline = min(clock.uptime + timeout.nanoseconds, latest)
        state.withLock { $0.deadline = deadline }
    }

    /// The clock's uptime, which deadlines count on.
    public var uptime: UInt64 { clock.uptime }

    /// Gives up with `error` at the next check (the first refusal stays).
    func refuse(_ error: ContainerError) {
        state.withLock { state in
            if state.reason == nil { state.reason = .refused(error) }
        }
    }

    /// Why the last blocking call was interrupted; nil when it was not.
    public var reason: Reason? { state.withLock { $0.reason } }

    /// Forgets a timeout that fired or a connection let go, for the next attempt (a stop stays).
    public func rearm() {
        state.withLock { state in
            if !state.stopped { state.reason = nil }
        }
    }

    /// What the callback answers: true to interrupt.
    func shouldInterrupt() -> Bool {
        let now = clock.uptime
        return state.withLock { state in
            if state.reason != nil { return true }
            if let deadline = state.deadline, now >= deadline {
                state.reason = .timedOut
                return true
            }
            return false
        }
    }
}
