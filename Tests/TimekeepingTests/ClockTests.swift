import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing
import Timekeeping

@Suite(.timeLimit(.minutes(10))) struct DurationTests {
    @Test func nanosecondsAreWholeAndNeverNegative() {
        #expect(Duration.seconds(2).nanoseconds == 2_000_000_000)
        #expect(Duration.milliseconds(1500).nanoseconds == 1_500_000_000)
        #expect((Duration.nanoseconds(7) + .seconds(1)).nanoseconds == 1_000_000_007)
        #expect(Duration.zero.nanoseconds == 0)
        #expect(Duration.milliseconds(-500).nanoseconds == 0)
        #expect(Duration.seconds(-3).nanoseconds == 0)
    }

    @Test func tooLongToCountSaturates() {
        #expect(Duration.seconds(Int64.max).nanoseconds == .max)
        #expect(ManualClock().deadline(after: .seconds(Int64.max)) == .max)
    }
}

@Suite(.timeLimit(.minutes(10))) struct ManualClockTests {
    @Test func advanceRunsWhatFellDueInDeadlineOrderAtItsDeadline() {
        let clock = ManualClock()
        let start = clock.uptime
        let ran = Mutex<[(String, UInt64)]>([])
        clock.schedule(at: start + 300) { ran.withLock { $0.append(("c", clock.uptime)) } }
        clock.schedule(at: start + 100) { ran.withLock { $0.append(("a", clock.uptime)) } }
        clock.schedule(at: start + 100) { ran.withLock { $0.append(("b", clock.uptime)) } }
        clock.schedule(at: start + 1_000) { ran.withLock { $0.append(("late", clock.uptime)) } }

        clock.advance(by: .nanoseconds(300))
        let order = ran.withLock { $0 }
        #expect(order.map(\.0) == ["a", "b", "c"])
        #expect(order.map(\.1) == [start + 100, start + 100, start + 300])
        #expect(clock.uptime == start + 300)
        #expect(clock.pendingActions == 1)
        clock.advance(by: .nanoseconds(700))
        #expect(ran.withLock { $0.map(\.0) } == ["a", "b", "c", "late"])
    }

    @Test func anActionThatSchedulesTheNextRunsAsOftenAsInRealTime() {
        let clock = ManualClock()
        let ticks = Atomic<Int>(0)
        // Ten ticks, then it stops: an action left pending would keep the clock (it captures it).
        @Sendable func tick() {
            guard ticks.add(1, ordering: .relaxed).newValue < 10 else { return }
            clock.schedule(at: clock.deadline(after: .milliseconds(100)), tick)
        }
        clock.schedule(at: clock.deadline(after: .milliseconds(100)), tick)
        clock.advance(by: .milliseconds(1050))
        #expect(ticks.load(ordering: .relaxed) == 10)
        #expect(clock.pendingActions == 0)
    }

    @Test func theWallClockMovesWithUptime() {
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let clock = ManualClock(now: start)
        #expect(clock.now == start)
        clock.advance(by: .milliseconds(2500))
        #expect(clock.now == start.addingTimeInterval(2.5))
    }
}

@Suite(.timeLimit(.minutes(10))) struct SystemClockTests {
    @Test func aScheduledActionRunsOnceItsDeadlinePassed() {
        let clock = SystemClock()
        let deadline = clock.deadline(after: .milliseconds(20))
        let ranAt = Mutex<UInt64?>(nil)
        let ran = DispatchSemaphore(value: 0)
        clock.schedule(at: deadline) {
            ranAt.withLock { $0 = clock.uptime }
            ran.signal()
        }
        // A generous guard against a hang, not a timing target.
        #expect(ran.wait(timeout: .now() + 10) == .success)
        #expect(ranAt.withLock { $0 }.map { $0 >= deadline } == true)
    }
}
