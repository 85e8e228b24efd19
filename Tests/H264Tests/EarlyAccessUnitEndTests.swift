import Foundation
import H264
import Testing

/// `AccessUnitAssembler.nextUnitEndsAccessUnit` / `endAccessUnit` with the splitter's
/// `pendingUnitPrefix`: ending an access unit as soon as the next unit's first bytes settle it
/// must give exactly the access units of the plain assembler, for any chunking, and must end
/// single-slice pictures one unit sooner.
@Suite struct EarlyAccessUnitEndTests {
    static let fixtures: [URL] = {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Fixtures")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".264") }.sorted().map { directory.appendingPathComponent($0) }
    }()

    static func plainUnits(_ bytes: [UInt8]) -> [[NALUnit]] {
        var assembler = AccessUnitAssembler()
        var units: [[NALUnit]] = []
        for nal in AnnexBSplitter.split(bytes) { assembler.push(nal) { units.append($0.nalUnits) } }
        assembler.finish { units.append($0.nalUnits) }
        return units
    }

    /// Splits in `chunk`-byte pieces and ends access units early after every piece. Returns the
    /// units and, for each, how many bytes had been pushed when it came out.
    static func earlyUnits(_ bytes: [UInt8], chunk: Int) -> (units: [[NALUnit]], pushedWhenOut: [Int], early: Int) {
        var splitter = AnnexBSplitter()
        var assembler = AccessUnitAssembler()
        var units: [[NALUnit]] = []
        var pushedWhenOut: [Int] = []
        var early = 0
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + chunk, bytes.count)
            var nals: [NALUnit] = []
            splitter.push(Array(bytes[offset..<end])) { if case .unit(let nal) = $0 { nals.append(nal) } }
            for nal in nals {
                assembler.push(nal) {
                    units.append($0.nalUnits)
                    pushedWhenOut.append(end)
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
        splitter.finish { if case .unit(let nal) = $0 { nals.append(nal) } }
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
            splitter.push(piece) { if case .unit(let nal) = $0 { nals.append(nal) } }
            for nal in nals { assembler.push(nal) { _ in out += 1 } }
            if let prefix = splitter.pendingUnitPrefix, assembler.nextUnitEndsAccessUnit(prefix: prefix) {
                assembler.endAccessUnit { _ in out += 1 }
            }
            #expect(out == index + 1, "access unit \(index) should be out once unit \(index + 1) starts")
        }
    }

    @Test func nothingEndsWithoutAPicture() {
        let assembler = AccessUnitAssembler()
        #expect(!assembler.nextUnitEndsAccessUnit(prefix: [0x09, 0xF0][...]))
        #expect(!assembler.nextUnitEndsAccessUnit(prefix: [][...]))
    }
}
