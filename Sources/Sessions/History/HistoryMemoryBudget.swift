import Decoding
import Synchronization

/// What every session's compressed history may keep alive together (`--max-history-memory`).
/// Each history bounds itself (`--history-seconds`, `--history-bytes`); their sum would still
/// grow with the number of sessions. Past this bound the history that owns the most gives up
/// its oldest GOP (or, when that GOP is all it holds, its newest is truncated, as one larger
/// than `--history-bytes` is), and so on until the sum fits: the session holding the most loses
/// history first, and one holding less than the others keeps what it has. The sum counts the
/// memory each keeps alive; who gives first goes by what each owns (`Report.owns`), since a
/// small history keeps two shared slabs alive however little it holds.
///
/// Owns: how much each history keeps alive, as it last said. A history reports after every
/// change, outside its own lock, numbered so that a report overtaken by a newer one is ignored;
/// shedding takes one history's lock at a time and never this one's, so no lock is ever held
/// while another is taken. Histories are held weakly, and made strong only outside this lock:
/// the last reference to a session's history may go on a shedding thread, and its `deinit`
/// (which calls `forget`) must not find this lock held.
public final class HistoryMemoryBudget: Sendable {
    public let limit: Int

    public struct Usage: Sendable, Equatable {
        /// What every history keeps alive now: the larger of its units' bytes and its slabs'.
        public var bytes = 0
        public var histories = 0
        /// GOPs given up to keep the sum within `limit` since start-up.
        public var gopsShed = 0
    }

    /// What a history says of itself after a change.
    struct Report {
        /// The memory it keeps alive, counted in the sum.
        var keeps: Int
        /// What of that is its own, which orders who gives first.
        var owns: Int
        /// Its own count of reports: an older one arriving late is ignored.
        var number: UInt64
    }

    private struct Entry {
        weak var history: CompressedHistory?
        var bytes: Int
        var owns: Int
        /// The number of the report that said so.
        var report: UInt64
    }

    private struct State {
        var entries: [ObjectIdentifier: Entry] = [:]
        var bytes = 0
        var gopsShed = 0
        /// A thread is shedding: another one over the bound leaves it to that one.
        var shedding = false
    }

    private let state = Mutex(State())

    public init(limit: Int) {
        self.limit = limit
    }

    /// A quarter of what this process may use (`MemoryLimit.ofThisProcess`): decoders have half
    /// (`DecoderMemoryBudget.defaultLimit`), and the rest is for pictures, uploads and the server.
    public static func defaultLimit() -> Int {
        MemoryLimit.ofThisProcess() / 4
    }

    public var usage: Usage {
        state.withLock { Usage(bytes: $0.bytes, histories: $0.entries.count, gopsShed: $0.gopsShed) }
    }

    /// What `history` keeps alive and owns now; past the bound, histories shed until the sum fits.
    func report(_ history: CompressedHistory, _ report: Report) {
        let mustShed = state.withLock { state -> Bool in
            let key = ObjectIdentifier(history)
            let before = state.entries[key]
            if let before, before.report > report.number { return false }
            state.bytes += report.keeps - (before?.bytes ?? 0)
            state.entries[key] = Entry(history: history, bytes: report.keeps, owns: report.owns, report: report.number)
            guard state.bytes > limit, !state.shedding else { return false }
            state.shedding = true
            return true
        }
        if mustShed { shed() }
    }

    /// `history` is gone: what it kept no longer counts.
    func forget(_ history: ObjectIdentifier) {
        state.withLock { state in
            guard let entry = state.entries.removeValue(forKey: history) else { return }
            state.bytes -= entry.bytes
        }
    }

    /// Takes a GOP from the history owning the most, until the sum fits or none can give one
    /// (a catch-up reads what each has left). The last look and the end of shedding are one
    /// step, so a report in between still finds someone shedding or sheds itself.
    private func shed() {
        var refused: Set<ObjectIdentifier> = []
        while true {
            let largest = state.withLock { state -> (key: ObjectIdentifier, entry: Entry)? in
                var largest: (key: ObjectIdentifier, entry: Entry)?
                if state.bytes > limit {
                    for (key, entry) in state.entries where !refused.contains(key) && entry.owns > largest?.entry.owns ?? -1 {
                        largest = (key, entry)
                    }
                }
                if largest == nil { state.shedding = false }
                return largest
            }
            guard let largest else { return }
            // Gone meanwhile: its `deinit` forgets it.
            guard let history = largest.entry.history else {
                refused.insert(largest.key)
                continue
            }
            // It reports what it keeps after, which lowers the sum.
            switch history.shedOneGOP() {
            case .shed: state.withLock { $0.gopsShed += 1 }
            case .removedEmpty: break
            case .refused: refused.insert(largest.key)
            }
        }
    }
}
