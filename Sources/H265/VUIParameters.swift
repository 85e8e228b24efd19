import VideoCoding

/// Video usability information (Annex E.2.1). Fields that are absent keep the values the spec
/// infers for them.
///
/// Its start, shared with H.264, is `display` (see `CodecVUI`).
public struct VUIParameters: Sendable, Equatable, CodecVUI {
    /// Aspect ratio, overscan, video signal type and chroma location.
    public var display = VUIDisplayParameters()
    public var neutralChromaIndication = false
    /// Each picture is a field: the stream is interlaced, coded field by field.
    public var fieldSeq = false
    public var frameFieldInfoPresent = false
    /// The window the stream suggests showing, inside the conformance window (in SubWidthC and
    /// SubHeightC units); decoders, libavcodec included, do not apply it by default.
    public var defaultDisplayWindow: SequenceParameterSet.Window?
    public var numUnitsInTick: UInt32?
    public var timeScale: UInt32?
    /// vui_num_ticks_poc_diff_one_minus1 + 1, when POC is proportional to timing.
    public var numTicksPocDiffOne: Int?
    public var hrdParametersPresent = false
    /// From bitstream_restriction, when present.
    public var tilesFixedStructure: Bool?
    public var motionVectorsOverPicBoundaries: Bool?
    public var restrictedRefPicLists: Bool?
    public var minSpatialSegmentationIdc: Int?

    public init() {}

    init(reader: inout BitReader, maxSubLayersMinus1: Int) throws(BitstreamError) {
        display = try VUIDisplayParameters(reader: &reader)
        neutralChromaIndication = try reader.readFlag()
        fieldSeq = try reader.readFlag()
        frameFieldInfoPresent = try reader.readFlag()
        if try reader.readFlag() { defaultDisplayWindow = try SequenceParameterSet.Window(reader: &reader) }
        if try reader.readFlag() {
            numUnitsInTick = try reader.readBits(32)
            timeScale = try reader.readBits(32)
            if try reader.readFlag() {
                numTicksPocDiffOne = 1 + (try reader.readUE(max: Int(UInt32.max) - 1, "vui_num_ticks_poc_diff_one_minus1"))
            }
            hrdParametersPresent = try reader.readFlag()
            if hrdParametersPresent {
                try HRDParameters.skip(&reader, commonInfoPresent: true, maxSubLayersMinus1: maxSubLayersMinus1)
            }
        }
        if try reader.readFlag() {
            tilesFixedStructure = try reader.readFlag()
            motionVectorsOverPicBoundaries = try reader.readFlag()
            restrictedRefPicLists = try reader.readFlag()
            minSpatialSegmentationIdc = try reader.readUE(max: 4095, "min_spatial_segmentation_idc")
            _ = try reader.readUE(max: 16, "max_bytes_per_pic_denom")
            _ = try reader.readUE(max: 16, "max_bits_per_min_cu_denom")
            _ = try reader.readUE(max: 15, "log2_max_mv_length_horizontal")
            _ = try reader.readUE(max: 15, "log2_max_mv_length_vertical")
        }
    }

    /// Pictures per second: time_scale / num_units_in_tick (§E.3.1: one tick per picture).
    public var frameRate: Double? { TimingInfo.tickRate(numUnitsInTick: numUnitsInTick, timeScale: timeScale) }
}

/// hrd_parameters() (§E.2.2), walked over: FrameTap has no use for its values, only for where
/// the VUI goes on after it.
enum HRDParameters {
    static func skip(_ reader: inout BitReader, commonInfoPresent: Bool, maxSubLayersMinus1: Int) throws(BitstreamError) {
        var nalParameters = false
        var vclParameters = false
        var subPictureParameters = false
        if commonInfoPresent {
            nalParameters = try reader.readFlag()
            vclParameters = try reader.readFlag()
            if nalParameters || vclParameters {
                subPictureParameters = try reader.readFlag()
                // tick_divisor_minus2, du_cpb_removal_delay_increment_length_minus1,
                // sub_pic_cpb_params_in_pic_timing_sei_flag, dpb_output_delay_du_length_minus1
                if subPictureParameters { try reader.skipBits(8 + 5 + 1 + 5) }
                try reader.skipBits(4 + 4)  // bit_rate_scale, cpb_size_scale
                if subPictureParameters { try reader.skipBits(4) }  // cpb_size_du_scale
                // initial_cpb_removal_delay_length_minus1, au_cpb_removal_delay_length_minus1,
                // dpb_output_delay_length_minus1
                try reader.skipBits(5 + 5 + 5)
            }
        }
        for _ in 0...maxSubLayersMinus1 {
            var fixedPictureRate = try reader.readFlag()  // fixed_pic_rate_general_flag
            if !fixedPictureRate { fixedPictureRate = try reader.readFlag() }  // fixed_pic_rate_within_cvs_flag
            var lowDelay = false
            if fixedPictureRate {
                _ = try reader.readUE(max: 2047, "elemental_duration_in_tc_minus1")
            } else {
                lowDelay = try reader.readFlag()
            }
            let cpbCount = lowDelay ? 1 : 1 + (try reader.readUE(max: 31, "cpb_cnt_minus1"))
            for present in [nalParameters, vclParameters] where present {
                // sub_layer_hrd_parameters(): bit_rate_value_minus1, cpb_size_value_minus1,
                // with sub-picture parameters cpb_size_du_value_minus1 and bit_rate_du_value_minus1,
                // then cbr_flag, per CPB.
                for _ in 0..<cpbCount {
                    for _ in 0..<(subPictureParameters ? 4 : 2) { _ = try reader.readUE() }
                    _ = try reader.readFlag()
                }
            }
        }
    }
}
