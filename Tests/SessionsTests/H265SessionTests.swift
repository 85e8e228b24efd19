import Decoding
import Foundation
import TestSupport
import Testing
import VideoCoding

@testable import Sessions

/// An H.265 session: its codec is detected, and a push whose SPS the decoder cannot take fails
/// with that SPS's stable code (the HTTP layer's 422) while the last good picture stays.
@Suite(.timeLimit(.minutes(10))) struct H265SessionTests {
    static let stream = "main_bframes_176x144.265"
    static let frames = 25

    /// Pushes `bytes`, expecting the push to fail with `code`; throws when it succeeds.
    private func expectRefusal(of bytes: [UInt8], with code: DecodeError.Code, by session: Session) async throws {
        let result = try await upload(bytes, to: session, flush: true)
        guard case .failure(let error) = result else {
            throw TestFailure("the push of a refused SPS succeeded: \(result)")
        }
        #expect(error.code == .decoding(code))
    }

    @Test func anH265StreamIsDetectedAndDecoded() async throws {
        let session = try makeSession()
        let summary = try await push(try Fixture.bytes(Self.stream), to: session, flush: true, chunk: 777)
        #expect(summary.frames == Self.frames)
        #expect(summary.format?.codec.rawValue == "h265" && summary.format?.tier == "Main")
        let status = session.status()
        #expect(status.codec?.rawValue == "h265" && !status.codecStated)
        #expect(status.counters.decodeErrors == 0)
        #expect(status.latestFrame?.width == 176 && status.latestFrame?.height == 144)
    }

    /// A stream with no IRAP picture (its keyframes cut out, as when one joins mid-GOP) gives no
    /// picture: libavcodec would decode each against references it invents (grey smears), which
    /// a live session never serves, before or after a good stream. The CLI, which emulates the
    /// ffmpeg CLI, does decode them (`ElementaryStreamReader`). Its flushed push is refused with
    /// `no_decodable_picture`, which says so.
    @Test func aStreamWithoutAKeyframeGivesNoPicture() async throws {
        let good = try Fixture.bytes(Self.stream)
        let keyless = HEVCEdits.stream(HEVCEdits.units(good).filter { !(16...23).contains(HEVCEdits.type($0)) })
        for pushedBefore in [false, true] {
            let session = try makeSession()
            if pushedBefore { #expect(try await push(good, to: session, flush: true).frames == Self.frames) }
            let latest = session.latestSequence
            try await expectRefusal(of: keyless, with: .noDecodablePicture, by: session)
            #expect(session.status().lastError?.message.contains("no keyframe (IRAP)") == true, "after a good stream: \(pushedBefore)")
            #expect(session.status().counters.framesDroppedBeforeKeyframe > 0)
            #expect(session.latestSequence == latest)
        }
    }

    /// A new session fed a stream whose SPS cannot be used: the push fails with its code.
    @Test(arguments: [
        (HEVCEdits.SPSChange(bitDepthLuma: 17), DecodeError.Code.invalidData),
        (HEVCEdits.SPSChange(chromaFormatIdc: 4), .invalidData),
        (HEVCEdits.SPSChange(bitDepthLuma: 16), .unsupportedStream),
        (HEVCEdits.SPSChange(width: 16384, height: 8192), .pictureTooLarge),
    ])
    func aBadOrUnsupportedSPSFailsThePush(_ change: HEVCEdits.SPSChange, _ code: DecodeError.Code) async throws {
        let session = try makeSession()
        let good = try Fixture.bytes(Self.stream)
        try await expectRefusal(of: HEVCEdits.changingSPS(good, change), with: code, by: session)
        #expect(session.latestSequence == nil)
        #expect(session.status().lastError?.code == code.rawValue)
        // The session goes on: a good stream decodes.
        #expect(try await push(good, to: session, flush: true).frames == Self.frames)
    }

    /// A session with a good picture, then an SPS that replaces the stream's with one the
    /// decoder refuses: the push fails and the last good picture stays the latest.
    @Test(arguments: [
        (HEVCEdits.SPSChange(bitDepthLuma: 14), DecodeError.Code.unsupportedStream),
        (HEVCEdits.SPSChange(width: 8192, height: 8192), .pictureTooLarge),
    ])
    func aRefusedSPSKeepsTheLastGoodPicture(_ change: HEVCEdits.SPSChange, _ code: DecodeError.Code) async throws {
        let session = try makeSession()
        let good = try Fixture.bytes(Self.stream)
        _ = try await push(good, to: session, flush: true)
        let latest = try #require(session.latestSequence)
        try await expectRefusal(of: HEVCEdits.changingSPS(good, change), with: code, by: session)
        #expect(session.latestSequence == latest)
        #expect(try await picture(session).get().served?.sequence == latest)
    }

    /// An SPS that cannot be read leaves the one known before in place (a damaged repeat must
    /// not stop a stream): the pictures decode with it, and the push reports the damage.
    @Test func anUnreadableRepeatOfTheSPSLeavesTheKnownOne() async throws {
        let session = try makeSession()
        let good = try Fixture.bytes(Self.stream)
        _ = try await push(good, to: session, flush: true)
        let summary = try await push(HEVCEdits.changingSPS(good, .init(bitDepthLuma: 17)), to: session, flush: true)
        #expect(summary.frames == Self.frames)
        #expect(summary.error?.code == "invalid_data" && summary.decodeErrors == 1)
    }
}
