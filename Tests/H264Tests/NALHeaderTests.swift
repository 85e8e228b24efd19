import Testing
@testable import H264

@Suite(.timeLimit(.minutes(10))) struct NALHeaderTests {
    @Test func allThirtyTwoTypesHaveStableNames() {
        #expect(NALUnitType.allCases.count == 32)
        let names = NALUnitType.allCases.map(\.name)
        #expect(names == [
            "unspecified0", "slice", "slice_data_a", "slice_data_b", "slice_data_c", "idr", "sei", "sps", "pps", "aud",
            "end_of_sequence", "end_of_stream", "filler", "sps_extension", "prefix", "subset_sps", "dps",
            "reserved17", "reserved18", "auxiliary_slice", "slice_extension", "slice_extension_depth", "reserved22",
            "reserved23", "stap_a", "stap_b", "mtap16", "mtap24", "fu_a", "fu_b", "unspecified30", "unspecified31",
        ])
        for (index, type) in NALUnitType.allCases.enumerated() { #expect(Int(type.rawValue) == index) }
    }

    @Test func vclTypes() {
        #expect(NALUnitType.allCases.filter(\.isVCL) == [.slice, .sliceDataA, .sliceDataB, .sliceDataC, .idr])
    }

    @Test func headerFields() {
        let idr = NALHeader(byte: 0x65)
        #expect(idr.forbiddenZeroBit == false)
        #expect(idr.refIdc == 3)
        #expect(idr.type == .idr)
        let broken = NALHeader(byte: 0x80 | 0x20 | 14)
        #expect(broken.forbiddenZeroBit)
        #expect(broken.refIdc == 1)
        #expect(broken.type == .prefix)
        for byte in UInt8.min...UInt8.max { #expect(NALHeader(byte: byte).byte == byte) }
        let unit = NALUnit(bytes: [0x06, 5, 1, 0x80], streamOffset: 12)
        #expect(unit.type == .sei)
        #expect(unit.refIdc == 0)
        #expect(Array(unit.payload) == [5, 1, 0x80])
    }
}
