import VideoCoding

/// Length-prefixed NAL units (ISO/IEC 14496-15, as in MP4 and Matroska "avc1" tracks).
public enum AVCC {
    /// Each unit preceded by its size as a 4-byte big-endian integer.
    public static func lengthPrefixed(_ units: [NALUnit]) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(units.reduce(0) { $0 + 4 + $1.bytes.count })
        for unit in units {
            let size = UInt32(unit.bytes.count)
            output.append(contentsOf: [UInt8(size >> 24), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF)])
            output.append(contentsOf: unit.bytes)
        }
        return output
    }

    /// The NAL units of a length-prefixed buffer. `lengthSize` is 1, 2 or 4 (from the avcC
    /// record). Throws `.invalidData` for a truncated buffer or a zero-length unit.
    public static func nalUnits(fromLengthPrefixed bytes: [UInt8], lengthSize: Int = 4) throws(BitstreamError) -> [NALUnit] {
        let units = bytes.withUnsafeBytes { buffer in
            Result { () throws(BitstreamError) in
                try LengthPrefixedUnits.units(in: buffer, lengthSize: lengthSize, emptyUnits: .refused)
            }
        }
        return try units.get().map(NALUnit.init)
    }

    /// Same as `nalUnits(fromLengthPrefixed:lengthSize:)` (the contract's name for it).
    public static func annexB(fromLengthPrefixed bytes: [UInt8], lengthSize: Int = 4) throws(BitstreamError) -> [NALUnit] {
        try nalUnits(fromLengthPrefixed: bytes, lengthSize: lengthSize)
    }

    /// Length-prefixed units rewritten as an Annex B byte stream (4-byte start codes).
    public static func annexBBytes(fromLengthPrefixed bytes: [UInt8], lengthSize: Int = 4) throws(BitstreamError) -> [UInt8] {
        AccessUnit(nalUnits: try nalUnits(fromLengthPrefixed: bytes, lengthSize: lengthSize)).annexB()
    }
}

/// AVCDecoderConfigurationRecord (ISO/IEC 14496-15 §5.3.3.1), the "avcC" box payload and
/// libavcodec's extradata for length-prefixed input.
public struct AVCDecoderConfigurationRecord: Sendable, Equatable {
    public var configurationVersion: UInt8 = 1
    public var profileIndication: UInt8
    public var profileCompatibility: UInt8
    public var levelIndication: UInt8
    /// Bytes in each NAL length field: 1, 2 or 4.
    public var lengthSize: Int
    /// Whole NAL units, header byte included.
    public var sequenceParameterSets: [[UInt8]]
    public var pictureParameterSets: [[UInt8]]
    /// The extension written for profiles 100, 110, 122 and 144; nil when absent.
    public var chromaFormat: UInt8?
    public var bitDepthLuma: UInt8?
    public var bitDepthChroma: UInt8?
    public var sequenceParameterSetExtensions: [[UInt8]] = []

    static let profilesWithExtension: Set<UInt8> = [100, 110, 122, 144]

    /// Profile, level and format come from the first SPS.
    public init(sps: [NALUnit], pps: [NALUnit], lengthSize: Int = 4) throws(BitstreamError) {
        guard let first = sps.first else { throw BitstreamError(.invalidData, "an avcC record needs at least one SPS") }
        guard !pps.isEmpty else { throw BitstreamError(.invalidData, "an avcC record needs at least one PPS") }
        guard [1, 2, 4].contains(lengthSize) else {
            throw BitstreamError(.invalidArgument, "NAL length size must be 1, 2 or 4 bytes, not \(lengthSize)")
        }
        guard sps.count < 32, pps.count < 256, (sps + pps).allSatisfy({ $0.bytes.count <= 0xFFFF }) else {
            throw BitstreamError(.invalidData, "too many or too large parameter sets for an avcC record")
        }
        guard sps.allSatisfy({ $0.type == .sps }), pps.allSatisfy({ $0.type == .pps }) else {
            throw BitstreamError(.invalidData, "avcC parameter set lists must hold SPS and PPS NAL units only")
        }
        let parsed = try SequenceParameterSet(nal: first)
        profileIndication = parsed.profileIdc
        profileCompatibility = parsed.constraintFlags.byte
        levelIndication = parsed.levelIdc
        self.lengthSize = lengthSize
        sequenceParameterSets = sps.map { Array($0.bytes) }
        pictureParameterSets = pps.map { Array($0.bytes) }
        if Self.profilesWithExtension.contains(parsed.profileIdc) {
            chromaFormat = UInt8(parsed.chromaFormatIdc)
            bitDepthLuma = UInt8(parsed.bitDepthLuma)
            bitDepthChroma = UInt8(parsed.bitDepthChroma)
        }
    }

    public func serialized() -> [UInt8] {
        var output: [UInt8] = [
            configurationVersion, profileIndication, profileCompatibility, levelIndication,
            0xFC | UInt8(lengthSize - 1), 0xE0 | UInt8(sequenceParameterSets.count),
        ]
        func appendSized(_ unit: [UInt8]) {
            output.append(UInt8(unit.count >> 8))
            output.append(UInt8(unit.count & 0xFF))
            output.append(contentsOf: unit)
        }
        sequenceParameterSets.forEach(appendSized)
        output.append(UInt8(pictureParameterSets.count))
        pictureParameterSets.forEach(appendSized)
        if let chromaFormat, let bitDepthLuma, let bitDepthChroma {
            output.append(0xFC | chromaFormat)
            output.append(0xF8 | (bitDepthLuma - 8))
            output.append(0xF8 | (bitDepthChroma - 8))
            output.append(UInt8(sequenceParameterSetExtensions.count))
            sequenceParameterSetExtensions.forEach(appendSized)
        }
        return output
    }

    /// Parses a record; the high-profile extension is read when present (many muxers omit it).
    public init(parsing bytes: [UInt8]) throws(BitstreamError) {
        var offset = 0
        func byte() throws(BitstreamError) -> UInt8 {
            guard offset < bytes.count else { throw BitstreamError(.invalidData, "avcC record is truncated") }
            defer { offset += 1 }
            return bytes[offset]
        }
        func sizedUnit() throws(BitstreamError) -> [UInt8] {
            let size = Int(try byte()) << 8 | Int(try byte())
            guard size <= bytes.count - offset else {
                throw BitstreamError(.invalidData, "avcC parameter set of \(size) bytes runs past the end")
            }
            defer { offset += size }
            return Array(bytes[offset..<(offset + size)])
        }
        configurationVersion = try byte()
        guard configurationVersion == 1 else {
            throw BitstreamError(.invalidData, "avcC configurationVersion \(configurationVersion) is not 1")
        }
        profileIndication = try byte()
        profileCompatibility = try byte()
        levelIndication = try byte()
        let lengthByte = try byte() & 3
        guard lengthByte != 2 else { throw BitstreamError(.invalidData, "avcC lengthSizeMinusOne 2 is reserved") }
        lengthSize = Int(lengthByte) + 1
        let spsCount = Int(try byte() & 0x1F)
        sequenceParameterSets = []
        for _ in 0..<spsCount { sequenceParameterSets.append(try sizedUnit()) }
        let ppsCount = Int(try byte())
        pictureParameterSets = []
        for _ in 0..<ppsCount { pictureParameterSets.append(try sizedUnit()) }
        chromaFormat = nil
        bitDepthLuma = nil
        bitDepthChroma = nil
        if Self.profilesWithExtension.contains(profileIndication) && bytes.count - offset >= 4 {
            chromaFormat = try byte() & 3
            bitDepthLuma = (try byte() & 7) + 8
            bitDepthChroma = (try byte() & 7) + 8
            let extensionCount = Int(try byte())
            for _ in 0..<extensionCount { sequenceParameterSetExtensions.append(try sizedUnit()) }
        }
    }

    public var spsUnits: [NALUnit] { sequenceParameterSets.filter { !$0.isEmpty }.map { NALUnit(bytes: $0) } }
    public var ppsUnits: [NALUnit] { pictureParameterSets.filter { !$0.isEmpty }.map { NALUnit(bytes: $0) } }
}
