import Containers
import Decoding
import Foundation
import TestSupport
import Timekeeping
import VideoCoding

extension ContainerFixtures {
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
    var rawMD5: String { MD5.hex(frames) { $0.appendPackedPlanes(to: &$1) } }
}
