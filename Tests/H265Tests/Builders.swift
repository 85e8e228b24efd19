import H265
import TestSupport
import VideoCoding

extension BitWriter {
    /// A NAL unit: two header bytes plus the escaped RBSP (trailing bits added).
    func nal(_ type: NALUnitType, layerId: UInt8 = 0, temporalIdPlus1: UInt8 = 1, streamOffset: Int = 0) -> NALUnit {
        var copy = self
        copy.trailingBits()
        let header = NALHeader(type: type, layerId: layerId, temporalIdPlus1: temporalIdPlus1)
        return NALUnit(bytes: header.bytes + RBSP.escape(copy.bytes), streamOffset: streamOffset)!
    }
}

/// profile_tier_level() with a Main profile at level 3.1 unless told otherwise.
struct PTLBuilder {
    var profileIdc = 1
    var highTier = false
    var compatibility: UInt32 = 0x6000_0000  // Main and Main 10
    /// The 48 bits after the compatibility flags, first bit highest.
    var constraints: UInt64 = 0x9000_0000_0000  // progressive source, frame only
    var levelIdc = 93
    /// (profile present, level present) per sub-layer below the highest.
    var subLayers: [(Bool, Bool)] = []

    func write(_ w: inout BitWriter) {
        w.u(2, 0)
        w.flag(highTier)
        w.u(5, profileIdc)
        w.bits(UInt64(compatibility), 32)
        w.bits(constraints, 48)
        w.u(8, levelIdc)
        for (profile, level) in subLayers {
            w.flag(profile)
            w.flag(level)
        }
        if !subLayers.isEmpty { w.u(2 * (8 - subLayers.count), 0) }
        for (profile, level) in subLayers {
            if profile { w.bits(0x1234_5678_9ABC, 48); w.bits(0x0_1234_5678, 40) }
            if level { w.u(8, 90) }
        }
    }
}

struct VPSBuilder {
    var id = 0
    var maxSubLayersMinus1 = 0
    var ptl = PTLBuilder()
    var maxLayerId = 0
    var numLayerSetsMinus1 = 0
    var timing: (UInt32, UInt32)? = (1, 25)

    var nal: NALUnit {
        var w = BitWriter()
        w.u(4, id)
        w.flag(true)
        w.flag(true)
        w.u(6, 0)
        w.u(3, maxSubLayersMinus1)
        w.flag(true)
        w.u(16, 0xFFFF)
        var ptl = ptl
        ptl.subLayers = Array(repeating: (false, false), count: maxSubLayersMinus1)
        ptl.write(&w)
        w.flag(false)  // one ordering entry
        w.ue(4)
        w.ue(2)
        w.ue(0)
        w.u(6, maxLayerId)
        w.ue(numLayerSetsMinus1)
        for _ in 0..<(numLayerSetsMinus1 * (maxLayerId + 1)) { w.flag(true) }
        w.flag(timing != nil)
        if let (ticks, scale) = timing {
            w.bits(UInt64(ticks), 32)
            w.bits(UInt64(scale), 32)
            w.flag(false)
            w.ue(0)  // vps_num_hrd_parameters
        }
        w.flag(false)  // vps_extension_flag
        return w.nal(.vps)
    }
}

/// Every SPS syntax element the tests vary, with the values of a plain 4:2:0 Main stream of
/// 320x240 in 32x32 coding tree blocks.
struct SPSBuilder {
    var vpsId = 0
    var maxSubLayersMinus1 = 0
    var ptl = PTLBuilder()
    var id = 0
    var chromaFormatIdc = 1
    var separateColourPlane = false
    var width = 320
    var height = 240
    var conformanceWindow: (Int, Int, Int, Int)?
    var bitDepthLumaMinus8 = 0
    var bitDepthChromaMinus8 = 0
    var log2MaxPocLsbMinus4 = 4
    /// (max_dec_pic_buffering_minus1, max_num_reorder_pics, max_latency_increase_plus1) for
    /// every sub-layer; only the last one is coded when there is one entry.
    var ordering: [(Int, Int, Int)] = [(4, 2, 0)]
    var log2MinCbMinus3 = 0
    var log2DiffMaxMinCb = 2
    var log2MinTbMinus2 = 0
    var log2DiffMaxMinTb = 3
    var scalingList: ((inout BitWriter) -> Void)?
    var pcm = false
    /// The sets' syntax, written after num_short_term_ref_pic_sets = `shortTermSetCount`.
    var shortTermSetCount = 0
    var shortTermSets: (inout BitWriter) -> Void = { _ in }
    var longTermPocs: [Int]?
    var vui: ((inout BitWriter) -> Void)?
    /// Bits the SPS ends with (none: it stops right after the VUI flag's syntax).
    var extensionFlag = false

    var rbsp: BitWriter {
        var w = BitWriter()
        w.u(4, vpsId)
        w.u(3, maxSubLayersMinus1)
        w.flag(true)
        var ptl = ptl
        if ptl.subLayers.count != maxSubLayersMinus1 {
            ptl.subLayers = Array(repeating: (false, false), count: maxSubLayersMinus1)
        }
        ptl.write(&w)
        w.ue(id)
        w.ue(chromaFormatIdc)
        if chromaFormatIdc == 3 { w.flag(separateColourPlane) }
        w.ue(width)
        w.ue(height)
        w.flag(conformanceWindow != nil)
        if let (left, right, top, bottom) = conformanceWindow {
            w.ue(left)
            w.ue(right)
            w.ue(top)
            w.ue(bottom)
        }
        w.ue(bitDepthLumaMinus8)
        w.ue(bitDepthChromaMinus8)
        w.ue(log2MaxPocLsbMinus4)
        w.flag(ordering.count > 1)
        for (buffering, reorder, latency) in ordering {
            w.ue(buffering)
            w.ue(reorder)
            w.ue(latency)
        }
        w.ue(log2MinCbMinus3)
        w.ue(log2DiffMaxMinCb)
        w.ue(log2MinTbMinus2)
        w.ue(log2DiffMaxMinTb)
        w.ue(1)  // max_transform_hierarchy_depth_inter
        w.ue(1)  // max_transform_hierarchy_depth_intra
        w.flag(scalingList != nil)
        if let scalingList {
            w.flag(true)
            scalingList(&w)
        }
        w.flag(true)  // amp_enabled_flag
        w.flag(true)  // sample_adaptive_offset_enabled_flag
        w.flag(pcm)
        if pcm {
            w.u(4, 7)
            w.u(4, 7)
            w.ue(0)
            w.ue(1)
            w.flag(false)
        }
        w.ue(shortTermSetCount)
        shortTermSets(&w)
        w.flag(longTermPocs != nil)
        if let longTermPocs {
            w.ue(longTermPocs.count)
            for poc in longTermPocs {
                w.u(log2MaxPocLsbMinus4 + 4, poc)
                w.flag(true)
            }
        }
        w.flag(true)  // sps_temporal_mvp_enabled_flag
        w.flag(true)  // strong_intra_smoothing_enabled_flag
        w.flag(vui != nil)
        vui?(&w)
        w.flag(extensionFlag)
        return w
    }

    var nal: NALUnit { rbsp.nal(.sps) }

    func parsed() throws -> SequenceParameterSet { try SequenceParameterSet(nal: nal) }
}

struct PPSBuilder {
    var id = 0
    var spsId = 0
    var dependentSliceSegments = false
    var outputFlagPresent = false
    var numExtraSliceHeaderBits = 0
    /// (columns, rows, uniform spacing, widths, heights) of the tile grid.
    var tiles: (Int, Int, Bool, [Int], [Int])?
    var wavefronts = false
    var scalingList: ((inout BitWriter) -> Void)?

    var nal: NALUnit {
        var w = BitWriter()
        w.ue(id)
        w.ue(spsId)
        w.flag(dependentSliceSegments)
        w.flag(outputFlagPresent)
        w.u(3, numExtraSliceHeaderBits)
        w.flag(false)  // sign_data_hiding_enabled_flag
        w.flag(true)  // cabac_init_present_flag
        w.ue(0)
        w.ue(0)
        w.se(-3)  // init_qp_minus26
        w.flag(false)
        w.flag(false)
        w.flag(true)  // cu_qp_delta_enabled_flag
        w.ue(1)
        w.se(0)
        w.se(0)
        w.flag(false)
        w.flag(true)  // weighted_pred_flag
        w.flag(false)
        w.flag(false)
        w.flag(tiles != nil)
        w.flag(wavefronts)
        if let (columns, rows, uniform, widths, heights) = tiles {
            w.ue(columns - 1)
            w.ue(rows - 1)
            w.flag(uniform)
            if !uniform {
                for width in widths { w.ue(width - 1) }
                for height in heights { w.ue(height - 1) }
            }
            w.flag(true)
        }
        w.flag(true)  // pps_loop_filter_across_slices_enabled_flag
        w.flag(true)  // deblocking_filter_control_present_flag
        w.flag(false)
        w.flag(false)
        w.se(1)
        w.se(-1)
        w.flag(scalingList != nil)
        scalingList?(&w)
        w.flag(false)  // lists_modification_present_flag
        w.ue(0)
        w.flag(false)
        w.flag(false)  // pps_extension_present_flag
        return w.nal(.pps)
    }
}

/// A slice segment with a header that matches `sps` and `pps`, and a byte of slice data.
struct SliceBuilder {
    var type = NALUnitType.trailR
    var first = true
    var ppsId = 0
    var dependent = false
    var address = 0
    var sliceType = 1
    var pocLsb = 0
    var temporalIdPlus1: UInt8 = 1
    var layerId: UInt8 = 0

    func nal(sps: SPSBuilder, pps: PPSBuilder) -> NALUnit {
        var w = BitWriter()
        w.flag(first)
        if type.isIRAP { w.flag(false) }
        w.ue(ppsId)
        if !first {
            if pps.dependentSliceSegments { w.flag(dependent) }
            let ctb = 1 << (sps.log2MinCbMinus3 + 3 + sps.log2DiffMaxMinCb)
            let size = ((sps.width + ctb - 1) / ctb) * ((sps.height + ctb - 1) / ctb)
            w.u(Int.bitWidth - (size - 1).leadingZeroBitCount, address)
        }
        if !dependent {
            w.u(pps.numExtraSliceHeaderBits, 0)
            w.ue(sliceType)
            if pps.outputFlagPresent { w.flag(true) }
            if sps.separateColourPlane { w.u(2, 1) }
            if !type.isIDR { w.u(sps.log2MaxPocLsbMinus4 + 4, pocLsb) }
        }
        w.u(8, 0xA5)  // stands in for the rest of the header and the slice data
        return w.nal(type, layerId: layerId, temporalIdPlus1: temporalIdPlus1)
    }
}

/// A small stream model: parameter sets and slices built to match each other.
struct StreamBuilder {
    var vps = VPSBuilder()
    var sps = SPSBuilder()
    var pps = PPSBuilder()
    var units: [NALUnit] = []

    mutating func parameterSets() {
        units += [vps.nal, sps.nal, pps.nal]
    }

    mutating func slice(_ configure: (inout SliceBuilder) -> Void) {
        var slice = SliceBuilder()
        configure(&slice)
        units.append(slice.nal(sps: sps, pps: pps))
    }

    mutating func add(_ type: NALUnitType, _ payload: [UInt8] = [0x80], layerId: UInt8 = 0) {
        units.append(NALUnit(bytes: NALHeader(type: type, layerId: layerId).bytes + payload)!)
    }

    var annexB: [UInt8] { AccessUnit(nalUnits: units).annexB() }

    /// Streams the units through a splitter and an assembler, as the service will.
    func assemble(pieces: Int? = nil) -> (units: [AccessUnit], assembler: AccessUnitAssembler) {
        Streams.accessUnits(annexB, pieces: pieces)
    }

    /// The NAL types of each access unit.
    func shapes(pieces: Int? = nil) -> [[NALUnitType]] { assemble(pieces: pieces).units.map { $0.nalUnits.map(\.type) } }
}
