import Testing
import Timekeeping

@Suite("RepeatGate and TokenBucket: what they let through, and the count of the rest", .timeLimit(.minutes(10)))
struct RateGateTests {
    static let second: UInt64 = 1_000_000_000

    @Test("the first of a kind passes, those within the interval are counted, the next after it says how many")
    func countsWhatItHoldsBack() {
        var gate = RepeatGate<String>(interval: .seconds(10))
        #expect(gate.admit("a", at: 5 * Self.second) == 0)
        #expect(gate.admit("a", at: 6 * Self.second) == nil)
        #expect(gate.admit("a", at: 15 * Self.second - 1) == nil)
        #expect(gate.admit("a", at: 15 * Self.second) == 2)
        // The interval counts from the last one admitted, not from the first of a burst.
        #expect(gate.admit("a", at: 16 * Self.second) == nil)
        #expect(gate.admit("a", at: 40 * Self.second) == 1)
        #expect(gate.admit("a", at: 60 * Self.second) == 0)
    }

    @Test("kinds are held back apart")
    func kindsApart() {
        var gate = RepeatGate<Int>(interval: .seconds(1))
        #expect(gate.admit(1, at: 0) == 0)
        #expect(gate.admit(2, at: 1) == 0)
        #expect(gate.admit(1, at: 2) == nil)
        #expect(gate.admit(2, at: Self.second + 1) == 0)
        #expect(gate.admit(1, at: Self.second) == 1)
    }

    @Test("a time earlier than the last one admitted, as threads that read the clock before the lock bring, is within the interval")
    func earlierTimes() {
        var gate = RepeatGate<String>(interval: .seconds(1))
        #expect(gate.admit("a", at: 10 * Self.second) == 0)
        #expect(gate.admit("a", at: 10 * Self.second - 5) == nil)
        var bucket = TokenBucket(burst: 2, perSecond: 1, at: 10 * Self.second)
        #expect(bucket.admit(at: 10 * Self.second).admitted)
        #expect(bucket.admit(at: 10 * Self.second).admitted)
        #expect(!bucket.admit(at: 10 * Self.second - 5).admitted)
        #expect(!bucket.admit(at: 10 * Self.second).admitted)
        #expect(bucket.admit(at: 12 * Self.second) == (true, 2))
    }
}
