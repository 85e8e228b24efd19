import Decoding
import HardwareTestSupport
import SessionsTestSupport
import Testing
import VideoCoding
import Timekeeping

@testable import Sessions

/// Hardware decoding as sessions see it, on pretend devices (a real software decoder that
/// reports itself as NVDEC and fails where told): device sharing, per-session fallback with its
/// reason in the status and /metrics, and a required back end without a device. No GPU needed.
@Suite(.timeLimit(.minutes(10))) struct HardwareSessionTests {
    /// Sessions of `backend` on pretend devices of their own.
    private struct PretendServer {
        var configuration: ServerConfiguration
        var services: SessionServices
    }

    private func configuration(
        _ backend: DecoderBackendChoice, platform: any HardwarePlatform, factory: PretendHardwareFactory,
        devices: HardwareDeviceList? = nil
    ) -> PretendServer {
        var configuration = testConfiguration()
        configuration.backend = backend
        configuration.hardwareDevices = devices
        // The CPU's capacity as one core's, whatever machine runs the test: NVDEC has more
        // headroom, so `auto` sessions are placed on the device.
        let engines = EnginePlacer(placement: EnginePlacement(cores: 1), clock: SystemClock())
        let services = SessionServices.forTests(
            configuration, devicePool: HardwareDevicePool(platform: platform, clock: SystemClock(), engines: engines),
            frameDownloads: FrameDownloadCounter(), decoderFactory: factory)
        return PretendServer(configuration: configuration, services: services)
    }

    @Test func newSessionsGoToTheLeastLoadedDeviceOverOneContextEach() throws {
        let platform = PretendPlatform(cuda: [0, 1])
        let configuration = configuration(.auto, platform: platform, factory: PretendHardwareFactory())
        let sessions = try (0..<4).map {
            try makeSession("s\($0)", configuration: configuration.configuration, services: configuration.services)
        }
        let devices = sessions.map { $0.status().device?.description }
        #expect(devices == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"])
        #expect(sessions.allSatisfy { $0.status().backend == .cuda })
        // Four decoders, two device contexts.
        #expect(platform.opens(of: .cuda(0)) == 1 && platform.opens(of: .cuda(1)) == 1)
        #expect(configuration.services.devicePool.sessions(on: .cuda(0)) == 2)
        sessions[0].close()
        sessions[2].close()
        let fifth = try makeSession("s4", configuration: configuration.configuration, services: configuration.services)
        #expect(fifth.status().device == .cuda(0), "the now idle device takes the next one")
    }

    @Test func aStreamTheHardwareCannotTakeGoesToSoftwareWithItsReason() async throws {
        let metrics = FrameTapMetrics()
        let configuration = configuration(.auto, platform: PretendPlatform(cuda: [0]), factory: PretendHardwareFactory())
        let session = try makeSession(configuration: configuration.configuration, services: configuration.services, metrics: metrics)
        #expect(session.status().backend == .cuda)
        let summary = try await push(try Fixture.bytes("high10_320x240.264"), to: session, flush: true)
        #expect(summary.frames > 0, "decoded, in software")
        let status = session.status()
        #expect(status.backend == .software)
        #expect(status.device == nil)
        #expect(status.backendReason.contains("10-bit") || status.backendReason.contains("High 10"), "\(status.backendReason)")
        #expect(status.fallbacks.map(\.reason) == [.unsupportedProfile])
        #expect(metrics.exposition().contains("frametap_decoder_fallbacks_total{reason=\"unsupported_profile\",codec=\"h264\"} 1"))
        // The device is free again for another session.
        #expect(configuration.services.devicePool.sessions(on: .cuda(0)) == 0)
    }

    /// An H.265 stream NVDEC cannot take (4:2:2) goes to software like an H.264 one, and the
    /// fallback is counted under its codec.
    @Test func anHEVCFallbackIsCountedUnderItsCodec() async throws {
        let metrics = FrameTapMetrics()
        let configuration = configuration(.auto, platform: PretendPlatform(cuda: [0]), factory: PretendHardwareFactory())
        let session = try makeSession(configuration: configuration.configuration, services: configuration.services, metrics: metrics)
        let summary = try await push(try Fixture.bytes("yuv422p10_176x144.265"), to: session, flush: true)
        #expect(summary.frames == 10)
        let status = session.status()
        #expect(status.codec == .h265 && status.backend == .software)
        #expect(status.fallbacks.map(\.reason) == [.unsupportedChroma])
        #expect(status.fallbacks.first?.codec == .h265)
        let exposition = metrics.exposition()
        #expect(exposition.contains("frametap_decoder_fallbacks_total{reason=\"unsupported_chroma\",codec=\"h265\"} 1"))
        #expect(exposition.contains("frametap_decoder_fallbacks_total{reason=\"unsupported_chroma\",codec=\"h264\"} 0"))
    }

    @Test func repeatedDeviceErrorsMoveTheSessionToSoftwareKeepingItsPictures() async throws {
        // Every access unit from the 6th on fails on the "hardware".
        let factory = PretendHardwareFactory(failing: { $0 >= 6 })
        let metrics = FrameTapMetrics()
        let configuration = configuration(.auto, platform: PretendPlatform(cuda: [0]), factory: factory)
        let session = try makeSession(configuration: configuration.configuration, services: configuration.services, metrics: metrics)
        // Three IDRs, one every 8 pictures: the switch happens at the next one.
        let stream = try Fixture.bytes(Fixture.repeatHeaders)
        let summary = try await push(stream, to: session, flush: true)
        let status = session.status()
        #expect(status.backend == .software)
        #expect(status.fallbacks.map(\.reason) == [.deviceErrors])
        #expect(status.counters.decodeErrors >= 3)
        // The pictures decoded on the device before the failures are kept, and decoding goes on
        // in software from the next IDR.
        #expect(summary.frames >= 8 + 4, "\(summary.frames) pictures")
        // Pictures are numbered by their place in the stream (PictureNumbering): the ones that
        // failed leave a gap, and the last is still the stream's 20th.
        #expect(session.latestSequence == 20)
        #expect(metrics.exposition().contains("frametap_decoder_fallbacks_total{reason=\"device_errors\",codec=\"h264\"} 1"))
    }

    @Test func aRequiredBackendWithoutADeviceIsACleanError() throws {
        let configuration = configuration(.cuda, platform: NoHardware(), factory: PretendHardwareFactory())
        #expect {
            _ = try makeSession(configuration: configuration.configuration, services: configuration.services)
        } throws: { error in
            (error as? SessionError)?.code == .decoding(.decoderUnavailable)
        }
        // And auto says what it tried.
        var automatic = configuration
        automatic.configuration.backend = .auto
        let session = try makeSession(configuration: automatic.configuration, services: automatic.services)
        #expect(session.status().backend == .software)
        #expect(session.status().backendReason.contains("CUDA"))
    }

    @Test func aRequiredBackendRefusesAStreamItCannotDecode() async throws {
        let configuration = configuration(.cuda, platform: PretendPlatform(cuda: [0]), factory: PretendHardwareFactory())
        let session = try makeSession(configuration: configuration.configuration, services: configuration.services)
        let result = try await upload(try Fixture.bytes("high10_320x240.264"), to: session, flush: true)
        guard case .failure(let error) = result else {
            Issue.record("a required back end does not fall back silently")
            return
        }
        #expect(error.code == .decoding(.decoderUnavailable))
        #expect(session.status().backend == .cuda)
    }

    /// A back end chosen mid-stream takes over at the stream's end, and the status says so at
    /// once, whichever kind of push ended the stream: a multipart answer ends it through the
    /// same end-of-stream path as a JSON one.
    @Test(arguments: [false, true])
    func aPendingBackendShowsAsSoonAsAFlushEndsTheStream(multipart: Bool) async throws {
        let configuration = configuration(.auto, platform: PretendPlatform(cuda: [0]), factory: PretendHardwareFactory())
        let session = try makeSession(configuration: configuration.configuration, services: configuration.services)
        let stream = try Fixture.bytes(Fixture.baseline)
        _ = try await push(stream, to: session, flush: false)
        try session.configure(SessionOptions(backend: .software))
        #expect(session.status().backend == .cuda, "mid-stream: the new back end waits for the stream's end")
        if multipart {
            let spooled = try session.beginSpooledUpload(PictureRequest(), flush: true)
            try await send(stream, to: spooled.queue)
            spooled.queue.finish()
            try await readToEnd(spooled)
            spooled.cancel()
        } else {
            _ = try await push(stream, to: session, flush: true)
        }
        #expect(session.status().backend == .software)
    }
}
