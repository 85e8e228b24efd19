import Foundation
import H264
import Testing
import TestSupport
import VideoCoding

/// `AccessUnitAssembler.nextUnitEndsAccessUnit` / `endAccessUnit` with the splitter's
/// `pendingUnitPrefix`: ending an access unit as soon as the next unit's first bytes settle it
/// must give exactly the access units of the plain assembler, for any chunking, and must end
/// single-slice pictures one unit sooner.
@Suite(.timeLimit(.minutes(10))) struct EarlyAccessUnitEndTests {
    static let fixtures: [URL] = TestDataFolder.fixtures.names(endingWith: ".264").map(Fixtures.url)

    static func plainUnits(_ bytes: [UInt8], maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes) -> [[NALUnit]] {
        var splitter = AnnexBSplitter(maxNALBytes: maxNALBytes)
        var assembler = AccessUnitAssembler()
        var units: [[NALUnit]] = []
        var events: [SplitterEvent] = []
        splitter.push(bytes) { events.append($0) }
        splitter.finish { events.append($0) }
        for event in events {
            switch event {
            case .unit(let unit): assembler.push(NALUnit(unit)) { units.append($0.nalUnits) }
            case .dropped(_, let prefix): assembler.unitDropped(prefix: prefix) { units.append($0.nalUnits) }
            }
        }
        assembler.finish { units.append($0.nalUnits) }
        return units
    }

    /// Splits in `chunk`-byte pieces and ends access units early after every piece. Returns the
    /// units and, for each, how many bytes had been pushed when it came out.
    static func earlyUnits(
        _ bytes: [UInt8], chunk: Int, maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes
    ) -> (units: [[NALUnit]], pushedWhenOut: [Int], early: Int) {
        var splitter = AnnexBSplitter(maxNALBytes: maxNALBytes)
        var assembler = AccessUnitAssembler()
        var units: [[NALUnit]] = []
        var pushedWhenOut: [Int] = []
        var early = 0
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + chunk, bytes.count)
            var events: [SplitterEvent] = []
            splitter.push(Array(bytes[offset..<end])) { events.append($0) }
            let out = { (unit: AccessUnit) in
                units.append(unit.nalUnits)
                pushedWhenOut.append(end)
            }
            for event in events {
                switch event {
                case .unit(let unit): assembler.push(NALUnit(unit), out)
                case .dropped(_, let prefix): assembler.unitDropped(prefix: prefix, out)
                }
            }
            if let prefix = splitter.pendingUnitPrefix, assembler.nextUnitEndsAccessUnit(prefix: prefix) {
                early += 1
                assembler.endAccessUnit {
                    units.append($0.nalUnits)
                    pushedWhenOut.append(end)
                }
            }
            offset = end
        }
        var nals: [NALUnit] = []
        splitter.finish { if case .unit(let unit) = $0 { nals.append(NALUnit(unit)) } }
        for nal in nals { assembler.push(nal) { units.append($0.nalUnits) } }
        assembler.finish { units.append($0.nalUnits) }
        return (units, pushedWhenOut, early)
    }

    @Test(arguments: fixtures)
    func sameAccessUnitsForAnyChunking(_ url: URL) throws {
        let bytes = [UInt8](try Data(contentsOf: url))
        let expected = Self.plainUnits(bytes)
        #expect(!expected.isEmpty)
        for chunk in [1, 2, 3, 5, 17, 333, 4096] {
            let early = Self.earlyUnits(bytes, chunk: chunk)
            #expect(early.units == expected, "\(url.lastPathComponent), \(chunk)-byte pieces")
        }
    }

    /// Pushed one access unit at a time (as a camera sends them), a single-slice picture comes
    /// out when the next unit's first bytes arrive, not one unit later.
    @Test func pictureEndsWhenTheNextUnitStarts() throws {
        let url = try #require(Self.fixtures.first { $0.lastPathComponent == "high_320x240.264" })
        let bytes = [UInt8](try Data(contentsOf: url))
        let units = Self.plainUnits(bytes)
        // Push unit by unit, each with its start codes, plus the next unit's first 6 bytes.
        var splitter = AnnexBSplitter()
        var assembler = AccessUnitAssembler()
        var out = 0
        let encoded: [[UInt8]] = units.map { nals in
            var bytes: [UInt8] = []
            for nal in nals { bytes += [0, 0, 0, 1] + nal.bytes }
            return bytes
        }
        var carried = 0
        for (index, unit) in encoded.enumerated() where index + 1 < encoded.count {
            var piece = Array(unit[carried...])
            let next = Array(encoded[index + 1].prefix(6))
            piece += next
            carried = next.count
            var nals: [NALUnit] = []
            splitter.push(piece) { if case .unit(let unit) = $0 { nals.append(NALUnit(unit)) } }
            for nal in nals { assembler.push(nal) { _ in out += 1 } }
            if let prefix = splitter.pendingUnitPrefix, assembler.nextUnitEndsAccessUnit(prefix: prefix) {
                assembler.endAccessUnit { _ in out += 1 }
            }
            #expect(out == index + 1, "access unit \(index) should be out once unit \(index + 1) starts")
        }
    }

    /// A picture's first slice that is over the NAL cap is dropped, and filler data follows it.
    /// Whether the filler joins the picture before the dropped slice must not depend on whether
    /// the slice's first bytes arrived in an earlier piece than the bytes that made it too large
    /// (found by the annexb-assembly fuzz target).
    @Test func aDroppedUnitEndsTheAccessUnitAlikeForAnyChunking() {
        var stream = StreamBuilder()
        stream.parameterSets()
        stream.slice { $0.type = .idr }
        var oversized = SliceBuilder()
        oversized.type = .idr
        oversized.idrPicId = 1
        let slice = oversized.nal(sps: stream.sps, pps: stream.pps).bytes
        stream.units.append(NALUnit(bytes: slice + Array(repeating: 0x11, count: 200)))
        stream.add(.filler, [0xFF, 0xFF, 0x80])
        stream.slice {
            $0.type = .idr
            $0.idrPicId = 2
        }
        let bytes = AccessUnit(nalUnits: stream.units).annexB()
        let expected = Self.plainUnits(bytes, maxNALBytes: 100)
        #expect(expected.map { $0.map(\.type) } == [[.sps, .pps, .idr], [.filler, .idr]])
        for chunk in 1...bytes.count {
            #expect(Self.earlyUnits(bytes, chunk: chunk, maxNALBytes: 100).units == expected, "\(chunk)-byte pieces")
        }
    }

    @Test func nothingEndsWithoutAPicture() {
        let assembler = AccessUnitAssembler()
        #expect(!assembler.nextUnitEndsAccessUnit(prefix: [0x09, 0xF0][...]))
        #expect(!assembler.nextUnitEndsAccessUnit(prefix: [][...]))
    }
}
