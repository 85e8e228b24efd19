import H265
import TestSupport
import Testing
import VideoCoding

@Suite(.timeLimit(.minutes(10))) struct SPSTests {
    @Test func plainSPS() throws {
        let sps = try SPSBuilder().parsed()
        #expect(sps.vpsId == 0 && sps.id == 0 && sps.maxSubLayers == 1)
        #expect(sps.chromaFormatIdc == 1 && !sps.separateColourPlane && sps.chromaSubsampling == (2, 2))
        #expect(sps.codedWidth == 320 && sps.codedHeight == 240 && sps.conformanceWindow == nil)
        #expect(sps.displayWidth == 320 && sps.displayHeight == 240)
        #expect(sps.bitDepthLuma == 8 && sps.bitDepthChroma == 8 && sps.log2MaxPicOrderCntLsb == 8)
        #expect(sps.subLayerOrdering == [SubLayerOrdering(maxDecPicBuffering: 5, maxNumReorderPics: 2, maxLatencyIncreasePlus1: 0)])
        #expect(sps.maxNumReorderPics == 2 && sps.maxDecPicBuffering == 5)
        #expect(sps.log2MinLumaCodingBlockSize == 3 && sps.log2CodingTreeBlockSize == 5)
        #expect(sps.log2MinLumaTransformBlockSize == 2 && sps.log2MaxLumaTransformBlockSize == 5)
        #expect(sps.picWidthInCodingTreeBlocks == 10 && sps.picHeightInCodingTreeBlocks == 8 && sps.picSizeInCodingTreeBlocks == 80)
        #expect(sps.ampEnabled && sps.sampleAdaptiveOffsetEnabled && sps.pcm == nil)
        #expect(sps.shortTermRefPicSets.isEmpty && !sps.longTermRefPicsPresent)
        #expect(sps.temporalMVPEnabled && sps.strongIntraSmoothingEnabled)
        #expect(sps.vui == nil && !sps.vuiMalformed)
        #expect(sps.profileName == "Main" && sps.tierName == "Main" && sps.levelName == "3.1")
        #expect(sps.frameRate == nil)
    }

    /// The window is coded in chroma sample units: SubWidthC x SubHeightC luma samples.
    @Test(arguments: [(0, false, 1, 1), (1, false, 2, 2), (2, false, 2, 1), (3, false, 1, 1), (3, true, 1, 1)])
    func conformanceWindowUnits(chroma: Int, separatePlanes: Bool, unitX: Int, unitY: Int) throws {
        let sps = try SPSBuilder(
            chromaFormatIdc: chroma, separateColourPlane: separatePlanes, width: 336, height: 256, conformanceWindow: (1, 3, 2, 5)
        ).parsed()
        #expect(sps.conformanceWindow == SequenceParameterSet.Window(left: 1, right: 3, top: 2, bottom: 5))
        let rect = sps.cropRect
        #expect(rect.x == unitX && rect.y == 2 * unitY)
        #expect(rect.width == 336 - 4 * unitX && rect.height == 256 - 7 * unitY)
        let format = StreamFormat(sps: sps)
        #expect(format.crop == StreamFormat.Crop(left: unitX, right: 3 * unitX, top: 2 * unitY, bottom: 5 * unitY))
        #expect(format.chromaFormat == ["4:0:0", "4:2:0", "4:2:2", "4:4:4"][chroma])
    }

    @Test func aWindowThatLeavesNothingIsIgnored() throws {
        let sps = try SPSBuilder(conformanceWindow: (80, 80, 0, 0)).parsed()
        #expect(sps.cropRect.width == 320 && sps.cropRect.height == 240)
        #expect(StreamFormat(sps: sps).crop == StreamFormat.Crop(left: 0, right: 0, top: 0, bottom: 0))
    }

    @Test func bitDepthsAndOrderingPerSubLayer() throws {
        var builder = SPSBuilder(
            maxSubLayersMinus1: 2, bitDepthLumaMinus8: 4, bitDepthChromaMinus8: 2, ordering: [(1, 0, 0), (2, 1, 0), (4, 3, 5)])
        let sps = try builder.parsed()
        #expect(sps.bitDepthLuma == 12 && sps.bitDepthChroma == 10 && sps.maxSubLayers == 3)
        #expect(sps.subLayerOrdering.map(\.maxDecPicBuffering) == [2, 3, 5])
        #expect(sps.subLayerOrdering.map(\.maxNumReorderPics) == [0, 1, 3])
        #expect(sps.subLayerOrdering.last?.maxLatencyIncreasePlus1 == 5 && sps.maxNumReorderPics == 3)
        // Only the highest sub-layer coded: every sub-layer has its values.
        builder.ordering = [(3, 1, 0)]
        #expect(try builder.parsed().subLayerOrdering.map(\.maxDecPicBuffering) == [4, 4, 4])
    }

    /// Sub-layer profile and level entries are walked over: the fields after them still parse.
    @Test func subLayerProfileTierLevelEntries() throws {
        let sps = try SPSBuilder(
            maxSubLayersMinus1: 3, ptl: PTLBuilder(subLayers: [(true, true), (false, true), (true, false)]), id: 7,
            ordering: [(4, 2, 0)]
        ).parsed()
        #expect(sps.id == 7 && sps.codedWidth == 320 && sps.profileTierLevel.levelIdc == 93)
    }

    @Test func scalingListsPCMAndLongTermReferencesAreWalkedOver() throws {
        var builder = SPSBuilder()
        builder.scalingList = { w in
            for sizeId in 0..<4 {
                for matrixId in stride(from: 0, to: 6, by: sizeId == 3 ? 3 : 1) {
                    let explicit = (sizeId + matrixId) % 2 == 0
                    w.flag(explicit)
                    if explicit {
                        if sizeId > 1 { w.se(8) }
                        for index in 0..<min(64, 1 << (4 + 2 * sizeId)) { w.se(index % 3 - 1) }
                    } else {
                        w.ue(matrixId == 0 ? 0 : 1)
                    }
                }
            }
        }
        builder.pcm = true
        builder.longTermPocs = [3, 200]
        builder.vui = { w in
            w.flag(true)
            w.u(8, 1)
            for _ in 0..<9 { w.flag(false) }
        }
        let sps = try builder.parsed()
        #expect(sps.scalingListEnabled && sps.pcm?.bitDepthLuma == 8 && sps.pcm?.log2MaxCodingBlockSize == 4)
        #expect(sps.longTermRefPicsPresent && sps.numLongTermRefPicsSPS == 2)
        #expect(sps.vui?.sampleAspectRatio == SampleAspectRatio(width: 1, height: 1) && !sps.vuiMalformed)
    }

    /// Set 0 of the short-term set tests, coded explicitly: -1, -3 and +2, all used.
    private static func writeFirstShortTermSet(_ w: inout BitWriter) {
        w.ue(2); w.ue(1)
        w.ue(0); w.flag(true)
        w.ue(1); w.flag(true)
        w.ue(1); w.flag(true)
    }

    @Test func explicitShortTermSets() throws {
        var builder = SPSBuilder()
        builder.shortTermSetCount = 2
        builder.shortTermSets = { w in
            Self.writeFirstShortTermSet(&w)
            // Set 1, not predicted: -2 (unused).
            w.flag(false)
            w.ue(1); w.ue(0)
            w.ue(1); w.flag(false)
        }
        builder.longTermPocs = []
        let sets = try builder.parsed().shortTermRefPicSets
        typealias Entry = ShortTermReferencePictureSet.Entry
        #expect(sets[0] == ShortTermReferencePictureSet(
            negative: [Entry(deltaPoc: -1, usedByCurrentPicture: true), Entry(deltaPoc: -3, usedByCurrentPicture: true)],
            positive: [Entry(deltaPoc: 2, usedByCurrentPicture: true)]))
        #expect(sets[1] == ShortTermReferencePictureSet(negative: [Entry(deltaPoc: -2, usedByCurrentPicture: false)], positive: []))
    }

    /// Equations 7-61 and 7-62: a set predicted from the one before it with deltaRps = -1.
    @Test func predictedShortTermSet() throws {
        var builder = SPSBuilder()
        builder.shortTermSetCount = 2
        builder.shortTermSets = { w in
            Self.writeFirstShortTermSet(&w)
            w.flag(true)  // inter_ref_pic_set_prediction_flag
            w.flag(true)  // delta_rps_sign: negative
            w.ue(0)  // abs_delta_rps_minus1: deltaRps = -1
            // Per reference picture (-1, -3, +2) and the reference itself: used, or use_delta.
            w.flag(true)
            w.flag(false); w.flag(true)
            w.flag(true)
            w.flag(true)
        }
        builder.vui = { w in
            for _ in 0..<8 { w.flag(false) }  // up to default_display_window_flag
            w.flag(true)  // timing, to see that the bits after the sets line up
            w.bits(1001, 32)
            w.bits(60000, 32)
            w.flag(false)
            w.flag(false)
            w.flag(false)
        }
        let sps = try builder.parsed()
        let predicted = try #require(sps.shortTermRefPicSets.last)
        #expect(predicted.predicted)
        #expect(predicted.negative.map(\.deltaPoc) == [-1, -2, -4])
        #expect(predicted.negative.map(\.usedByCurrentPicture) == [true, true, false])
        #expect(predicted.positive.map(\.deltaPoc) == [1])
        #expect(predicted.count == 4)
        // H.265 ticks are pictures: 60000 / 1001, not half of it as in H.264.
        #expect(abs((sps.frameRate ?? 0) - 59.94) < 0.01)
    }

    @Test func fullVUI() throws {
        var builder = SPSBuilder()
        builder.maxSubLayersMinus1 = 1
        builder.ordering = [(4, 2, 0)]
        builder.vui = { w in
            w.flag(true); w.u(8, 255); w.u(16, 64); w.u(16, 45)  // Extended_SAR
            w.flag(true); w.flag(true)  // overscan
            w.flag(true); w.u(3, 2); w.flag(true); w.flag(true); w.u(8, 9); w.u(8, 16); w.u(8, 9)
            w.flag(true); w.ue(1); w.ue(2)  // chroma location
            w.flag(false)  // neutral_chroma_indication_flag
            w.flag(true)  // field_seq_flag
            w.flag(true)  // frame_field_info_present_flag
            w.flag(true); w.ue(1); w.ue(2); w.ue(3); w.ue(4)  // default display window
            w.flag(true); w.bits(1, 32); w.bits(50, 32)
            w.flag(true); w.ue(0)  // poc proportional to timing
            w.flag(true)  // hrd_parameters(1, 1)
            w.flag(true); w.flag(true)  // NAL and VCL parameters
            w.flag(true); w.u(8, 0); w.u(5, 0); w.flag(false); w.u(5, 0)  // sub-picture parameters
            w.u(4, 0); w.u(4, 0); w.u(4, 0)
            w.u(5, 23); w.u(5, 23); w.u(5, 23)
            for layer in 0..<2 {
                w.flag(layer == 0)  // fixed_pic_rate_general_flag
                if layer == 1 { w.flag(false); w.flag(false) }  // not fixed within the CVS, not low delay
                if layer == 0 { w.ue(0) }  // elemental_duration_in_tc_minus1
                w.ue(1)  // cpb_cnt_minus1: two CPBs
                for _ in 0..<2 {  // NAL then VCL
                    for _ in 0..<2 { w.ue(1000); w.ue(2000); w.ue(300); w.ue(400); w.flag(true) }
                }
            }
            w.flag(true)  // bitstream_restriction_flag
            w.flag(true); w.flag(false); w.flag(true); w.ue(100); w.ue(2); w.ue(1); w.ue(15); w.ue(15)
        }
        let sps = try builder.parsed()
        let vui = try #require(sps.vui)
        #expect(vui.sampleAspectRatio == SampleAspectRatio(width: 64, height: 45) && vui.aspectRatioIdc == 255)
        #expect(vui.overscanAppropriate == true && vui.videoFormat == 2 && vui.videoFullRange)
        #expect(vui.colourPrimaries == 9 && vui.transferCharacteristics == 16 && vui.matrixCoefficients == 9)
        #expect(vui.chromaSampleLocTypeTopField == 1 && vui.chromaSampleLocTypeBottomField == 2)
        #expect(vui.fieldSeq && vui.frameFieldInfoPresent && !vui.neutralChromaIndication)
        #expect(vui.defaultDisplayWindow == SequenceParameterSet.Window(left: 1, right: 2, top: 3, bottom: 4))
        #expect(vui.frameRate == 50 && vui.numTicksPocDiffOne == 1 && vui.hrdParametersPresent)
        #expect(vui.tilesFixedStructure == true && vui.restrictedRefPicLists == true && vui.minSpatialSegmentationIdc == 100)
        let format = StreamFormat(sps: sps)
        #expect(format.interlaced && format.frameRate == 50 && format.sampleAspectRatio == "64:45")
        #expect(format.colorPrimaries == "bt2020" && format.transfer == "smpte2084" && format.matrix == "bt2020nc")
        // The default display window is not applied: libavcodec does not by default either.
        #expect(format.width == 320 && format.height == 240)
    }

    @Test func malformedVUILeavesTheSPSUsable() throws {
        var builder = SPSBuilder()
        builder.vui = { w in
            w.flag(true); w.u(8, 255); w.u(4, 0)  // Extended_SAR cut short
        }
        let sps = try builder.parsed()
        #expect(sps.vui == nil && sps.vuiMalformed && sps.codedWidth == 320)
    }

    @Test func vpsTimingIsWhatLibavcodecTakes() throws {
        let sps = try SPSBuilder().parsed()
        let vps = try VideoParameterSet(nal: VPSBuilder().nal)
        #expect(StreamFormat(sps: sps).frameRate == nil)
        #expect(StreamFormat(sps: sps, vps: vps).frameRate == 25)
    }
}

@Suite(.timeLimit(.minutes(10))) struct ProfileTierLevelTests {
    static func ptl(_ builder: PTLBuilder) throws -> ProfileTierLevel {
        var w = BitWriter()
        builder.write(&w)
        var reader = BitReader(w.bytes)
        return try ProfileTierLevel(reader: &reader, maxSubLayersMinus1: builder.subLayers.count)
    }

    @Test func mainProfiles() throws {
        var builder = PTLBuilder()
        #expect(try Self.ptl(builder).profileName == "Main")
        builder.profileIdc = 2
        #expect(try Self.ptl(builder).profileName == "Main 10")
        builder.profileIdc = 3
        builder.highTier = true
        builder.levelIdc = 186
        let still = try Self.ptl(builder)
        #expect(still.profileName == "Main Still Picture" && still.tierName == "High" && still.levelName == "6.2")
        #expect(still.progressiveSource && !still.interlacedSource && still.frameOnlyConstraint)
    }

    /// A stream may leave general_profile_idc 0 and only claim compatibility.
    @Test func profileFromCompatibilityFlags() throws {
        var builder = PTLBuilder()
        builder.profileIdc = 0
        builder.compatibility = 0x2000_0000  // flag 2: Main 10
        let ptl = try Self.ptl(builder)
        #expect(ptl.profileIdc == 0 && ptl.effectiveProfileIdc == 2 && ptl.profileName == "Main 10")
        #expect(ptl.isCompatible(with: 2) && !ptl.isCompatible(with: 1))
    }

    /// Table A.2's rows by their constraint flags (max_12bit ... one_picture_only).
    @Test(arguments: [
        ("Main 4:2:2 10", [1, 1, 0, 1, 0, 0, 0, 0]), ("Main 4:4:4", [1, 1, 1, 0, 0, 0, 0, 0]),
        ("Main 12", [1, 0, 0, 1, 1, 0, 0, 0]), ("Monochrome", [1, 1, 1, 1, 1, 1, 0, 0]),
        ("Monochrome 16", [0, 0, 0, 1, 1, 1, 0, 0]), ("Main 4:4:4 10 Intra", [1, 1, 0, 0, 0, 0, 1, 0]),
        ("Main 4:4:4 Still Picture", [1, 1, 1, 0, 0, 0, 1, 1]), ("Rext", [0, 1, 0, 1, 0, 1, 0, 1]),
    ])
    func rangeExtensionProfiles(name: String, flags: [Int]) throws {
        var builder = PTLBuilder()
        builder.profileIdc = 4
        builder.compatibility = 0x0800_0000
        // progressive_source, frame_only, then the nine flags (lower_bit_rate set), 34 reserved bits.
        var constraints: UInt64 = 0b1001
        for flag in flags + [1] { constraints = constraints << 1 | UInt64(flag) }
        builder.constraints = constraints << 35
        let ptl = try Self.ptl(builder)
        #expect(ptl.profileName == name)
        #expect(ptl.rangeExtensionConstraints?.lowerBitRate == true)
        #expect(ptl.rangeExtensionConstraints?.max8Bit == (flags[2] == 1))
    }

    @Test(arguments: [(30, "1"), (60, "2"), (63, "2.1"), (93, "3.1"), (120, "4"), (123, "4.1"), (153, "5.1"), (186, "6.2"), (255, "8.5")])
    func levelNames(idc: Int, name: String) throws {
        var builder = PTLBuilder()
        builder.levelIdc = idc
        #expect(try Self.ptl(builder).levelName == name)
    }

    @Test func subLayerEntriesAreSkipped() throws {
        var builder = PTLBuilder()
        builder.subLayers = [(true, true), (true, false), (false, true), (false, false)]
        var w = BitWriter()
        builder.write(&w)
        w.u(8, 0x5A)
        var reader = BitReader(w.bytes)
        _ = try ProfileTierLevel(reader: &reader, maxSubLayersMinus1: 4)
        #expect(try reader.readBits(8) == 0x5A)
    }
}

@Suite(.timeLimit(.minutes(10))) struct VPSAndPPSTests {
    @Test func vps() throws {
        let builder = VPSBuilder(id: 3, maxSubLayersMinus1: 2, maxLayerId: 5, numLayerSetsMinus1: 3, timing: (1001, 30000))
        let vps = try VideoParameterSet(nal: builder.nal)
        #expect(vps.id == 3 && vps.maxLayers == 1 && vps.maxSubLayers == 3 && vps.temporalIdNesting)
        #expect(vps.profileTierLevel.profileName == "Main")
        #expect(vps.subLayerOrdering.map(\.maxDecPicBuffering) == [5, 5, 5])
        #expect(vps.maxLayerId == 5 && vps.numLayerSets == 4)
        #expect(vps.numUnitsInTick == 1001 && vps.timeScale == 30000)
    }

    @Test func ppsForSliceHeaders() throws {
        let builder = PPSBuilder(
            id: 12, spsId: 3, dependentSliceSegments: true, outputFlagPresent: true, numExtraSliceHeaderBits: 2, wavefronts: true)
        let pps = try PictureParameterSet(nal: builder.nal)
        #expect(pps.id == 12 && pps.spsId == 3)
        #expect(pps.dependentSliceSegmentsEnabled && pps.outputFlagPresent && pps.numExtraSliceHeaderBits == 2)
        #expect(pps.entropyCodingSyncEnabled && !pps.tilesEnabled)
        #expect(pps.initQp == 23 && pps.cuQpDeltaDepth == 1 && pps.weightedPred && pps.deblockingFilterControlPresent)
        #expect(!pps.listsModificationPresent && pps.log2ParallelMergeLevel == 2)
    }

    @Test func tiles() throws {
        var builder = PPSBuilder()
        builder.tiles = (3, 2, false, [4, 3], [5])
        builder.scalingList = { w in
            for sizeId in 0..<4 {
                for _ in stride(from: 0, to: 6, by: sizeId == 3 ? 3 : 1) {
                    w.flag(false)
                    w.ue(0)
                }
            }
        }
        let pps = try PictureParameterSet(nal: builder.nal)
        let tiles = try #require(pps.tiles)
        #expect(tiles.columns == 3 && tiles.rows == 2 && !tiles.uniformSpacing)
        #expect(tiles.columnWidths == [4, 3] && tiles.rowHeights == [5] && tiles.loopFilterAcrossTiles)
        #expect(pps.scalingListDataPresent && pps.log2ParallelMergeLevel == 2)
        builder.tiles = (4, 4, true, [], [])
        #expect(try PictureParameterSet(nal: builder.nal).tiles?.columnWidths == [])
    }

    @Test func parameterSetsByIdAndInLibavcodecsOrder() throws {
        var sets = ParameterSets()
        var sps = SPSBuilder(vpsId: 1, id: 2)
        let pps = PPSBuilder(id: 5, spsId: 2)
        let vps = VPSBuilder(id: 1)
        #expect(try sets.update(with: pps.nal) && sets.units(forPPS: 5) == nil)
        #expect(try sets.update(with: sps.nal))
        #expect(try sets.update(with: vps.nal))
        #expect(try !sets.update(with: sps.nal))  // the same bytes again
        let units = try #require(sets.units(forPPS: 5))
        #expect([units.vps.type, units.sps.type, units.pps.type] == [.vps, .sps, .pps])
        #expect(sets.sps(forPPS: 5)?.id == 2 && sets.vps(forSPS: 2)?.id == 1)
        sps.width = 640
        #expect(try sets.update(with: sps.nal) && sets.sps[2]?.codedWidth == 640)
        // A malformed set leaves the stored one alone.
        #expect(throws: BitstreamError.self) { try sets.update(with: NALUnit(bytes: [0x42, 0x01, 0x01])!) }
        #expect(sets.sps[2]?.codedWidth == 640)
        #expect(try !sets.update(with: NALUnit(bytes: [0x4E, 0x01, 0x05])!))  // prefix SEI: not a set
        sets.removeAll()
        #expect(sets.sps.isEmpty && sets.ppsUnits.isEmpty)
    }
}

@Suite(.timeLimit(.minutes(10))) struct SliceSegmentHeaderTests {
    static func sets(_ sps: SPSBuilder, _ pps: PPSBuilder) throws -> ParameterSets {
        var sets = ParameterSets()
        try sets.update(with: sps.nal)
        try sets.update(with: pps.nal)
        return sets
    }

    @Test func firstSegmentOfAnIDR() throws {
        let (sps, pps) = (SPSBuilder(), PPSBuilder())
        var slice = SliceBuilder()
        slice.type = .idrWithRADL
        slice.sliceType = 2
        let header = try SliceSegmentHeader(nal: slice.nal(sps: sps, pps: pps), parameterSets: try Self.sets(sps, pps))
        #expect(header.firstSliceSegmentInPicture && !header.noOutputOfPriorPics && !header.dependentSliceSegment)
        #expect(header.ppsId == 0 && header.spsId == 0 && header.sliceSegmentAddress == 0)
        #expect(header.sliceType == .i && header.picOutput == true && header.picOrderCntLsb == 0)
    }

    @Test func laterSegmentsAndDependentOnes() throws {
        let pps = PPSBuilder(dependentSliceSegments: true, outputFlagPresent: true, numExtraSliceHeaderBits: 3)
        let sps = SPSBuilder(chromaFormatIdc: 3, separateColourPlane: true)
        let sets = try Self.sets(sps, pps)
        // The last of 80 blocks: 7 address bits.
        var slice = SliceBuilder(first: false, address: 79, sliceType: 0, pocLsb: 200)
        let header = try SliceSegmentHeader(nal: slice.nal(sps: sps, pps: pps), parameterSets: sets)
        #expect(!header.firstSliceSegmentInPicture && !header.dependentSliceSegment && header.sliceSegmentAddress == 79)
        #expect(header.sliceType == .b && header.picOutput == true && header.colourPlaneId == 1 && header.picOrderCntLsb == 200)
        slice.dependent = true
        slice.address = 40
        let dependent = try SliceSegmentHeader(nal: slice.nal(sps: sps, pps: pps), parameterSets: sets)
        #expect(dependent.dependentSliceSegment && dependent.sliceSegmentAddress == 40)
        #expect(dependent.sliceType == nil && dependent.picOrderCntLsb == nil)
    }

    @Test func craCarriesNoOutputOfPriorPics() throws {
        let (sps, pps) = (SPSBuilder(), PPSBuilder())
        let nal = SliceBuilder(type: .cra, sliceType: 2, pocLsb: 16)
        var bytes = Array(nal.nal(sps: sps, pps: pps).bytes)
        bytes[2] |= 0x40  // no_output_of_prior_pics_flag, right after the first bit
        let header = try SliceSegmentHeader(nal: NALUnit(bytes: bytes)!, parameterSets: try Self.sets(sps, pps))
        #expect(header.noOutputOfPriorPics && header.picOrderCntLsb == 16 && header.sliceType == .i)
    }

    @Test func unknownParameterSetsAndOtherTypesThrow() throws {
        let slice = SliceBuilder().nal(sps: SPSBuilder(), pps: PPSBuilder())
        #expect(throws: BitstreamError.self) { try SliceSegmentHeader(nal: slice, parameterSets: ParameterSets()) }
        #expect(throws: BitstreamError.self) {
            try SliceSegmentHeader(nal: PPSBuilder().nal, parameterSets: try Self.sets(SPSBuilder(), PPSBuilder()))
        }
        #expect(SliceSegmentHeader.startsPicture(slice) == true)
        #expect(SliceSegmentHeader.startsPicture(PPSBuilder().nal) == nil)
        #expect(SliceSegmentHeader.startsPicture(NALUnit(bytes: [0x02, 0x01])!) == nil)
        // An address beyond the picture is malformed.
        let outside = SliceBuilder(first: false, address: 100)
        #expect(throws: BitstreamError.self) {
            try SliceSegmentHeader(nal: outside.nal(sps: SPSBuilder(), pps: PPSBuilder()), parameterSets: try Self.sets(SPSBuilder(), PPSBuilder()))
        }
    }
}
