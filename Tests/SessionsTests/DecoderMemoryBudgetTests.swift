import Decoding
import SessionsTestSupport
import Testing
import TestSupport

@testable import Sessions

/// Sessions share one decoder memory budget: a stream that does not fit is refused before
/// anything is decoded, and the sessions already admitted are untouched.
@Suite(.timeLimit(.minutes(10))) struct DecoderMemoryBudgetTests {
    @Test func aStreamOverTheBudgetIsRefusedAndOthersKeepDecoding() async throws {
        var configuration = testConfiguration()
        let stream = try Fixture.bytes(Fixture.baseline)
        // Room for one 176x144 decoder (6 pictures of 38016 bytes), not two.
        configuration.decoderMemoryLimit = 6 * 38016 + 1000
        let services = SessionServices.forTests(configuration)
        let first = try makeSession("first", configuration: configuration, services: services)
        let second = try makeSession("second", configuration: configuration, services: services)

        let admitted = try await push(stream, to: first, flush: true)
        #expect(admitted.frames == Fixture.baselineFrames)
        #expect(services.decoderMemory.usage.decoders == 1)

        let refused = try await upload(stream, to: second, flush: true)
        guard case .failure(let error) = refused else {
            Issue.record("the second stream does not fit the budget")
            return
        }
        #expect(error.code == .decoding(.decoderMemoryExceeded))
        #expect(error.message.hasPrefix("decoding this stream needs about 0.2 MiB (6 pictures of"))
        #expect(second.status().counters.framesDecoded == 0)
        #expect(second.status().counters.framesRejectedTooLarge == Fixture.baselineFrames)

        // The admitted session goes on decoding; closing it frees its share for the other.
        #expect(try await push(stream, to: first, flush: true).frames == Fixture.baselineFrames)
        first.close()
        #expect(await eventually { services.decoderMemory.usage.decoders == 0 })
        // Its SPS was refused once: a stream that sends it again (here, the same file) is
        // judged again and now fits.
        #expect(try await push(stream, to: second, flush: true).frames == Fixture.baselineFrames)
    }

    /// An on-demand session woken by a request for a stream the budget has no room for: the
    /// request gets `decoder_memory_exceeded` (not `no_frame_yet`), the decoder goes, and the
    /// catch-up counts as refused.
    @Test func anOnDemandWakeTheBudgetRefusesSaysSo() async throws {
        var configuration = OnDemand.configuration()
        // Room for three 176x144 pictures: no decoder of the stream fits.
        configuration.decoderMemoryLimit = 3 * 38016
        let metrics = FrameTapMetrics()
        let registry = makeRegistry(configuration, metrics: metrics)
        let stream = try Fixture.bytes(Fixture.baseline)
        let sleeper = try registry.openSession(SessionID("sleeper")).session
        _ = try await push(stream, to: sleeper, flush: true)
        guard case .failure(let error) = try await picture(sleeper) else {
            Issue.record("the woken session has no room for its decoder")
            return
        }
        #expect(error.code == .decoding(.decoderMemoryExceeded), "\(error)")
        #expect(await eventually { sleeper.status().decoder == .idle })
        registry.refreshMetrics()
        #expect(metrics.exposition().contains(#"frametap_catchup_decodes_total{kind="wake",result="refused"} 1"#))
        registry.shutdown()
    }

    /// The same with an MJPEG viewer watching: the request fails alike, but the decoder stays,
    /// going live from the next keyframe, where the budget is asked again for the viewer.
    @Test func aRefusedWakeWithAViewerStaysLiveForIt() async throws {
        var configuration = OnDemand.configuration()
        configuration.decoderMemoryLimit = 3 * 38016
        let registry = makeRegistry(configuration, metrics: FrameTapMetrics())
        let stream = try Fixture.bytes(Fixture.baseline)
        let sleeper = try registry.openSession(SessionID("watched")).session
        _ = try await push(stream, to: sleeper, flush: true)
        let viewer = try sleeper.subscribe(PictureRequest())
        guard case .failure(let error) = try await picture(sleeper) else {
            Issue.record("the woken session has no room for its decoder")
            return
        }
        #expect(error.code == .decoding(.decoderMemoryExceeded), "\(error)")
        #expect(await eventually { sleeper.status().decoder == .live }, "the viewer keeps it live")
        viewer.cancel()
        registry.shutdown()
    }

    /// `/metrics` shows the budget, what is held of it and the refusals.
    @Test func theBudgetIsInTheMetrics() async throws {
        var configuration = testConfiguration()
        configuration.decoderMemoryLimit = 6 * 38016 + 1000
        let metrics = FrameTapMetrics()
        let registry = makeRegistry(configuration, metrics: metrics)
        let stream = try Fixture.bytes(Fixture.baseline)
        _ = try await push(stream, to: try registry.openSession(SessionID("a")).session, flush: true)
        _ = try await upload(stream, to: try registry.openSession(SessionID("b")).session, flush: true)
        registry.refreshMetrics()
        let text = metrics.exposition()
        #expect(text.contains("frametap_decoder_memory_limit_bytes \(6 * 38016 + 1000)"))
        #expect(text.contains("frametap_decoder_memory_used_bytes \(6 * 38016)"))
        #expect(text.contains("frametap_decoder_memory_refusals_total 1"))
        registry.shutdown()
    }
}
