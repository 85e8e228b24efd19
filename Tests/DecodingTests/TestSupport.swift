import Decoding
import Foundation
import H264
import VideoCoding
import TestSupport
import VideoCoding

/// Test streams are generated at test time with the ffmpeg CLI (libx264) into one temp
/// directory per test process, and the ffmpeg CLI's own decode is the reference.
enum TestSupport {
    static let directory: URL = {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("frametap-decoding-tests-\(ProcessInfo.processInfo.processIdentifier)")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    /// The shared conformance streams, when this checkout sits next to them.
    static let conformanceDirectory = TestDataFolder.sharedH264.url
    static let conformanceDirectoryH265 = TestDataFolder.sharedH265.url

    static var ffmpegAvailable: Bool { FileManager.default.isExecutableFile(atPath: ffmpegPath) }
    static let ffmpegPath = ["/usr/bin/ffmpeg", "/usr/local/bin/ffmpeg"]
        .first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/bin/ffmpeg"

    /// Encodes `frames` frames of `testsrc2` at `size` with libx264 into a raw .h264 file,
    /// once per process and name. `x264Params` shapes the GOP (e.g. "keyint=5:bframes=2").
    static func stream(
        _ name: String, size: String, frames: Int, x264Params: String = "", extra: [String] = []
    ) throws -> URL {
        let url = directory.appendingPathComponent("\(name).h264")
        if FileManager.default.fileExists(atPath: url.path) { return url }
        let partial = directory.appendingPathComponent("\(name).\(UUID().uuidString).h264")
        var arguments = [
            "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=\(size):rate=25",
            "-frames:v", "\(frames)", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
        ]
        if !x264Params.isEmpty { arguments += ["-x264-params", x264Params] }
        arguments += extra + ["-f", "h264", partial.path]
        try runProgram(ffmpegPath, arguments)
        // Concurrent tests may generate the same stream; the rename makes the first one win whole.
        if (try? FileManager.default.moveItem(at: partial, to: url)) == nil {
            try? FileManager.default.removeItem(at: partial)
        }
        return url
    }

    /// Per-frame MD5s of what the ffmpeg CLI's raw h264 path outputs, in output order.
    /// `threads` matters only for damaged streams: libavcodec conceals errors differently with
    /// frame threading (measured), so those comparisons pin the CLI to our thread count.
    /// `format`: the demuxer, `h264` or `hevc`.
    static func ffmpegFrameMD5s(_ file: URL, threads: Int? = nil, format: String = "h264") throws -> [String] {
        let threadArguments = threads.map { ["-threads", "\($0)"] } ?? []
        let text = String(decoding: try runProgram(ffmpegPath, threadArguments + [
            "-nostdin", "-loglevel", "error", "-flags", "unaligned", "-f", format, "-i", file.path,
            "-autoscale", "0", "-fps_mode", "passthrough", "-f", "framemd5", "-",
        ]), as: UTF8.self)
        return text.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap {
            $0.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces) }
        }
    }

    /// MD5 of ffmpeg's whole rawvideo output (the `| md5sum` of the reference command).
    static func ffmpegRawMD5(_ file: URL) throws -> String {
        let raw = try runProgram(ffmpegPath, [
            "-nostdin", "-loglevel", "error", "-flags", "unaligned", "-f", "h264", "-i", file.path,
            "-autoscale", "0", "-fps_mode", "passthrough", "-f", "rawvideo", "-",
        ])
        return MD5.hex(raw)
    }

    static func frameMD5(_ frame: DecodedFrame) -> String {
        var bytes: [UInt8] = []
        frame.appendPackedPlanes(to: &bytes)
        return MD5.hex(bytes)
    }

    /// MD5 of an 8-bit 4:2:0 picture as NV12 (the luma plane, then Cb and Cr interleaved), what
    /// `ffmpeg -pix_fmt nv12 -f framehash -hash md5` hashes.
    static func nv12MD5(_ frame: DecodedFrame) -> String {
        var planes: [UInt8] = []
        frame.appendPackedPlanes(to: &planes)
        let luma = frame.width * frame.height
        let chroma = ((frame.width + 1) / 2) * ((frame.height + 1) / 2)
        guard planes.count == luma + 2 * chroma else { return "not 8-bit 4:2:0: \(frame.pixelFormatName)" }
        var nv12 = Array(planes[..<luma])
        nv12.reserveCapacity(luma + 2 * chroma)
        for index in 0..<chroma {
            nv12.append(planes[luma + index])
            nv12.append(planes[luma + chroma + index])
        }
        return MD5.hex(nv12)
    }

    /// What the comparisons with the ffmpeg CLI decode with: its reorder probe, no GPU.
    static let cliEquivalent = DecoderOptions(backend: .software, emulateFFmpegProbe: true)

    /// Decodes a whole byte stream with `LibavDecoder`, in chunks of the sizes `chunking` yields.
    static func decodeAll(
        _ bytes: [UInt8], options: DecoderOptions = cliEquivalent, codec: VideoCodec = .h264,
        chunking: () -> Int = { 4096 }
    ) throws -> (frames: [DecodedFrame], errors: [DecodeError]) {
        let decoder = try LibavDecoder(codec: codec, options: options)
        return decodeAll(bytes, with: decoder, chunking: chunking)
    }

    static func decodeAll(
        _ bytes: [UInt8], with decoder: LibavDecoder, chunking: () -> Int = { 4096 }
    ) -> (frames: [DecodedFrame], errors: [DecodeError]) {
        var frames: [DecodedFrame] = []
        var errors: [DecodeError] = []
        var offset = 0
        bytes.withUnsafeBytes { buffer in
            while offset < buffer.count {
                let end = min(buffer.count, offset + max(1, chunking()))
                let output = decoder.decode(annexB: UnsafeRawBufferPointer(rebasing: buffer[offset..<end]))
                frames += output.frames
                errors += output.errors
                offset = end
            }
        }
        let tail = decoder.drain()
        return (frames + tail.frames, errors + tail.errors)
    }

    static func bytes(of url: URL) throws -> [UInt8] { [UInt8](try Data(contentsOf: url)) }
}

extension TestSupport {
    /// MD5 of the frames' packed planes one after another (what `-f rawvideo - | md5sum` hashes).
    static func rawMD5(_ frames: [DecodedFrame]) -> String { MD5.hex(frames) { $0.appendPackedPlanes(to: &$1) } }

    /// Pushes a whole stream through a `StreamDecoder` in reproducible uneven pieces.
    static func streamDecodeAll(
        _ bytes: [UInt8], options: DecoderOptions = cliEquivalent, keyframesOnly: Bool = false,
        maxNALBytes: Int = 8 << 20, seed: UInt64 = 1, pieces: ClosedRange<Int> = 1...3000
    ) throws -> (frames: [DecodedFrame], errors: [DecodeError], decoder: StreamDecoder) {
        let decoder = try StreamDecoder(options: options, maxNALBytes: maxNALBytes, keyframesOnly: keyframesOnly)
        var generator = SplitMix64(seed: seed)
        var frames: [DecodedFrame] = []
        var errors: [DecodeError] = []
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + Int.random(in: pieces, using: &generator))
            let output = decoder.push(Array(bytes[offset..<end]))
            frames += output.frames
            errors += output.errors
            offset = end
        }
        let tail = decoder.finish()
        return (frames + tail.frames, errors + tail.errors, decoder)
    }
}
