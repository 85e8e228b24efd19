import Testing
@testable import H264
import VideoCoding

@Suite(.timeLimit(.minutes(10))) struct SliceHeaderTests {
    func sets(_ sps: SPSBuilder, _ pps: PPSBuilder) throws -> ParameterSets {
        var sets = ParameterSets()
        try sets.update(with: sps.nal)
        try sets.update(with: pps.nal)
        return sets
    }

    @Test func parsesEveryPrefixField() throws {
        let sps = SPSBuilder(log2MaxFrameNum: 8, log2MaxPocLsb: 10, frameMbsOnly: false)
        let pps = PPSBuilder(bottomFieldPicOrderInFramePresent: true, redundantPicCntPresent: true)
        let parameterSets = try sets(sps, pps)
        var slice = SliceBuilder(
            type: .idr, refIdc: 3, firstMb: 17, sliceType: 7, frameNum: 200, idrPicId: 9, pocLsb: 1000, deltaPocBottom: -1,
            redundantPicCnt: 2)
        let header = try SliceHeaderPrefix(nal: slice.nal(sps: sps, pps: pps), parameterSets: parameterSets)
        #expect(header.firstMbInSlice == 17 && header.sliceType == .i && header.sliceTypeFixedForPicture)
        #expect(header.frameNum == 200 && !header.fieldPic && header.isIDR && header.idrPicId == 9)
        #expect(header.picOrderCntLsb == 1000 && header.deltaPicOrderCntBottom == -1)
        #expect(header.redundantPicCnt == 2 && header.isRedundant)

        slice.type = .slice
        slice.fieldPic = true
        slice.bottomField = true
        slice.sliceType = 1
        let field = try SliceHeaderPrefix(nal: slice.nal(sps: sps, pps: pps), parameterSets: parameterSets)
        #expect(field.fieldPic && field.bottomField && field.idrPicId == nil && field.sliceType == .b)
        #expect(field.deltaPicOrderCntBottom == 0)
    }

    @Test func pocTypeOneDeltas() throws {
        let sps = SPSBuilder(pocType: 1)
        let pps = PPSBuilder(bottomFieldPicOrderInFramePresent: true)
        let slice = SliceBuilder(deltaPoc0: 4, deltaPoc1: -6)
        let header = try SliceHeaderPrefix(nal: slice.nal(sps: sps, pps: pps), parameterSets: sets(sps, pps))
        #expect(header.pocType == 1 && header.deltaPicOrderCnt0 == 4 && header.deltaPicOrderCnt1 == -6)
    }

    @Test func separateColourPlanes() throws {
        let sps = SPSBuilder(profileIdc: 244, chromaFormatIdc: 3, separateColourPlane: true)
        let slice = SliceBuilder(colourPlaneId: 2, frameNum: 5)
        let header = try SliceHeaderPrefix(nal: slice.nal(sps: sps, pps: PPSBuilder()), parameterSets: sets(sps, PPSBuilder()))
        #expect(header.colourPlaneId == 2 && header.frameNum == 5)
    }

    @Test func unknownParameterSetsThrow() throws {
        let slice = SliceBuilder(ppsId: 3).nal(sps: SPSBuilder(), pps: PPSBuilder())
        #expect(throws: BitstreamError.self) { try SliceHeaderPrefix(nal: slice, parameterSets: ParameterSets()) }
        let leading = try SliceHeaderPrefix.leadingFields(of: slice)
        #expect(leading.ppsId == 3 && leading.firstMbInSlice == 0 && leading.sliceType == .p)
        #expect(throws: BitstreamError.self) { try SliceHeaderPrefix.leadingFields(of: NALUnit(bytes: [0x67, 0x42])) }
    }

    /// Each §7.4.1.2.4 condition on its own.
    @Test func firstSliceOfNewPictureRules() throws {
        let sps = SPSBuilder(frameMbsOnly: false)
        let pps = PPSBuilder(bottomFieldPicOrderInFramePresent: true)
        var pps1 = pps
        pps1.id = 1
        var parameterSets = try sets(sps, pps)
        try parameterSets.update(with: pps1.nal)
        func header(_ change: (inout SliceBuilder) -> Void) throws -> SliceHeaderPrefix {
            var slice = SliceBuilder(firstMb: 10, frameNum: 3, pocLsb: 6)
            change(&slice)
            return try SliceHeaderPrefix(nal: slice.nal(sps: sps, pps: pps), parameterSets: parameterSets)
        }
        let base = try header { _ in }
        #expect(try header { $0.firstMb = 30 }.startsNewPicture(after: base) == false)
        #expect(try header { $0.sliceType = 0 }.startsNewPicture(after: base) == false)
        #expect(try header { $0.refIdc = 1 }.startsNewPicture(after: base) == false)
        #expect(try header { $0.frameNum = 4 }.startsNewPicture(after: base))
        #expect(try header { $0.ppsId = 1 }.startsNewPicture(after: base))
        #expect(try header { $0.fieldPic = true }.startsNewPicture(after: base))
        #expect(try header { $0.refIdc = 0 }.startsNewPicture(after: base))
        #expect(try header { $0.pocLsb = 8 }.startsNewPicture(after: base))
        #expect(try header { $0.deltaPocBottom = 1 }.startsNewPicture(after: base))
        #expect(try header { $0.type = .idr }.startsNewPicture(after: base))
        let top = try header { $0.fieldPic = true }
        #expect(try header {
            $0.fieldPic = true
            $0.bottomField = true
        }.startsNewPicture(after: top))
        let idr = try header { $0.type = .idr }
        #expect(try header {
            $0.type = .idr
            $0.idrPicId = 1
        }.startsNewPicture(after: idr))
        #expect(try header {
            $0.type = .idr
            $0.firstMb = 50
        }.startsNewPicture(after: idr) == false)
        #expect(try header { $0.refIdc = 0 }.startsNewPicture(after: try header { $0.refIdc = 0 }) == false)

        var poc1 = sps
        poc1.pocType = 1
        var poc1Sets = ParameterSets()
        try poc1Sets.update(with: poc1.nal)
        try poc1Sets.update(with: pps.nal)
        func poc1Header(_ d0: Int, _ d1: Int) throws -> SliceHeaderPrefix {
            try SliceHeaderPrefix(
                nal: SliceBuilder(deltaPoc0: d0, deltaPoc1: d1).nal(sps: poc1, pps: pps), parameterSets: poc1Sets)
        }
        #expect(try poc1Header(1, 2).startsNewPicture(after: poc1Header(1, 2)) == false)
        #expect(try poc1Header(0, 2).startsNewPicture(after: poc1Header(1, 2)))
        #expect(try poc1Header(1, 3).startsNewPicture(after: poc1Header(1, 2)))
    }
}
