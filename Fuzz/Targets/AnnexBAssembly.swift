// libFuzzer target: AnnexBSplitter and AccessUnitAssembler over any bytes, pushed whole and in
// a chunking derived from the input. Checked against a naive whole-input reference splitter:
// the exact units, offsets, drops and discarded bytes for every chunking; oversized units
// reported the moment they outgrow the cap (so memory stays bounded); `pendingUnitPrefix`
// after every piece; and the same access units whether they are ended early
// (`nextUnitEndsAccessUnit`, as StreamDecoder does after every piece) or only by the next unit.

import H264
import VideoCoding

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAnnexBAssembly(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    var random = SplitMix64(seededBy: input)
    // One input in four runs with a small cap, so dropping oversized units and resynchronising
    // at the next start code are exercised as often as plain splitting.
    let cap = random.next() % 4 == 0 ? random.next(upTo: 600) : AnnexBSplitter.defaultMaxNALBytes
    let reference = ReferenceSplit(input, maxNALBytes: cap)

    let whole = splitAndAssemble(input, pieces: [input.count], cap: cap, endEarly: false, reference)
    require(
        whole.accessUnits.flatMap(\.nalUnits) == reference.emitted.map(\.bytes),
        "access units hold exactly the emitted NAL units, in order")

    // One chunking per input: every mutation of the input brings a new one.
    let pieces = random.pieces(total: input.count)
    let chunked = splitAndAssemble(input, pieces: pieces, cap: cap, endEarly: true, reference)
    // Below prefixLength bytes a dropped unit's prefix is as long as what had arrived, so where
    // the access unit ends after it may depend on the chunking; no entry point allows such a
    // cap (the server's smallest is 1024).
    if cap >= AnnexBSplitter.prefixLength {
        require(
            chunked.accessUnits == whole.accessUnits,
            "same access units for \(pieces.count) pieces with early ends as for the whole input (cap \(cap))")
        require(chunked.counters == whole.counters, "same assembler counters for any chunking")
    }
    return 0
}

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

/// An access unit with every field compared.
struct AccessUnitSummary: Equatable {
    var nalUnits: [[UInt8]]
    var offsets: [Int]
    var isIDR: Bool
    var isRandomAccessPoint: Bool
    var recoveryPoint: RecoveryPoint?
    var primarySliceType: SliceType?
    var ppsId: Int?
    var spsId: Int?
    var frameNum: Int?
    var isField: Bool
    var isBottomField: Bool
    var hasPicture: Bool
    var streamOffset: Int

    init(_ unit: AccessUnit) {
        nalUnits = unit.nalUnits.map(\.bytes)
        offsets = unit.nalUnits.map(\.streamOffset)
        isIDR = unit.isIDR
        isRandomAccessPoint = unit.isRandomAccessPoint
        recoveryPoint = unit.recoveryPoint
        primarySliceType = unit.primarySliceType
        ppsId = unit.ppsId
        spsId = unit.spsId
        frameNum = unit.frameNum
        isField = unit.isField
        isBottomField = unit.isBottomField
        hasPicture = unit.hasPicture
        streamOffset = unit.streamOffset
    }
}

struct AssemblerCounters: Equatable {
    var accessUnits: Int
    var slicesWithUnknownParameterSets: Int
    var malformedUnits: Int
    var lastError: BitstreamError?
}

/// Splits `input` in `pieces`, checking the splitter against `reference` after every piece,
/// and assembles the units; with `endEarly`, access units are ended after each piece whenever
/// the pending unit's first bytes settle it, as StreamDecoder does.
func splitAndAssemble(
    _ input: [UInt8], pieces: [Int], cap: Int, endEarly: Bool, _ reference: ReferenceSplit
) -> (accessUnits: [AccessUnitSummary], counters: AssemblerCounters) {
    var splitter = AnnexBSplitter(maxNALBytes: cap)
    var assembler = AccessUnitAssembler()
    var accessUnits: [AccessUnitSummary] = []
    var emitted: [NALUnit] = []
    var droppedPrefixes: [ArraySlice<UInt8>] = []
    let collect = { (unit: AccessUnit) in
        require(!unit.nalUnits.isEmpty, "an access unit holds at least one NAL unit")
        require(unit.streamOffset == unit.nalUnits[0].streamOffset, "an access unit starts at its first NAL unit")
        // One way only: a redundant slice (redundant_pic_cnt > 0) goes with the access unit but
        // makes no picture of it, as in libavcodec, which skips redundant slices.
        require(
            !unit.hasPicture || unit.nalUnits.contains { $0.type.isVCL },
            "an access unit with a picture holds a VCL NAL unit (types 1...5)")
        require(!unit.isIDR || unit.nalUnits.contains { $0.type == .idr }, "an IDR access unit holds an IDR slice")
        accessUnits.append(AccessUnitSummary(unit))
    }
    let handle = { (event: SplitterEvent) in
        switch event {
        case .unit(let unit):
            let nal = NALUnit(unit)
            emitted.append(nal)
            assembler.push(nal, collect)
        case .dropped(let error, let prefix):
            require(error.code == .nalTooLarge, "a drop is reported as nal_too_large")
            droppedPrefixes.append(prefix)
            assembler.unitDropped(prefix: prefix, collect)
        }
    }
    var pushed = 0
    input.withUnsafeBytes { bytes in
        for piece in pieces {
            splitter.push(UnsafeRawBufferPointer(rebasing: bytes[pushed..<(pushed + piece)]), handle)
            pushed += piece
            require(
                splitter.droppedUnits == reference.dropsReported(afterPushing: pushed)
                    && droppedPrefixes.count == splitter.droppedUnits,
                "a unit over the cap is dropped the moment it outgrows it (\(pushed) bytes pushed, cap \(cap))")
            let prefix = splitter.pendingUnitPrefix.map(Array.init)
            require(
                prefix == reference.pendingPrefix(afterPushing: pushed),
                "pendingUnitPrefix after \(pushed) bytes")
            if endEarly, let prefix = splitter.pendingUnitPrefix, assembler.nextUnitEndsAccessUnit(prefix: prefix) {
                assembler.endAccessUnit(collect)
            }
        }
    }
    splitter.finish(handle)
    assembler.finish(collect)

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
    require(
        assembler.accessUnitCount == accessUnits.count, "accessUnitCount counts the access units emitted")
    let counters = AssemblerCounters(
        accessUnits: assembler.accessUnitCount,
        slicesWithUnknownParameterSets: assembler.slicesWithUnknownParameterSets,
        malformedUnits: assembler.malformedUnits, lastError: assembler.lastError)
    return (accessUnits, counters)
}
