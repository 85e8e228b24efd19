/// The first part of vui_parameters(), whose syntax and code points H.264 (E.1.1) and H.265
/// (E.2.1) share: the sample aspect ratio, overscan, the video signal type (format, range,
/// colour description) and the chroma sample location. Fields that are absent keep the values
/// the specs infer for them (unspecified colour description, limited range, video_format 5).
public struct VUIDisplayParameters: Sendable, Equatable {
    public var aspectRatioIdc: Int?
    /// From Table E-1, or Extended_SAR (255); nil when unspecified or reserved.
    public var sampleAspectRatio: SampleAspectRatio?
    public var overscanAppropriate: Bool?
    public var videoFormat: Int = 5
    public var videoFullRange = false
    /// Tables E-3, E-4 and E-5; `ColourDescription` names them.
    public var colourPrimaries: Int = 2
    public var transferCharacteristics: Int = 2
    public var matrixCoefficients: Int = 2
    public var chromaSampleLocTypeTopField: Int?
    public var chromaSampleLocTypeBottomField: Int?

    public init() {}

    /// Reads from aspect_ratio_info_present_flag to the chroma sample location.
    public init(reader: inout BitReader) throws(BitstreamError) {
        if try reader.readFlag() {
            let idc = Int(try reader.readBits(8))
            aspectRatioIdc = idc
            if idc == SampleAspectRatio.extendedSAR {
                let width = Int(try reader.readBits(16))
                let height = Int(try reader.readBits(16))
                if width > 0 && height > 0 { sampleAspectRatio = SampleAspectRatio(width: width, height: height) }
            } else {
                sampleAspectRatio = SampleAspectRatio(aspectRatioIdc: idc)
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
    }
}

/// A codec's whole VUI, whose start is `display`: the fields of `display` read as the VUI's
/// own (`vui.videoFullRange`).
@dynamicMemberLookup
public protocol CodecVUI {
    var display: VUIDisplayParameters { get set }
}

extension CodecVUI {
    public subscript<Value>(dynamicMember field: WritableKeyPath<VUIDisplayParameters, Value>) -> Value {
        get { display[keyPath: field] }
        set { display[keyPath: field] = newValue }
    }
}

/// The shape of a sample (Table E-1, the same in H.264 and H.265).
public struct SampleAspectRatio: Sendable, Equatable, Hashable {
    public var width: Int
    public var height: Int

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    /// The ratio aspect_ratio_idc stands for; nil for 0 (unspecified), reserved values and
    /// Extended_SAR, whose ratio is coded after it.
    public init?(aspectRatioIdc: Int) {
        guard let ratio = Self.tableE1[aspectRatioIdc] else { return nil }
        self = ratio
    }

    /// "N:D", as `StreamFormat` reports it.
    public var text: String { "\(width):\(height)" }

    /// aspect_ratio_idc of a ratio coded as sar_width and sar_height.
    public static let extendedSAR = 255

    private static let tableE1: [Int: SampleAspectRatio] = [
        1: .init(width: 1, height: 1), 2: .init(width: 12, height: 11), 3: .init(width: 10, height: 11),
        4: .init(width: 16, height: 11), 5: .init(width: 40, height: 33), 6: .init(width: 24, height: 11),
        7: .init(width: 20, height: 11), 8: .init(width: 32, height: 11), 9: .init(width: 80, height: 33),
        10: .init(width: 18, height: 11), 11: .init(width: 15, height: 11), 12: .init(width: 64, height: 33),
        13: .init(width: 160, height: 99), 14: .init(width: 4, height: 3), 15: .init(width: 3, height: 2),
        16: .init(width: 2, height: 1),
    ]
}

/// Names for the colour description code points (Tables E-3, E-4, E-5, the same in H.264 and
/// H.265), spelled the way FFmpeg-based tools print them so the JSON matches what users see in
/// ffprobe.
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

/// The timing info of a VUI, and of an H.265 VPS (§E.2.1 in both codecs).
public enum TimingInfo {
    /// Ticks per second: time_scale / num_units_in_tick; nil when the timing is absent or
    /// either value is 0. A tick is a field period in H.264, a picture in H.265.
    public static func tickRate(numUnitsInTick: UInt32?, timeScale: UInt32?) -> Double? {
        guard let ticks = numUnitsInTick, let scale = timeScale, ticks > 0, scale > 0 else { return nil }
        return Double(scale) / Double(ticks)
    }
}
