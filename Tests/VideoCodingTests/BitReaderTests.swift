import TestSupport
import Testing
import VideoCoding

@Suite(.timeLimit(.minutes(10))) struct BitReaderTests {
    @Test func fixedLengthReads() throws {
        var reader = BitReader([0b1010_1100, 0xFF, 0x01, 0x80, 0x12, 0x34, 0x56, 0x78])
        #expect(try reader.readBit() == true)
        #expect(try reader.readBits(3) == 0b010)
        #expect(try reader.readBits(8) == 0b1100_1111)
        #expect(try reader.readBits(0) == 0)
        #expect(try reader.readBits(12) == 0b1111_0000_0001)
        #expect(try reader.readBits(8) == 0x80)
        #expect(try reader.readBits(32) == 0x1234_5678)
        #expect(reader.bitsLeft == 0)
        #expect(throws: BitstreamError.self) { try reader.readBit() }
    }

    @Test func expGolombRoundTrip() throws {
        var writer = BitWriter()
        let unsigned: [UInt64] = Array(0...300) + [65535, 1 << 20, UInt64(UInt32.max) - 1]
        let signed = Array(-300...300) + [Int(Int32.max), -Int(Int32.max)]
        for value in unsigned { writer.ue(value) }
        for value in signed { writer.se(value) }
        var reader = BitReader(writer.bytes)
        for value in unsigned { #expect(try reader.readUE() == UInt32(value)) }
        for value in signed { #expect(try reader.readSE() == Int32(value)) }
    }

    @Test func expGolombCodes() throws {
        // 1, 010, 011, 00100 -> 0, 1, 2, 3; as se: 0, 1, -1, 2
        var reader = BitReader([0b1010_0110, 0b0100_0000])
        #expect(try reader.readUE() == 0)
        #expect(try reader.readUE() == 1)
        #expect(try reader.readUE() == 2)
        #expect(try reader.readUE() == 3)
        var signed = BitReader([0b1010_0110, 0b0100_0000])
        #expect(try signed.readSE() == 0)
        #expect(try signed.readSE() == 1)
        #expect(try signed.readSE() == -1)
        #expect(try signed.readSE() == 2)
    }

    @Test func malformedExpGolombThrowsInvalidData() {
        // 32 leading zeros: the value would not fit in 32 bits.
        var tooLong = BitReader([0, 0, 0, 0, 0x80, 0, 0, 0, 0])
        #expect(throws: BitstreamError(.invalidData, "Exp-Golomb code longer than 32 bits at bit 32")) {
            try tooLong.readUE()
        }
        var truncated = BitReader([0b0000_0001])
        do {
            _ = try truncated.readUE()
            Issue.record("truncated code parsed")
        } catch {
            #expect(error.code == .invalidData)
        }
        var allZero = BitReader([0, 0])
        #expect(throws: BitstreamError.self) { try allZero.readUE() }
        var ranged = BitReader([0b0001_0000])  // ue = 7
        #expect(throws: BitstreamError.self) { try ranged.readUE(max: 6, "bit_depth") }
    }

    @Test func moreRBSPData() throws {
        var reader = BitReader([0b1011_0000, 0, 0])  // data 1, 0, 1, then the stop bit, cabac_zero_words
        #expect(reader.moreRBSPData())
        _ = try reader.readBits(2)
        #expect(reader.moreRBSPData())
        _ = try reader.readBit()
        #expect(reader.moreRBSPData() == false)
        var second = BitReader([0xA5, 0x80])
        _ = try second.readBits(8)
        #expect(second.moreRBSPData() == false)
        #expect(BitReader([]).moreRBSPData() == false)
        #expect(BitReader([0, 0]).moreRBSPData() == false)
    }

    @Test func emulationPreventionRemoval() {
        #expect(RBSP.unescape([0, 0, 3, 1, 0, 0, 3, 0, 0, 3]) == [0, 0, 1, 0, 0, 0, 0])
        #expect(RBSP.unescape([0, 3, 0, 0, 3, 3]) == [0, 3, 0, 0, 3])
        #expect(RBSP.unescape([0, 0, 0, 3]) == [0, 0, 0])
        #expect(RBSP.unescape([UInt8]()) == [])
        #expect(RBSP.unescape([0x25, 0, 0, 3, 0, 0, 3, 0] as ArraySlice<UInt8>) == [0x25, 0, 0, 0, 0, 0])
    }

    @Test func escapeInvertsUnescape() {
        var rng = SplitMix64(seed: 7)
        for _ in 0..<500 {
            let rbsp = (0..<Int(rng.next() % 40)).map { _ in rng.next() % 2 == 0 ? UInt8(0) : UInt8(rng.next() % 4) }
            let escaped = RBSP.escape(rbsp)
            #expect(RBSP.unescape(escaped) == rbsp)
            for index in escaped.indices.dropFirst(2) where escaped[index - 2] == 0 && escaped[index - 1] == 0 {
                #expect(escaped[index] == 3)
            }
        }
    }
}
