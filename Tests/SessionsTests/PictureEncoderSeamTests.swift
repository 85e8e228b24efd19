import HardwareTestSupport
import Imaging
import SessionsTestSupport
import Testing

@testable import Sessions

/// The encoder seam as sessions use it: each session gets its own encoder from the
/// configuration's factory, at its first encode, and says which encoder serves it.
@Suite(.timeLimit(.minutes(10))) struct PictureEncoderSeamTests {
    @Test func eachSessionEncodesWithItsOwnEncoderFromTheConfiguredFactory() async throws {
        let factory = PretendGPUEncoderFactory()
        let services = SessionServices.forTests(testConfiguration(), encoderFactory: factory)
        let session = try makeSession("enc1", services: services)
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        #expect(factory.encodersMade == 0, "no encoder before the first encode")
        #expect(session.pictureEncoder == nil)

        let full = try #require(try await picture(session).get().served)
        let thumb = try #require(try await picture(session, PictureRequest(width: 88, quality: 60)).get().served)
        _ = try await picture(session, PictureRequest(width: 88, quality: 60)).get()  // cached: no call
        #expect(Array(full.picture.bytes.prefix(2)) == [0xFF, 0xD8], "the pretend's inner encoder really encodes")
        #expect(thumb.picture.width == 88)
        // The cache resolves the request against the picture (176x144) before it asks.
        // Baseline (no reordering, every GOP closed): picture n is access unit n - 1.
        let newest = Int64(full.sequence) - 1
        #expect(
            factory.calls == [
                .init(
                    encoder: 1, accessUnit: newest, options: PictureOptions(width: 176, height: 144, quality: PictureOptions.defaultQuality),
                    onDevice: false),
                .init(encoder: 1, accessUnit: newest, options: PictureOptions(width: 88, height: 72, quality: 60), onDevice: false),
            ])
        #expect(session.pictureEncoder == PictureEncoderIdentity(name: "pretend-nvjpeg", reason: "a test's pretend GPU encoder"))

        let other = try makeSession("enc2", services: services)
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: other, flush: true)
        _ = try await picture(other, PictureRequest(format: .yuv)).get()
        #expect(factory.encodersMade == 2, "one encoder per session")
        #expect(factory.calls.last?.encoder == 2)
        #expect(session.encodeCount == 2 && other.encodeCount == 1)
    }

    /// Software-decoded pictures: whichever encoder the machine has, TurboJPEG reads them, and
    /// the session reports the encoder the factory chose, before its first encode and after.
    @Test func theStandardEncoderReportsItsChoice() async throws {
        let session = try makeSession()
        let chosen = PictureEncoders.standard().identity
        #expect(session.status().encoder == chosen)
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        _ = try await picture(session).get()
        #expect(session.pictureEncoder == chosen)
        #expect(session.status().encoder == chosen)
    }
}
