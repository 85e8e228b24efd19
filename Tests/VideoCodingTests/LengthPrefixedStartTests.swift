import TestSupport
import Testing
import VideoCoding

/// A push of length-prefixed units (VideoToolbox's, an MP4 sample's) is told from Annex B by its
/// first bytes: every Annex B stream FrameTap has (its fixtures and, where present, the
/// conformance corpora) reads as Annex B, and each fixture written length-prefixed does not.
@Suite(.timeLimit(.minutes(10))) struct LengthPrefixedStartTests {
    static func annexBStreams() -> [(String, [UInt8])] {
        var streams: [(String, [UInt8])] = []
        for folder in [TestDataFolder.fixtures, .sharedH264, .sharedH265] {
            for row in folder.manifest.rows {
                guard let bytes = try? folder.bytes(row.file) else { continue }
                streams.append((row.file, bytes))
            }
        }
        return streams
    }

    static func lengthPrefixed(_ annexB: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        for unit in AnnexBSplitter.split(annexB) {
            let count = unit.bytes.count
            out += [UInt8(count >> 24 & 0xFF), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)]
            out += Array(unit.bytes)
        }
        return out
    }

    @Test func annexBStreamsAreNotTakenForLengthPrefixedOnes() {
        let streams = Self.annexBStreams()
        #expect(streams.count >= 30)
        for (name, bytes) in streams {
            for size in [64, 4096, 65536] {
                let first = Array(bytes.prefix(size))
                #expect(!first.withUnsafeBytes { LengthPrefixedUnits.beginStream($0) }, "\(name), first \(size) bytes")
            }
        }
    }

    @Test func lengthPrefixedStreamsAreKnown() throws {
        var known = 0
        for row in TestDataFolder.fixtures.manifest.rows {
            let bytes = Self.lengthPrefixed(try Fixtures.bytes(row.file))
            let first = Array(bytes.prefix(65536))
            #expect(first.withUnsafeBytes { LengthPrefixedUnits.beginStream($0) }, "\(row.file)")
            known += 1
        }
        #expect(known >= 30)
        // A whole SEI, then the first bytes of a keyframe larger than the piece.
        let sei: [UInt8] = [0, 0, 0, 4, 0x06, 0x05, 0x01, 0x80]
        let keyframeBegun: [UInt8] = sei + [0, 1, 0, 0, 0x65, 0x88, 0x84]
        #expect(keyframeBegun.withUnsafeBytes { LengthPrefixedUnits.beginStream($0) })
        // A keyframe first (the parameter sets kept aside, as VideoToolbox does), larger than
        // the piece; a unit with nothing after it.
        #expect([UInt8]([0, 1, 0xA2, 0xB3, 0x65, 0x88, 0x84, 0x00]).withUnsafeBytes { LengthPrefixedUnits.beginStream($0) })
        #expect(sei.withUnsafeBytes { LengthPrefixedUnits.beginStream($0) })
        // Too little to tell, a start code of either length, an implausible second length.
        #expect(![UInt8]([0, 0, 0, 9, 0x67]).withUnsafeBytes { LengthPrefixedUnits.beginStream($0) })
        #expect(![UInt8]([0, 0, 1, 0x67, 0x42, 0, 0x1E] + [UInt8](repeating: 0x55, count: 400)).withUnsafeBytes {
            LengthPrefixedUnits.beginStream($0)
        })
        #expect(![UInt8]([0, 0, 0, 1, 0x67, 0x42, 0, 0x1E]).withUnsafeBytes { LengthPrefixedUnits.beginStream($0) })
        #expect(!(sei + [0x80, 0, 0, 0, 0x65, 0x88]).withUnsafeBytes { LengthPrefixedUnits.beginStream($0) })
        // A first unit of 256 to 511 bytes reads `00 00 01 xx`, as a three-byte start code does:
        // length-prefixed once that unit is whole and another's length and header follow.
        let sized300: [UInt8] = [0, 0, 1, 0x2C, 0x06] + [UInt8](repeating: 0x55, count: 299)
        #expect((sized300 + [0, 0, 0, 4, 0x65, 0x88]).withUnsafeBytes { LengthPrefixedUnits.beginStream($0) })
        #expect(!Array(sized300.prefix(200)).withUnsafeBytes { LengthPrefixedUnits.beginStream($0) })
        // H.265's types beyond those it names (a Dolby Vision RPU, 62) after a whole unit.
        let dolbyVision: [UInt8] = [0, 0, 0, 3, 0x40, 0x01, 0x0C, 0, 0, 0, 9, 0x7C, 0x01, 0x10]
        #expect(dolbyVision.withUnsafeBytes { LengthPrefixedUnits.beginStream($0) })
    }
}
