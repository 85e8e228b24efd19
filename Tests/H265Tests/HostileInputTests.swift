import H265
import TestSupport
import Testing
import VideoCoding

/// Malformed and hostile parameter sets and slices: every one throws `BitstreamError` (or
/// parses), none crashes, and no claimed size is allocated before the bits for it are there.
@Suite(.timeLimit(.minutes(10))) struct HostileInputTests {
    @Test func everyTruncationOfARealSPSThrowsOrParses() throws {
        for name in ["yuv422p10_176x144.265", "odd_crop_322x242.265", "fullrange_bt709_176x144.265"] {
            let rbsp = try #require(try Streams.units(name).first { $0.type == .sps }).rbsp()
            for length in 0..<rbsp.count {
                do {
                    let sps = try SequenceParameterSet(rbsp: Array(rbsp.prefix(length)))
                    // Only a cut at or after the VUI flag leaves a usable SPS.
                    #expect(sps.codedWidth > 0)
                } catch {
                    #expect(error.code == .invalidData)
                }
            }
        }
    }

    @Test func everyTruncationOfRealVPSAndPPSThrowsOrParses() throws {
        let units = try Streams.units("wpp_320x240.265")
        let vps = try #require(units.first { $0.type == .vps }).rbsp()
        let pps = try #require(units.first { $0.type == .pps }).rbsp()
        for length in 0..<vps.count { _ = try? VideoParameterSet(rbsp: Array(vps.prefix(length))) }
        #expect(throws: BitstreamError.self) { try VideoParameterSet(rbsp: Array(vps.prefix(10))) }
        for length in 0..<pps.count - 1 {
            #expect(throws: BitstreamError.self) { try PictureParameterSet(rbsp: Array(pps.prefix(length))) }
        }
    }

    /// Every single bit after the header flipped in every parameter set and first slice of a
    /// stream: parsing throws or succeeds, and assembling the damaged units loses none.
    @Test func bitFlipsInParameterSetsAndSliceHeaders() throws {
        let units = try Streams.units("slices4_320x240.265")
        let heads = units.filter { [.vps, .sps, .pps].contains($0.type) }
            + units.filter { $0.type.isSliceSegment }.prefix(2).map { NALUnit(bytes: Array($0.bytes.prefix(24)))! }
        for (index, unit) in heads.enumerated() {
            for bit in 16..<(unit.bytes.count * 8) {
                var bytes = Array(unit.bytes)
                bytes[bit / 8] ^= 0x80 >> UInt8(bit % 8)
                var damaged = heads
                damaged[index] = NALUnit(bytes: bytes)!
                var sets = ParameterSets()
                for nal in damaged {
                    _ = try? sets.update(with: nal)
                    _ = try? SliceSegmentHeader(nal: nal, parameterSets: sets)
                }
                // Every unit comes out again, in order.
                var assembler = AccessUnitAssembler()
                var out: [NALUnit] = []
                for nal in damaged { assembler.push(nal) { out += $0.nalUnits } }
                assembler.finish { out += $0.nalUnits }
                #expect(out == damaged)
            }
        }
    }

    @Test func hugeSizes() {
        var builder = SPSBuilder()
        builder.width = 1 << 20
        #expect(throws: BitstreamError.self) { try builder.parsed() }
        builder = SPSBuilder()
        builder.height = 0
        #expect(throws: BitstreamError.self) { try builder.parsed() }
        builder = SPSBuilder()
        builder.width = 324  // not a multiple of the minimum coding block
        #expect(throws: BitstreamError.self) { try builder.parsed() }
        builder = SPSBuilder()
        builder.conformanceWindow = (1 << 20, 0, 0, 0)
        #expect(throws: BitstreamError.self) { try builder.parsed() }
        builder = SPSBuilder()
        builder.log2DiffMaxMinCb = 9  // a coding tree block of 2^12
        #expect(throws: BitstreamError.self) { try builder.parsed() }
        builder = SPSBuilder()
        builder.ordering = [(200, 2, 0)]
        #expect(throws: BitstreamError.self) { try builder.parsed() }
    }

    @Test func bitDepthAbove16AndChromaFormatAbove3() {
        var builder = SPSBuilder()
        builder.bitDepthLumaMinus8 = 9
        #expect(throws: BitstreamError.self) { try builder.parsed() }
        builder = SPSBuilder()
        builder.bitDepthChromaMinus8 = 200
        #expect(throws: BitstreamError.self) { try builder.parsed() }
        builder = SPSBuilder()
        builder.chromaFormatIdc = 4
        #expect(throws: BitstreamError.self) { try builder.parsed() }
        builder = SPSBuilder()
        builder.bitDepthLumaMinus8 = 8
        #expect((try? builder.parsed())?.bitDepthLuma == 16)
    }

    @Test func malformedProfileTierLevel() {
        // Cut inside the general profile's 88 bits, and inside a sub-layer's entry.
        for length in 0..<12 {
            var w = BitWriter()
            PTLBuilder().write(&w)
            var reader = BitReader(Array(w.bytes.prefix(length)))
            #expect(throws: BitstreamError.self) { try ProfileTierLevel(reader: &reader, maxSubLayersMinus1: 0) }
        }
        var w = BitWriter()
        var builder = PTLBuilder()
        builder.subLayers = [(true, true)]
        builder.write(&w)
        var reader = BitReader(Array(w.bytes.dropLast(3)))
        #expect(throws: BitstreamError.self) { try ProfileTierLevel(reader: &reader, maxSubLayersMinus1: 1) }
        // Seven sub-layers below the highest is one too many: rejected in the VPS and SPS.
        var sps = SPSBuilder()
        sps.maxSubLayersMinus1 = 7
        #expect(throws: BitstreamError.self) { try sps.parsed() }
    }

    @Test func malformedShortTermReferencePictureSets() {
        func sps(_ count: Int, _ sets: @escaping (inout BitWriter) -> Void) -> SPSBuilder {
            var builder = SPSBuilder()
            builder.shortTermSetCount = count
            builder.shortTermSets = sets
            return builder
        }
        // Too many pictures, deltas or sets.
        #expect(throws: BitstreamError.self) { try sps(1) { w in w.ue(1000); w.ue(0) }.parsed() }
        #expect(throws: BitstreamError.self) { try sps(1) { w in w.ue(16); w.ue(0) }.parsed() }
        #expect(throws: BitstreamError.self) { try sps(1) { w in w.ue(1); w.ue(0); w.ue(1 << 16); w.flag(true) }.parsed() }
        #expect(throws: BitstreamError.self) { try sps(65) { _ in }.parsed() }
        // 64 sets announced, the bits of none there.
        #expect(throws: BitstreamError.self) { try sps(64) { _ in }.parsed() }
        // A predicted set with a delta beyond 2^15.
        #expect(throws: BitstreamError.self) {
            try sps(2) { w in
                w.ue(1); w.ue(0); w.ue(0); w.flag(true)
                w.flag(true); w.flag(false); w.ue(1 << 15)
                w.flag(true); w.flag(true)
            }.parsed()
        }
        // Each prediction may add a picture (the reference itself): 30, 31, then 32, one too many.
        func chained(_ count: Int) -> SPSBuilder {
            sps(count) { w in
                w.ue(15); w.ue(15)
                for _ in 0..<30 { w.ue(0); w.flag(true) }
                for index in 1..<count {
                    w.flag(true); w.flag(false); w.ue(99)  // deltaRps = +100: no picture falls on 0
                    for _ in 0..<(30 + index) { w.flag(true) }
                }
            }
        }
        #expect((try? chained(2).parsed())?.shortTermRefPicSets.last?.count == 31)
        #expect(throws: BitstreamError.self) { try chained(3).parsed() }
    }

    @Test func hostileVPSAndPPSCounts() {
        // 1024 layer sets of 64 layers claimed: refused as soon as the bits run out.
        var vps = VPSBuilder()
        vps.maxLayerId = 63
        #expect((try? VideoParameterSet(nal: vps.nal)) != nil)
        vps.numLayerSetsMinus1 = 1023
        let cut = NALUnit(bytes: Array(vps.nal.bytes.prefix(40)))!
        #expect(throws: BitstreamError.self) { try VideoParameterSet(nal: cut) }
        vps.numLayerSetsMinus1 = 5000
        #expect(throws: BitstreamError.self) { try VideoParameterSet(nal: vps.nal) }
        var pps = PPSBuilder()
        pps.tiles = (5000, 1, true, [], [])
        #expect(throws: BitstreamError.self) { try PictureParameterSet(nal: pps.nal) }
        pps.tiles = (1000, 1000, false, [], [])
        #expect(throws: BitstreamError.self) { try PictureParameterSet(nal: pps.nal) }
    }

    @Test func garbageNeverTraps() {
        var generator = SplitMix64(seed: 2025)
        for _ in 0..<3000 {
            let type = UInt8(generator.next() % 64)
            var bytes = Array(NALHeader(type: NALUnitType(rawValue: type)!).bytes)
            for _ in 0..<Int(generator.next() % 80) { bytes.append(UInt8(truncatingIfNeeded: generator.next())) }
            let unit = NALUnit(bytes: bytes)!
            let rbsp = unit.rbsp()
            _ = try? VideoParameterSet(rbsp: rbsp)
            _ = try? SequenceParameterSet(rbsp: rbsp)
            _ = try? PictureParameterSet(rbsp: rbsp)
            var assembler = AccessUnitAssembler()
            assembler.push(unit) { _ in }
            _ = assembler.nextUnitEndsAccessUnit(prefix: ArraySlice(unit.bytes.prefix(3)))
            assembler.unitDropped(prefix: ArraySlice(unit.bytes.prefix(16))) { _ in }
            assembler.finish { _ in }
        }
    }
}
