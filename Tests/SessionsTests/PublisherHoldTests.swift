import Testing

@testable import Sessions

/// The hold a named publisher's pushes have on a session's stream, as a value: no sockets, no clock.
@Suite(.timeLimit(.minutes(10))) struct PublisherHoldTests {
    final class Push {}
    static let second: UInt64 = 1_000_000_000

    @Test func theHoldCountsOnlyItsOwnPushes() {
        var hold = PublisherHold()
        let (first, second, third) = (Push(), Push(), Push())
        hold.pushBegan(by: "a", job: ObjectIdentifier(first), takingOver: false)
        // Another client takes over, then "a" pushes again, taking its hold back.
        hold.pushBegan(by: nil, job: ObjectIdentifier(second), takingOver: true)
        hold.pushBegan(by: "a", job: ObjectIdentifier(third), takingOver: true)
        // The first push, of the hold before, ends: the new one still runs.
        hold.pushEnded(job: ObjectIdentifier(first), flushed: true, at: 1 * Self.second)
        #expect(hold.hold(at: 60 * Self.second)?.publisher == "a", "still pushing, long after the lease")
        #expect(hold.refusal(of: "b", at: 60 * Self.second)?.message.contains("is pushing to it") == true)
        hold.pushEnded(job: ObjectIdentifier(third), flushed: false, at: 61 * Self.second)
        #expect(hold.hold(at: 70 * Self.second)?.publisher == "a")
        #expect(hold.refusal(of: "b", at: 70 * Self.second)?.retryAfterSeconds == 1)
        #expect(hold.hold(at: 71 * Self.second)?.publisher == nil, "ten seconds after its last push")
        #expect(hold.refusal(of: "b", at: 71 * Self.second) == nil)
    }

    @Test func aTakeoverNamingNoPublisherHoldsAgainstTheOneItDisplaced() {
        var hold = PublisherHold()
        let (phone, taker, again) = (Push(), Push(), Push())
        hold.pushBegan(by: "phone", job: ObjectIdentifier(phone), takingOver: false)
        hold.pushEnded(job: ObjectIdentifier(phone), flushed: false, at: 1 * Self.second)
        hold.pushBegan(by: nil, job: ObjectIdentifier(taker), takingOver: true)
        hold.pushEnded(job: ObjectIdentifier(taker), flushed: false, at: 2 * Self.second)
        let refused = hold.refusal(of: "phone", at: 3 * Self.second)
        #expect(refused?.code == .sessionBusy && refused?.facts["heldBy"] == .text("takeover"))
        #expect(hold.refusal(of: nil, at: 3 * Self.second) == nil, "pushes naming no publisher go on")
        #expect(hold.hold(at: 3 * Self.second)?.publisher == nil)
        // The taker's next push keeps the hold; a flush ends it.
        hold.pushBegan(by: nil, job: ObjectIdentifier(again), takingOver: false)
        hold.pushEnded(job: ObjectIdentifier(again), flushed: true, at: 4 * Self.second)
        #expect(hold.refusal(of: "phone", at: 4 * Self.second) == nil)
    }

    @Test func pushesNamingNoPublisherHoldNothing() {
        var hold = PublisherHold()
        let push = Push()
        hold.pushBegan(by: nil, job: ObjectIdentifier(push), takingOver: false)
        #expect(hold.refusal(of: "a", at: 0) == nil)
        hold.pushEnded(job: ObjectIdentifier(push), flushed: false, at: Self.second)
        #expect(hold.refusal(of: "a", at: 2 * Self.second) == nil)
    }
}
