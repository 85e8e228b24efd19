import CFFmpeg
import CTurboJPEG
import Decoding
import Foundation
import H264
import Imaging
import TestSupport

/// Test streams made at test time with the ffmpeg CLI and libx264 (or libx265), decoded with a
/// minimal libavcodec loop (independent of the Decoding target's decoder), plus ffmpeg's own RGB
/// rendering of the same picture as the reference.
struct TestStream {
    let path: String
    let width: Int
    let height: Int
    /// The ffmpeg demuxer of the raw stream: `h264` or `hevc`.
    let rawFormat: String

    /// `testsrc2` encoded by libx264 (or `encoder: "libx265"`) in `pixelFormat` (x264 takes
    /// yuvj420p / gray for full range and monochrome); `extra` goes before the output name (e.g.
    /// `-colorspace bt709`).
    static func make(
        pixelFormat: String, width: Int = 320, height: Int = 240, frames: Int = 3, extra: [String] = [],
        encoder: String = "libx264"
    ) throws -> TestStream {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("frametap-imaging-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let hevc = encoder == "libx265"
        let path = directory.appendingPathComponent("\(pixelFormat).\(hevc ? "265" : "264")").path
        let quiet = hevc ? ["-x265-params", "log-level=error"] : []
        _ = try runFFmpeg(
            ["-f", "lavfi", "-i", "testsrc2=size=\(width)x\(height):rate=25", "-frames:v", "\(frames)",
             "-c:v", encoder] + quiet + ["-pix_fmt", pixelFormat] + extra + ["-f", hevc ? "hevc" : "h264", path])
        return TestStream(path: path, width: width, height: height, rawFormat: hevc ? "hevc" : "h264")
    }

    /// The first picture as ffmpeg renders it in `pixelFormat` (default packed RGB with the
    /// CLI's default conversion: for 8-bit 4:2:0 that repeats each chroma sample).
    func ffmpegFirstFrame(pixelFormat: String = "rgb24") throws -> [UInt8] {
        try runFFmpeg(["-f", rawFormat, "-i", path, "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", pixelFormat, "-"])
    }

    /// ffmpeg's RGB rendering with chroma interpolated rather than repeated (the comparison
    /// partner for a JPEG decoded with libjpeg's default smooth upsampling).
    func ffmpegFirstFrameSmoothChroma() throws -> [UInt8] {
        try runFFmpeg(
            ["-f", rawFormat, "-i", path, "-frames:v", "1", "-vf",
             "scale=flags=bicubic+full_chroma_int+accurate_rnd,format=rgb24", "-f", "rawvideo", "-"])
    }

    func decodeFrames() throws -> [DecodedFrame] {
        let data = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        return try decodeAnnexB(data, codec: rawFormat == "hevc" ? AV_CODEC_ID_HEVC : AV_CODEC_ID_H264)
    }

    func firstFrame() throws -> DecodedFrame {
        guard let frame = try decodeFrames().first else { throw TestFailure("\(path) decoded to no frames") }
        return frame
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent)
    }
}

@discardableResult
func runFFmpeg(_ arguments: [String]) throws -> [UInt8] {
    [UInt8](try runProgram("/usr/bin/ffmpeg", ["-hide_banner", "-loglevel", "error", "-nostdin", "-y"] + arguments))
}

/// Parser → decoder → frames, draining at the end (the parser needs one empty call to emit
/// its last access unit).
func decodeAnnexB(_ stream: [UInt8], codec codecID: AVCodecID = AV_CODEC_ID_H264) throws -> [DecodedFrame] {
    guard let codec = avcodec_find_decoder(codecID),
        let context = avcodec_alloc_context3(codec),
        let parser = av_parser_init(Int32(codecID.rawValue))
    else { throw TestFailure("cannot set up libavcodec") }
    defer {
        var optionalContext: UnsafeMutablePointer<AVCodecContext>? = context
        avcodec_free_context(&optionalContext)
        av_parser_close(parser)
    }
    guard avcodec_open2(context, codec, nil) >= 0 else { throw TestFailure("avcodec_open2 failed") }
    guard let packet = av_packet_alloc() else { throw TestFailure("av_packet_alloc failed") }
    defer {
        var optionalPacket: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&optionalPacket)
    }
    var frames: [DecodedFrame] = []

    func receive() {
        while true {
            guard let frame = av_frame_alloc() else { return }
            if avcodec_receive_frame(context, frame) == 0 {
                // Handed over whole: the decoder keeps no reference to this AVFrame.
                nonisolated(unsafe) let received = frame
                frames.append(DecodedFrame(taking: received, pts: nil))
            } else {
                var unused: UnsafeMutablePointer<AVFrame>? = frame
                av_frame_free(&unused)
                return
            }
        }
    }

    let padded = stream + [UInt8](repeating: 0, count: Int(AV_INPUT_BUFFER_PADDING_SIZE))
    try padded.withUnsafeBufferPointer { buffer in
        var offset = 0
        var flushed = false
        while !flushed {
            let remaining = stream.count - offset
            if remaining == 0 { flushed = true }
            var output: UnsafeMutablePointer<UInt8>?
            var outputSize: Int32 = 0
            let used = av_parser_parse2(
                parser, context, &output, &outputSize, remaining > 0 ? buffer.baseAddress! + offset : nil,
                Int32(remaining), ft_av_nopts_value(), ft_av_nopts_value(), 0)
            guard used >= 0 else { throw TestFailure("parser error \(used)") }
            offset += Int(used)
            if outputSize > 0 {
                packet.pointee.data = output
                packet.pointee.size = outputSize
                _ = avcodec_send_packet(context, packet)
                receive()
            }
        }
    }
    _ = avcodec_send_packet(context, nil)
    receive()
    return frames
}

/// A frame with its planes allocated (by libavutil, with its own strides and padding) and not
/// yet filled.
func allocatedFrame(
    _ format: AVPixelFormat, width: Int, height: Int, range: AVColorRange,
    colorspace: AVColorSpace = AVCOL_SPC_UNSPECIFIED
) throws -> DecodedFrame {
    guard let frame = av_frame_alloc() else { throw TestFailure("av_frame_alloc failed") }
    frame.pointee.format = format.rawValue
    frame.pointee.width = Int32(width)
    frame.pointee.height = Int32(height)
    frame.pointee.color_range = range
    frame.pointee.colorspace = colorspace
    guard av_frame_get_buffer(frame, 0) >= 0 else { throw TestFailure("av_frame_get_buffer failed") }
    return DecodedFrame(taking: frame, pts: nil)
}

/// A frame filled by `sample(plane, x, y)`, for formats and sizes x264 cannot make (NV12,
/// gray, 1x1, odd 4:2:0 sizes). Plane geometry follows libavutil (chroma rounds up).
func makeFrame(
    _ format: AVPixelFormat, width: Int, height: Int, range: AVColorRange = AVCOL_RANGE_MPEG,
    colorspace: AVColorSpace = AVCOL_SPC_UNSPECIFIED,
    sample: (_ plane: Int, _ x: Int, _ y: Int) -> UInt8
) throws -> DecodedFrame {
    let decoded = try allocatedFrame(format, width: width, height: height, range: range, colorspace: colorspace)
    var index = 0
    while let geometry = decoded.planeGeometry(index), let plane = decoded.plane(index) {
        let bytesPerSample = 1
        let mutableBase = UnsafeMutablePointer(mutating: plane.base)
        for y in 0..<geometry.rows {
            for x in 0..<(geometry.rowBytes / bytesPerSample) {
                mutableBase[y * plane.stride + x] = sample(index, x, y)
            }
        }
        index += 1
    }
    return decoded
}

struct DecodedJPEG {
    let width: Int
    let height: Int
    let subsampling: Int32
    let rgb: [UInt8]
}

/// Decodes a JPEG picture to packed RGB with TurboJPEG's accurate DCT.
///
/// Chroma reconstruction must match the reference's, or the comparison measures two
/// upsampling filters instead of the encoder: on testsrc2's saturated colour edges, smooth vs
/// repeated chroma alone costs ~10 dB. `smoothChroma: false` (TJFLAG_FASTUPSAMPLE) repeats
/// chroma like ffmpeg's default 8-bit rgb24 conversion; `true` (libjpeg's default, what
/// browsers show) pairs with `ffmpegFirstFrameSmoothChroma()`.
func decodeJPEG(_ picture: EncodedPicture, smoothChroma: Bool = true) throws -> DecodedJPEG {
    try picture.withUnsafeBytes { bytes throws -> DecodedJPEG in try decodeJPEG(bytes, smoothChroma: smoothChroma) }
}

func decodeJPEG(_ bytes: UnsafeRawBufferPointer, smoothChroma: Bool = true) throws -> DecodedJPEG {
    guard let handle = tjInitDecompress() else { throw TestFailure("tjInitDecompress failed") }
    defer { tjDestroy(handle) }
    let jpeg = bytes.bindMemory(to: UInt8.self)
    var width: Int32 = 0
    var height: Int32 = 0
    var subsampling: Int32 = 0
    var colorspace: Int32 = 0
    guard tjDecompressHeader3(handle, jpeg.baseAddress, UInt(jpeg.count), &width, &height, &subsampling, &colorspace) == 0
    else { throw TestFailure("not a JPEG: \(String(cString: tjGetErrorStr2(handle)))") }
    var rgb = [UInt8](repeating: 0, count: Int(width) * Int(height) * 3)
    let status = rgb.withUnsafeMutableBufferPointer { output in
        tjDecompress2(
            handle, jpeg.baseAddress, UInt(jpeg.count), output.baseAddress, width, 0, height,
            Int32(TJPF_RGB.rawValue), TJFLAG_ACCURATEDCT | (smoothChroma ? 0 : TJFLAG_FASTUPSAMPLE))
    }
    guard status == 0 else { throw TestFailure("tjDecompress2: \(String(cString: tjGetErrorStr2(handle)))") }
    return DecodedJPEG(width: Int(width), height: Int(height), subsampling: subsampling, rgb: rgb)
}

/// Peak signal-to-noise ratio of two equally long 8-bit sample sequences, in dB.
func psnr(_ a: [UInt8], _ b: [UInt8]) -> Double {
    precondition(a.count == b.count && !a.isEmpty)
    var squaredError = 0.0
    for index in a.indices {
        let difference = Double(a[index]) - Double(b[index])
        squaredError += difference * difference
    }
    let meanSquaredError = squaredError / Double(a.count)
    return meanSquaredError == 0 ? .infinity : 10 * log10(255 * 255 / meanSquaredError)
}

extension EncodedPicture {
    var byteArray: [UInt8] { withUnsafeBytes { [UInt8]($0) } }
}

/// A frame of 9- to 16-bit samples (little-endian words) filled by `sample(plane, x, y)`.
func makeHighBitFrame(
    _ format: AVPixelFormat, width: Int, height: Int, range: AVColorRange = AVCOL_RANGE_MPEG,
    sample: (_ plane: Int, _ x: Int, _ y: Int) -> UInt16
) throws -> DecodedFrame {
    let decoded = try allocatedFrame(format, width: width, height: height, range: range)
    var index = 0
    while let geometry = decoded.planeGeometry(index), let plane = decoded.plane(index) {
        let base = UnsafeMutableRawPointer(mutating: plane.base)
        for y in 0..<geometry.rows {
            for x in 0..<(geometry.rowBytes / 2) {
                base.storeBytes(of: sample(index, x, y).littleEndian, toByteOffset: y * plane.stride + 2 * x, as: UInt16.self)
            }
        }
        index += 1
    }
    return decoded
}
