import Decoding
import FoundationEssentials
import Synchronization
import VideoCoding

/// A session's recent past, compressed: the access units ingest handed on, in whole GOPs,
/// bounded by time and bytes (oldest GOP dropped first). What on-demand decoding catches up
/// from, and what a picture from the past (`frame/at.jpg`) is decoded from.
///
/// Every session keeps one, whatever its decode mode: the access units are already assembled
/// and their bytes shared with the reader's NAL units, so keeping them costs their bytes and
/// an entry each, not a copy. A session in keyframes mode hands on only intra pictures, so
/// its history holds only those.
///
/// Bounds: the time from the oldest held access unit to the newest never exceeds
/// `limits.seconds`, nor the bytes `limits.bytes` (counted twice: the units' own bytes, and the
/// slabs they lie in, which stay alive whole while any held unit is in them, beyond the two
/// slabs at the history's ends that it shares with bytes it does not hold), except that the newest GOP is never dropped
/// (a decoder may be reading it) — unless it alone passes the byte bound: then its units are
/// dropped and it is marked truncated (memory stays bounded whatever the stream), and it is
/// no longer a place decoding can start from. A GOP a catch-up still reads (`pin`) is not
/// dropped for time or bytes until the catch-up let go of it.
///
/// Owns: the held access units, their receive times and the bounds' bookkeeping. Any thread;
/// readers outside the session get `CompressedHistoryView`.
final class CompressedHistory: Sendable {
    struct Limits: Sendable, Equatable {
        var seconds: Duration
        var bytes: Int
    }

    /// One held access unit.
    struct Unit: Sendable {
        let indexed: IndexedAccessUnit
        /// When its bytes arrived: the wall clock (for `?t=` and headers) and the session clock's uptime.
        let receivedAt: Date
        let receivedUptime: UInt64
        let bytes: Int

        var index: Int64 { indexed.index }
    }

    /// A keyframe and the access units after it in decoding order, up to the next keyframe.
    struct GOP: Sendable {
        var units: [Unit] = []
        var bytes = 0
        /// Its first unit is a keyframe: decoding can start here. Not so for the pictures before
        /// a stream's first keyframe.
        let startsAtKeyframe: Bool
        /// The GOP before it is the one before it in the same stream, with nothing lost between:
        /// its leading pictures can be decoded by starting there.
        let followsPrevious: Bool
        /// It has leading pictures (`CodedAccessUnit.isLeading`).
        var hasLeading = false
        /// Its keyframe recovers gradually (`CodedAccessUnit.recoveryDistance`): a decoder that
        /// starts there may not show the pictures of up to this many units from it.
        let recoveryDistance: Int
        /// The slabs its units were first to keep alive, in bytes.
        var slabBytes = 0
        /// It passed the byte bound alone, or was given up for the bound of every session's
        /// history together (`shed`), and its units were dropped.
        var truncated = false
        var shed = false
        /// The stream ended after its last unit (a decoder reading on drains there).
        var endsStream = false
        /// Its first index (kept when truncated) and the index after its last.
        let firstIndex: Int64
        var endIndex: Int64

        var isDecodable: Bool { startsAtKeyframe && !truncated }
    }

    /// What a catch-up or a picture from the past reads next.
    enum Read: Sendable {
        /// Units in decoding order from the index asked for; `drainAfter` holds the indices
        /// after which the stream ended.
        case units([Unit], drainAfter: Set<Int64>)
        /// The units from that index on were dropped (the bounds): start again.
        case gap
    }

    /// Where a decode from the past starts, what it reads, and which picture it is for.
    struct DecodePlan: Sendable {
        enum Target: Sendable, Equatable {
            /// The newest picture that could be on screen once this access unit arrived: in output
            /// order, the last before the first picture whose own unit came later.
            case accessUnit(Int64)
            /// The picture decoded from this access unit.
            case pictureOf(accessUnit: Int64)
            /// The picture with this number.
            case number(UInt64)
        }

        /// In decoding order: the target's GOP, after the GOP before it when the target is one of
        /// its leading pictures (or the GOP has leading pictures and a number is asked for).
        var units: [Unit]
        var drainAfter: Set<Int64>
        let target: Target
        /// The target's GOP is the newest held and the stream goes on: more of its access units
        /// may come, and a picture that only a drain would give out has no number yet (its place
        /// in output order depends on pictures not received).
        var atOpenEdge = false
        /// The index of the target GOP's first access unit.
        let targetGOPFirstIndex: Int64
    }

    /// What is held (`GET /sessions/{id}/history`, and the range a `not_in_history` names).
    struct Summary: Sendable, Equatable {
        /// Receive times of the first access unit decoding can start from and of the newest one.
        var from: Date?
        var to: Date?
        var gops = 0
        var accessUnits = 0
        var bytes = 0
        /// The bytes of the slabs the held units lie in: the memory the history keeps alive.
        var slabBytes = 0
        /// The numbers the held pictures can have (the last one is an upper bound: the newest
        /// pictures may still be inside a decoder).
        var firstSeq: UInt64?
        var lastSeq: UInt64?
        var limits: Limits
        /// GOPs dropped for the bounds since the session began (one larger than the byte bound
        /// counts when its units go, as it arrives).
        var gopsDropped = 0
        /// The newest GOP alone passed the byte bound: none of it is held.
        var newestGOPTooLarge = false
        /// GOPs given up for the bound of every session's history together (counted in
        /// `gopsDropped` too), and whether the newest was.
        var gopsShed = 0
        var newestGOPShed = false
    }

    private struct State {
        var gops: [GOP] = []
        var bytes = 0
        /// The next GOP does not follow the last one (a stream ended, the decode mode changed).
        var broken = false
        /// The lowest index a catch-up still reads.
        var pinned: Int64?
        var gopsDropped = 0
        /// Of those, GOPs given up for the bound of every session's history together.
        var gopsShed = 0
        /// The slabs the held units' bytes lie in, with how many held NAL units lie in each.
        var slabs: [ObjectIdentifier: HeldSlab] = [:]
        /// The bytes of those slabs: the memory the history keeps alive.
        var slabBytes = 0

        /// The memory the history keeps alive, as the bound of every session's history counts it.
        var keeps: Int { max(bytes, slabBytes) }
        /// What of it is the history's own: the slabs at its two ends, which it shares with bytes
        /// it does not hold, are not held against it (a quiet camera's one small GOP keeps two
        /// slabs alive whatever its size). Who gives first goes by this.
        var owns: Int { max(bytes, slabBytes - CompressedHistory.sharedSlabBytes) }
        /// Reports to the bound so far (numbered so a late one is ignored).
        var reports: UInt64 = 0

        mutating func nextReport() -> HistoryMemoryBudget.Report {
            reports += 1
            return HistoryMemoryBudget.Report(keeps: keeps, owns: owns, number: reports)
        }

        /// Counts `unit`'s NAL units in their slabs; the bytes of the slabs none held before.
        mutating func keep(_ unit: CodedAccessUnit) -> Int {
            var added = 0
            for nal in unit.nalUnits {
                let slab = nal.bytes.slab
                let key = ObjectIdentifier(slab)
                if slabs[key] != nil {
                    slabs[key]!.units += 1
                } else {
                    slabs[key] = HeldSlab(capacity: slab.capacity, units: 1)
                    added += slab.capacity
                }
            }
            slabBytes += added
            return added
        }

        /// Lets go of `units`' NAL units; a slab none holds any more no longer counts.
        mutating func release(_ units: [Unit]) {
            for unit in units {
                for nal in unit.indexed.unit.nalUnits {
                    let key = ObjectIdentifier(nal.bytes.slab)
                    guard let held = slabs[key] else { continue }
                    if held.units == 1 {
                        slabs[key] = nil
                        slabBytes -= held.capacity
                    } else {
                        slabs[key]!.units -= 1
                    }
                }
            }
        }
    }

    private struct HeldSlab {
        let capacity: Int
        /// Held NAL units in it.
        var units: Int
    }

    let limits: Limits
    private let state = Mutex(State())
    /// The bound of every session's history together, told what this one keeps after each change.
    private let budget: HistoryMemoryBudget?

    /// What one held unit costs beyond its bytes (the entry, its NAL unit array): counted so
    /// that a stream of tiny units is bounded too.
    static let unitOverhead = 128

    /// The slabs at the history's two ends hold bytes before its oldest unit and after its
    /// newest: up to this much of the memory it keeps alive is not its own.
    static let sharedSlabBytes = 2 * SlabPool.shared.slabBytes

    init(limits: Limits, budget: HistoryMemoryBudget? = nil) {
        self.limits = limits
        self.budget = budget
    }

    deinit {
        budget?.forget(ObjectIdentifier(self))
    }

    // MARK: - Ingest

    /// Keeps an access unit ingest handed on, then drops what the bounds no longer allow.
    func append(_ indexed: IndexedAccessUnit, receivedAt: Date, receivedUptime: UInt64) {
        let unit = Unit(
            indexed: indexed, receivedAt: receivedAt, receivedUptime: receivedUptime,
            bytes: indexed.unit.byteCount + Self.unitOverhead)
        let report = state.withLock { state -> HistoryMemoryBudget.Report? in
            let startsNewGOP = indexed.unit.isKeyframe || state.gops.isEmpty || state.broken
                || state.gops[state.gops.count - 1].endsStream
            if startsNewGOP {
                state.gops.append(
                    GOP(
                        startsAtKeyframe: indexed.unit.isKeyframe, followsPrevious: !state.broken && !state.gops.isEmpty,
                        recoveryDistance: indexed.unit.isKeyframe ? indexed.unit.recoveryDistance : 0,
                        firstIndex: indexed.index, endIndex: indexed.index))
                state.broken = false
            }
            let last = state.gops.count - 1
            state.gops[last].endIndex = indexed.index + 1
            guard !state.gops[last].truncated else { return nil }
            state.gops[last].units.append(unit)
            state.gops[last].bytes += unit.bytes
            state.gops[last].slabBytes += state.keep(indexed.unit)
            if indexed.unit.isLeading { state.gops[last].hasLeading = true }
            state.bytes += unit.bytes
            enforceLimits(&state, newest: receivedUptime)
            return state.nextReport()
        }
        if let report { budget?.report(self, report) }
    }

    /// What `shedOneGOP` did.
    enum Shedding {
        /// A GOP with units went: counted in `gopsDropped` and `gopsShed`.
        case shed
        /// The oldest GOP went, one whose units had gone before (it passed the byte bound alone).
        case removedEmpty
        /// Nothing could go: nothing held, or a catch-up reads it.
        case refused
    }

    /// Gives up one GOP for the bound of every session's history together: the oldest, or the
    /// newest (truncated, as one larger than the byte bound is) when it is all that is held. It
    /// reports what it keeps after, whatever it did.
    func shedOneGOP() -> Shedding {
        let (outcome, report) = state.withLock { state -> (Shedding, HistoryMemoryBudget.Report) in
            var outcome = Shedding.shed
            if state.gops.count > 1 {
                let oldest = state.gops[0]
                if let pinned = state.pinned, oldest.endIndex > pinned, !oldest.truncated {
                    outcome = .refused
                } else {
                    state.bytes -= oldest.bytes
                    state.release(oldest.units)
                    state.gops.removeFirst()
                    if oldest.truncated { outcome = .removedEmpty }
                }
            } else if let newest = state.gops.first, !newest.truncated, !newest.units.isEmpty, state.pinned == nil {
                Self.truncateNewest(&state)
                state.gops[0].shed = true
            } else {
                outcome = .refused
            }
            if outcome == .shed {
                state.gopsDropped += 1
                state.gopsShed += 1
            }
            return (outcome, state.nextReport())
        }
        budget?.report(self, report)
        return outcome
    }

    /// The stream ended (a flush): the next access unit starts a new GOP that does not follow.
    func endStream() {
        state.withLock { state in
            guard !state.gops.isEmpty else { return }
            state.gops[state.gops.count - 1].endsStream = true
            state.broken = true
        }
    }

    /// What ingest hands on changed (keyframes mode switched): the next GOP does not follow.
    func breakContinuity() {
        state.withLock { $0.broken = true }
    }

    private func enforceLimits(_ state: inout State, newest: UInt64) {
        let last = state.gops.count - 1
        if state.gops[last].bytes > limits.bytes || state.gops[last].slabBytes > limits.bytes + Self.sharedSlabBytes {
            // One GOP larger than the whole bound: it cannot be kept, whoever reads it.
            Self.truncateNewest(&state)
            state.gopsDropped += 1
        }
        let span = limits.seconds.nanoseconds
        while state.gops.count > 1 {
            let oldest = state.gops[0]
            let firstUptime = oldest.units.first?.receivedUptime ?? newest
            let overBytes = state.bytes > limits.bytes || state.slabBytes > limits.bytes + Self.sharedSlabBytes
            let overTime = newest &- firstUptime > span
            // A truncated GOP holds nothing a decoder can use.
            guard overBytes || overTime || oldest.truncated else { break }
            if let pinned = state.pinned, oldest.endIndex > pinned, !oldest.truncated { break }
            state.bytes -= oldest.bytes
            state.release(oldest.units)
            state.gops.removeFirst()
            if !oldest.truncated { state.gopsDropped += 1 }
        }
    }

    /// Drops the newest GOP's units; its later units are not kept either, and it is no longer a
    /// place decoding can start from.
    private static func truncateNewest(_ state: inout State) {
        let last = state.gops.count - 1
        state.bytes -= state.gops[last].bytes
        state.release(state.gops[last].units)
        state.gops[last].units = []
        state.gops[last].bytes = 0
        state.gops[last].slabBytes = 0
        state.gops[last].truncated = true
    }

    // MARK: - Catching up

    /// Where a catch-up to the newest picture starts: the last GOP decoding can start from —
    /// unless it holds fewer units than a decoder needs to output one of its pictures (`delay`,
    /// the units it holds back, + the pictures the stream reorders), then the one before (a live
    /// decoder shows one of that GOP's pictures by now) — and earlier again when that one has
    /// leading pictures, or while a start that recovers gradually would not yet show the newest
    /// picture out (`startOfDecode`). Nil when none is held.
    /// The start is pinned (`pin`) in the same step, so that nothing drops it in between.
    func pinCatchUpStart(delay: Int) -> Int64? {
        state.withLock { state in
            guard var position = state.gops.lastIndex(where: \.isDecodable) else { return nil }
            let newest = state.gops[state.gops.count - 1].endIndex
            let reordered = state.gops[position].units.last?.indexed.unit.sequence.reorderedPictures ?? 16
            let lag = Int64(reordered + delay)
            if newest - state.gops[position].firstIndex < lag, Self.predecessorUsable(position, in: state.gops) {
                position -= 1
            }
            let newestShown = max(newest - 1 - lag, state.gops[position].firstIndex)
            let start = state.gops[Self.startOfDecode(for: position, reaching: newestShown, in: state.gops)].firstIndex
            state.pinned = start
            return start
        }
    }

    /// Keeps the GOPs from `index` on from being dropped for the bounds, until `unpin`.
    func pin(_ index: Int64) {
        state.withLock { $0.pinned = index }
    }

    func unpin() {
        state.withLock { $0.pinned = nil }
    }

    /// Up to `limit` units from `index` on, in decoding order (none when `index` is past the
    /// newest); `.gap` when units from `index` were dropped.
    func read(from index: Int64, limit: Int) -> Read {
        state.withLock { Self.read($0, from: index, limit: limit) }
    }

    /// The units from the first of the last GOP decoding can start at to the newest (or to a
    /// truncated GOP after it); none when no such GOP is held.
    func readFromLastKeyframe() -> Read {
        state.withLock { state in
            guard let position = state.gops.lastIndex(where: \.isDecodable) else { return .units([], drainAfter: []) }
            return Self.read(state, from: state.gops[position].firstIndex, limit: .max)
        }
    }

    private static func read(_ state: State, from index: Int64, limit: Int) -> Read {
        guard let newest = state.gops.last, index < newest.endIndex else { return .units([], drainAfter: []) }
        guard var position = state.gops.firstIndex(where: { $0.endIndex > index }) else {
            return .units([], drainAfter: [])
        }
        if state.gops[position].firstIndex > index && position == 0 { return .gap }
        var units: [Unit] = []
        var drainAfter: Set<Int64> = []
        while position < state.gops.count, units.count < limit {
            let gop = state.gops[position]
            if gop.truncated { return units.isEmpty ? .gap : .units(units, drainAfter: drainAfter) }
            for unit in gop.units where unit.index >= index && units.count < limit {
                units.append(unit)
            }
            if gop.endsStream, let last = gop.units.last, units.last?.index == last.index {
                drainAfter.insert(last.index)
            }
            position += 1
        }
        return .units(units, drainAfter: drainAfter)
    }

    // MARK: - Pictures from the past

    enum Lookup: Sendable {
        case plan(DecodePlan)
        case notHeld(Summary)
    }

    /// The decode that yields the picture on screen at `time`: the newest one in output order
    /// whose access unit, and those of every picture shown before it, had arrived by then.
    func plan(at time: Date) -> Lookup {
        state.withLock { state in
            let summary = Self.summary(state, limits: limits)
            guard let first = summary.from, time >= first,
                let position = state.gops.lastIndex(where: {
                    $0.isDecodable && ($0.units.first?.receivedAt ?? .distantFuture) <= time
                })
            else { return .notHeld(summary) }
            let gop = state.gops[position]
            guard let unit = gop.units.last(where: { $0.receivedAt <= time }) else { return .notHeld(summary) }
            if unit.indexed.unit.isLeading && !Self.predecessorUsable(position, in: state.gops) {
                return .notHeld(summary)
            }
            return .plan(Self.plan(for: position, in: state.gops, target: .accessUnit(unit.index)))
        }
    }

    /// The decode that yields the picture on screen once the access unit before `index` (a GOP's
    /// first) had arrived: the GOP before's newest that could be shown.
    func plan(before index: Int64) -> Lookup {
        state.withLock { state in
            let summary = Self.summary(state, limits: limits)
            guard let position = state.gops.lastIndex(where: { $0.isDecodable && $0.firstIndex < index }),
                let unit = state.gops[position].units.last(where: { $0.index < index })
            else { return .notHeld(summary) }
            if unit.indexed.unit.isLeading && !Self.predecessorUsable(position, in: state.gops) { return .notHeld(summary) }
            return .plan(Self.plan(for: position, in: state.gops, target: .accessUnit(unit.index)))
        }
    }

    /// The decode that yields the picture numbered `number`.
    func plan(number: UInt64) -> Lookup {
        state.withLock { state in
            let summary = Self.summary(state, limits: limits)
            guard number >= 1,
                let position = state.gops.lastIndex(where: { $0.isDecodable && UInt64($0.firstIndex) < number }),
                number <= UInt64(state.gops[position].endIndex)
            else { return .notHeld(summary) }
            return .plan(Self.plan(for: position, in: state.gops, target: .number(number)))
        }
    }

    /// The decode that yields the picture whose access unit has the presentation time `pts` (a
    /// container's or a pulled source's, 1/90,000 s): the newest such, should a stream's times
    /// repeat (a pulled source's start again with each connection).
    func plan(presentationTime pts: Int64) -> Lookup {
        state.withLock { state in
            let summary = Self.summary(state, limits: limits)
            for position in state.gops.indices.reversed() where state.gops[position].isDecodable {
                guard let unit = state.gops[position].units.last(where: { $0.indexed.pts == pts }) else { continue }
                if unit.indexed.unit.isLeading && !Self.predecessorUsable(position, in: state.gops) { break }
                return .plan(Self.plan(for: position, in: state.gops, target: .pictureOf(accessUnit: unit.index)))
            }
            return .notHeld(summary)
        }
    }

    /// When the access unit `index` arrived (wall time, and the session's uptime), while it is held.
    func arrival(_ index: Int64) -> (date: Date, uptime: UInt64)? {
        unit(index).map { ($0.receivedAt, $0.receivedUptime) }
    }

    private func unit(_ index: Int64) -> Unit? {
        state.withLock { state in
            guard let gop = state.gops.last(where: { $0.firstIndex <= index }), index < gop.endIndex,
                let first = gop.units.first
            else { return nil }
            let offset = Int(index - first.index)
            if offset >= 0, offset < gop.units.count, gop.units[offset].index == index {
                return gop.units[offset]
            }
            return gop.units.first { $0.index == index }
        }
    }

    var summary: Summary { state.withLock { Self.summary($0, limits: limits) } }

    /// Bytes held now.
    var bytes: Int { state.withLock { $0.bytes } }

    /// The index the next access unit will have (0 before the first).
    var endIndex: Int64 { state.withLock { $0.gops.last?.endIndex ?? 0 } }

    private static func summary(_ state: State, limits: Limits) -> Summary {
        var summary = Summary(limits: limits, gopsDropped: state.gopsDropped)
        summary.newestGOPTooLarge = state.gops.last.map { $0.truncated && !$0.shed } ?? false
        summary.newestGOPShed = state.gops.last?.shed ?? false
        summary.gopsShed = state.gopsShed
        summary.bytes = state.bytes
        summary.slabBytes = state.slabBytes
        summary.accessUnits = state.gops.reduce(0) { $0 + $1.units.count }
        let decodable = state.gops.filter(\.isDecodable)
        summary.gops = decodable.count
        // A GOP whose first picture no decode reaches recovered (it, or the GOPs it would start
        // from, recover gradually with no GOP held before them) is not counted as held: held
        // from the first one that is. Each look walks back at most `maxGOPsBackForRecovery`.
        let servable = state.gops.indices.first { position in
            guard state.gops[position].isDecodable else { return false }
            let first = state.gops[position].firstIndex
            return recovered(first, from: startOfDecode(for: position, reaching: first, in: state.gops), in: state.gops)
        }
        if let firstServable = servable ?? state.gops.indices.first(where: { state.gops[$0].isDecodable }),
            let last = state.gops.last
        {
            let first = state.gops[firstServable]
            summary.from = first.units.first?.receivedAt
            summary.to = last.units.last?.receivedAt ?? decodable.last?.units.last?.receivedAt
            summary.firstSeq = UInt64(first.firstIndex) + 1
            summary.lastSeq = UInt64((decodable.last ?? first).endIndex)
        }
        return summary
    }

    /// The GOP before `position` is held whole, decodable and in the same stream.
    private static func predecessorUsable(_ position: Int, in gops: [GOP]) -> Bool {
        position > 0 && gops[position].followsPrevious && gops[position - 1].isDecodable
            && !gops[position - 1].endsStream
    }

    /// The GOP a decode that is to show the picture of unit `index`, in the GOP at `position`,
    /// starts at: the GOP before when that one has leading pictures (which may be the picture),
    /// and earlier again while the start recovers gradually and `index` lies within its recovery.
    private static func startOfDecode(for position: Int, reaching index: Int64, in gops: [GOP]) -> Int {
        var start = position
        if gops[start].hasLeading && predecessorUsable(start, in: gops) { start -= 1 }
        while !recovered(index, from: start, in: gops) && predecessorUsable(start, in: gops)
            && position - start < maxGOPsBackForRecovery
        {
            start -= 1
        }
        return start
    }

    /// How far back a decode goes for a recovery, at most: a stream whose recovery points all
    /// claim longer recoveries (every unit one, each with the largest count) costs no more than
    /// this many GOPs a decode, and the history does not count its pictures as held.
    static let maxGOPsBackForRecovery = 8

    /// A decoder that starts at the GOP at `start` shows the picture of unit `index` (as far as
    /// the recovery of its keyframe goes).
    private static func recovered(_ index: Int64, from start: Int, in gops: [GOP]) -> Bool {
        gops[start].recoveryDistance == 0 || index - gops[start].firstIndex >= Int64(gops[start].recoveryDistance)
    }

    private static func plan(for position: Int, in gops: [GOP], target: DecodePlan.Target) -> DecodePlan {
        let index: Int64
        switch target {
        case .accessUnit(let unit), .pictureOf(let unit): index = unit
        // Numbers follow output order, as recovery does (`recoveryDistance` allows for reordering).
        case .number(let number): index = Int64(number) - 1
        }
        var units: [Unit] = []
        for earlier in startOfDecode(for: position, reaching: index, in: gops)..<position { units += gops[earlier].units }
        units += gops[position].units
        let drainAfter: Set<Int64> = gops[position].endsStream ? Set(gops[position].units.last.map { [$0.index] } ?? []) : []
        return DecodePlan(
            units: units, drainAfter: drainAfter, target: target,
            atOpenEdge: position == gops.count - 1 && !gops[position].endsStream,
            targetGOPFirstIndex: gops[position].firstIndex)
    }
}
