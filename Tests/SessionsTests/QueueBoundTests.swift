import Dispatch
import Testing
import TestSupport

@testable import Sessions

/// `QueueBound` checks its queue on every access, in every build: off its queue it traps
/// instead of racing.
@Suite(.timeLimit(.minutes(10))) struct QueueBoundTests {
    @Test func onItsQueueTheValueIsReachable() {
        let queue = DispatchQueue(label: "test.bound")
        let bound = QueueBound(1, queue: queue)
        let value = queue.sync { bound.withValue { value -> Int in value += 1; return value } }
        #expect(value == 2)
    }

    @Test func offItsQueueAnAccessTraps() async {
        await #expect(processExitsWith: .failure) {
            exitSuccessfullyAfter(.seconds(60), waitingFor: "an access off its queue to trap")
            let bound = QueueBound(1, queue: DispatchQueue(label: "test.bound"))
            _ = bound.withValue { $0 }
        }
    }
}
