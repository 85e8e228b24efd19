/// When each stretch of a spooled body arrived, so that its replay hands each piece on with the
/// time its bytes came, not the time they were read back. Pieces that came within `resolution`
/// of a stretch's first piece join that stretch; past `maxStretches`, neighbouring stretches
/// merge, so a body of any length or duration costs a bounded table.
struct ArrivalTimeline {
    private struct Stretch {
        /// Bytes written up to the stretch's end.
        var end: Int
        var firstAt: UInt64
        var lastAt: UInt64
    }

    static var resolution: UInt64 { 10_000_000 }
    static var maxStretches: Int { 8192 }

    private var stretches: [Stretch] = []
    private var written = 0
    /// The first stretch not yet wholly read back.
    private var head = 0

    var stretchCount: Int { stretches.count }

    /// `count` bytes arrived at `time` (the service clock's uptime) and were written after the others.
    mutating func recordArrival(count: Int, at time: UInt64) {
        written += count
        if let last = stretches.indices.last, time &- stretches[last].firstAt < Self.resolution {
            stretches[last].end = written
            stretches[last].lastAt = time
            return
        }
        stretches.append(Stretch(end: written, firstAt: time, lastAt: time))
        if stretches.count > Self.maxStretches { mergeNeighbours() }
    }

    /// When the last of the bytes before `end` had arrived (nil for none recorded). Asked with
    /// ends that only grow, as the body is read back in order.
    mutating func arrival(ofBytesBefore end: Int) -> UInt64? {
        while head < stretches.count, stretches[head].end < end { head += 1 }
        return head < stretches.count ? stretches[head].lastAt : stretches.last?.lastAt
    }

    private mutating func mergeNeighbours() {
        var merged: [Stretch] = []
        merged.reserveCapacity(stretches.count / 2 + 1)
        var index = 0
        while index < stretches.count {
            var stretch = stretches[index]
            if index + 1 < stretches.count {
                stretch.end = stretches[index + 1].end
                stretch.lastAt = stretches[index + 1].lastAt
            }
            merged.append(stretch)
            index += 2
        }
        stretches = merged
        head = 0
    }
}
