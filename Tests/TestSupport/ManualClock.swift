import Foundation
import Synchronization
import Timekeeping

/// A clock that moves only when a test says so. Parts driven by it (timers, deadlines, ages,
/// token expiry) run without a single sleep: the test advances time instead of waiting for it.
public final class ManualClock: ServiceClock {
    private struct Action {
        let deadline: UInt64
        /// Scheduling order, which breaks ties between equal deadlines.
        let order: UInt64
        let run: @Sendable () -> Void
    }

    private struct State {
        /// Not 0, so that no reading looks like "never".
        var uptime: UInt64 = 1_000_000_000
        var actions: [Action] = []
        var scheduled: UInt64 = 0
    }

    private let state = Mutex(State())
    private let startUptime: UInt64
    private let startDate: Date

    /// `now` is the wall clock at the start; it moves with `uptime`.
    public init(now: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        startUptime = state.withLock { $0.uptime }
        startDate = now
    }

    public var uptime: UInt64 { state.withLock { $0.uptime } }
    public var now: Date { startDate.addingTimeInterval(Double(uptime - startUptime) / 1e9) }

    public func schedule(at deadline: UInt64, _ action: @escaping @Sendable () -> Void) {
        state.withLock { state in
            state.actions.append(Action(deadline: deadline, order: state.scheduled, run: action))
            state.scheduled += 1
        }
    }

    /// Actions scheduled and not run yet.
    public var pendingActions: Int { state.withLock { $0.actions.count } }

    /// Moves time forward by `duration`, running every action that falls due on the way, in
    /// deadline order, on the calling thread. While an action runs, `uptime` reads its deadline
    /// (as if the real clock had just fired it), so an action that schedules the next one
    /// (a repeating check) runs as often as it would have in real time.
    public func advance(by duration: Duration) {
        let target = state.withLock { state -> UInt64 in
            let (sum, overflow) = state.uptime.addingReportingOverflow(duration.nanoseconds)
            return overflow ? .max : sum
        }
        while let action = takeNextAction(dueBy: target) {
            action.run()
        }
    }

    private func takeNextAction(dueBy target: UInt64) -> Action? {
        state.withLock { state in
            let due = state.actions.indices.filter { state.actions[$0].deadline <= target }
            guard
                let index = due.min(by: {
                    (state.actions[$0].deadline, state.actions[$0].order) < (state.actions[$1].deadline, state.actions[$1].order)
                })
            else {
                state.uptime = max(state.uptime, target)
                return nil
            }
            let action = state.actions.remove(at: index)
            state.uptime = max(state.uptime, action.deadline)
            return action
        }
    }
}
