import Ingest
import Testing

/// When a pulled source's samples may go on (`SourcePacing`): values in, times out, no clock.
@Suite(.timeLimit(.minutes(10))) struct SourcePacingTests {
    static let millisecond: UInt64 = 1_000_000
    /// 25 pictures a second in 90 kHz ticks.
    static let ticksPerPicture: Int64 = 3_600

    /// A stored file read faster than real time (no read waits): it runs up to `lead` ahead of
    /// real time, then each sample is held to its own time.
    @Test func aSourceReadFasterThanRealTimeIsHeldToItsTimestamps() {
        var pacing = SourcePacing()
        var now: UInt64 = 1_000 * Self.millisecond
        let start = now
        var held = 0
        for picture in 0..<1_000 {
            // 1 ms a sample to read and hand on: 40 times real time.
            now += Self.millisecond
            let pts = 900_000 + Int64(picture) * Self.ticksPerPicture
            if let due = pacing.sample(pts: pts, readTook: 0, now: now) {
                held += 1
                // The sample's own time on the anchor's clock, less the lead allowed.
                #expect(due == start + Self.millisecond + UInt64(picture) * 40 * Self.millisecond - SourcePacing.lead)
                now = due
            }
        }
        // 5 s of pictures go at once (125, at 1 ms each, 0.125 s), the rest at their time.
        #expect(held >= 1_000 - 130 && held <= 1_000 - 120)
        let media = 999 * 40 * Self.millisecond
        #expect(now >= start + media - SourcePacing.lead && now <= start + media)
    }

    /// A 2 s file read again each time it ends, 0.5 s after: each replay goes on from where the
    /// last one's schedule ended, so beyond the lead the file plays at its own speed. Each
    /// connection's pacing started afresh before, and a file shorter than the lead then played
    /// whole at once every 0.5 s.
    @Test func aShortFileReadAgainAndAgainPlaysAtItsOwnSpeed() {
        var pacing = SourcePacing()
        var now: UInt64 = 1_000 * Self.millisecond
        let start = now
        let replays = 20
        for _ in 0..<replays {
            for picture in 0..<50 {
                now += Self.millisecond
                if let due = pacing.sample(pts: Int64(picture) * Self.ticksPerPicture, readTook: 0, now: now) { now = due }
            }
            pacing.fileEnded()
            now += 500 * Self.millisecond
        }
        let media = UInt64(replays) * 50 * 40 * Self.millisecond
        #expect(now - start >= media - SourcePacing.lead, "\((now - start) / Self.millisecond) ms for \(media / Self.millisecond) ms of pictures")
        #expect(now - start <= media + UInt64(replays) * 600 * Self.millisecond)
    }

    /// Timestamps whose difference does not fit in 64 bits start the pace again; nothing traps.
    @Test func timestampsFarApartStartThePaceAgain() {
        var pacing = SourcePacing()
        #expect(pacing.sample(pts: -1, readTook: 0, now: 1_000) == nil)
        #expect(pacing.sample(pts: .max, readTook: 0, now: 2_000) == nil)
        #expect(pacing.sample(pts: .min, readTook: 0, now: 3_000) == nil)
        #expect(pacing.sample(pts: .max, readTook: 0, now: 4_000) == nil)
    }

    /// A live source makes the reader wait for each sample: it is never held, even when its
    /// clock runs fast against this one's (1 % here, far more than any camera's drift) and
    /// even after a burst of buffered pictures at connect.
    @Test func aSourceTheReaderWaitsForIsNeverHeld() {
        var pacing = SourcePacing()
        var now: UInt64 = 0
        var pts: Int64 = 0
        // The burst: 3 s of pictures at once.
        for _ in 0..<75 {
            now += Self.millisecond
            pts += Self.ticksPerPicture
            #expect(pacing.sample(pts: pts, readTook: 0, now: now) == nil)
        }
        // Then 10 minutes live, each read waiting 35 of the picture's 40 ms (minus the 1 %).
        for _ in 0..<15_000 {
            now += 40 * Self.millisecond * 99 / 100
            pts += Self.ticksPerPicture
            #expect(pacing.sample(pts: pts, readTook: 35 * Self.millisecond, now: now) == nil)
        }
    }

    /// Once a source has made the reader wait, it is live for the rest of the connection: a jump
    /// of its timestamps within reach of the lead, or a backlog of 8 s after a stall, is taken as
    /// it comes, not held.
    @Test func aLiveSourceIsNeverHeldAfterAJumpOrAStall() {
        var pacing = SourcePacing()
        var now: UInt64 = 0
        var pts: Int64 = 0
        for _ in 0..<50 {
            now += 40 * Self.millisecond
            pts += Self.ticksPerPicture
            #expect(pacing.sample(pts: pts, readTook: 38 * Self.millisecond, now: now) == nil)
        }
        // The timestamps jump 8 s ahead.
        pts += 8 * 90_000
        for _ in 0..<50 {
            now += 40 * Self.millisecond
            pts += Self.ticksPerPicture
            #expect(pacing.sample(pts: pts, readTook: 38 * Self.millisecond, now: now) == nil)
        }
        // A stall of 8 s, then its backlog at once.
        now += 8_000 * Self.millisecond
        for _ in 0..<200 {
            now += Self.millisecond
            pts += Self.ticksPerPicture
            #expect(pacing.sample(pts: pts, readTook: 0, now: now) == nil)
        }
    }

    /// A timestamp that jumps forward far past the lead, or goes back, is a new start, not a
    /// reason to hold the stream for the jump's length.
    @Test func aJumpInTheTimestampsStartsThePaceAgain() {
        var pacing = SourcePacing()
        #expect(pacing.sample(pts: 1_000_000, readTook: 0, now: Self.millisecond) == nil)
        // An hour ahead (a camera's clock set), then back (a counter wrapped).
        #expect(pacing.sample(pts: 1_000_000 + 3_600 * 90_000, readTook: 0, now: 2 * Self.millisecond) == nil)
        #expect(pacing.sample(pts: 5, readTook: 0, now: 3 * Self.millisecond) == nil)
        #expect(pacing.sample(pts: 5 + Self.ticksPerPicture, readTook: 0, now: 4 * Self.millisecond) == nil)
        #expect(pacing.sample(pts: .max, readTook: 0, now: 5 * Self.millisecond) == nil)
        #expect(pacing.sample(pts: .min, readTook: 0, now: 6 * Self.millisecond) == nil)
        // Samples without timestamps are never held.
        #expect(pacing.sample(pts: nil, readTook: 0, now: 7 * Self.millisecond) == nil)
    }
}
