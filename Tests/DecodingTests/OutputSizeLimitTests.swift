import Decoding
import H264
import Testing
import TestSupport
import VideoCoding

/// The size limit holds for what libavcodec outputs, not only for the SPS FrameTap read: a
/// parameter set FrameTap could not read (it keeps the last one it could) may give libavcodec
/// another size.
@Suite(.timeLimit(.minutes(10))) struct OutputSizeLimitTests {
    @Test func aPicturePastTheLimitIsNeverHandedOnWhateverTheSequenceSaid() throws {
        var reader = H264.ElementaryStreamReader()
        var units: [CodedAccessUnit] = []
        for unit in AnnexBSplitter.split(try Fixtures.bytes("baseline_176x144.264")) {
            reader.push(unit) { if case .accessUnit(let coded) = $0 { units.append(coded) } }
        }
        reader.finish { if case .accessUnit(let coded) = $0 { units.append(coded) } }
        try #require(units.count > 1)
        var options = DecoderOptions.lowLatency(backend: .software)
        options.sizeLimit = PictureSizeLimit(maxWidth: 160, maxHeight: 160, maxPixels: 160 * 160)
        let decoder = try AccessUnitDecoder(options: options)
        var handedOn = 0
        var errors: [DecodeError] = []
        for (index, var unit) in units.enumerated() {
            // What FrameTap read of the sequence: inside the limit. libavcodec decodes 176x144.
            unit.sequence.format.codedWidth = 128
            unit.sequence.format.codedHeight = 96
            errors += decoder.decode(IndexedAccessUnit(index: Int64(index), unit: unit)) { _, _ in handedOn += 1 }
        }
        errors += decoder.drain { _, _ in handedOn += 1 }
        #expect(handedOn == 0)
        #expect(errors.map(\.code) == [.pictureTooLarge], "once for the size: \(errors)")
    }
}
