import Decoding
import Foundation
import TestSupport
import Testing

@testable import Sessions

/// Garbage that parses as slices of a known PPS makes libavcodec output error-concealed
/// pictures. They must not replace the session's last good picture, and must show as errors.
@Suite(.timeLimit(.minutes(10))) struct DamagedPictureTests {
    @Test func concealedPicturesNeverReplaceTheLastGoodPicture() async throws {
        let session = try makeSession()
        // No flush: the garbage continues the same stream, as a broken camera link would.
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: false)
        // Two damaged slices, so the last thing decoded is a concealed picture (a picture is
        // handed on as soon as the next one starts; with a third slice the session's last error
        // would be libavcodec refusing that one).
        let summary = try await push(DamagedSlices.make(count: 2), to: session, flush: true)

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

    /// `frametap decode` and a session read a stream through the same joiner (`StreamDecoder`),
    /// so they count its damage alike: each concealed picture is an error of both, on top of
    /// what libavcodec refused outright.
    @Test func theCommandLineAndTheServerCountADamagedStreamAlike() async throws {
        let stream = try Fixture.bytes(Fixture.baseline) + DamagedSlices.make(count: 3)
        let session = try makeSession()
        _ = try await upload(stream, to: session, flush: true)
        let server = session.status().counters

        // As `frametap decode --threads 1 --backend software` builds its decoder.
        var options = DecoderOptions.throughput(backend: .software)
        options.threads = 1
        let commandLine = try StreamDecoder(options: options)
        var concealed = 0
        let count: (DecodedFrame) -> Void = { if $0.hasDecodeErrors { concealed += 1 } }
        var errors = stream.withUnsafeBytes { commandLine.push($0, onPicture: count) }
        errors += commandLine.finish(onPicture: count)

        #expect(concealed >= 1, "the damaged slices make concealed pictures")
        #expect(errors.filter { $0.message.contains("concealed") }.count == concealed)
        #expect(commandLine.counters.decodeErrors == errors.count)
        #expect(commandLine.counters.framesDecoded == server.framesDecoded)
        #expect(commandLine.counters.decodeErrors == server.decodeErrors)
        session.close()
    }

    @Test func aLongPollIsNotAnsweredWithAConcealedPicture() async throws {
        let session = try makeSession()
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        let good = try #require(session.latestSequence)
        _ = try await upload(DamagedSlices.make(), to: session, flush: true)
        // Nothing newer and good arrived: the wait ends with 304, not a damaged picture.
        let answer = try await picture(session, after: good, wait: .milliseconds(200)).get()
        #expect(answer.served == nil)
        #expect(session.latestSequence == good)
    }
}
