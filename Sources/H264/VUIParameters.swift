import VideoCoding

/// Video usability information (Annex E.1.1). Fields that are absent keep the values the spec
/// infers for them (unspecified colour description, limited range, video_format 5).
///
/// Its start, shared with H.265, is `display` (see `CodecVUI`).
public struct VUIParameters: Sendable, Equatable, CodecVUI {
    public struct HRDParameters: Sendable, Equatable {
        public struct CPB: Sendable, Equatable {
            public var bitRateValueMinus1: UInt32
            public var cpbSizeValueMinus1: UInt32
            public var cbr: Bool
        }
        public var bitRateScale: Int
        public var cpbSizeScale: Int
        public var cpbs: [CPB]
        public var initialCpbRemovalDelayLength: Int
        public var cpbRemovalDelayLength: Int
        public var dpbOutputDelayLength: Int
        public var timeOffsetLength: Int

        init(reader: inout BitReader) throws(BitstreamError) {
            let count = 1 + (try reader.readUE(max: 31, "cpb_cnt_minus1"))
            bitRateScale = Int(try reader.readBits(4))
            cpbSizeScale = Int(try reader.readBits(4))
            cpbs = []
            for _ in 0..<count {
                cpbs.append(CPB(
                    bitRateValueMinus1: try reader.readUE(), cpbSizeValueMinus1: try reader.readUE(),
                    cbr: try reader.readFlag()))
            }
            initialCpbRemovalDelayLength = 1 + Int(try reader.readBits(5))
            cpbRemovalDelayLength = 1 + Int(try reader.readBits(5))
            dpbOutputDelayLength = 1 + Int(try reader.readBits(5))
            timeOffsetLength = Int(try reader.readBits(5))
        }

        /// Bit rate of the first CPB in bits per second (equation E-37).
        public var bitRate: Int? {
            guard let first = cpbs.first else { return nil }
            return (Int(first.bitRateValueMinus1) + 1) << (6 + bitRateScale)
        }
    }

    /// Aspect ratio, overscan, video signal type and chroma location.
    public var display = VUIDisplayParameters()
    public var numUnitsInTick: UInt32?
    public var timeScale: UInt32?
    public var fixedFrameRate = false
    public var nalHRD: HRDParameters?
    public var vclHRD: HRDParameters?
    public var lowDelayHRD = false
    public var picStructPresent = false
    public var motionVectorsOverPicBoundaries: Bool?
    public var maxNumReorderFrames: Int?
    public var maxDecFrameBuffering: Int?

    public init() {}

    init(reader: inout BitReader) throws(BitstreamError) {
        display = try VUIDisplayParameters(reader: &reader)
        if try reader.readFlag() {
            numUnitsInTick = try reader.readBits(32)
            timeScale = try reader.readBits(32)
            fixedFrameRate = try reader.readFlag()
        }
        if try reader.readFlag() { nalHRD = try HRDParameters(reader: &reader) }
        if try reader.readFlag() { vclHRD = try HRDParameters(reader: &reader) }
        if nalHRD != nil || vclHRD != nil { lowDelayHRD = try reader.readFlag() }
        picStructPresent = try reader.readFlag()
        if try reader.readFlag() {
            motionVectorsOverPicBoundaries = try reader.readFlag()
            _ = try reader.readUE(max: 16, "max_bytes_per_pic_denom")
            _ = try reader.readUE(max: 16, "max_bits_per_mb_denom")
            _ = try reader.readUE(max: 16, "log2_max_mv_length_horizontal")
            _ = try reader.readUE(max: 16, "log2_max_mv_length_vertical")
            maxNumReorderFrames = try reader.readUE(max: 16, "max_num_reorder_frames")
            maxDecFrameBuffering = try reader.readUE(max: 16, "max_dec_frame_buffering")
        }
    }

    /// Frames per second for frame-coded content: time_scale / (2 * num_units_in_tick), since a
    /// tick is one field period (§E.2.1, equation C-1 with DeltaTfiDivisor 2 for a frame).
    public var frameRate: Double? {
        TimingInfo.tickRate(numUnitsInTick: numUnitsInTick, timeScale: timeScale).map { $0 / 2 }
    }
}
