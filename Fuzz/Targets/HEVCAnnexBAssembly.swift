// libFuzzer target: AnnexBSplitter and H.265's AccessUnitAssembler over any bytes, pushed whole
// and in a chunking derived from the input, the splitter checked against the naive reference
// after every piece (CheckedSplit.swift). The access units hold exactly the emitted base-layer
// units, in order (other layers counted); they are the same whether ended early
// (`nextUnitEndsAccessUnit`, as a decoder does after every piece) or only by the next unit; and
// RandomAccess judges every one of them.

import H265
import VideoCoding

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHEVCAnnexBAssembly(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = fuzzInput(data, size)
    var random = SplitMix64(seededBy: input)
    // One input in four runs with a small cap, so dropped units reach the assembler often.
    let cap = random.next() % 4 == 0 ? random.next(upTo: 600) : AnnexBSplitter.defaultMaxNALBytes
    let reference = ReferenceSplit(input, maxNALBytes: cap)

    let whole = splitAndAssemble(input, pieces: [input.count], cap: cap, endEarly: false, reference)
    // Units shorter than the two-byte header are no H.265 units at all.
    let headed = reference.emitted.map(\.bytes).filter { $0.count >= 2 }
    let baseLayer = headed.filter { NALHeader($0[0], $0[1]).layerId == 0 }
    require(whole.accessUnits.flatMap(\.nalUnits) == baseLayer, "access units hold exactly the base-layer units, in order")
    require(
        whole.counters.unitsOutsideBaseLayer == headed.count - baseLayer.count, "units of other layers are counted")

    let pieces = random.pieces(total: input.count)
    let chunked = splitAndAssemble(input, pieces: pieces, cap: cap, endEarly: true, reference)
    // Below prefixLength bytes a dropped unit's prefix is as long as what had arrived (see the
    // H.264 target); no entry point allows such a cap.
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
    var hasPicture: Bool
    var pictureType: NALUnitType?
    var sliceType: SliceType?
    var ppsId: Int?
    var spsId: Int?
    var temporalId: Int?
    var picOrderCntLsb: Int?
    var streamOffset: Int
    var verdict: RandomAccess.Verdict

    init(_ unit: AccessUnit, verdict: RandomAccess.Verdict) {
        nalUnits = unit.nalUnits.map { Array($0.bytes) }
        offsets = unit.nalUnits.map(\.streamOffset)
        hasPicture = unit.hasPicture
        pictureType = unit.pictureType
        sliceType = unit.sliceType
        ppsId = unit.ppsId
        spsId = unit.spsId
        temporalId = unit.temporalId
        picOrderCntLsb = unit.picOrderCntLsb
        streamOffset = unit.streamOffset
        self.verdict = verdict
    }
}

struct AssemblerCounters: Equatable {
    var accessUnits: Int
    var unitsOutsideBaseLayer: Int
    var slicesWithUnknownParameterSets: Int
    var malformedUnits: Int
    var lastError: BitstreamError?
    var skippedBeforeRandomAccessPoint: Int
    var skippedRASL: Int
}

/// Splits `input` in `pieces`, checked against `reference`, and assembles the units; with
/// `endEarly`, access units are ended after each piece whenever the pending unit's first bytes
/// settle it.
func splitAndAssemble(
    _ input: [UInt8], pieces: [Int], cap: Int, endEarly: Bool, _ reference: ReferenceSplit
) -> (accessUnits: [AccessUnitSummary], counters: AssemblerCounters) {
    var assembler = AccessUnitAssembler()
    var access = RandomAccess()
    var accessUnits: [AccessUnitSummary] = []
    let collect = { (unit: AccessUnit) in
        require(!unit.nalUnits.isEmpty, "an access unit holds at least one NAL unit")
        require(unit.streamOffset == unit.nalUnits[0].streamOffset, "an access unit starts at its first NAL unit")
        require(unit.nalUnits.allSatisfy { $0.layerId == 0 }, "an access unit holds base-layer units only")
        require(
            unit.hasPicture == unit.nalUnits.contains { $0.type.isSliceSegment }
                && unit.pictureType == unit.nalUnits.first(where: { $0.type.isSliceSegment && SliceSegmentHeader.startsPicture($0) == true })?.type
                    ?? unit.nalUnits.first(where: { $0.type.isSliceSegment })?.type,
            "the picture's type is that of the segment that starts it (or of its first segment)")
        // Within one unit, a second segment that starts a picture would have begun another one.
        require(
            unit.nalUnits.filter { SliceSegmentHeader.startsPicture($0) == true }.count <= 1,
            "an access unit holds at most one picture start")
        if let sps = unit.sps, let lsb = unit.picOrderCntLsb {
            require(lsb < 1 << sps.log2MaxPicOrderCntLsb, "slice_pic_order_cnt_lsb fits its SPS")
        }
        accessUnits.append(AccessUnitSummary(unit, verdict: access.verdict(for: unit)))
    }
    checkedSplit(
        input, pieces: pieces, cap: cap, reference,
        handle: { event in
            switch event {
            case .unit(let unit): if let nal = NALUnit(unit) { assembler.push(nal, collect) }
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
    require(
        access.skippedRASL + access.skippedBeforeRandomAccessPoint
            == accessUnits.count(where: { $0.verdict != .decode }),
        "RandomAccess counts what it skips")
    let counters = AssemblerCounters(
        accessUnits: assembler.accessUnitCount, unitsOutsideBaseLayer: assembler.unitsOutsideBaseLayer,
        slicesWithUnknownParameterSets: assembler.slicesWithUnknownParameterSets,
        malformedUnits: assembler.malformedUnits, lastError: assembler.lastError,
        skippedBeforeRandomAccessPoint: access.skippedBeforeRandomAccessPoint, skippedRASL: access.skippedRASL)
    return (accessUnits, counters)
}
