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
/// A stored file that ends is read again on the next connection, its timestamps starting over:
/// `fileEnded()` has that replay go on from where this one's schedule ended, so that a file
/// shorter than `lead` plays at its own speed too rather than all at once every time.
///
/// A value, one per pull: the pull's thread asks it, for each sample, when it may go on.
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
    /// When the last sample was due, and the step to it from the one before.
    private var lastDue: (uptime: UInt64, step: UInt64)?
    /// Where the next anchor lies at the earliest: the end of the last replay's schedule.
    private var resumeAt: UInt64 = 0
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
        let anchor: Anchor
        if let current = self.anchor, pts >= current.pts {
            anchor = current
        } else {
            anchor = Anchor(pts: pts, uptime: max(now, resumeAt))
            self.anchor = anchor
            resumeAt = 0
        }
        let delta = pts.subtractingReportingOverflow(anchor.pts)
        let ticks = delta.overflow ? nil : UInt64(delta.partialValue).multipliedReportingOverflow(by: 1_000_000_000)
        let due = ticks.map { anchor.uptime.addingReportingOverflow($0.partialValue / UInt64(DemuxedSample.ptsPerSecond)) }
        // Far ahead of where a held source can be: a jump in its timestamps, not a source running ahead.
        guard let ticks, let due, !ticks.overflow, !due.overflow, due.partialValue <= now &+ Self.lead &+ Self.jump else {
            self.anchor = Anchor(pts: pts, uptime: now)
            lastDue = nil
            return nil
        }
        let step = lastDue.map { due.partialValue > $0.uptime ? due.partialValue - $0.uptime : $0.step } ?? 0
        lastDue = (due.partialValue, step)
        guard due.partialValue > now &+ Self.lead else { return nil }
        return due.partialValue - Self.lead
    }

    /// The connection ended with the whole file read (not a live source): the next one replays
    /// it from its first timestamp, one step after this one's last was due.
    public mutating func fileEnded() {
        if !isLive, let lastDue { resumeAt = lastDue.uptime &+ lastDue.step }
        anchor = nil
        lastDue = nil
        isLive = false
        windowStart = nil
        waited = 0
    }
}
