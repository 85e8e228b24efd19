import Testing
@testable import H264
import VideoCoding

@Suite(.timeLimit(.minutes(10))) struct AVCCTests {
    let units = [NALUnit(bytes: [0x67, 1, 2, 3]), NALUnit(bytes: [0x68, 4]), NALUnit(bytes: [0x65] + Array(repeating: 7, count: 300))]

    @Test func lengthPrefixedRoundTrip() throws {
        let prefixed = AVCC.lengthPrefixed(units)
        #expect(Array(prefixed.prefix(10)) == [0, 0, 0, 4, 0x67, 1, 2, 3, 0, 0])
        #expect(Array(prefixed[14..<18]) == [0, 0, 1, 45])
        #expect(try AVCC.nalUnits(fromLengthPrefixed: prefixed).map(\.bytes) == units.map(\.bytes))
        #expect(try AVCC.annexB(fromLengthPrefixed: prefixed).map(\.bytes) == units.map(\.bytes))
        #expect(AnnexBSplitter.split(try AVCC.annexBBytes(fromLengthPrefixed: prefixed)).map(\.bytes) == units.map(\.bytes))
    }

    @Test(arguments: [1, 2])
    func shortLengthFields(lengthSize: Int) throws {
        var bytes: [UInt8] = []
        for unit in units.prefix(2) {
            if lengthSize == 2 { bytes.append(0) }
            bytes.append(UInt8(unit.bytes.count))
            bytes.append(contentsOf: unit.bytes)
        }
        #expect(try AVCC.nalUnits(fromLengthPrefixed: bytes, lengthSize: lengthSize).map(\.bytes) == units.prefix(2).map(\.bytes))
    }

    @Test func truncatedInputThrows() throws {
        let prefixed = AVCC.lengthPrefixed(units)
        for cut in [1, 3, 5, 9, prefixed.count - 1] {
            #expect(throws: BitstreamError.self, "cut \(cut)") {
                try AVCC.nalUnits(fromLengthPrefixed: Array(prefixed.prefix(cut)))
            }
        }
        #expect(throws: BitstreamError.self) { try AVCC.nalUnits(fromLengthPrefixed: [0, 0, 0, 0]) }
        #expect(throws: BitstreamError(.invalidArgument, "NAL length size must be 1, 2 or 4 bytes, not 3")) {
            try AVCC.nalUnits(fromLengthPrefixed: prefixed, lengthSize: 3)
        }
        #expect(try AVCC.nalUnits(fromLengthPrefixed: []).isEmpty)
    }

    @Test func mainProfileRecordHasNoExtension() throws {
        let sps = SPSBuilder(profileIdc: 77, constraintFlags: 0x40, levelIdc: 31)
        let record = try AVCDecoderConfigurationRecord(sps: [sps.nal], pps: [PPSBuilder().nal])
        let bytes = record.serialized()
        #expect(Array(bytes.prefix(6)) == [1, 77, 0x40, 31, 0xFF, 0xE1])
        let spsBytes = sps.nal.bytes
        #expect(Array(bytes[6..<8]) == [0, UInt8(spsBytes.count)])
        #expect(Array(bytes[8..<(8 + spsBytes.count)]) == spsBytes)
        #expect(bytes[8 + spsBytes.count] == 1)
        #expect(bytes.count == 8 + spsBytes.count + 3 + PPSBuilder().nal.bytes.count)
        let parsed = try AVCDecoderConfigurationRecord(parsing: bytes)
        #expect(parsed == record)
        #expect(parsed.chromaFormat == nil && parsed.lengthSize == 4)
        #expect(parsed.spsUnits == [sps.nal] && parsed.ppsUnits.map(\.bytes) == [PPSBuilder().nal.bytes])
    }

    @Test func highProfileRecordCarriesChromaAndBitDepth() throws {
        let sps = SPSBuilder(profileIdc: 122, chromaFormatIdc: 2, bitDepthLuma: 10, bitDepthChroma: 10)
        let record = try AVCDecoderConfigurationRecord(sps: [sps.nal], pps: [PPSBuilder().nal, PPSBuilder(id: 1).nal], lengthSize: 2)
        let bytes = record.serialized()
        #expect(bytes[4] == 0xFD)
        #expect(Array(bytes.suffix(4)) == [UInt8(0xFE), 0xFA, 0xFA, 0])
        let parsed = try AVCDecoderConfigurationRecord(parsing: bytes)
        #expect(parsed == record)
        #expect(parsed.chromaFormat == 2 && parsed.bitDepthLuma == 10 && parsed.bitDepthChroma == 10)
        #expect(parsed.pictureParameterSets.count == 2 && parsed.lengthSize == 2)
        // Muxers often leave the extension out; that must still parse.
        let withoutExtension = try AVCDecoderConfigurationRecord(parsing: Array(bytes.dropLast(4)))
        #expect(withoutExtension.chromaFormat == nil && withoutExtension.sequenceParameterSets == record.sequenceParameterSets)
    }

    @Test func malformedRecordsThrow() throws {
        let bytes = try AVCDecoderConfigurationRecord(sps: [SPSBuilder().nal], pps: [PPSBuilder().nal]).serialized()
        // The last four bytes are the optional high-profile extension; cut inside the PPS instead.
        for cut in [0, 3, 6, 9, bytes.count - 5] {
            #expect(throws: BitstreamError.self, "cut \(cut)") { try AVCDecoderConfigurationRecord(parsing: Array(bytes.prefix(cut))) }
        }
        var wrongVersion = bytes
        wrongVersion[0] = 2
        #expect(throws: BitstreamError.self) { try AVCDecoderConfigurationRecord(parsing: wrongVersion) }
        #expect(throws: BitstreamError.self) { try AVCDecoderConfigurationRecord(sps: [], pps: [PPSBuilder().nal]) }
        #expect(throws: BitstreamError.self) { try AVCDecoderConfigurationRecord(sps: [SPSBuilder().nal], pps: []) }
        #expect(throws: BitstreamError.self) {
            try AVCDecoderConfigurationRecord(sps: [PPSBuilder().nal], pps: [PPSBuilder().nal])
        }
    }
}
