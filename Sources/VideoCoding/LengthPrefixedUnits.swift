/// NAL units each preceded by its size (ISO/IEC 14496-15: the samples of MP4, Matroska and FLV
/// `avc1`/`hvc1` tracks), as the codec-neutral units the readers take.
public enum LengthPrefixedUnits {
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
