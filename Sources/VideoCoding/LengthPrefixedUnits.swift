/// NAL units each preceded by its size (ISO/IEC 14496-15: the samples of MP4, Matroska and FLV
/// `avc1`/`hvc1` tracks), as the codec-neutral units the readers take.
public enum LengthPrefixedUnits {
    /// Whether `bytes`, the first of a stream, are NAL units each after a 4-byte length (as
    /// VideoToolbox and MP4 samples hold them) rather than Annex B. Every length and header in
    /// `bytes` must be plausible: 2 bytes to 16 MiB, a header whose forbidden bit is clear, of a
    /// type H.264 defines (1-23) or of H.265's base layer (its second byte 1-7). A stream that
    /// starts `00 00 00 01` is Annex B (that length would be 1). One that starts `00 00 01` reads
    /// as a length of 256 to 511 as well as Annex B's three-byte start code: length-prefixed only
    /// when that whole unit and the length and header of another follow. Any other start needs no
    /// whole unit (a keyframe without its parameter sets is larger than any first piece).
    public static func beginStream(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= 6, !(bytes[0] == 0 && bytes[1] == 0 && bytes[2] == 0 && bytes[3] == 1) else { return false }
        let ambiguous = bytes[0] == 0 && bytes[1] == 0 && bytes[2] == 1
        var offset = 0
        var lengths = 0
        var whole = 0
        while bytes.count - offset >= 6 {
            let size = (0..<4).reduce(0) { $0 << 8 | Int(bytes[offset + $1]) }
            let header = bytes[offset + 4]
            let second = bytes[offset + 5]
            let h264 = (1...23).contains(header & 0x1F)
            let h265 = header & 0x01 == 0 && (1...7).contains(second)
            guard size >= 2, size <= 16 << 20, header & 0x80 == 0, h264 || h265 else { return false }
            lengths += 1
            guard size <= bytes.count - offset - 4 else { break }
            whole += 1
            offset += 4 + size
        }
        return !ambiguous || (whole >= 1 && lengths >= 2)
    }

    /// What a zero-length unit is: padding, which some muxers write (skipped), or invalid data
    /// where every unit must carry bytes (refused).
    public enum EmptyUnits: Sendable {
        case skipped, refused
    }

    /// The units of one sample. `lengthSize` is 1, 2 or 4 (from the configuration record).
    /// A length that runs past the sample, or a length field cut short, throws `.invalidData`.
    public static func units(
        in sample: UnsafeRawBufferPointer, lengthSize: Int, streamOffset: Int = 0, emptyUnits: EmptyUnits = .skipped
    ) throws(BitstreamError) -> [AnnexBUnit] {
        try units(in: sample, lengthSize: lengthSize, streamOffset: streamOffset, emptyUnits: emptyUnits) {
            SlabBytes(copying: $0)
        }
    }

    /// `units(in:lengthSize:streamOffset:emptyUnits:)` whose sample lands through `landing`
    /// (once, and only when it holds a unit): the units are regions of where it landed.
    public static func units(
        in sample: UnsafeRawBufferPointer, lengthSize: Int, streamOffset: Int = 0, emptyUnits: EmptyUnits = .skipped,
        landing: inout SlabWriter
    ) throws(BitstreamError) -> [AnnexBUnit] {
        try units(in: sample, lengthSize: lengthSize, streamOffset: streamOffset, emptyUnits: emptyUnits) {
            landing.landContiguous($0)
        }
    }

    private static func units(
        in sample: UnsafeRawBufferPointer, lengthSize: Int, streamOffset: Int, emptyUnits: EmptyUnits,
        land: (UnsafeRawBufferPointer) -> SlabBytes
    ) throws(BitstreamError) -> [AnnexBUnit] {
        guard [1, 2, 4].contains(lengthSize) else {
            throw BitstreamError(.invalidArgument, "NAL length size must be 1, 2 or 4 bytes, not \(lengthSize)")
        }
        var units: [AnnexBUnit] = []
        var landed: SlabBytes?
        var offset = 0
        while offset < sample.count {
            guard sample.count - offset >= lengthSize else {
                throw BitstreamError(
                    .invalidData, "a NAL length field at byte \(offset) of a \(sample.count)-byte sample is cut short")
            }
            var size = 0
            for index in 0..<lengthSize { size = size << 8 | Int(sample[offset + index]) }
            offset += lengthSize
            if size == 0, emptyUnits == .refused {
                throw BitstreamError(.invalidData, "a zero-length NAL unit at byte \(offset - lengthSize) of a sample")
            }
            guard size <= sample.count - offset else {
                throw BitstreamError(
                    .invalidData,
                    "a NAL unit at byte \(offset) of a sample claims \(size) bytes, but only \(sample.count - offset) follow")
            }
            if size > 0 {
                if landed == nil { landed = land(sample) }
                units.append(AnnexBUnit(bytes: landed!.region(offset..<(offset + size)), streamOffset: streamOffset + offset))
            }
            offset += size
        }
        return units
    }
}
