/// Video usability information (Annex E.1.1). Fields that are absent keep the values the spec
/// infers for them (unspecified colour description, limited range, video_format 5).
public struct VUIParameters: Sendable, Equatable {
    public struct SampleAspectRatio: Sendable, Equatable, Hashable {
        public var width: Int
        public var height: Int
        public init(width: Int, height: Int) {
            self.width = width
            self.height = height
        }
        /// "N:D" as used in `VideoFormat`.
        public var text: String { "\(width):\(height)" }
    }

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

    public var aspectRatioIdc: Int?
    /// From Table E-1, or Extended_SAR (255); nil when unspecified or reserved.
    public var sampleAspectRatio: SampleAspectRatio?
    /// Short name for `sampleAspectRatio`.
    public var sar: SampleAspectRatio? { sampleAspectRatio }
    public var overscanAppropriate: Bool?
    public var videoFormat: Int = 5
    public var videoFullRange = false
    public var colourPrimaries: Int = 2
    public var transferCharacteristics: Int = 2
    public var matrixCoefficients: Int = 2
    public var chromaSampleLocTypeTopField: Int?
    public var chromaSampleLocTypeBottomField: Int?
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
        if try reader.readFlag() {
            let idc = Int(try reader.readBits(8))
            aspectRatioIdc = idc
            if idc == Self.extendedSAR {
                let width = Int(try reader.readBits(16))
                let height = Int(try reader.readBits(16))
                if width > 0 && height > 0 { sampleAspectRatio = SampleAspectRatio(width: width, height: height) }
            } else if let ratio = Self.sampleAspectRatios[idc] {
                sampleAspectRatio = ratio
            }
        }
        if try reader.readFlag() { overscanAppropriate = try reader.readFlag() }
        if try reader.readFlag() {
            videoFormat = Int(try reader.readBits(3))
            videoFullRange = try reader.readFlag()
            if try reader.readFlag() {
                colourPrimaries = Int(try reader.readBits(8))
                transferCharacteristics = Int(try reader.readBits(8))
                matrixCoefficients = Int(try reader.readBits(8))
            }
        }
        if try reader.readFlag() {
            chromaSampleLocTypeTopField = try reader.readUE(max: 5, "chroma_sample_loc_type_top_field")
            chromaSampleLocTypeBottomField = try reader.readUE(max: 5, "chroma_sample_loc_type_bottom_field")
        }
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
        guard let ticks = numUnitsInTick, let scale = timeScale, ticks > 0, scale > 0 else { return nil }
        return Double(scale) / (2 * Double(ticks))
    }

    static let extendedSAR = 255

    /// Table E-1.
    static let sampleAspectRatios: [Int: SampleAspectRatio] = [
        1: .init(width: 1, height: 1), 2: .init(width: 12, height: 11), 3: .init(width: 10, height: 11),
        4: .init(width: 16, height: 11), 5: .init(width: 40, height: 33), 6: .init(width: 24, height: 11),
        7: .init(width: 20, height: 11), 8: .init(width: 32, height: 11), 9: .init(width: 80, height: 33),
        10: .init(width: 18, height: 11), 11: .init(width: 15, height: 11), 12: .init(width: 64, height: 33),
        13: .init(width: 160, height: 99), 14: .init(width: 4, height: 3), 15: .init(width: 3, height: 2),
        16: .init(width: 2, height: 1),
    ]
}

/// Names for the colour description code points (Tables E-3, E-4, E-5), spelled the way
/// FFmpeg-based tools print them so the JSON matches what users see in ffprobe.
public enum ColourDescription {
    public static func primariesName(_ code: Int) -> String {
        switch code {
        case 1: "bt709"
        case 2: "unspecified"
        case 4: "bt470m"
        case 5: "bt470bg"
        case 6: "smpte170m"
        case 7: "smpte240m"
        case 8: "film"
        case 9: "bt2020"
        case 10: "smpte428"
        case 11: "smpte431"
        case 12: "smpte432"
        case 22: "ebu3213"
        default: "reserved"
        }
    }

    public static func transferName(_ code: Int) -> String {
        switch code {
        case 1: "bt709"
        case 2: "unspecified"
        case 4: "gamma22"
        case 5: "gamma28"
        case 6: "smpte170m"
        case 7: "smpte240m"
        case 8: "linear"
        case 9: "log100"
        case 10: "log316"
        case 11: "iec61966-2-4"
        case 12: "bt1361e"
        case 13: "iec61966-2-1"
        case 14: "bt2020-10"
        case 15: "bt2020-12"
        case 16: "smpte2084"
        case 17: "smpte428"
        case 18: "arib-std-b67"
        default: "reserved"
        }
    }

    public static func matrixName(_ code: Int) -> String {
        switch code {
        case 0: "gbr"
        case 1: "bt709"
        case 2: "unspecified"
        case 4: "fcc"
        case 5: "bt470bg"
        case 6: "smpte170m"
        case 7: "smpte240m"
        case 8: "ycgco"
        case 9: "bt2020nc"
        case 10: "bt2020c"
        case 11: "smpte2085"
        case 12: "chroma-derived-nc"
        case 13: "chroma-derived-c"
        case 14: "ictcp"
        default: "reserved"
        }
    }
}
