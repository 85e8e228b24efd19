/// Picture numbers (`seq`) that do not depend on where decoding started.
///
/// A picture's number is 1 + the index of its GOP's keyframe (the access units in decoding
/// order before it, `IndexedAccessUnit.index`) + its rank in output order within its GOP.
/// Ingest gives every access unit its index; the decoder carries the index through reordering
/// with the picture (`DecodedFrame.accessUnitIndex`), which says which GOP an output picture
/// belongs to. So a decoder that starts at any keyframe numbers that GOP's pictures as one
/// that has decoded the stream from its start: a picture decoded on demand or from history
/// has the number the live decode gave it. Numbers grow with output order (every picture of
/// a GOP comes out before the next GOP's pictures that follow its keyframe; a GOP numbers at
/// most as many pictures as it has access units) and are never reused; a picture that is not
/// output (a damaged unit libavcodec drops) leaves a gap.
///
/// Open GOPs: the leading pictures of a keyframe (`CodedAccessUnit.isLeading`: H.265 RASL,
/// H.264 pictures before a recovery point in output order) cannot be output by a decoder that
/// starts at that keyframe, and they come first in its output order. Such a decoder does not
/// send them and counts them here, so the pictures after them keep their numbers. A caller that
/// wants the leading pictures themselves starts one GOP earlier (what `CompressedHistory`
/// does when it holds that GOP).
struct PictureNumbering {
    private struct GOP {
        /// The index of its first access unit: the keyframe (or, for a decoder that started
        /// before any keyframe, whatever came first).
        let key: Int64
        /// Started at a keyframe with no GOP before it in this decoder: its leading pictures
        /// are not decoded.
        let startedFresh: Bool
        /// Leading pictures not decoded; they come first in output order.
        var skippedLeading = 0
        /// Pictures of it output so far.
        var output = 0
        /// A picture after the keyframe that is not leading has been sent: from then on no
        /// picture is leading (leading pictures come right after their keyframe).
        var trailing = false
    }

    /// The latest GOPs, oldest first: a decoder's output lags its input by a few access units.
    private var gops: [GOP] = []
    private static let gopsKept = 8
    /// Nothing has been sent since the decoder started or was drained.
    private var fresh = true
    private(set) var lastNumber: UInt64 = 0

    /// Whether `unit` goes to the decoder: not when it is a leading picture of a keyframe this
    /// decoder started at (then it is counted for the numbers of the pictures after it).
    mutating func admit(_ unit: IndexedAccessUnit) -> Bool {
        if unit.unit.isKeyframe {
            gops.append(GOP(key: unit.index, startedFresh: fresh))
            fresh = false
            if gops.count > Self.gopsKept { gops.removeFirst(gops.count - Self.gopsKept) }
            return true
        }
        guard !gops.isEmpty else {
            // Pictures before the first keyframe (an H.264 stream that starts at an I picture
            // after P pictures): numbered from the first of them. The keyframe's leading
            // pictures may then refer to them, so libavcodec decides whether they come out.
            gops.append(GOP(key: unit.index, startedFresh: false))
            fresh = false
            return true
        }
        let last = gops.count - 1
        if unit.unit.isLeading, gops[last].startedFresh, !gops[last].trailing {
            gops[last].skippedLeading += 1
            return false
        }
        if !unit.unit.isLeading { gops[last].trailing = true }
        return true
    }

    /// This decoder started at the keyframe of the last GOP admitted (nothing before it).
    var lastGOPStartedFresh: Bool { gops.last?.startedFresh ?? false }

    /// A picture came out: its number. A picture without an index (never expected) or one that
    /// would not be newer than the last is numbered after the last, so numbers stay unique.
    mutating func number(_ frame: DecodedFrame) -> UInt64 {
        var number = lastNumber + 1
        if let index = frame.accessUnitIndex, let position = gops.lastIndex(where: { $0.key <= index }) {
            let gop = gops[position]
            gops[position].output += 1
            let computed = UInt64(gop.key) + 1 + UInt64(gop.skippedLeading) + UInt64(gop.output)
            if computed > lastNumber { number = computed }
        }
        lastNumber = number
        return number
    }

    /// The decoder was drained: it starts afresh at the next keyframe.
    mutating func streamEnded() {
        fresh = true
    }
}
