import Decoding
import Foundation
import Testing

/// Slices that parse (a known PPS) but carry garbage: libavcodec conceals the damage and still
/// outputs the picture, and `hasDecodeErrors` is how the rest of FrameTap can tell.
@Suite struct DamagedPictureTests {
    static let baseline = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Fixtures/baseline_176x144.264")

    @Test func concealedPicturesAreFlaggedAndCleanOnesAreNot() throws {
        let stream = try TestSupport.bytes(of: Self.baseline)
        let clean = try TestSupport.decodeAll(stream, options: DecoderOptions(backend: .software))
        #expect(clean.frames.count == 20)
        #expect(clean.frames.allSatisfy { !$0.hasDecodeErrors })

        let damaged = try TestSupport.decodeAll(
            stream + DamagedSlices.make(), options: DecoderOptions(backend: .software))
        // Every clean picture is still output unflagged, and after them libavcodec outputs at
        // least one concealed picture rather than dropping it (what the ffmpeg CLI writes too).
        #expect(damaged.frames.prefix(20).allSatisfy { !$0.hasDecodeErrors })
        #expect(damaged.frames.count > 20)
        #expect(damaged.frames.dropFirst(20).contains { $0.hasDecodeErrors })
    }
}

/// P slices of the baseline fixture's PPS 0 with a pseudo-random payload.
enum DamagedSlices {
    static func make(count: Int = 3, payload: Int = 400) -> [UInt8] {
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
