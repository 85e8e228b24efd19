/// H.264 P slices of the baseline fixture's PPS 0 with a pseudo-random payload: they parse, so
/// libavcodec decodes them and conceals the damage rather than refusing them.
public enum DamagedSlices {
    public static func make(count: Int = 3, payload: Int = 400) -> [UInt8] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var bytes: [UInt8] = []
        for _ in 0..<count {
            // nal_unit_type 1; first_mb_in_slice 0, slice_type 5 (P), pic_parameter_set_id 0.
            bytes += [0, 0, 0, 1, 0x41, 0x9A]
            for _ in 0..<payload {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                bytes.append(UInt8(truncatingIfNeeded: state >> 56))
            }
        }
        return bytes
    }
}
