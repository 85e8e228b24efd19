import H265
import Testing
import VideoCoding

@Suite(.timeLimit(.minutes(10))) struct NALHeaderTests {
    /// Table 7-1 in order: the published counter keys.
    static let names = [
        "trail_n", "trail_r", "tsa_n", "tsa_r", "stsa_n", "stsa_r", "radl_n", "radl_r", "rasl_n", "rasl_r",
        "rsv_vcl_n10", "rsv_vcl_r11", "rsv_vcl_n12", "rsv_vcl_r13", "rsv_vcl_n14", "rsv_vcl_r15",
        "bla_w_lp", "bla_w_radl", "bla_n_lp", "idr_w_radl", "idr_n_lp", "cra", "rsv_irap_vcl22", "rsv_irap_vcl23",
        "rsv_vcl24", "rsv_vcl25", "rsv_vcl26", "rsv_vcl27", "rsv_vcl28", "rsv_vcl29", "rsv_vcl30", "rsv_vcl31",
        "vps", "sps", "pps", "aud", "eos", "eob", "fd", "prefix_sei", "suffix_sei",
        "rsv_nvcl41", "rsv_nvcl42", "rsv_nvcl43", "rsv_nvcl44", "rsv_nvcl45", "rsv_nvcl46", "rsv_nvcl47",
        "unspec48", "unspec49", "unspec50", "unspec51", "unspec52", "unspec53", "unspec54", "unspec55",
        "unspec56", "unspec57", "unspec58", "unspec59", "unspec60", "unspec61", "unspec62", "unspec63",
    ]

    @Test func everyTypeHasItsTableName() {
        #expect(NALUnitType.allCases.count == 64)
        #expect(NALUnitType.allCases.map(\.rawValue) == Array(0...63))
        #expect(NALUnitType.allCases.map(\.name) == Self.names)
        #expect(Set(Self.names).count == 64)
        #expect(Self.names.allSatisfy { $0.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "_" } })
    }

    @Test(arguments: NALUnitType.allCases)
    func headerRoundTrips(_ type: NALUnitType) {
        for (layer, temporal) in [(UInt8(0), UInt8(1)), (1, 1), (0, 7), (63, 3), (32, 2)] {
            let header = NALHeader(type: type, layerId: layer, temporalIdPlus1: temporal)
            let bytes = header.bytes
            #expect(bytes[0] >> 1 & 0x3F == type.rawValue && bytes[0] & 0x80 == 0)
            let parsed = NALHeader(bytes[0], bytes[1])
            #expect(parsed == header)
            #expect(parsed.type == type && parsed.layerId == layer && parsed.temporalId == Int(temporal) - 1)
            #expect(NALUnitType(headerByte: bytes[0]) == type)
        }
    }

    @Test func headerBitsInPlace() {
        // forbidden 0, type 33 (SPS), layer 0, temporal id plus 1 = 1: the 42 01 every SPS starts with.
        #expect(NALHeader(0x42, 0x01) == NALHeader(type: .sps))
        #expect(NALHeader(type: .sps).bytes == [0x42, 0x01])
        // Layer id 33 spans both bytes: its top bit is the last of the first byte.
        let split = NALHeader(0x43, 0x0A)
        #expect(split.type == .sps && split.layerId == 33 && split.temporalIdPlus1 == 2)
        let forbidden = NALHeader(0xC2, 0x00)
        #expect(forbidden.forbiddenZeroBit && forbidden.temporalId == -1 && !forbidden.isWellFormed)
        #expect(NALHeader(type: .cra).isWellFormed)
    }

    @Test(arguments: NALUnitType.allCases)
    func predicates(_ type: NALUnitType) {
        let value = Int(type.rawValue)
        #expect(type.isVCL == (value < 32))
        #expect(type.isSliceSegment == ((0...9).contains(value) || (16...21).contains(value)))
        #expect(type.isIRAP == (16...23).contains(value))
        #expect(type.isIDR == (value == 19 || value == 20))
        #expect(type.isBLA == (16...18).contains(value))
        #expect(type.isCRA == (value == 21))
        #expect(type.isRASL == (value == 8 || value == 9))
        #expect(type.isRADL == (value == 6 || value == 7))
        #expect(type.isSubLayerNonReference == [0, 2, 4, 6, 8, 10, 12, 14].contains(value))
    }

    @Test func unitsFromTheSplitter() {
        let found = AnnexBUnit(bytes: [0x40, 0x01, 0x0C, 0x01], streamOffset: 12)
        let unit = NALUnit(found)
        #expect(unit?.type == .vps && unit?.streamOffset == 12 && unit?.bytes == found.bytes)
        #expect(unit?.payload.elementsEqual([0x0C, 0x01]) == true)
        // A lone byte has no H.265 header.
        #expect(NALUnit(AnnexBUnit(bytes: [0x40], streamOffset: 0)) == nil)
        #expect(NALUnit(bytes: [0x26, 0x01, 0x00, 0x00, 0x03, 0x01])?.rbsp() == [0x00, 0x00, 0x01])
    }
}
