/// When each stretch of a spooled body arrived, so that its replay hands each piece on with the
/// time its bytes came, not the time they were read back. Pieces that came within `resolution`
/// of a stretch's first piece join that stretch. Past `maxStretches`, the resolution doubles and
/// the stretches join again by it, so a body of any length or duration costs a bounded table,
/// and every byte's time is off by less than the resolution, evenly over the body.
struct ArrivalTimeline {
    private struct Stretch {
        /// Bytes written up to the stretch's end.
        var end: Int
        var firstAt: UInt64
        var lastAt: UInt64
    }

    static var initialResolution: UInt64 { 10_000_000 }
    static var maxStretches: Int { 8192 }

    /// Nanoseconds: a stretch's pieces came less than this after its first.
    private(set) var resolution = Self.initialResolution
    private var stretches: [Stretch] = []
    private var written = 0
    /// The first stretch not yet wholly read back.
    private var head = 0

    var stretchCount: Int { stretches.count }

    /// `count` bytes arrived at `time` (the service clock's uptime) and were written after the others.
    mutating func recordArrival(count: Int, at time: UInt64) {
        written += count
        if let last = stretches.indices.last, time &- stretches[last].firstAt < resolution {
            stretches[last].end = written
            stretches[last].lastAt = time
            return
        }
        stretches.append(Stretch(end: written, firstAt: time, lastAt: time))
        while stretches.count > Self.maxStretches { coarsen() }
    }

    /// When the last of the bytes before `end` had arrived (nil for none recorded). Asked with
    /// ends that only grow, as the body is read back in order.
    mutating func arrival(ofBytesBefore end: Int) -> UInt64? {
        while head < stretches.count, stretches[head].end < end { head += 1 }
        return head < stretches.count ? stretches[head].lastAt : stretches.last?.lastAt
    }

    /// Doubles the resolution and joins the stretches by it.
    private mutating func coarsen() {
        resolution *= 2
        var joined: [Stretch] = []
        joined.reserveCapacity(stretches.count)
        for stretch in stretches {
            if let last = joined.indices.last, stretch.lastAt &- joined[last].firstAt < resolution {
                joined[last].end = stretch.end
                joined[last].lastAt = stretch.lastAt
            } else {
                joined.append(stretch)
            }
        }
        stretches = joined
        head = 0
    }
}
