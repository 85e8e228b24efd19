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
        nalUnits = unit.nalUnits.map { Array($0.bytes) }
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

/// Splits `input` in `pieces`, checked against `reference`, and assembles the units; with
/// `endEarly`, access units are ended after each piece whenever the pending unit's first bytes
/// settle it, as StreamDecoder does.
func splitAndAssemble(
    _ input: [UInt8], pieces: [Int], cap: Int, endEarly: Bool, _ reference: ReferenceSplit
) -> (accessUnits: [AccessUnitSummary], counters: AssemblerCounters) {
    var assembler = AccessUnitAssembler()
    var accessUnits: [AccessUnitSummary] = []
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
    checkedSplit(
        input, pieces: pieces, cap: cap, reference,
        handle: { event in
            switch event {
            case .unit(let unit): assembler.push(NALUnit(unit), collect)
            case .dropped(_, let prefix): assembler.unitDropped(prefix: prefix, collect)
            }
        },
        afterPiece: { splitter in
            if endEarly, let prefix = splitter.pendingUnitPrefix, assembler.nextUnitEndsAccessUnit(prefix: prefix) {
                assembler.endAccessUnit(collect)
            }
        })
    assembler.finish(collect)
    require(
        assembler.accessUnitCount == accessUnits.count(where: \.hasPicture),
        "accessUnitCount counts the access units emitted with a picture")
    let counters = AssemblerCounters(
        accessUnits: assembler.accessUnitCount,
        slicesWithUnknownParameterSets: assembler.slicesWithUnknownParameterSets,
        malformedUnits: assembler.malformedUnits, lastError: assembler.lastError)
    return (accessUnits, counters)
}
