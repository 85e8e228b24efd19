import Foundation
import H265
import TestSupport
import VideoCoding

/// The project's H.265 fixtures (Tests/Fixtures/*.265) and the third-party streams of the shared
/// test data (../shared/testdata/h265/*.h265), read in place: never copied into the repository.
enum Streams {
    static var sharedAvailable: Bool { TestDataFolder.sharedH265.isPresent }

    /// A fixture by its `.265` name, a shared stream by its `.h265` name.
    static func folder(_ name: String) -> TestDataFolder { name.hasSuffix(".h265") ? .sharedH265 : .fixtures }
    static func url(_ name: String) -> URL { folder(name).url(name) }
    static func bytes(_ name: String) throws -> [UInt8] { try folder(name).bytes(name) }

    static func units(_ bytes: [UInt8]) -> [NALUnit] {
        AnnexBSplitter.split(bytes).compactMap(NALUnit.init)
    }

    static func units(_ name: String) throws -> [NALUnit] { units(try bytes(name)) }

    /// Splits and assembles as the decoder-feeding layer will: `pieces` bytes at a time (the
    /// whole stream at once when nil), access units ended early after every piece when the
    /// next unit's first bytes settle it, then the end of the stream.
    static func accessUnits(
        _ bytes: [UInt8], pieces: Int? = nil, maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes,
        assembler start: AccessUnitAssembler = AccessUnitAssembler()
    ) -> (units: [AccessUnit], assembler: AccessUnitAssembler) {
        var splitter = AnnexBSplitter(maxNALBytes: maxNALBytes)
        var assembler = start
        var output: [AccessUnit] = []
        func handle(_ event: SplitterEvent) {
            switch event {
            case .unit(let unit):
                if let nal = NALUnit(unit) { assembler.push(nal) { output.append($0) } }
            case .dropped(_, let prefix):
                assembler.unitDropped(prefix: prefix) { output.append($0) }
            }
        }
        let size = max(1, pieces ?? bytes.count)
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + size, bytes.count)
            var events: [SplitterEvent] = []
            splitter.push(Array(bytes[offset..<end])) { events.append($0) }
            events.forEach(handle)
            if let prefix = splitter.pendingUnitPrefix, assembler.nextUnitEndsAccessUnit(prefix: prefix) {
                assembler.endAccessUnit { output.append($0) }
            }
            offset = end
        }
        var events: [SplitterEvent] = []
        splitter.finish { events.append($0) }
        events.forEach(handle)
        assembler.finish { output.append($0) }
        return (output, assembler)
    }

    static func accessUnits(_ name: String) throws -> (units: [AccessUnit], assembler: AccessUnitAssembler) {
        accessUnits(try bytes(name))
    }

    /// Where libavcodec's HEVC parser may start the packet of an access unit whose first NAL
    /// header is at `header`: 5.1 at the 00 00 01 before it (a four-byte start code's first zero
    /// stays at the end of the packet before); later versions take that zero along.
    static func packetStartCandidates(before header: Int, in bytes: [UInt8]) -> [Int] {
        header >= 4 && bytes[header - 4] == 0 ? [header - 3, header - 4] : [header - 3]
    }

    static let ffprobe = ["/usr/bin/ffprobe", "/usr/local/bin/ffprobe"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    static let ffmpeg = ["/usr/bin/ffmpeg", "/usr/local/bin/ffmpeg"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }

    /// ffprobe's packets of a raw H.265 file: libavcodec's parser's access units, as (byte
    /// position, size).
    static func ffprobePackets(_ url: URL) throws -> [(position: Int, size: Int)] {
        guard let probe = ffprobe else { throw TestFailure("ffprobe is not installed") }
        let text = String(
            decoding: try runProgram(probe, ["-v", "error", "-f", "hevc", "-show_entries", "packet=pos,size", "-of", "csv=p=0", url.path]),
            as: UTF8.self)
        return text.split(separator: "\n").map { line in
            let fields = line.split(separator: ",").compactMap { Int($0) }
            return (fields.count == 2 ? fields[1] : -1, fields.first ?? -1)
        }
    }
}
