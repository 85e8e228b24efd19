@testable import Containers
import Foundation
import Testing
import TestSupport
import Timekeeping
import VideoCoding

@Suite("MP4BoxScreen: sample counts libavformat would believe", .timeLimit(.minutes(10)))
struct MP4BoxScreenTests {
    /// The offset of the first box of `type` in `bytes` (a plain search: the fixtures hold no
    /// other occurrence of these four letters before the box).
    static func offset(of type: String, in bytes: [UInt8]) throws -> Int {
        let name = Array(type.utf8)
        let at = try #require((4..<(bytes.count - 4)).first { Array(bytes[$0..<($0 + 4)]) == name }, "no \(type) box")
        return at - 4
    }

    static func put(_ value: UInt32, at offset: Int, in bytes: inout [UInt8]) {
        for index in 0..<4 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (24 - 8 * index)) }
    }

    static func demux(_ bytes: [UInt8]) throws -> DemuxedDecode {
        try DemuxedDecode.run(bytes, container: .mp4, pieceSize: 1000)
    }

    @Test("a trun of a few bytes that claims 67 million samples is refused before libavformat reads it")
    func aFragmentClaimingMillionsOfSamples() throws {
        var bytes = try ContainerFixtures.bytes("h264_320x240_fragmented.mp4")
        let trun = try Self.offset(of: "trun", in: bytes)
        // No per-sample fields: libavformat would fill 67 million index entries (1.6 GB) from the defaults.
        Self.put(0x0000_0005, at: trun + 8, in: &bytes)
        Self.put(0x0400_2101, at: trun + 12, in: &bytes)
        let result = try Self.demux(bytes)
        #expect(result.failure?.code == .invalidContainer)
        #expect(result.failure?.message.contains("67117313 samples") == true, "\(String(describing: result.failure))")
        #expect(result.samples == 0)
    }

    @Test("a moov whose stsz says 67 million samples of one size is refused")
    func aMovieClaimingMillionsOfSamples() throws {
        var bytes = try ContainerFixtures.bytes("h264_320x240.mp4")
        let stsz = try Self.offset(of: "stsz", in: bytes)
        Self.put(1, at: stsz + 12, in: &bytes)
        Self.put(0x0400_2101, at: stsz + 16, in: &bytes)
        let result = try Self.demux(bytes)
        #expect(result.failure?.code == .invalidContainer)
        #expect(result.failure?.message.contains("MP4s of up to 1048576 samples") == true, "\(String(describing: result.failure))")
    }

    @Test("a sample table entry over 64 MiB is refused; the same file with it in bounds is read whole")
    func aSampleTooLarge() throws {
        let fixture = try ContainerFixtures.bytes("h264_320x240.mp4")
        var bytes = fixture
        let stsz = try Self.offset(of: "stsz", in: bytes)
        Self.put(65 << 20, at: stsz + 20 + 4 * 3, in: &bytes)
        let result = try Self.demux(bytes)
        #expect(result.failure?.message.contains("a sample of 68157440 bytes") == true, "\(String(describing: result.failure))")
        #expect(try Self.demux(fixture).samples == 20)
    }

    static let hugeRun: [UInt8] = [0, 0, 0, 16] + Array("trun".utf8) + [0, 0, 0, 0, 0x04, 0x00, 0x21, 0x01]

    /// `box` of `type` with `payload`, its size in front.
    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        let size = UInt32(8 + payload.count)
        return [UInt8(size >> 24), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF)] + Array(type.utf8) + payload
    }

    static func size(at offset: Int, in bytes: [UInt8]) -> UInt32 {
        bytes[offset..<(offset + 4)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    /// `inserted` put at `offset`, and the size of each box that starts at one of `enclosing`
    /// grown by it.
    static func insert(_ inserted: [UInt8], at offset: Int, into bytes: [UInt8], enclosing: [Int]) -> [UInt8] {
        var result = bytes
        for at in enclosing {
            let size = Self.size(at: at, in: bytes)
            Self.put(size + UInt32(inserted.count), at: at, in: &result)
        }
        result.insert(contentsOf: inserted, at: offset)
        return result
    }

    @Test("a trun in a top-level meta box, after junk and an hdlr as libavformat finds them, is counted too")
    func aFragmentHiddenInMetadata() throws {
        let bytes = try ContainerFixtures.bytes("h264_320x240_fragmented.mp4")
        let moof = try Self.offset(of: "moof", in: bytes)
        // libavformat looks for the hdlr 4 bytes at a time, then reads boxes from there.
        let handler = Self.box("hdlr", [UInt8](repeating: 0, count: 25))
        let meta = Self.box("meta", [0, 0, 0, 0, 1, 2, 3, 4] + handler + Self.hugeRun)
        var hidden = bytes
        hidden.insert(contentsOf: meta, at: moof)
        let result = try Self.demux(hidden)
        #expect(result.failure?.message.contains("67117313 samples") == true, "\(String(describing: result.failure))")
    }

    @Test("a stsz in a sample entry, where libavformat reads boxes after the entry's fields, is counted; junk after it too", arguments: [0, 3])
    func aSampleTableHiddenInASampleEntry(junk: Int) throws {
        let bytes = try ContainerFixtures.bytes("h264_320x240.mp4")
        let enclosing = try ["moov", "trak", "mdia", "minf", "stbl", "stsd"].map { try Self.offset(of: $0, in: bytes) }
        // The first sample entry: after the stsd's header, version and flags, and entry count.
        let entry = enclosing.last! + 16
        #expect(Array(bytes[(entry + 4)..<(entry + 8)]) == Array("avc1".utf8))
        let hidden = Self.box("stsz", [0, 0, 0, 0, 0, 0, 0, 1, 0x04, 0x00, 0x21, 0x01]) + [UInt8](repeating: 0, count: junk)
        let changed = Self.insert(hidden, at: entry + Int(Self.size(at: entry, in: bytes)), into: bytes, enclosing: enclosing + [entry])
        let result = try Self.demux(changed)
        #expect(result.failure?.message.contains("67117333 samples") == true, "\(String(describing: result.failure))")
    }

    @Test("a compressed moov (cmov) is refused: libavformat would unpack and read it where no screen sees it")
    func aCompressedMovie() throws {
        var bytes = try ContainerFixtures.bytes("h264_320x240_fragmented.mp4")
        let udta = try Self.offset(of: "udta", in: bytes)
        bytes.replaceSubrange((udta + 4)..<(udta + 8), with: Array("cmov".utf8))
        let result = try Self.demux(bytes)
        #expect(result.failure?.message.contains("compressed (cmov)") == true, "\(String(describing: result.failure))")
    }

    @Test("a moov larger than its bound, or one that runs to the end of the input, is refused")
    func boxSizes() throws {
        let fixture = try ContainerFixtures.bytes("h264_320x240.mp4")
        let moov = try Self.offset(of: "moov", in: fixture)
        var huge = fixture
        Self.put(UInt32(65 << 20), at: moov, in: &huge)
        #expect(try Self.demux(huge).failure?.message.contains("moov box is 68157440 bytes") == true)
        var open = fixture
        Self.put(0, at: moov, in: &open)
        #expect(try Self.demux(open).failure?.message.contains("runs to the end") == true)
    }

    @Test("an MP4 cut anywhere inside its moov is invalid_container (or ends with no sample), never unsupported_codec or no_video_track")
    func cutInsideTheMovie() throws {
        for file in ["h264_320x240.mp4", "h264_320x240_fragmented.mp4", "h265_176x144.mp4"] {
            let bytes = try ContainerFixtures.bytes(file)
            let moov = try Self.offset(of: "moov", in: bytes)
            for cut in stride(from: 9, to: moov + Int(Self.size(at: moov, in: bytes)), by: 7) {
                // No failure and no sample is what a push reports as invalid_container too.
                let result = try Self.demux(Array(bytes.prefix(cut)))
                #expect(result.failure.map { $0.code == .invalidContainer } ?? (result.samples == 0), "\(file) cut at \(cut): \(String(describing: result.failure))")
            }
        }
    }

    @Test("zeros after the file, garbage after it, and a last mdat that runs to the end are read as libavformat reads them")
    func endings() throws {
        let bytes = try ContainerFixtures.bytes("h264_320x240.mp4")
        let padded = try Self.demux(bytes + [UInt8](repeating: 0, count: 100_000))
        #expect(padded.failure == nil && padded.frames.count == 20, "\(String(describing: padded.failure))")
        var generator = SystemRandomNumberGenerator()
        let garbage = try Self.demux(bytes + (0..<100_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        #expect(garbage.frames.count == 20)
        if let message = garbage.failure?.message {
            #expect(message.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7F }, "\(message)")
        }
        var open = bytes
        Self.put(0, at: try Self.offset(of: "mdat", in: bytes), in: &open)
        let toTheEnd = try Self.demux(open)
        #expect(toTheEnd.failure == nil && toTheEnd.frames.count == 20, "\(String(describing: toTheEnd.failure))")
    }

    @Test("a box whose end lies past 2^62 bytes ends the input: libavformat cannot skip it and would read inside it")
    func aBoxThatCannotBeSkipped() throws {
        let bytes = try ContainerFixtures.bytes("h264_320x240_fragmented.mp4")
        let moof = try Self.offset(of: "moof", in: bytes)
        for type in ["free", "\u{0}\u{1}\u{2}\u{3}"] {
            let huge = UInt64(Int64.max) - UInt64(moof) - 100
            let largeSize = (0..<8).map { UInt8(truncatingIfNeeded: huge >> (56 - 8 * $0)) }
            var changed = bytes
            changed.insert(contentsOf: [0, 0, 0, 1] + Array(type.utf8) + largeSize + Self.hugeRun, at: moof)
            let screen = MP4BoxScreen(input: InMemoryInput(changed, pieceSize: 333))
            var delivered = 0
            var buffer = [UInt8](repeating: 0, count: 4096)
            while case .bytes(let count) = buffer.withUnsafeMutableBytes({ screen.read(into: $0) }) { delivered += count }
            #expect(delivered == moof + 16, "\(type.utf8.map { $0 }): nothing after the box's header is handed on")
        }
    }

    @Test("an audio-only MP4 whose moov is whole but whose media data is cut stays no_video_track")
    func aWholeMovieCutAfter() throws {
        // The fixture's moov is at its end: moved first (its offsets then point wrong, which a
        // header read alone never sees), then the input cut inside the media data's header and after it.
        let fixture = try ContainerFixtures.bytes("audio_only.mp4")
        let moov = try Self.offset(of: "moov", in: fixture)
        let mdat = try Self.offset(of: "mdat", in: fixture)
        let bytes = Array(fixture[0..<28]) + Array(fixture[moov...]) + Array(fixture[mdat..<moov])
        let end = 28 + fixture.count - moov
        for cut in [end + 4, end + 12] {
            #expect(try Self.demux(Array(bytes.prefix(cut))).failure?.code == .noVideoTrack, "cut at \(cut)")
        }
    }

    @Test("each fixture passes the screen unchanged", arguments: ["h264_320x240.mp4", "h264_320x240_aac.mp4", "h264_320x240_moov_at_end.mp4", "h264_320x240_fragmented.mp4", "h265_176x144.mp4", "h265_176x144_fragmented.mp4"])
    func fixturesPass(file: String) throws {
        let bytes = try ContainerFixtures.bytes(file)
        let screen = MP4BoxScreen(input: InMemoryInput(bytes, pieceSize: 333))
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while case .bytes(let count) = buffer.withUnsafeMutableBytes({ screen.read(into: $0) }) { out += buffer[..<count] }
        #expect(screen.refusal == nil)
        #expect(out == bytes)
        #expect((screen.initSegment != nil) == file.contains("fragmented"), "a fresh start needs a moov without samples")
    }
}

@Suite("Demuxer: a long fragmented MP4 starts afresh at a fragment", .timeLimit(.minutes(10)))
struct FragmentedFreshStartTests {
    static let ffmpeg = ["/usr/bin/ffmpeg", "/usr/local/bin/ffmpeg"]
        .first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/ffmpeg"

    struct Run {
        var samples: [DemuxedSample] = []
        var failure: ContainerError?
        var freshStarts = 0
        var mostHeld = 0
    }

    static func demux(_ bytes: [UInt8], freshStartAfter samples: Int, samplesWithoutFreshStart: Int? = nil) throws -> Run {
        var limits = MP4BoxScreen.Limits()
        limits.freshStartAfterSamples = samples
        if let samplesWithoutFreshStart { limits.samplesWithoutFreshStart = samplesWithoutFreshStart }
        let demuxer = try Demuxer(
            container: .mp4, input: InMemoryInput(bytes, pieceSize: 700), seekWindow: 32 << 20,
            interrupt: DemuxInterrupt(clock: SystemClock()), mp4Limits: limits)
        var run = Run()
        loop: while true {
            switch demuxer.next() {
            case .sample(let sample): run.samples.append(sample)
            case .end: break loop
            case .failed(let error):
                run.failure = error
                break loop
            }
            run.mostHeld = max(run.mostHeld, demuxer.heldBytes)
        }
        run.freshStarts = demuxer.freshStarts
        return run
    }

    /// Every sample, with its bytes, key flag and time, as a demuxer that never starts afresh reads them.
    static func expectSameSamples(_ bytes: [UInt8], _ what: String) throws {
        let whole = try demux(bytes, freshStartAfter: .max)
        let fresh = try demux(bytes, freshStartAfter: 3)
        #expect(whole.failure == nil && fresh.failure == nil, "\(what): \(String(describing: fresh.failure))")
        #expect(whole.samples.count == 20, "\(what)")
        #expect(fresh.freshStarts >= 5, "\(what): \(fresh.freshStarts) fresh starts")
        #expect(fresh.samples.map(\.payload) == whole.samples.map(\.payload), "\(what)")
        #expect(fresh.samples.map(\.isKeyframe) == whole.samples.map(\.isKeyframe), "\(what)")
        #expect(fresh.samples.map(\.pts) == whole.samples.map(\.pts), "\(what)")
        #expect(fresh.mostHeld < 16 << 10, "\(what): held \(fresh.mostHeld) bytes")
    }

    @Test("fragments whose data offsets count from their moof (B-frames, H.264 and H.265)")
    func offsetsFromTheMoof() throws {
        try Self.expectSameSamples(try ContainerFixtures.bytes("h264_320x240_fragmented.mp4"), "h264")
        try Self.expectSameSamples(try ContainerFixtures.bytes("h265_176x144_fragmented.mp4"), "h265")
    }

    @Test("fragments that name absolute file offsets (ffmpeg without default_base_moof), with audio", .enabled(if: FileManager.default.isExecutableFile(atPath: ffmpeg), "needs the ffmpeg CLI"))
    func absoluteOffsetsAndNoDecodeTime() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fresh-start-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = folder.appendingPathComponent("in.mp4")
        try Data(try ContainerFixtures.bytes("h264_320x240_aac.mp4")).write(to: source)
        let output = folder.appendingPathComponent("out.mp4")
        // Without default_base_moof, ffmpeg names each fragment's base data offset in the file.
        _ = try runProgram(Self.ffmpeg, [
            "-nostdin", "-loglevel", "error", "-y", "-i", source.path, "-c", "copy",
            "-movflags", "frag_every_frame+empty_moov", output.path,
        ])
        let absolute = Array(try Data(contentsOf: output))
        let tfhd = try MP4BoxScreenTests.offset(of: "tfhd", in: absolute)
        #expect(absolute[tfhd + 11] & 0x01 != 0, "the fragments name a base data offset")
        try Self.expectSameSamples(absolute, "absolute offsets, with audio")

    }

    @Test("fragments with no decode time (tfdt): the times go on across a fresh start")
    func noDecodeTime() throws {
        // Every tfdt renamed to a free box: libavformat then counts decode times from the start
        // of what it read, so a fresh demuxer starts them again from 0.
        var undated = try ContainerFixtures.bytes("h264_320x240_fragmented.mp4")
        var search = 0
        while let at = (search..<(undated.count - 4)).first(where: { undated[$0..<($0 + 4)].elementsEqual("tfdt".utf8) }) {
            undated.replaceSubrange(at..<(at + 4), with: Array("free".utf8))
            search = at + 4
        }
        try Self.expectSameSamples(undated, "no tfdt")
    }

    @Test("fragments after a moov with samples of its own cannot start afresh: refused past the bound", .enabled(if: FileManager.default.isExecutableFile(atPath: ffmpeg), "needs the ffmpeg CLI"))
    func fragmentsAfterAMovieWithSamples() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fresh-start-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = folder.appendingPathComponent("in.mp4")
        try Data(try ContainerFixtures.bytes("h264_320x240.mp4")).write(to: source)
        let output = folder.appendingPathComponent("out.mp4")
        // Without empty_moov, ffmpeg puts the first fragment's samples in the moov.
        _ = try runProgram(Self.ffmpeg, [
            "-nostdin", "-loglevel", "error", "-y", "-i", source.path, "-c", "copy", "-movflags", "frag_every_frame", output.path,
        ])
        let bytes = Array(try Data(contentsOf: output))
        let whole = try Self.demux(bytes, freshStartAfter: 3)
        #expect(whole.failure == nil && whole.samples.count == 20 && whole.freshStarts == 0)
        let bounded = try Self.demux(bytes, freshStartAfter: 3, samplesWithoutFreshStart: 10)
        #expect(bounded.failure?.code == .invalidContainer)
        #expect(bounded.failure?.message.contains("declared more than 10 samples") == true, "\(String(describing: bounded.failure))")
        #expect(bounded.samples.count < 20)
    }

    @Test("a moov that describes samples of its own cannot start afresh: read whole below the bound")
    func aMovieWithSamplesIsNotStartedAfresh() throws {
        let run = try Self.demux(try ContainerFixtures.bytes("h264_320x240.mp4"), freshStartAfter: 3)
        #expect(run.failure == nil)
        #expect(run.samples.count == 20)
        #expect(run.freshStarts == 0)
    }
}
