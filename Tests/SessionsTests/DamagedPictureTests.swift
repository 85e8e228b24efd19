import Foundation
import Testing

@testable import Sessions

/// Garbage that parses as slices of a known PPS makes libavcodec output error-concealed
/// pictures. They must not replace the session's last good picture, and must show as errors.
@Suite struct DamagedPictureTests {
    @Test func concealedPicturesNeverReplaceTheLastGoodPicture() async throws {
        let session = try makeSession()
        // No flush: the garbage continues the same stream, as a broken camera link would.
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: false)
        // Two damaged slices, so the last thing decoded is a concealed picture (a picture is
        // handed on as soon as the next one starts; with a third slice the session's last error
        // would be libavcodec refusing that one).
        let summary = try await push(damagedSlices(count: 2), to: session, flush: true)

        // The flush released the last clean picture (20), then at least one concealed one.
        #expect(summary.frames >= 2)
        #expect(session.status().counters.framesDecoded > Fixture.baselineFrames)
        #expect(session.latestSequence == UInt64(Fixture.baselineFrames))
        #expect(summary.latestSeq == UInt64(Fixture.baselineFrames))
        let served = try await picture(session).get().served
        #expect(served?.sequence == UInt64(Fixture.baselineFrames))

        let status = session.status()
        #expect(status.latestFrame?.seq == UInt64(Fixture.baselineFrames))
        #expect(status.counters.decodeErrors >= 1)
        #expect(status.lastError?.code == "invalid_data")
        #expect(status.lastError?.message.contains("concealed") == true)
    }

    @Test func aLongPollIsNotAnsweredWithAConcealedPicture() async throws {
        let session = try makeSession()
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        let good = try #require(session.latestSequence)
        _ = try await upload(damagedSlices(), to: session, flush: true)
        // Nothing newer and good arrived: the wait ends with 304, not a damaged picture.
        let answer = try await picture(session, after: good, wait: .milliseconds(200)).get()
        #expect(answer.served == nil)
        #expect(session.latestSequence == good)
    }

    /// P slices of the fixture's PPS 0 with a pseudo-random payload (as DecodingTests'
    /// `DamagedSlices`); with three, the last thing decoded is a concealed picture.
    private func damagedSlices(count: Int = 3, payload: Int = 400) -> [UInt8] {
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
