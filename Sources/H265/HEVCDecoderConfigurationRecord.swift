import VideoCoding

/// HEVCDecoderConfigurationRecord (ISO/IEC 14496-15 §8.3.3.1), the `hvcC` box payload of MP4
/// and Matroska H.265 tracks: what a decoder needs before the first length-prefixed sample.
public struct HEVCDecoderConfigurationRecord: Sendable, Equatable {
    public var configurationVersion: UInt8
    public var generalProfileSpace: UInt8
    public var generalTierFlag: Bool
    public var generalProfileIdc: UInt8
    public var generalLevelIdc: UInt8
    public var chromaFormatIdc: UInt8
    public var bitDepthLuma: Int
    public var bitDepthChroma: Int
    /// Bytes in each NAL length field of the samples: 1, 2 or 4.
    public var lengthSize: Int
    /// The parameter set and SEI units of its arrays, in record order, headers included.
    public var nalUnits: [[UInt8]]

    /// The fixed part before the arrays.
    static let headerLength = 23

    /// Parses a record. Versions 0 and 1 are read the same (early muxers wrote 0, and libavcodec
    /// reads those too); a length size of 3 bytes is reserved and refused.
    public init(parsing bytes: [UInt8]) throws(BitstreamError) {
        guard bytes.count >= Self.headerLength else {
            throw BitstreamError(.invalidData, "an hvcC record has \(Self.headerLength) bytes before its arrays, this one \(bytes.count)")
        }
        configurationVersion = bytes[0]
        guard configurationVersion <= 1 else {
            throw BitstreamError(.invalidData, "hvcC configurationVersion \(configurationVersion) is not 1")
        }
        generalProfileSpace = bytes[1] >> 6
        generalTierFlag = bytes[1] & 0x20 != 0
        generalProfileIdc = bytes[1] & 0x1F
        generalLevelIdc = bytes[12]
        chromaFormatIdc = bytes[16] & 0x03
        bitDepthLuma = Int(bytes[17] & 0x07) + 8
        bitDepthChroma = Int(bytes[18] & 0x07) + 8
        let lengthSizeMinusOne = bytes[21] & 0x03
        guard lengthSizeMinusOne != 2 else { throw BitstreamError(.invalidData, "hvcC lengthSizeMinusOne 2 is reserved") }
        lengthSize = Int(lengthSizeMinusOne) + 1
        let arrayCount = Int(bytes[22])
        var offset = Self.headerLength
        func take(_ count: Int, _ what: String) throws(BitstreamError) -> ArraySlice<UInt8> {
            guard count <= bytes.count - offset else {
                throw BitstreamError(.invalidData, "hvcC \(what) of \(count) bytes at byte \(offset) runs past its \(bytes.count) bytes")
            }
            defer { offset += count }
            return bytes[offset..<(offset + count)]
        }
        nalUnits = []
        for _ in 0..<arrayCount {
            _ = try take(1, "array header")
            let counts = try take(2, "unit count")
            let unitCount = Int(counts.first!) << 8 | Int(counts.last!)
            for _ in 0..<unitCount {
                let sizes = try take(2, "unit length")
                let size = Int(sizes.first!) << 8 | Int(sizes.last!)
                let unit = try take(size, "NAL unit")
                if !unit.isEmpty { nalUnits.append(Array(unit)) }
            }
        }
    }
}
