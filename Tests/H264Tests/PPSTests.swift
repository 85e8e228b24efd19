import Testing
@testable import H264
import VideoCoding

@Suite(.timeLimit(.minutes(10))) struct PPSTests {
    @Test func basicFields() throws {
        let builder = PPSBuilder(
            id: 7, spsId: 2, cabac: true, bottomFieldPicOrderInFramePresent: true, refIdxL0: 3, refIdxL1: 2, weightedPred: true,
            weightedBipredIdc: 2, picInitQp: 30, chromaQpIndexOffset: -2, redundantPicCntPresent: true)
        let pps = try PictureParameterSet(nal: builder.nal)
        #expect(pps.id == 7 && pps.spsId == 2)
        #expect(pps.entropyCodingModeCABAC && pps.bottomFieldPicOrderInFramePresent)
        #expect(pps.numSliceGroups == 1 && pps.sliceGroupMapType == nil)
        #expect(pps.numRefIdxL0DefaultActive == 3 && pps.numRefIdxL1DefaultActive == 2)
        #expect(pps.weightedPred && pps.weightedBipredIdc == 2)
        #expect(pps.picInitQp == 30 && pps.chromaQpIndexOffset == -2)
        #expect(pps.deblockingFilterControlPresent && !pps.constrainedIntraPred && pps.redundantPicCntPresent)
        #expect(pps.transform8x8Mode == nil && pps.secondChromaQpIndexOffset == nil)
    }

    @Test(arguments: 0...6)
    func sliceGroupMapsAreWalkedOver(mapType: Int) throws {
        var builder = PPSBuilder()
        builder.numSliceGroups = 3
        builder.sliceGroups = { w in
            w.ue(mapType)
            switch mapType {
            case 0: for run in [10, 20, 30] { w.ue(run) }
            case 2: for corner in [0, 40, 41, 80] { w.ue(corner) }
            case 3, 4, 5:
                w.flag(true)
                w.ue(5)
            case 6:
                w.ue(98)  // 99 map units, 2 bits each for 3 groups
                for unit in 0..<99 { w.u(2, unit % 3) }
            default: break
            }
        }
        builder.refIdxL0 = 5
        builder.redundantPicCntPresent = true
        let pps = try PictureParameterSet(nal: builder.nal)
        #expect(pps.numSliceGroups == 3 && pps.sliceGroupMapType == mapType)
        #expect(pps.numRefIdxL0DefaultActive == 5)
        #expect(pps.redundantPicCntPresent)
    }

    @Test func highProfileTail() throws {
        let builder = PPSBuilder(tail: (true, [[3, -3] + Array(repeating: 0, count: 14), nil, nil, nil, nil, nil, [-8], nil], -4))
        let pps = try PictureParameterSet(nal: builder.nal)
        #expect(pps.transform8x8Mode == true && pps.picScalingMatrixPresent == true)
        #expect(pps.secondChromaQpIndexOffset == -4)
    }

    @Test func tailScalingListCountDependsOnChromaFormat() throws {
        // 4:4:4 with transform_8x8: 6 + 6 lists.
        let builder = PPSBuilder(tail: (true, Array(repeating: nil, count: 11) + [[-8]], 5))
        let rbsp = builder.nal.rbsp()
        let for444 = try PictureParameterSet(rbsp: rbsp, chromaFormatIdc: 3)
        #expect(for444.secondChromaQpIndexOffset == 5)
        // Read as 4:2:0 (8 lists) the tail is misread, and is dropped without losing the rest.
        let as420 = try PictureParameterSet(rbsp: rbsp, chromaFormatIdc: 1)
        #expect(as420.secondChromaQpIndexOffset != 5)
        #expect(as420.deblockingFilterControlPresent == for444.deblockingFilterControlPresent)

        var sets = ParameterSets()
        try sets.update(with: SPSBuilder(profileIdc: 244, chromaFormatIdc: 3).nal)
        try sets.update(with: builder.nal)
        #expect(sets.pps[0]?.secondChromaQpIndexOffset == 5)
    }

    @Test func malformedHeaderThrows() {
        #expect(throws: BitstreamError.self) { try PictureParameterSet(rbsp: [0x00]) }
        #expect(throws: BitstreamError.self) { try PictureParameterSet(nal: PPSBuilder(numSliceGroups: 9).nal) }
    }

    @Test func parameterSetsTrackChanges() throws {
        var sets = ParameterSets()
        var sps = SPSBuilder()
        #expect(try sets.update(with: sps.nal))
        #expect(try sets.update(with: sps.nal) == false)
        sps.widthInMbs = 40
        #expect(try sets.update(with: sps.nal))
        #expect(sets.sps[0]?.codedWidth == 640)
        var pps = PPSBuilder()
        pps.id = 4
        #expect(try sets.update(with: pps.nal))
        #expect(try sets.update(with: pps.nal) == false)
        #expect(sets.sps(forPPS: 4)?.codedWidth == 640)
        #expect(sets.sps(forPPS: 5) == nil)
        #expect(try sets.update(with: NALUnit(bytes: [0x09, 0xF0])) == false)
        #expect(throws: BitstreamError.self) { try sets.update(with: NALUnit(bytes: [0x67, 0x64])) }
        #expect(sets.sps[0]?.codedWidth == 640)
        #expect(sets.spsUnits[0] == sps.nal && sets.ppsUnits[4] == pps.nal)
    }
}
