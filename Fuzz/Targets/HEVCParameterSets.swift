// libFuzzer target: the H.265 syntax parsers (VPS; SPS with profile_tier_level, scaling lists,
// short-term reference picture sets and VUI with HRD; PPS with tiles; slice segment headers)
// over the NAL units of a small Annex B stream, the way the assembler meets them: parameter sets
// first update a ParameterSets, later slice segments are read against it. Every unit is also
// parsed as every kind of parameter set, whatever its header says, so mutations of one kind's
// bytes reach all parsers.

import H265
import VideoCoding

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHEVCParameterSets(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let units = AnnexBSplitter.split(fuzzInput(data, size)).compactMap(NALUnit.init)
    var sets = ParameterSets()
    for nal in units {
        let rbsp = nal.rbsp()
        _ = try? VideoParameterSet(rbsp: rbsp)
        if let sps = try? SequenceParameterSet(rbsp: rbsp) { checkDerivedValues(sps) }
        if let pps = try? PictureParameterSet(rbsp: rbsp), let tiles = pps.tiles {
            require(
                tiles.uniformSpacing ? tiles.columnWidths.isEmpty : tiles.columnWidths.count == tiles.columns - 1,
                "explicit tile widths: one per column but the last")
        }
        switch nal.type {
        case .vps, .sps, .pps:
            let before = (vps: sets.vps, sps: sets.sps, pps: sets.pps)
            do {
                try sets.update(with: nal)
                switch nal.type {
                case .vps:
                    let parsed = try VideoParameterSet(nal: nal)
                    require(sets.vps[parsed.id] == parsed && sets.vpsUnits[parsed.id]?.bytes == nal.bytes, "a VPS is stored under its id")
                case .sps:
                    let parsed = try SequenceParameterSet(nal: nal)
                    require(sets.sps[parsed.id] == parsed && sets.spsUnits[parsed.id]?.bytes == nal.bytes, "an SPS is stored under its id")
                default:
                    let parsed = try PictureParameterSet(nal: nal)
                    require(sets.pps[parsed.id] == parsed && sets.ppsUnits[parsed.id]?.bytes == nal.bytes, "a PPS is stored under its id")
                }
            } catch {
                require(
                    sets.vps == before.vps && sets.sps == before.sps && sets.pps == before.pps,
                    "a malformed parameter set leaves the stored ones alone")
            }
        default:
            checkSliceHeader(nal, sets)
        }
    }
    return 0
}

func checkDerivedValues(_ sps: SequenceParameterSet) {
    let crop = sps.cropRect
    require(
        crop.x >= 0 && crop.y >= 0 && crop.width > 0 && crop.height > 0 && crop.x + crop.width <= sps.codedWidth
            && crop.y + crop.height <= sps.codedHeight,
        "the crop rectangle \(crop) lies inside the \(sps.codedWidth)x\(sps.codedHeight) coded picture")
    let format = StreamFormat(sps: sps)
    require(
        format.width == crop.width && format.height == crop.height && format.crop.left >= 0
            && format.crop.right >= 0 && format.crop.top >= 0 && format.crop.bottom >= 0,
        "StreamFormat repeats the crop rectangle")
    require(!format.profile.isEmpty && !format.level.isEmpty && format.tier != nil, "every profile, level and tier has a name")
    require(format.bitDepth <= 16 && format.bitDepthChroma <= 16, "bit depths stay within 16")
    if let rate = format.frameRate { require(rate.isFinite && rate > 0, "a frame rate is positive and finite") }
    require(sps.picSizeInCodingTreeBlocks >= 1, "a picture has a coding tree block")
    require(sps.subLayerOrdering.count == sps.maxSubLayers, "one ordering entry per sub-layer")
    for set in sps.shortTermRefPicSets {
        require(set.count < 32, "a short-term reference picture set holds fewer than 32 pictures")
        require(
            set.negative.allSatisfy { $0.deltaPoc < 0 } && set.positive.allSatisfy { $0.deltaPoc > 0 },
            "pictures before have negative POC differences, pictures after positive ones")
    }
}

func checkSliceHeader(_ nal: NALUnit, _ sets: ParameterSets) {
    guard let header = try? SliceSegmentHeader(nal: nal, parameterSets: sets) else { return }
    require(nal.type.isSliceSegment, "only slice segments have a slice segment header")
    require(SliceSegmentHeader.startsPicture(nal) == header.firstSliceSegmentInPicture, "the first bit is read in place")
    let sps = sets.sps[header.spsId]!
    require(header.sliceSegmentAddress < sps.picSizeInCodingTreeBlocks, "the segment lies in the picture")
    require(!header.dependentSliceSegment || !header.firstSliceSegmentInPicture, "a picture's first segment is not dependent")
    require(header.dependentSliceSegment == (header.sliceType == nil), "a segment that is not dependent has a slice type")
    if let lsb = header.picOrderCntLsb { require(lsb < 1 << sps.log2MaxPicOrderCntLsb, "slice_pic_order_cnt_lsb fits") }
}
