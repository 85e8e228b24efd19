import Decoding
import Foundation
import TestSupport
import Testing

/// Slices that parse (a known PPS) but carry garbage: libavcodec conceals the damage and still
/// outputs the picture, and `hasDecodeErrors` is how the rest of FrameTap can tell.
@Suite(.timeLimit(.minutes(10))) struct DamagedPictureTests {
    static let baseline = Fixtures.url("baseline_176x144.264")

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
