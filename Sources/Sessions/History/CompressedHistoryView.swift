import Decoding
import FoundationEssentials
import VideoCoding

/// What a session's compressed history holds, read-only (`Session.accessUnits`): the door for
/// outputs that want coded video rather than pictures (a recorder, a restreamer), wherever they
/// live. A reader follows the session by reading from the last keyframe once, then from the
/// index after the last unit it got; `.dropped` says it fell further behind than the history's
/// bounds, and starts it over at a keyframe.
///
/// A read copies the held units' entries under the history's lock, never their bytes: a
/// unit's NAL units and parameter sets are shared with the history and immutable, and stay
/// valid for as long as the reader keeps them, whatever the session does next. Any thread.
public struct CompressedHistoryView: Sendable {
    let history: CompressedHistory

    /// The result of reading from an index.
    public enum Read: Sendable {
        /// The held units from the index asked for, in decoding order; empty when nothing newer
        /// is held yet.
        case units([HeldAccessUnit])
        /// The units from the index asked for are no longer held (the history's time and byte
        /// bounds dropped them, or they were too many for its byte bound): start again at
        /// `fromLastKeyframe()`.
        case dropped
    }

    /// The units from the last keyframe decoding can start at (its parameter sets are in its
    /// `unit.parameterSets`) to the newest, in decoding order; empty when none is held. When
    /// that keyframe has leading pictures (`unit.isLeading`), they follow it and cannot be
    /// decoded from it: a decoder starting here skips them.
    public func fromLastKeyframe() -> [HeldAccessUnit] {
        switch history.readFromLastKeyframe() {
        case .units(let units, let drainAfter): Self.held(units, drainAfter: drainAfter)
        case .gap: []
        }
    }

    /// Up to `limit` held units from `index` on, in decoding order.
    public func read(from index: Int64, limit: Int = .max) -> Read {
        switch history.read(from: index, limit: max(0, limit)) {
        case .units(let units, let drainAfter): .units(Self.held(units, drainAfter: drainAfter))
        case .gap: .dropped
        }
    }

    /// The index the next access unit will get: where a reader that wants only what comes from
    /// now on starts.
    public var endIndex: Int64 { history.endIndex }

    private static func held(_ units: [CompressedHistory.Unit], drainAfter: Set<Int64>) -> [HeldAccessUnit] {
        units.map { unit in
            HeldAccessUnit(
                index: unit.index, unit: unit.indexed.unit, receivedAt: unit.receivedAt,
                endsStream: drainAfter.contains(unit.index))
        }
    }
}

/// One access unit a session's history holds.
public struct HeldAccessUnit: Sendable {
    /// Its position in decoding order among every access unit the session received (across
    /// pushes, pulls and streams), from 0; never reused.
    public let index: Int64
    /// Its NAL units, the parameter sets its picture uses, whether it is a keyframe, and the
    /// facts of its sequence (the format).
    public let unit: CodedAccessUnit
    /// When its bytes arrived (the session's wall clock).
    public let receivedAt: Date
    /// Its stream ended after it (a flush): what follows is a new stream, which a decoder
    /// starts again at a keyframe.
    public let endsStream: Bool

    public var isKeyframe: Bool { unit.isKeyframe }

    /// Its Annex B bytes (four-byte start codes); with `startingDecoder`, preceded by the
    /// parameter sets a decoder that has none needs for it, the way to begin at a keyframe.
    public func annexB(startingDecoder: Bool = false) -> [UInt8] {
        var bytes: [UInt8] = []
        unit.appendAnnexB(to: &bytes, parameterSetsUnless: { _ in !startingDecoder })
        return bytes
    }
}
