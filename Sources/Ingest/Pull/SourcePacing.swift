import Containers

/// Holds a pulled source that runs ahead of real time to its own timestamps, and leaves a live
/// one alone.
///
/// A stored file behind an HTTP URL arrives as fast as the network gives it: unpaced, its
/// pictures would be decoded at the decoder's speed and the file read again and again. A live
/// source (a camera, a server relaying one) sets its own pace: the reader waits for it. So the
/// pacing looks at who waits. A source that kept the reader waiting for a quarter of a second
/// is live, and from then on, for the rest of the connection, its samples are taken as they
/// come: whatever its clock's drift, a jump in its timestamps, or the backlog after a stall. One
/// that never did is let run up to `lead` ahead of real time, which covers the burst of buffered
/// pictures some servers send at connect, and then held to its timestamps.
///
/// A value, one per connection: the pull's thread asks it, for each sample, when it may go on.
public struct SourcePacing: Sendable {
    /// How far ahead of real time a source may run before it is held.
    public static let lead: UInt64 = 5_000_000_000
    /// How often the reader's waiting is judged.
    static let window: UInt64 = 1_000_000_000
    /// The share of a window the reader waited on a live source, at least.
    static let liveShare: UInt64 = 4
    /// A timestamp due further than this past `lead` is a jump (a restarted camera, a wrapped
    /// counter), and one behind its anchor's too: the pace starts again from it.
    static let jump: UInt64 = 10_000_000_000

    private struct Anchor {
        var pts: Int64
        var uptime: UInt64
    }

    private var anchor: Anchor?
    /// The source set the pace in a window of this connection.
    private var isLive = false
    private var windowStart: UInt64?
    private var waited: UInt64 = 0

    public init() {}

    /// A read that took `readTook` nanoseconds ended at `now` with a sample stamped `pts` (90 kHz
    /// units, `DemuxedSample.ptsPerSecond`). Returns the uptime the sample may go on at,
    /// or nil for now.
    public mutating func sample(pts: Int64?, readTook: UInt64, now: UInt64) -> UInt64? {
        guard !isLive else { return nil }
        waited += readTook
        let start = windowStart ?? now
        windowStart = start
        if now &- start >= Self.window {
            if waited * Self.liveShare >= now &- start {
                isLive = true
                return nil
            }
            windowStart = now
            waited = 0
        }
        guard let pts else { return nil }
        guard let anchor, pts >= anchor.pts else { return restart(at: pts, now) }
        let delta = pts.subtractingReportingOverflow(anchor.pts)
        guard !delta.overflow else { return restart(at: pts, now) }
        let ticks = UInt64(delta.partialValue).multipliedReportingOverflow(by: 1_000_000_000)
        let due = anchor.uptime.addingReportingOverflow(ticks.partialValue / UInt64(DemuxedSample.ptsPerSecond))
        // Far ahead of where a held source can be: a jump in its timestamps, not a source running ahead.
        guard !ticks.overflow, !due.overflow, due.partialValue <= now &+ Self.lead &+ Self.jump else {
            return restart(at: pts, now)
        }
        guard due.partialValue > now &+ Self.lead else { return nil }
        return due.partialValue - Self.lead
    }

    private mutating func restart(at pts: Int64, _ now: UInt64) -> UInt64? {
        anchor = Anchor(pts: pts, uptime: now)
        return nil
    }
}
