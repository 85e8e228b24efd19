// Shared by the Annex B fuzz targets of both codecs (see the Makefile's fuzz section): a naive
// reference splitter, and an AnnexBSplitter run checked against it after every piece.

import VideoCoding

/// What the splitter must report for an input, found the slow and obvious way: every 00 00 01
/// is a start code, a unit is what lies between two of them without its trailing zero bytes.
struct ReferenceSplit {
    struct Unit {
        /// Offset of the byte after the start code's 01.
        var start: Int
        /// Offset of the next start code's 01 (or the input's end): bytes before it that are
        /// not trailing zeros belong to the unit.
        var regionEnd: Int
        /// The unit without trailing zeros; empty units are never reported.
        var bytes: [UInt8]
        /// For units over the cap: how many input bytes must have been pushed when the drop is
        /// reported, i.e. one past the first non-zero byte beyond the cap.
        var reportedDropBy: Int?
    }

    let input: [UInt8]
    let cap: Int
    /// Every start code's unit, empty ones included, in stream order.
    var regions: [Unit] = []
    var emitted: [Unit] { regions.filter { !$0.bytes.isEmpty && $0.reportedDropBy == nil } }
    var dropped: [Unit] { regions.filter { $0.reportedDropBy != nil } }
    /// Bytes before the first start code that are not the zeros leading into it.
    var discardedBytes = 0

    init(_ input: [UInt8], maxNALBytes: Int) {
        self.input = input
        cap = maxNALBytes
        var ones: [Int] = []
        var index = 0
        while index + 2 < input.count {
            if input[index] == 0 && input[index + 1] == 0 && input[index + 2] == 1 {
                ones.append(index + 2)
                index += 3
            } else {
                index += 1
            }
        }
        let firstOne = ones.first ?? input.count
        var zerosBefore = 0
        while zerosBefore < firstOne && input[firstOne - 1 - zerosBefore] == 0 { zerosBefore += 1 }
        discardedBytes = ones.isEmpty ? input.count - zerosBefore : firstOne - zerosBefore

        for (position, one) in ones.enumerated() {
            let start = one + 1
            let regionEnd = position + 1 < ones.count ? ones[position + 1] : input.count
            var end = regionEnd
            while end > start && input[end - 1] == 0 { end -= 1 }
            var reportedDropBy: Int?
            if end - start > maxNALBytes {
                var first = start + maxNALBytes
                while input[first] == 0 { first += 1 }
                reportedDropBy = first + 1
            }
            regions.append(
                Unit(start: start, regionEnd: regionEnd, bytes: Array(input[start..<end]), reportedDropBy: reportedDropBy))
        }
    }

    /// `AnnexBSplitter.pendingUnitPrefix` once the first `pushed` bytes are in.
    func pendingPrefix(afterPushing pushed: Int) -> [UInt8]? {
        guard let open = regions.last(where: { $0.start <= pushed }) else { return nil }
        if let droppedBy = open.reportedDropBy, droppedBy <= pushed { return nil }
        var end = min(pushed, open.regionEnd)
        while end > open.start && input[end - 1] == 0 { end -= 1 }
        guard end > open.start else { return nil }
        return Array(input[open.start..<min(end, open.start + 16)])
    }

    /// Drops the splitter must have reported once the first `pushed` bytes are in: exactly those
    /// of the units that have outgrown the cap by then, no later (memory) and no sooner.
    func dropsReported(afterPushing pushed: Int) -> Int {
        regions.count(where: { ($0.reportedDropBy ?? Int.max) <= pushed })
    }
}

/// Splits `input` in `pieces`, checking the splitter against `reference` after every piece:
/// a unit over the cap is dropped the moment it outgrows it, `pendingUnitPrefix` is the open
/// unit's first bytes, and at the end the emitted units, drops, prefixes and counters are the
/// reference's. `handle` gets every event; `afterPiece` runs once each piece's events are handled
/// (where a decoder ends access units early).
func checkedSplit(
    _ input: [UInt8], pieces: [Int], cap: Int, _ reference: ReferenceSplit,
    handle: (SplitterEvent) -> Void, afterPiece: (AnnexBSplitter) -> Void
) {
    var splitter = AnnexBSplitter(maxNALBytes: cap)
    var emitted: [AnnexBUnit] = []
    var droppedPrefixes: [ArraySlice<UInt8>] = []
    func record(_ event: SplitterEvent) {
        switch event {
        case .unit(let unit):
            emitted.append(unit)
        case .dropped(let error, let prefix):
            require(error.code == .nalTooLarge, "a drop is reported as nal_too_large")
            droppedPrefixes.append(prefix)
        }
        handle(event)
    }
    var pushed = 0
    input.withUnsafeBytes { bytes in
        for piece in pieces {
            splitter.push(UnsafeRawBufferPointer(rebasing: bytes[pushed..<(pushed + piece)]), record)
            pushed += piece
            require(
                splitter.droppedUnits == reference.dropsReported(afterPushing: pushed)
                    && droppedPrefixes.count == splitter.droppedUnits,
                "a unit over the cap is dropped the moment it outgrows it (\(pushed) bytes pushed, cap \(cap))")
            require(
                splitter.pendingUnitPrefix.map(Array.init) == reference.pendingPrefix(afterPushing: pushed),
                "pendingUnitPrefix after \(pushed) bytes")
            afterPiece(splitter)
        }
    }
    splitter.finish(record)

    let expected = reference.emitted
    require(emitted.count == expected.count, "\(emitted.count) units emitted, the reference finds \(expected.count)")
    for (unit, reference) in zip(emitted, expected) {
        require(
            unit.bytes == reference.bytes && unit.streamOffset == reference.start,
            "unit at \(unit.streamOffset) (\(unit.bytes.count) bytes) is the reference's at \(reference.start)")
    }
    require(splitter.emittedUnits == expected.count, "emittedUnits counts the emitted units")
    require(splitter.droppedUnits == reference.dropped.count, "droppedUnits counts the units over the cap")
    for (prefix, reference) in zip(droppedPrefixes, reference.dropped) {
        // Everything that had arrived when the unit outgrew the cap, up to prefixLength bytes.
        require(
            prefix.count >= min(cap + 1, AnnexBSplitter.prefixLength) && prefix.count <= AnnexBSplitter.prefixLength
                && prefix.elementsEqual(reference.bytes.prefix(prefix.count)),
            "a dropped unit's prefix is its first bytes (unit at \(reference.start))")
    }
    require(splitter.bytesConsumed == input.count, "bytesConsumed counts every byte pushed")
    require(
        splitter.discardedBytes == reference.discardedBytes,
        "discardedBytes \(splitter.discardedBytes), the reference counts \(reference.discardedBytes)")
}
