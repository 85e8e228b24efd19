import Decoding
import Foundation
import H264
import Testing
import TestSupport
import VideoCoding

/// The decoder memory budget: an estimate from the SPS, admitted before any picture is decoded.
@Suite(.timeLimit(.minutes(10))) struct DecoderMemoryTests {
    static let live = DecoderOptions.lowLatency(backend: .software)

    static func sps(_ file: String) throws -> SequenceFacts {
        let units = AnnexBSplitter.split(try Fixtures.bytes(file)).map(NALUnit.init)
        return SequenceFacts(sps: try SequenceParameterSet(nal: try #require(units.first { $0.type == .sps })))
    }

    @Test func theEstimateCountsEveryPictureAlive() throws {
        // Baseline, 176x144 4:2:0 8-bit, 3 reference frames, VUI says no reordering.
        let baseline = DecoderMemoryEstimate(sequence: try Self.sps("baseline_176x144.264"), options: Self.live, onHardware: false)
        #expect(baseline.pictureBytes == 176 * 144 * 3 / 2)
        #expect(baseline.pictures == 3 + 1 + 2, "references, the picture decoding, and FrameTap's two")

        // 10-bit 4:2:2 takes two bytes a sample and full-height chroma.
        let deep = DecoderMemoryEstimate(sequence: try Self.sps("yuv422p10_176x144.264"), options: Self.live, onHardware: false)
        #expect(deep.pictureBytes == 176 * 144 * 2 * 2)

        // Frame threads and hardware surfaces are pictures alive too.
        var threaded = Self.live
        threaded.threads = 4
        threaded.threadType = .frame
        #expect(DecoderMemoryEstimate(sequence: try Self.sps("baseline_176x144.264"), options: threaded, onHardware: false).pictures == baseline.pictures + 3)
        #expect(
            DecoderMemoryEstimate(sequence: try Self.sps("baseline_176x144.264"), options: Self.live, onHardware: true).pictures
                == baseline.pictures + Self.live.deviceFramesHeld + 1)
    }

    @Test func theBudgetAdmitsWhatFitsAndGivesItBack() throws {
        let estimate = DecoderMemoryEstimate(pictureBytes: 1 << 20, pictures: 6)
        let budget = DecoderMemoryBudget(limit: 10 << 20)
        var first: DecoderMemoryReservation? = try budget.reserve(estimate)
        #expect(budget.usage.bytes == 6 << 20 && budget.usage.decoders == 1 && budget.usage.refusals == 0)
        #expect(throws: DecodeError.self) { _ = try budget.reserve(estimate) }
        do {
            _ = try budget.reserve(estimate)
        } catch {
            #expect(error.code == .decoderMemoryExceeded)
            #expect(error.message == "decoding this stream needs about 6 MiB (6 pictures of 1 MiB); the decoder memory budget is 10 MiB, of which 6 MiB are held by 1 decoder(s)")
        }
        // A stream growing its share gives the old one back, only once the new one fits.
        let larger = DecoderMemoryEstimate(pictureBytes: 1 << 20, pictures: 9)
        first = try budget.reserve(larger, replacing: first)
        #expect(budget.usage.bytes == 9 << 20 && budget.usage.decoders == 1)
        #expect(throws: DecodeError.self) { _ = try budget.reserve(DecoderMemoryEstimate(pictureBytes: 1 << 20, pictures: 11), replacing: first) }
        #expect(budget.usage.bytes == 9 << 20, "a refused growth keeps the earlier share")
        first = nil
        #expect(budget.usage.bytes == 0 && budget.usage.decoders == 0)
        #expect(budget.usage.refusals == 3)
    }

    /// A stream over budget decodes nothing (the decoder never sees a picture of it), says
    /// why once, and its pictures are counted as rejected; the next stream that fits decodes.
    @Test func aStreamOverBudgetIsRefusedBeforeDecoding() throws {
        let bytes = try Fixtures.bytes("high_320x240.264")
        let estimate = DecoderMemoryEstimate(sequence: try Self.sps("high_320x240.264"), options: Self.live, onHardware: false)
        let budget = DecoderMemoryBudget(limit: estimate.bytes - 1)
        var options = Self.live
        options.memoryBudget = budget
        let decoder = try StreamDecoder(options: options)
        var output = decoder.push(bytes)
        output.frames += decoder.finish().frames
        #expect(output.frames.isEmpty)
        #expect(output.errors.map(\.code) == [.decoderMemoryExceeded])
        #expect(decoder.counters.framesRejectedTooLarge == Fixtures.frameCount("high_320x240.264"))
        #expect(budget.usage.bytes == 0)

        let roomy = DecoderMemoryBudget(limit: estimate.bytes)
        options.memoryBudget = roomy
        var admitted: StreamDecoder? = try StreamDecoder(options: options)
        let decoded = admitted!.push(bytes).frames + admitted!.finish().frames
        #expect(decoded.count == Fixtures.frameCount("high_320x240.264"))
        #expect(roomy.usage.bytes == estimate.bytes, "held while the decoder lives")
        admitted = nil
        #expect(roomy.usage.bytes == 0)
    }
}
