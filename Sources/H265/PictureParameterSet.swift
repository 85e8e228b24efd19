import VideoCoding

/// A picture parameter set (§7.3.2.3.1) up to slice_segment_header_extension_present_flag:
/// what slice segment headers need, and the rest of its base part walked over. The extensions
/// after it are not read.
public struct PictureParameterSet: Sendable, Equatable {
    /// The tile grid, when tiles are enabled.
    public struct Tiles: Sendable, Equatable {
        public var columns: Int
        public var rows: Int
        /// Column widths and row heights in coding tree blocks, all but the last (which takes
        /// the rest of the picture); empty with uniform spacing.
        public var columnWidths: [Int]
        public var rowHeights: [Int]
        public var uniformSpacing: Bool
        public var loopFilterAcrossTiles: Bool
    }

    public var id: Int
    public var spsId: Int
    public var dependentSliceSegmentsEnabled: Bool
    public var outputFlagPresent: Bool
    public var numExtraSliceHeaderBits: Int
    public var signDataHidingEnabled: Bool
    public var cabacInitPresent: Bool
    public var numRefIdxL0DefaultActive: Int
    public var numRefIdxL1DefaultActive: Int
    public var initQp: Int
    public var constrainedIntraPred: Bool
    public var transformSkipEnabled: Bool
    /// diff_cu_qp_delta_depth when cu_qp_delta_enabled_flag is set.
    public var cuQpDeltaDepth: Int?
    public var cbQpOffset: Int
    public var crQpOffset: Int
    public var sliceChromaQpOffsetsPresent: Bool
    public var weightedPred: Bool
    public var weightedBipred: Bool
    public var transquantBypassEnabled: Bool
    public var tiles: Tiles?
    /// entropy_coding_sync_enabled_flag: wavefront parallel processing.
    public var entropyCodingSyncEnabled: Bool
    public var loopFilterAcrossSlicesEnabled: Bool
    public var deblockingFilterControlPresent: Bool
    public var deblockingFilterOverrideEnabled: Bool
    public var deblockingFilterDisabled: Bool
    public var scalingListDataPresent: Bool
    public var listsModificationPresent: Bool
    public var log2ParallelMergeLevel: Int
    public var sliceSegmentHeaderExtensionPresent: Bool

    public var tilesEnabled: Bool { tiles != nil }

    public init(nal: NALUnit) throws(BitstreamError) {
        try self.init(rbsp: nal.rbsp(of: .pps, "a PPS"))
    }

    /// `rbsp` starts after the two header bytes, emulation prevention removed.
    public init(rbsp: [UInt8]) throws(BitstreamError) {
        var reader = BitReader(rbsp)
        id = try reader.readUE(max: 63, "pps_pic_parameter_set_id")
        spsId = try reader.readUE(max: 15, "pps_seq_parameter_set_id")
        dependentSliceSegmentsEnabled = try reader.readFlag()
        outputFlagPresent = try reader.readFlag()
        numExtraSliceHeaderBits = Int(try reader.readBits(3))
        signDataHidingEnabled = try reader.readFlag()
        cabacInitPresent = try reader.readFlag()
        numRefIdxL0DefaultActive = 1 + (try reader.readUE(max: 14, "num_ref_idx_l0_default_active_minus1"))
        numRefIdxL1DefaultActive = 1 + (try reader.readUE(max: 14, "num_ref_idx_l1_default_active_minus1"))
        // -(26 + QpBdOffsetY) at 16 bits is -74.
        initQp = 26 + (try reader.readSE(in: -74...25, "init_qp_minus26"))
        constrainedIntraPred = try reader.readFlag()
        transformSkipEnabled = try reader.readFlag()
        cuQpDeltaDepth = try reader.readFlag() ? try reader.readUE(max: 3, "diff_cu_qp_delta_depth") : nil
        cbQpOffset = try reader.readSE(in: -12...12, "pps_cb_qp_offset")
        crQpOffset = try reader.readSE(in: -12...12, "pps_cr_qp_offset")
        sliceChromaQpOffsetsPresent = try reader.readFlag()
        weightedPred = try reader.readFlag()
        weightedBipred = try reader.readFlag()
        transquantBypassEnabled = try reader.readFlag()
        let tilesEnabled = try reader.readFlag()
        entropyCodingSyncEnabled = try reader.readFlag()
        tiles = nil
        if tilesEnabled {
            // 8K at 16x16 coding tree blocks is 512 blocks wide; the spec's limits per level are lower.
            let columns = 1 + (try reader.readUE(max: 1023, "num_tile_columns_minus1"))
            let rows = 1 + (try reader.readUE(max: 1023, "num_tile_rows_minus1"))
            let uniformSpacing = try reader.readFlag()
            var columnWidths: [Int] = []
            var rowHeights: [Int] = []
            if !uniformSpacing {
                for _ in 0..<(columns - 1) { columnWidths.append(1 + (try reader.readUE(max: 4095, "column_width_minus1"))) }
                for _ in 0..<(rows - 1) { rowHeights.append(1 + (try reader.readUE(max: 4095, "row_height_minus1"))) }
            }
            tiles = Tiles(
                columns: columns, rows: rows, columnWidths: columnWidths, rowHeights: rowHeights,
                uniformSpacing: uniformSpacing, loopFilterAcrossTiles: try reader.readFlag())
        }
        loopFilterAcrossSlicesEnabled = try reader.readFlag()
        deblockingFilterControlPresent = try reader.readFlag()
        deblockingFilterOverrideEnabled = false
        deblockingFilterDisabled = false
        if deblockingFilterControlPresent {
            deblockingFilterOverrideEnabled = try reader.readFlag()
            deblockingFilterDisabled = try reader.readFlag()
            if !deblockingFilterDisabled {
                _ = try reader.readSE(in: -6...6, "pps_beta_offset_div2")
                _ = try reader.readSE(in: -6...6, "pps_tc_offset_div2")
            }
        }
        scalingListDataPresent = try reader.readFlag()
        if scalingListDataPresent { try ScalingListData.skip(&reader) }
        listsModificationPresent = try reader.readFlag()
        log2ParallelMergeLevel = 2 + (try reader.readUE(max: 4, "log2_parallel_merge_level_minus2"))
        sliceSegmentHeaderExtensionPresent = try reader.readFlag()
    }
}
