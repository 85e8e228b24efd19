import Decoding

/// Decoding the past: access units read back from a session's `CompressedHistory` go to a
/// decoder in decoding order, and the decoder is drained wherever the stream ended after a unit
/// (a flush), so that the pictures it still holds come out before the next stream starts at its
/// keyframe. The one way a catch-up (on demand, a few units per turn of the decode queue) and a
/// picture from the past (a plan's units, on a catch-up decoder of its own) feed a decoder.
struct HistoryReplay {
    /// The index of the next unit to feed.
    private(set) var cursor: Int64
    /// Units fed so far.
    private(set) var unitsFed = 0

    init(from index: Int64) {
        cursor = index
    }

    /// Feeds `units` (as the history read them from `cursor` on; `drainAfter`: the indices after
    /// which the stream ended) until `finished` says the caller has what it wanted. Each unit's
    /// errors, and a drain's, go to `onErrors`.
    mutating func feed(
        _ units: [CompressedHistory.Unit], drainAfter: Set<Int64>, until finished: () -> Bool = { false },
        decode: (IndexedAccessUnit) -> [DecodeError], drain: () -> [DecodeError], onErrors: ([DecodeError]) -> Void
    ) {
        for unit in units {
            if finished() { return }
            onErrors(decode(unit.indexed))
            if drainAfter.contains(unit.index) { onErrors(drain()) }
            cursor = unit.index + 1
            unitsFed += 1
        }
    }

    /// The history no longer holds what was to be read next: go on from `index`.
    mutating func restart(at index: Int64) {
        cursor = index
    }
}
