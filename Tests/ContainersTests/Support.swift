import Containers
import Decoding
import Foundation
import TestSupport
import Timekeeping
import VideoCoding

/// The committed container fixtures (scripts/make-container-fixtures.sh) and their manifest.
enum ContainerFixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Fixtures/Containers").standardizedFileURL

    struct Row: Sendable, CustomStringConvertible {
        var file: String
        var container: String
        var codec: String
        var frames: Int
        var md5: String
        var description: String { file }
    }

    static let rows: [Row] = {
        guard let text = try? String(contentsOf: directory.appendingPathComponent("MANIFEST.tsv"), encoding: .utf8) else { return [] }
        return text.split(separator: "\n").dropFirst().map { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            return Row(file: fields[0], container: fields[1], codec: fields[2], frames: Int(fields[5]) ?? 0, md5: fields[6])
        }
    }()

    /// The rows whose video FrameTap decodes.
    static var decodable: [Row] { rows.filter { $0.codec == "h264" || $0.codec == "h265" } }

    static func bytes(_ file: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: directory.appendingPathComponent(file)))
    }

    static func format(of row: Row) -> ContainerFormat {
        ContainerFormat(rawValue: row.container)!
    }
}

/// A demuxer's whole output, and the pictures a `StreamDecoder` made of its samples.
struct DemuxedDecode {
    var frames: [DecodedFrame] = []
    var errors: [DecodeError] = []
    var samples = 0
    var failure: ContainerError?
    var ignored: [String: Int] = [:]
    var descriptions: [SampleDescription] = []

    static let cliEquivalent = DecoderOptions(backend: .software, emulateFFmpegProbe: true)

    /// Demuxes `bytes` delivered in `pieceSize` pieces and decodes every sample.
    static func run(
        _ bytes: [UInt8], container: ContainerFormat, pieceSize: Int = 4096, seekWindow: Int = 32 << 20
    ) throws -> DemuxedDecode {
        var result = DemuxedDecode()
        let decoder = try StreamDecoder(options: cliEquivalent)
        let demuxer: Demuxer
        do {
            demuxer = try Demuxer(
                container: container, input: InMemoryInput(bytes, pieceSize: pieceSize), seekWindow: seekWindow,
                interrupt: DemuxInterrupt(clock: SystemClock()))
        } catch {
            result.failure = error
            return result
        }
        loop: while true {
            switch demuxer.next() {
            case .sample(let sample):
                result.samples += 1
                if result.descriptions.last != sample.description { result.descriptions.append(sample.description) }
                result.errors += sample.payload.withUnsafeBytes { payload in
                    decoder.push(sample: payload, described: sample.description) { result.frames.append($0) }
                }
            case .end:
                break loop
            case .failed(let error):
                result.failure = error
                break loop
            }
        }
        let tail = decoder.finish()
        result.frames += tail.frames
        result.errors += tail.errors
        result.ignored = demuxer.ignoredPackets
        return result
    }

    /// MD5 of the pictures' packed planes one after another (what `-f rawvideo - | md5sum` hashes).
    var rawMD5: String {
        var md5 = MD5()
        for frame in frames {
            var planes: [UInt8] = []
            frame.appendPackedPlanes(to: &planes)
            md5.update(planes)
        }
        return md5.finalize()
    }
}
