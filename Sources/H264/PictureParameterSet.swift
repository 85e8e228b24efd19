import VideoCoding

/// A picture parameter set (§7.3.2.2): what slice headers need, and the rest walked over.
public struct PictureParameterSet: Sendable, Equatable {
    public var id: Int
    public var spsId: Int
    public var entropyCodingModeCABAC: Bool
    public var bottomFieldPicOrderInFramePresent: Bool
    public var numSliceGroups: Int
    public var sliceGroupMapType: Int?
    public var numRefIdxL0DefaultActive: Int
    public var numRefIdxL1DefaultActive: Int
    public var weightedPred: Bool
    public var weightedBipredIdc: Int
    public var picInitQp: Int
    public var picInitQs: Int
    public var chromaQpIndexOffset: Int
    public var deblockingFilterControlPresent: Bool
    public var constrainedIntraPred: Bool
    public var redundantPicCntPresent: Bool
    /// The optional High-profile tail; nil when the PPS ends before it.
    public var transform8x8Mode: Bool?
    public var picScalingMatrixPresent: Bool?
    public var secondChromaQpIndexOffset: Int?

    /// `sps` supplies chroma_format_idc for the length of the scaling-matrix tail; without it
    /// 4:2:0 is assumed, which only matters for 4:4:4 streams with PPS scaling matrices.
    public init(nal: NALUnit, sps: SequenceParameterSet? = nil) throws(BitstreamError) {
        try self.init(rbsp: nal.rbsp(of: .pps, "a PPS"), chromaFormatIdc: sps?.chromaFormatIdc ?? 1)
    }

    public init(rbsp: [UInt8], chromaFormatIdc: Int = 1) throws(BitstreamError) {
        var reader = BitReader(rbsp)
        id = try reader.readUE(max: 255, "pic_parameter_set_id")
        spsId = try reader.readUE(max: 31, "seq_parameter_set_id")
        entropyCodingModeCABAC = try reader.readFlag()
        bottomFieldPicOrderInFramePresent = try reader.readFlag()
        numSliceGroups = 1 + (try reader.readUE(max: 7, "num_slice_groups_minus1"))
        sliceGroupMapType = nil
        if numSliceGroups > 1 {
            let mapType = try reader.readUE(max: 6, "slice_group_map_type")
            sliceGroupMapType = mapType
            switch mapType {
            case 0:
                for _ in 0..<numSliceGroups { _ = try reader.readUE() }  // run_length_minus1
            case 2:
                for _ in 0..<(numSliceGroups - 1) {
                    _ = try reader.readUE()  // top_left
                    _ = try reader.readUE()  // bottom_right
                }
            case 3, 4, 5:
                _ = try reader.readFlag()  // slice_group_change_direction_flag
                _ = try reader.readUE()  // slice_group_change_rate_minus1
            case 6:
                let mapUnits = 1 + (try reader.readUE(max: 1 << 22, "pic_size_in_map_units_minus1"))
                // slice_group_id[i] is u(v) with Ceil(Log2(num_slice_groups_minus1 + 1)) bits.
                var bitsPerId = 0
                while (1 << bitsPerId) < numSliceGroups { bitsPerId += 1 }
                try reader.skipBits(mapUnits * bitsPerId)
            default:
                break
            }
        }
        numRefIdxL0DefaultActive = 1 + (try reader.readUE(max: 31, "num_ref_idx_l0_default_active_minus1"))
        numRefIdxL1DefaultActive = 1 + (try reader.readUE(max: 31, "num_ref_idx_l1_default_active_minus1"))
        weightedPred = try reader.readFlag()
        weightedBipredIdc = Int(try reader.readBits(2))
        picInitQp = 26 + (try reader.readSE(in: -62...25, "pic_init_qp_minus26"))
        picInitQs = 26 + (try reader.readSE(in: -26...25, "pic_init_qs_minus26"))
        chromaQpIndexOffset = try reader.readSE(in: -12...12, "chroma_qp_index_offset")
        deblockingFilterControlPresent = try reader.readFlag()
        constrainedIntraPred = try reader.readFlag()
        redundantPicCntPresent = try reader.readFlag()

        transform8x8Mode = nil
        picScalingMatrixPresent = nil
        secondChromaQpIndexOffset = nil
        guard reader.moreRBSPData() else { return }
        // The tail only feeds the decoder; a malformed one must not hide the fields above.
        do {
            let transform8x8 = try reader.readFlag()
            let scalingPresent = try reader.readFlag()
            if scalingPresent {
                let listCount = 6 + (chromaFormatIdc == 3 ? 6 : 2) * (transform8x8 ? 1 : 0)
                for index in 0..<listCount {
                    if try reader.readFlag() { try ScalingList.skip(&reader, size: index < 6 ? 16 : 64) }
                }
            }
            let secondOffset = try reader.readSE(in: -12...12, "second_chroma_qp_index_offset")
            transform8x8Mode = transform8x8
            picScalingMatrixPresent = scalingPresent
            secondChromaQpIndexOffset = secondOffset
        } catch {
            return
        }
    }
}
