import Decoding
import Foundation
import TestSupport
import Testing
import VideoCoding

/// The shared conformance streams (outside the repository; skipped when absent): JVT/openh264
/// H.264 and cros-codecs H.265. Each MANIFEST.tsv row with an MD5 of the whole output (`yuv_md5`,
/// or the H.265 corpus's `md5_whole_yuv420p`) must decode to exactly that many frames and bytes.
struct ConformanceStream: CustomTestStringConvertible, Sendable {
    let directory: URL
    let file: String
    let frames: Int
    let yuvMD5: String
    var testDescription: String { file }
    var url: URL { directory.appendingPathComponent(file) }
    /// By the file's extension, for the tests that open a decoder themselves.
    var codec: VideoCodec { ["265", "h265", "hevc"].contains(url.pathExtension) ? .h265 : .h264 }
    /// One MD5 per picture over NV12, in output order, when the corpus has them (`<file>.md5`).
    var nv12FrameMD5s: [String]? {
        guard let text = try? String(contentsOf: directory.appendingPathComponent(file + ".md5"), encoding: .utf8)
        else { return nil }
        return text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    static let manifest: [ConformanceStream] = rows(in: .sharedH264)
    static let h265Manifest: [ConformanceStream] = rows(in: .sharedH265)
    /// The repository's own fixtures (Tests/Fixtures), same manifest format.
    static let fixtures: [ConformanceStream] = rows(in: .fixtures)

    static func rows(in folder: TestDataFolder) -> [ConformanceStream] {
        folder.manifest.rows.compactMap { row in
            guard let md5 = row["yuv_md5"] ?? row["md5_whole_yuv420p"], !md5.isEmpty, let frames = try? row.number("frames")
            else { return nil }
            return ConformanceStream(directory: folder.url, file: row.file, frames: frames, yuvMD5: md5)
        }
    }

    static var available: Bool { !manifest.isEmpty }
}

@Suite(.enabled(if: ConformanceStream.available, "shared conformance streams not present"), .timeLimit(.minutes(10)))
struct ConformanceTests {
    @Test(arguments: ConformanceStream.manifest)
    func decodesToTheReferenceBytes(_ stream: ConformanceStream) throws {
        let bytes = try TestSupport.bytes(of: stream.url)
        let decoded = try TestSupport.decodeAll(bytes, codec: stream.codec) { 64 * 1024 }
        #expect(decoded.frames.count == stream.frames)
        #expect(TestSupport.rawMD5(decoded.frames) == stream.yuvMD5)
    }

    @Test func svcOnlyStreamGivesNoFrames() throws {
        let bytes = try TestSupport.bytes(
            of: TestSupport.conformanceDirectory.appendingPathComponent("sps_subsetsps_bothVUI.264"))
        let decoded = try TestSupport.decodeAll(bytes)
        #expect(decoded.frames.isEmpty)
    }
}

@Suite(.enabled(if: !ConformanceStream.fixtures.isEmpty, "Tests/Fixtures not present"), .timeLimit(.minutes(10)))
struct FixtureTests {
    @Test(arguments: ConformanceStream.fixtures)
    func decodesToTheReferenceBytes(_ stream: ConformanceStream) throws {
        let decoded = try TestSupport.decodeAll(TestSupport.bytes(of: stream.url), codec: stream.codec) { 1500 }
        #expect(decoded.frames.count == stream.frames)
        #expect(TestSupport.rawMD5(decoded.frames) == stream.yuvMD5)
    }
}

/// The same streams through the whole StreamDecoder pipeline, in small uneven pieces, the codec
/// detected (every .265 fixture and H.265 stream as h265, every other as h264).
@Suite(.timeLimit(.minutes(10))) struct StreamDecoderConformanceTests {
    @Test(arguments: ConformanceStream.manifest + ConformanceStream.h265Manifest + ConformanceStream.fixtures)
    func decodesToTheReferenceBytes(_ stream: ConformanceStream) throws {
        let decoded = try TestSupport.streamDecodeAll(TestSupport.bytes(of: stream.url))
        #expect(decoded.frames.count == stream.frames)
        #expect(TestSupport.rawMD5(decoded.frames) == stream.yuvMD5)
        #expect(decoded.decoder.counters.framesDroppedBeforeKeyframe == 0)
        #expect(decoded.decoder.codec == stream.codec)
        // Nothing went wrong but the pictures libavcodec concealed damage in (the error
        // resilience streams), each of which is reported once.
        #expect(decoded.errors.filter { !$0.reportsConcealedPicture }.isEmpty)
        #expect(decoded.errors.count == decoded.frames.filter(\.hasDecodeErrors).count)
    }

    /// The cros-codecs references: each picture, as NV12, against the MD5 that repository lists
    /// for it (independent of libavcodec; the streams are 8-bit 4:2:0, so NV12 is the same
    /// samples with the chroma planes interleaved).
    @Test(arguments: ConformanceStream.h265Manifest.filter { $0.nv12FrameMD5s != nil })
    func eachPictureMatchesItsNV12Reference(_ stream: ConformanceStream) throws {
        let decoded = try TestSupport.streamDecodeAll(TestSupport.bytes(of: stream.url), options: .lowLatency(backend: .software))
        #expect(decoded.frames.map(TestSupport.nv12MD5) == stream.nv12FrameMD5s)
    }
}
