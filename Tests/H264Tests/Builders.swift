@testable import H264
import TestSupport

/// Every SPS syntax element the tests vary, with values of a plain 4:2:0 High stream.
struct SPSBuilder {
    var profileIdc = 100
    var constraintFlags: UInt8 = 0
    var levelIdc = 40
    var id = 0
    var chromaFormatIdc = 1
    var separateColourPlane = false
    var bitDepthLuma = 8
    var bitDepthChroma = 8
    /// nil: seq_scaling_matrix_present_flag 0. Otherwise one entry per list: nil = not present,
    /// else the delta_scale values coded for it.
    var scalingLists: [[Int]?]?
    var log2MaxFrameNum = 4
    var pocType = 0
    var log2MaxPocLsb = 6
    var deltaPicOrderAlwaysZero = false
    var offsetForNonRefPic = 0
    var offsetForTopToBottomField = 0
    var offsetsForRefFrame: [Int] = []
    var maxNumRefFrames = 1
    var gaps = false
    var widthInMbs = 20
    var heightInMapUnits = 15
    var frameMbsOnly = true
    var mbaff = false
    var direct8x8 = true
    var crop: (left: Int, right: Int, top: Int, bottom: Int)?
    var vui: ((inout BitWriter) -> Void)?

    var writer: BitWriter {
        var w = BitWriter()
        w.u(8, profileIdc)
        w.u(8, Int(constraintFlags))
        w.u(8, levelIdc)
        w.ue(id)
        if SequenceParameterSet.profilesWithChromaInfo.contains(UInt8(profileIdc)) {
            w.ue(chromaFormatIdc)
            if chromaFormatIdc == 3 { w.flag(separateColourPlane) }
            w.ue(bitDepthLuma - 8)
            w.ue(bitDepthChroma - 8)
            w.flag(false)
            w.flag(scalingLists != nil)
            if let scalingLists {
                for list in scalingLists {
                    w.flag(list != nil)
                    for delta in list ?? [] { w.se(delta) }
                }
            }
        }
        w.ue(log2MaxFrameNum - 4)
        w.ue(pocType)
        if pocType == 0 {
            w.ue(log2MaxPocLsb - 4)
        } else if pocType == 1 {
            w.flag(deltaPicOrderAlwaysZero)
            w.se(offsetForNonRefPic)
            w.se(offsetForTopToBottomField)
            w.ue(offsetsForRefFrame.count)
            for offset in offsetsForRefFrame { w.se(offset) }
        }
        w.ue(maxNumRefFrames)
        w.flag(gaps)
        w.ue(widthInMbs - 1)
        w.ue(heightInMapUnits - 1)
        w.flag(frameMbsOnly)
        if !frameMbsOnly { w.flag(mbaff) }
        w.flag(direct8x8)
        w.flag(crop != nil)
        if let crop {
            w.ue(crop.left)
            w.ue(crop.right)
            w.ue(crop.top)
            w.ue(crop.bottom)
        }
        w.flag(vui != nil)
        vui?(&w)
        return w
    }

    var nal: NALUnit { writer.nal(type: .sps) }

    func parsed() throws -> SequenceParameterSet { try SequenceParameterSet(nal: nal) }
}

struct PPSBuilder {
    var id = 0
    var spsId = 0
    var cabac = false
    var bottomFieldPicOrderInFramePresent = false
    var sliceGroups: ((inout BitWriter) -> Void)?
    var numSliceGroups = 1
    var refIdxL0 = 1
    var refIdxL1 = 1
    var weightedPred = false
    var weightedBipredIdc = 0
    var picInitQp = 26
    var chromaQpIndexOffset = 0
    var deblockingControl = true
    var constrainedIntra = false
    var redundantPicCntPresent = false
    /// (transform_8x8_mode_flag, scaling lists like SPSBuilder's, second_chroma_qp_index_offset)
    var tail: (transform8x8: Bool, scalingLists: [[Int]?]?, secondChromaQpIndexOffset: Int)?

    var nal: NALUnit {
        var w = BitWriter()
        w.ue(id)
        w.ue(spsId)
        w.flag(cabac)
        w.flag(bottomFieldPicOrderInFramePresent)
        w.ue(numSliceGroups - 1)
        if numSliceGroups > 1 { sliceGroups?(&w) }
        w.ue(refIdxL0 - 1)
        w.ue(refIdxL1 - 1)
        w.flag(weightedPred)
        w.u(2, weightedBipredIdc)
        w.se(picInitQp - 26)
        w.se(0)
        w.se(chromaQpIndexOffset)
        w.flag(deblockingControl)
        w.flag(constrainedIntra)
        w.flag(redundantPicCntPresent)
        if let tail {
            w.flag(tail.transform8x8)
            w.flag(tail.scalingLists != nil)
            for list in tail.scalingLists ?? [] {
                w.flag(list != nil)
                for delta in list ?? [] { w.se(delta) }
            }
            w.se(tail.secondChromaQpIndexOffset)
        }
        return w.nal(type: .pps)
    }
}

/// A slice NAL unit whose header matches the given parameter sets; the slice data is filler.
struct SliceBuilder {
    var type = NALUnitType.slice
    var refIdc: UInt8 = 2
    var firstMb = 0
    var sliceType = 5
    var ppsId = 0
    var colourPlaneId = 0
    var frameNum = 0
    var fieldPic = false
    var bottomField = false
    var idrPicId = 0
    var pocLsb = 0
    var deltaPocBottom = 0
    var deltaPoc0 = 0
    var deltaPoc1 = 0
    var redundantPicCnt = 0

    func nal(sps: SPSBuilder, pps: PPSBuilder, streamOffset: Int = 0) -> NALUnit {
        var w = BitWriter()
        w.ue(firstMb)
        w.ue(sliceType)
        w.ue(ppsId)
        if sps.separateColourPlane { w.u(2, colourPlaneId) }
        w.u(sps.log2MaxFrameNum, frameNum)
        if !sps.frameMbsOnly {
            w.flag(fieldPic)
            if fieldPic { w.flag(bottomField) }
        }
        if type == .idr { w.ue(idrPicId) }
        if sps.pocType == 0 {
            w.u(sps.log2MaxPocLsb, pocLsb)
            if pps.bottomFieldPicOrderInFramePresent && !fieldPic { w.se(deltaPocBottom) }
        }
        if sps.pocType == 1 && !sps.deltaPicOrderAlwaysZero {
            w.se(deltaPoc0)
            if pps.bottomFieldPicOrderInFramePresent && !fieldPic { w.se(deltaPoc1) }
        }
        if pps.redundantPicCntPresent { w.ue(redundantPicCnt) }
        // Stand-in slice data with zero runs, so emulation prevention is exercised.
        w.u(8, 0)
        w.u(8, 0)
        w.u(8, 1)
        w.u(8, 0xAB)
        return w.nal(type: type, refIdc: refIdc, streamOffset: streamOffset)
    }
}
