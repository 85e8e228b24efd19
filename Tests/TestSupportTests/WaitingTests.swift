import Dispatch
import Foundation
import Synchronization
import Testing
import TestSupport

/// The waits every test relies on end at their deadline, saying what they waited for.
@Suite(.timeLimit(.minutes(10))) struct WaitingTests {
    @Test func anOutcomeNeverSetTimesOutNamingWhatItAwaited() async {
        let outcome = Outcome<Int>()
        await #expect {
            try await outcome.value(waitingFor: "the answer", timeout: .milliseconds(50))
        } throws: { error in
            "\(error)" == "timed out after 0.05 s waiting for the answer"
        }
    }

    @Test func anOutcomeGivesItsFirstValueBeforeAndAfterTheWait() async throws {
        let early = Outcome<Int>()
        early.set(1)
        early.set(2)
        #expect(try await early.value(waitingFor: "a value set before") == 1)
        let late = Outcome<Int>()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { late.set(3) }
        #expect(try await late.value(waitingFor: "a value set later") == 3)
        #expect(late.current == 3)
    }

    @Test func aSignalIsKeptForTheNextWaitAndTakenByIt() async throws {
        let signal = Signal()
        signal.signal()
        try await signal.wait(for: "the signal sent before")
        await #expect(throws: WaitTimeout.self) {
            try await signal.wait(for: "a second signal", timeout: .milliseconds(20))
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { signal.signal() }
        try await signal.wait(for: "the signal sent later")
    }

    @Test func cancellingTheTaskEndsAWait() async {
        let signal = Signal()
        let waiting = Task { try await signal.wait(for: "a signal that never comes", timeout: .seconds(600)) }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
    }

    @Test func semaphoreAndGroupWaitsTimeOutNamingWhatTheyAwaited() {
        #expect {
            try DispatchSemaphore(value: 0).wait(for: "a semaphore nobody signals", timeout: .milliseconds(20))
        } throws: { error in
            "\(error)" == "timed out after 0.02 s waiting for a semaphore nobody signals"
        }
        let group = DispatchGroup()
        group.enter()
        #expect(throws: WaitTimeout.self) { try group.wait(for: "a group nobody leaves", timeout: .milliseconds(20)) }
        group.leave()
        #expect(throws: Never.self) { try group.wait(for: "a group left") }
    }

    @Test func aHeldQueueRunsNothingUntilReleased() throws {
        let queue = DispatchQueue(label: "test.hold")
        let ran = Atomic<Bool>(false)
        let hold = try QueueHold(queue, "the test queue")
        queue.async { ran.store(true, ordering: .relaxed) }
        #expect(!eventually(timeout: .milliseconds(50)) { ran.load(ordering: .relaxed) })
        hold.release()
        #expect(eventually { ran.load(ordering: .relaxed) })
    }

    @Test func aHoldThatIsNeverReleasedEndsAtItsLimit() throws {
        let queue = DispatchQueue(label: "test.hold")
        let ran = Atomic<Bool>(false)
        _ = try QueueHold(queue, "the test queue", limit: .milliseconds(50))
        queue.async { ran.store(true, ordering: .relaxed) }
        #expect(eventually { ran.load(ordering: .relaxed) })
    }

    @Test func aProgramThatRunsPastItsLimitIsKilled() throws {
        let started = ContinuousClock.now
        #expect {
            try runProgram("/bin/sleep", ["30"], timeout: .milliseconds(200))
        } throws: { error in
            "\(error)" == "timed out after 0.2 s waiting for /bin/sleep 30 to end"
        }
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test func aProgramThatFailsSaysWhy() throws {
        #expect {
            try runProgram("/bin/sh", ["-c", "echo broken >&2; exit 3"])
        } throws: { error in
            "\(error)" == "/bin/sh -c echo broken >&2; exit 3 exited 3: broken\n"
        }
        #expect(String(decoding: try runProgram("/bin/echo", ["fine"]), as: UTF8.self) == "fine\n")
    }

    @Test func eventuallyTellsWhetherTheConditionCameTrue() {
        let deadline = ContinuousClock.now + .milliseconds(30)
        #expect(eventually { ContinuousClock.now >= deadline })
        #expect(!eventually(timeout: .milliseconds(20)) { false })
    }

    /// In an asynchronous test `eventually` sleeps the task, not the thread.
    @Test func eventuallyAwaitsInAsynchronousTests() async {
        let deadline = ContinuousClock.now + .milliseconds(30)
        #expect(await eventually { ContinuousClock.now >= deadline })
        #expect(await !eventually(timeout: .milliseconds(20)) { false })
    }
}
