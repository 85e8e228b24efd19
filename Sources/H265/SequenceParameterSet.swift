import VideoCoding

/// A sequence parameter set (§7.3.2.2.1) up to and including its VUI, with what the rest of
/// FrameTap derives from it. The extensions after the VUI are not read.
public struct SequenceParameterSet: Sendable, Equatable {
    /// Offsets of a window as coded: in units of SubWidthC and SubHeightC luma samples.
    public typealias Window = EdgeOffsets

    public typealias Rect = PictureRect

    /// pcm_sample_bit_depth_*_minus1 + 1 and the PCM coding block sizes, when PCM is enabled.
    public struct PCM: Sendable, Equatable {
        public var bitDepthLuma: Int
        public var bitDepthChroma: Int
        public var log2MinCodingBlockSize: Int
        public var log2MaxCodingBlockSize: Int
        public var loopFilterDisabled: Bool
    }

    public var vpsId: Int
    /// sps_max_sub_layers_minus1 + 1 (1...7).
    public var maxSubLayers: Int
    public var temporalIdNesting: Bool
    public var profileTierLevel: ProfileTierLevel
    public var id: Int
    public var chromaFormatIdc: Int
    public var separateColourPlane: Bool
    public var picWidthInLumaSamples: Int
    public var picHeightInLumaSamples: Int
    /// The conformance cropping window; nil when the SPS has none.
    public var conformanceWindow: Window?
    public var bitDepthLuma: Int
    public var bitDepthChroma: Int
    public var log2MaxPicOrderCntLsb: Int
    /// One entry per sub-layer, sub-layer 0 first.
    public var subLayerOrdering: [SubLayerOrdering]
    public var log2MinLumaCodingBlockSize: Int
    /// CtbLog2SizeY: 4, 5 or 6.
    public var log2CodingTreeBlockSize: Int
    public var log2MinLumaTransformBlockSize: Int
    public var log2MaxLumaTransformBlockSize: Int
    public var maxTransformHierarchyDepthInter: Int
    public var maxTransformHierarchyDepthIntra: Int
    public var scalingListEnabled: Bool
    public var ampEnabled: Bool
    public var sampleAdaptiveOffsetEnabled: Bool
    public var pcm: PCM?
    public var shortTermRefPicSets: [ShortTermReferencePictureSet]
    public var longTermRefPicsPresent: Bool
    public var numLongTermRefPicsSPS: Int
    public var temporalMVPEnabled: Bool
    public var strongIntraSmoothingEnabled: Bool
    /// nil when absent, and also when present but malformed or truncated: the VUI is optional
    /// for decoding, and cameras with broken VUI must still play.
    public var vui: VUIParameters?
    /// True when the SPS announced a VUI that could not be parsed.
    public var vuiMalformed: Bool

    public init(nal: NALUnit) throws(BitstreamError) {
        try self.init(rbsp: nal.rbsp(of: .sps, "an SPS"))
    }

    /// `rbsp` starts after the two header bytes, emulation prevention removed.
    public init(rbsp: [UInt8]) throws(BitstreamError) {
        var reader = BitReader(rbsp)
        vpsId = Int(try reader.readBits(4))
        let maxSubLayersMinus1 = Int(try reader.readBits(3))
        guard maxSubLayersMinus1 <= 6 else {
            throw BitstreamError(.invalidData, "sps_max_sub_layers_minus1 = \(maxSubLayersMinus1) is above its maximum 6")
        }
        maxSubLayers = maxSubLayersMinus1 + 1
        temporalIdNesting = try reader.readFlag()
        profileTierLevel = try ProfileTierLevel(reader: &reader, maxSubLayersMinus1: maxSubLayersMinus1)
        id = try reader.readUE(max: 15, "sps_seq_parameter_set_id")
        chromaFormatIdc = try reader.readUE(max: 3, "chroma_format_idc")
        separateColourPlane = chromaFormatIdc == 3 ? try reader.readFlag() : false
        // Far beyond any level (8K is 8192 wide); keeps the arithmetic below safe.
        picWidthInLumaSamples = try reader.readUE(max: 1 << 16, "pic_width_in_luma_samples")
        picHeightInLumaSamples = try reader.readUE(max: 1 << 16, "pic_height_in_luma_samples")
        conformanceWindow = try reader.readFlag() ? try Window(reader: &reader) : nil
        bitDepthLuma = 8 + (try reader.readUE(max: 8, "bit_depth_luma_minus8"))
        bitDepthChroma = 8 + (try reader.readUE(max: 8, "bit_depth_chroma_minus8"))
        log2MaxPicOrderCntLsb = 4 + (try reader.readUE(max: 12, "log2_max_pic_order_cnt_lsb_minus4"))
        subLayerOrdering = try SubLayerOrdering.read(&reader, maxSubLayersMinus1: maxSubLayersMinus1)

        log2MinLumaCodingBlockSize = 3 + (try reader.readUE(max: 3, "log2_min_luma_coding_block_size_minus3"))
        log2CodingTreeBlockSize =
            log2MinLumaCodingBlockSize + (try reader.readUE(max: 3, "log2_diff_max_min_luma_coding_block_size"))
        log2MinLumaTransformBlockSize = 2 + (try reader.readUE(max: 3, "log2_min_luma_transform_block_size_minus2"))
        log2MaxLumaTransformBlockSize =
            log2MinLumaTransformBlockSize + (try reader.readUE(max: 3, "log2_diff_max_min_luma_transform_block_size"))
        // The limits libavcodec enforces (and §7.4.3.2.1 sets): a stream outside them does not decode.
        guard (4...6).contains(log2CodingTreeBlockSize) else {
            throw BitstreamError(.invalidData, "coding tree block size 2^\(log2CodingTreeBlockSize) is outside 16...64")
        }
        guard log2MinLumaTransformBlockSize < log2MinLumaCodingBlockSize,
            log2MaxLumaTransformBlockSize <= min(log2CodingTreeBlockSize, 5)
        else {
            throw BitstreamError(.invalidData, "transform block sizes do not fit the coding block sizes")
        }
        let minCodingBlock = 1 << log2MinLumaCodingBlockSize
        guard picWidthInLumaSamples > 0, picHeightInLumaSamples > 0,
            picWidthInLumaSamples % minCodingBlock == 0, picHeightInLumaSamples % minCodingBlock == 0
        else {
            throw BitstreamError(
                .invalidData,
                "picture size \(picWidthInLumaSamples)x\(picHeightInLumaSamples) is not a multiple of the minimum coding block \(minCodingBlock)")
        }
        let depthLimit = log2CodingTreeBlockSize - log2MinLumaTransformBlockSize
        maxTransformHierarchyDepthInter = try reader.readUE(max: depthLimit, "max_transform_hierarchy_depth_inter")
        maxTransformHierarchyDepthIntra = try reader.readUE(max: depthLimit, "max_transform_hierarchy_depth_intra")

        scalingListEnabled = try reader.readFlag()
        if scalingListEnabled, try reader.readFlag() { try ScalingListData.skip(&reader) }
        ampEnabled = try reader.readFlag()
        sampleAdaptiveOffsetEnabled = try reader.readFlag()
        pcm = nil
        if try reader.readFlag() {
            let luma = 1 + Int(try reader.readBits(4))
            let chroma = 1 + Int(try reader.readBits(4))
            let log2Min = 3 + (try reader.readUE(max: 2, "log2_min_pcm_luma_coding_block_size_minus3"))
            let log2Max = log2Min + (try reader.readUE(max: 2, "log2_diff_max_min_pcm_luma_coding_block_size"))
            pcm = PCM(
                bitDepthLuma: luma, bitDepthChroma: chroma, log2MinCodingBlockSize: log2Min,
                log2MaxCodingBlockSize: log2Max, loopFilterDisabled: try reader.readFlag())
        }

        let setCount = try reader.readUE(max: 64, "num_short_term_ref_pic_sets")
        shortTermRefPicSets = []
        for _ in 0..<setCount {
            shortTermRefPicSets.append(try ShortTermReferencePictureSet(reader: &reader, previous: shortTermRefPicSets.last))
        }
        longTermRefPicsPresent = try reader.readFlag()
        numLongTermRefPicsSPS = 0
        if longTermRefPicsPresent {
            numLongTermRefPicsSPS = try reader.readUE(max: 32, "num_long_term_ref_pics_sps")
            // lt_ref_pic_poc_lsb_sps (u(v)) and used_by_curr_pic_lt_sps_flag of each.
            try reader.skipBits(numLongTermRefPicsSPS * (log2MaxPicOrderCntLsb + 1))
        }
        temporalMVPEnabled = try reader.readFlag()
        strongIntraSmoothingEnabled = try reader.readFlag()

        (vui, vuiMalformed) = try reader.readOptionalVUI { reader throws(BitstreamError) in
            try VUIParameters(reader: &reader, maxSubLayersMinus1: maxSubLayersMinus1)
        }
    }

    // MARK: - Derived values

    /// ChromaArrayType (§7.4.3.2.1): 0 for monochrome and for separately coded colour planes.
    public var chromaArrayType: Int { separateColourPlane ? 0 : chromaFormatIdc }

    /// SubWidthC and SubHeightC (Table 6-1).
    public var chromaSubsampling: (width: Int, height: Int) {
        switch chromaArrayType {
        case 1: (2, 2)
        case 2: (2, 1)
        default: (1, 1)
        }
    }

    /// Decoded picture size in luma samples, before cropping.
    public var codedWidth: Int { picWidthInLumaSamples }
    public var codedHeight: Int { picHeightInLumaSamples }

    public var picWidthInCodingTreeBlocks: Int { (picWidthInLumaSamples + (1 << log2CodingTreeBlockSize) - 1) >> log2CodingTreeBlockSize }
    public var picHeightInCodingTreeBlocks: Int { (picHeightInLumaSamples + (1 << log2CodingTreeBlockSize) - 1) >> log2CodingTreeBlockSize }
    /// PicSizeInCtbsY.
    public var picSizeInCodingTreeBlocks: Int { picWidthInCodingTreeBlocks * picHeightInCodingTreeBlocks }

    /// The visible part of the decoded picture in luma samples (the conformance window). A
    /// window that leaves nothing is ignored, as libavcodec does.
    public var cropRect: Rect {
        let unit = chromaSubsampling
        return Rect(
            codedWidth: codedWidth, codedHeight: codedHeight, crop: conformanceWindow, unitWidth: unit.width,
            unitHeight: unit.height)
    }

    public var displayWidth: Int { cropRect.width }
    public var displayHeight: Int { cropRect.height }

    /// Of the highest sub-layer, which is what a decoder of the whole stream buffers.
    public var maxNumReorderPics: Int { subLayerOrdering.last?.maxNumReorderPics ?? 0 }
    public var maxDecPicBuffering: Int { subLayerOrdering.last?.maxDecPicBuffering ?? 1 }

    public var profileName: String { profileTierLevel.profileName }
    public var tierName: String { profileTierLevel.tierName }
    public var levelName: String { profileTierLevel.levelName }

    /// Pictures per second from the VUI: time_scale / num_units_in_tick, since an H.265 tick is
    /// one picture (§E.3.1; a field when `vui.fieldSeq`), not one field as in H.264.
    public var frameRate: Double? { vui?.frameRate }
}

/// scaling_list_data() (§7.3.4). FrameTap hands decoding to libavcodec, so the values are only
/// walked over; getting their length right is what matters.
enum ScalingListData {
    static func skip(_ reader: inout BitReader) throws(BitstreamError) {
        for sizeId in 0..<4 {
            let step = sizeId == 3 ? 3 : 1
            for matrixId in stride(from: 0, to: 6, by: step) {
                if try reader.readFlag() {
                    if sizeId > 1 { _ = try reader.readSE(in: -7...247, "scaling_list_dc_coef_minus8") }
                    for _ in 0..<min(64, 1 << (4 + (sizeId << 1))) {
                        _ = try reader.readSE(in: -128...127, "scaling_list_delta_coef")
                    }
                } else {
                    // The reference list must be this one or an earlier one of the same size.
                    _ = try reader.readUE(max: matrixId / step, "scaling_list_pred_matrix_id_delta")
                }
            }
        }
    }
}

extension EdgeOffsets {
    /// A conformance or default display window as H.265 codes it.
    init(reader: inout BitReader) throws(BitstreamError) {
        // A window wider than any picture is refused before any arithmetic on it.
        self.init(
            left: try reader.readUE(max: 1 << 16, "window left offset"),
            right: try reader.readUE(max: 1 << 16, "window right offset"),
            top: try reader.readUE(max: 1 << 16, "window top offset"),
            bottom: try reader.readUE(max: 1 << 16, "window bottom offset"))
    }
}
