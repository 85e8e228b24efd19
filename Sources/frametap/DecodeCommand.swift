import ArgumentParser
import Bitstream
import Decoding
import Dispatch
import FoundationEssentials
import HTTPServer
import Imaging
import Timekeeping
import VideoCoding

#if canImport(Glibc)
    import Glibc
#endif

/// `frametap decode`: a whole stream to pictures on disk or standard output.
///
/// The loop reads top to bottom: read a piece → decode → write each picture; at end of input,
/// drain the decoder and write what it still held.
struct DecodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Decode an H.264 or H.265 Annex B stream to JPEG, raw YUV or raw RGB pictures.",
        discussion: """
            With --output DIR (default: frames) pictures are written as frame-000001.jpg, ... \
            (.yuv, .rgb for raw formats). With --output - they are written back to back to \
            standard output: --format yuv then equals `ffmpeg -flags unaligned -f h264 -i F \
            -autoscale 0 -fps_mode passthrough -f rawvideo -` (-f hevc for H.265) byte for byte. \
            The codec is detected from the stream's first parameter set unless --codec states it. \
            Pictures decoded on \
            a GPU are written in the software decoder's pixel format too (NVDEC's and VA-API's \
            NV12 becomes yuv420p: the same samples, chroma de-interleaved), so that holds on every \
            back end whose decode is bit-exact. The summary on standard error ends with the back \
            end used and why (e.g. "backend software: NVDEC cannot decode High 10 (10-bit)"), \
            after the encoder used and why ("encoder turbojpeg (...)"). \
            With --compare-encoders each written JPEG is also encoded by TurboJPEG at the same \
            quality, both are decoded back to their YCbCr samples, and one JSON line on standard \
            error reports the chosen encoder's PSNR against TurboJPEG's: {"encoderComparison": \
            {"encoder", "reason", "pictures", "deviceEncodes", "identicalPictures", "psnrMinDB", \
            "psnrMeanDB", "downloads"}} (the mean over the pictures that differ at all; null where \
            there are none). nvJPEG encodes a \
            picture on the GPU before anything downloads it, so "deviceEncodes" counts the \
            pictures it took straight from the decoder's surface; the TurboJPEG reference then \
            downloads each picture ("downloads"). Without --compare-encoders, JPEG at the \
            picture's own size with --backend cuda and --encoder nvjpeg downloads nothing.
            """
    )

    @Argument(help: "An H.264 or H.265 Annex B elementary stream, or - for standard input.")
    var input: String

    @Option(help: "h264 or h265: the stream's codec (default: detected from its first parameter set).")
    var codec: VideoCodec?

    @Option(help: "A directory for one file per picture, or - for standard output.")
    var output = "frames"

    @Option(help: "jpeg, yuv (native planar pixels) or rgb (packed RGB24).")
    var format: PictureFormat = .jpeg

    @Option(help: "Write every Nth decoded picture (1 = all).")
    var every = 1

    @Flag(help: "Decode only keyframes (H.264 IDR or recovery point, H.265 IRAP): much less CPU for thumbnails. A stream with intra refresh instead (recovery points that are not intra pictures) is decoded whole.")
    var keyframesOnly = false

    @Option(help: "Output width; with only one of width/height the aspect ratio is kept.")
    var width: Int?

    @Option(help: "Output height; with only one of width/height the aspect ratio is kept.")
    var height: Int?

    @Option(help: "JPEG quality, 1-100.")
    var quality = PictureOptions.defaultQuality

    @Option(
        help: """
            auto (CUDA/NVDEC, then VA-API, then software; streams the hardware cannot decode fall \
            back to software), cuda or vaapi (required: fail rather than decode in software), or software.
            """)
    var backend: DecoderBackendChoice = .auto

    @Option(
        name: .customLong("hw-devices"),
        help: """
            Hardware devices to use, e.g. cuda:0,cuda:1,/dev/dri/renderD128 (cuda = cuda:0, vaapi = every \
            /dev/dri/renderD*). Default: every CUDA device, then every render node.
            """)
    var hwDevices: String?

    @Option(
        help: """
            auto (nvJPEG on the GPU when libnvjpeg.so.12, the NVIDIA driver and a CUDA device are \
            there, else TurboJPEG), nvjpeg (the same, asked for) or turbojpeg (the CPU alone).
            """)
    var encoder: PictureEncoderChoice = .auto

    @Flag(help: "Measure the encoder against TurboJPEG at the same quality (JPEG only; see above).")
    var compareEncoders = false

    @Option(help: "Decoder threads (0 = one per core).")
    var threads = 0

    @Option(name: .customLong("max-nal-bytes"), help: "Largest NAL unit accepted, in bytes.")
    var maxNALBytes = AnnexBSplitter.defaultMaxNALBytes

    @Flag(help: "Let libavcodec print its own warnings about the stream.")
    var verbose = false

    func validate() throws {
        guard every >= 1 else { throw ValidationError("--every must be at least 1") }
        guard maxNALBytes >= 1024 else { throw ValidationError("--max-nal-bytes must be at least 1024") }
        guard threads >= 0 && threads <= 64 else { throw ValidationError("--threads must be 0...64") }
        guard !compareEncoders || format == .jpeg else { throw ValidationError("--compare-encoders compares JPEGs: --format jpeg") }
        do {
            _ = try hardwareDevices
        } catch {
            throw ValidationError("--hw-devices: \(error.message)")
        }
        do {
            _ = try pictureOptions.validated()
        } catch {
            throw ValidationError(error.message)
        }
    }

    private var hardwareDevices: HardwareDeviceList? {
        get throws(DecodeError) { try hwDevices.map { text throws(DecodeError) in try HardwareDeviceList(parsing: text) } }
    }

    private var pictureOptions: PictureOptions {
        PictureOptions(format: format, width: width, height: height, quality: quality)
    }

    func run() throws {
        LibavLogging.set(verbose ? .warnings : .quiet)
        var decoderOptions = keyframesOnly ? DecoderOptions.lowLatency(backend: backend) : DecoderOptions.throughput(backend: backend)
        decoderOptions.threads = threads
        let sink: PictureSink
        let decoder: StreamDecoder
        let encoder: any PictureEncoding
        do {
            decoderOptions.hardwareDevices = try hardwareDevices
            sink = try PictureSink(destination: output, format: format)
            decoder = try StreamDecoder(
                options: decoderOptions, maxNALBytes: maxNALBytes, keyframesOnly: keyframesOnly, codec: codec)
            encoder = try PictureEncoders.standard(self.encoder).makeEncoder()
        } catch let failure as CommandFailure {
            printError("frametap: error: \(failure.message)")
            throw failure.exitCode
        } catch let error as DecodeError {
            printError("frametap: error: \(error.message)")
            throw ExitStatus.noDecodablePicture
        } catch {
            printError("frametap: error: \(error)")
            throw ExitStatus.noDecodablePicture
        }

        let comparison: EncoderComparison?
        do {
            comparison = compareEncoders ? try EncoderComparison() : nil
        } catch {
            printError("frametap: error: \(error.message)")
            throw ExitStatus.noDecodablePicture
        }
        let run = DecodeRun(encoder: encoder, sink: sink, options: pictureOptions, every: every, comparison: comparison)
        do {
            var reader = try InputReader(path: input)
            try reader.forEachChunk { chunk in try run.decoded(decoder.push(chunk, onPicture: run.write)) }
            try run.decoded(decoder.finish(onPicture: run.write))
        } catch {
            run.progress.finishLine()
            let failure = error as? CommandFailure ?? CommandFailure.io("\(error)")
            printError("frametap: error: \(failure.message)")
            throw failure.exitCode
        }
        let progress = run.progress
        let firstError = run.firstError
        progress.finishLine()

        let counters = decoder.counters
        let units = counters.nalUnits.values.reduce(0, +)
        if progress.framesDecoded == 0, let error = firstError, error.code == .lengthPrefixedUnits {
            printError("frametap: error: \(input): \(error.message)")
            throw ExitStatus.notVideo
        }
        if progress.framesDecoded == 0, let stated = codec, decoder.lastError?.code == .codecMismatch {
            let failure = CommandFailure.otherCodec(than: stated, input: input)
            printError("frametap: error: \(failure.message)")
            throw failure.exitCode
        }
        guard units > 0, let codec = decoder.codec else {
            let why =
                units == 0
                ? "no start code in \(counters.bytes) bytes"
                : "\(units) NAL units and no parameter set of either codec (--codec h264 or h265 reads them anyway)"
            printError("frametap: error: \(input) is neither an H.264 nor an H.265 Annex B stream: \(why)")
            throw ExitStatus.notVideo
        }
        guard progress.framesDecoded > 0 else {
            let why = Self.explainNoPicture(codec, counters, firstError ?? decoder.lastError)
            printError("frametap: error: no decodable picture in \(input): \(why)")
            throw ExitStatus.noDecodablePicture
        }
        let seconds = progress.elapsedSeconds
        var summary = "frametap: decoded \(progress.framesDecoded) frame\(progress.framesDecoded == 1 ? "" : "s")"
        if let last = progress.lastFrame {
            summary += " (\(last.width)x\(last.height) \(last.pixelFormatName), \(last.decodedBy.rawValue))"
        }
        summary += " in \(fixed(seconds, 2)) s (\(fixed(Double(progress.framesDecoded) / max(seconds, 1e-9), 1)) fps)"
        summary += "; wrote \(sink.picturesWritten) \(format.rawValue) picture(s) to \(output == "-" ? "stdout" : output)"
        if counters.decodeErrors > 0 { summary += "; \(counters.decodeErrors) decode error(s)" }
        // Refused pictures among decoded ones: the refusal, as scripts retry such a stream on auto.
        if let refusal = run.firstRefusal { summary += "; hardware refused: \(refusal.message)" }
        if counters.framesDroppedBeforeKeyframe > 0 {
            summary += "; \(counters.framesDroppedBeforeKeyframe) picture(s) before the first keyframe, or before the stream recovered, not shown"
        }
        if counters.framesSkippedLeading > 0 {
            summary += "; \(counters.framesSkippedLeading) leading picture(s) of the first keyframe skipped (RASL)"
        }
        if counters.unitsOutsideBaseLayer > 0 {
            summary += "; \(counters.unitsOutsideBaseLayer) NAL unit(s) of layers above the base layer left out"
        }
        let downloads = decoderOptions.frameDownloads
        if downloads.downloads + downloads.failures > 0 {
            // Hardware pictures reach system memory only when written (see DecodedFrame).
            summary += "; \(downloads.downloads) picture(s) downloaded from the GPU"
            if downloads.failures > 0 { summary += ", \(downloads.failures) download(s) failed" }
        }
        let fallbacks = decoder.fallbacks
        if !fallbacks.isEmpty {
            summary += "; fallback: " + fallbacks.map {
                "\($0.from.rawValue) -> \($0.to.rawValue) \($0.reason.rawValue) after \($0.afterFrames) picture(s)"
            }.joined(separator: ", ")
        }
        if let comparison {
            printError(comparison.json(encoder: encoder.identity, downloads: downloads.downloads))
        }
        summary += "; encoder \(encoder.identity.name) (\(encoder.identity.reason))"
        // Last, so scripts can read it as "; backend NAME (REASON)" at the end of the line.
        summary += "; backend \(decoder.backend.rawValue) (\(decoder.backendReason))"
        printError(summary)
    }

    /// Why a stream of `codec` gave no picture, in the codec's terms (`NALUnitNames`).
    private static func explainNoPicture(_ codec: VideoCodec, _ counters: StreamDecoder.Counters, _ error: DecodeError?) -> String {
        let counts = counters.nalUnits
        let names = NALUnitNames.of(codec)
        for set in names.parameterSets where counts[set.name] == nil { return "no \(set.title) found" }
        let slices = names.slices.reduce(0) { $0 + (counts[$1] ?? 0) }
        if slices == 0 {
            let other = counts.keys.filter(names.extensions.contains)
            return other.isEmpty
                ? "no coded slice found"
                : "only \(names.extensionTitle) (\(other.sorted().joined(separator: ", "))), no base-layer slice"
        }
        if counters.framesRejectedTooLarge > 0, let error { return error.message }
        if counters.framesDroppedBeforeKeyframe > 0 && !names.randomAccess.contains(where: { counts[$0] != nil }) {
            return "no \(names.randomAccessTitle) to start decoding from, or the stream ended before it recovered"
        }
        return error?.message ?? "the decoder produced no picture"
    }
}

extension PictureFormat: ExpressibleByArgument {}
extension VideoCodec: ExpressibleByArgument {}
extension DecoderBackendChoice: ExpressibleByArgument {}
extension PictureEncoderChoice: ExpressibleByArgument {}

/// The per-picture half of the decode loop: count, thin out (`--every`), encode, write.
final class DecodeRun {
    let encoder: any PictureEncoding
    let sink: PictureSink
    let options: PictureOptions
    let every: Int
    let comparison: EncoderComparison?
    var progress = Progress(enabled: isatty(STDERR_FILENO) != 0)
    private(set) var firstError: DecodeError?
    /// The first picture a required hardware back end turned down (it names the reason code).
    private(set) var firstRefusal: DecodeError?
    private var writeFailure: CommandFailure?

    init(encoder: any PictureEncoding, sink: PictureSink, options: PictureOptions, every: Int, comparison: EncoderComparison?) {
        self.encoder = encoder
        self.comparison = comparison
        self.sink = sink
        self.options = options
        self.every = every
    }

    /// Each picture as the decoder hands it out (so only the decoder's own pictures stay alive).
    /// The first write failure is kept and thrown by `decoded`, as the decoder cannot be
    /// interrupted mid-push.
    func write(_ frame: DecodedFrame) {
        guard writeFailure == nil else { return }
        progress.frameDecoded(frame)
        guard (progress.framesDecoded - 1) % every == 0 else { return }
        do throws(CommandFailure) {
            // A GPU picture is downloaded by the encoder if it needs its pixels (a GPU encoder may
            // not); a failed download is the decoder's failure, not the encoder's.
            let wasOnDevice = frame.isOnDevice
            let picture: EncodedPicture
            do {
                picture = try encoder.encode(frame, options)
            } catch {
                if let download = frame.downloadError { throw CommandFailure(download) }
                throw CommandFailure(error)
            }
            if let comparison {
                do {
                    try comparison.compare(picture, of: frame, onDevice: wasOnDevice && frame.isOnDevice, options)
                } catch {
                    if let download = frame.downloadError { throw CommandFailure(download) }
                    throw CommandFailure(error)
                }
            }
            try sink.write(picture)
        } catch {
            writeFailure = error
        }
    }

    /// After each push: its errors, and the first failure to write a picture.
    func decoded(_ errors: [DecodeError]) throws(CommandFailure) {
        if firstError == nil { firstError = errors.first }
        if firstRefusal == nil { firstRefusal = errors.first { $0.code == .decoderUnavailable } }
        if let writeFailure { throw writeFailure }
        progress.report()
    }
}

/// Where decoded pictures go: numbered files in a directory, or standard output.
final class PictureSink {
    private let directory: String?
    private let fileExtension: String
    private(set) var picturesWritten = 0

    init(destination: String, format: PictureFormat) throws(CommandFailure) {
        fileExtension = format == .jpeg ? "jpg" : format.rawValue
        if destination == "-" {
            directory = nil
            signal(SIGPIPE, SIG_IGN)  // a closed pipe becomes EPIPE, reported as an output error
            return
        }
        directory = destination
        try Self.makeDirectory(destination)
    }

    /// `mkdir -p`, failing with the system's reason for the part that could not be made.
    private static func makeDirectory(_ path: String) throws(CommandFailure) {
        guard !path.isEmpty else { throw CommandFailure.io("the output directory is empty: name one, or - for standard output") }
        var made = path.hasPrefix("/") ? "/" : ""
        for part in path.split(separator: "/") {
            made += made.isEmpty || made.hasSuffix("/") ? String(part) : "/\(part)"
            guard mkdir(made, 0o777) != 0 else { continue }  // less the umask, as mkdir(1)
            let reason = errno
            var status = stat()
            if reason == EEXIST, stat(made, &status) == 0, status.st_mode & S_IFMT == S_IFDIR { continue }
            let why = reason == EEXIST ? "it exists and is not a directory" : String(cString: strerror(reason))
            let part = made == path ? "" : " (at \(made))"
            throw CommandFailure.io("cannot create the output directory \(path)\(part): \(why)")
        }
    }

    func write(_ picture: EncodedPicture) throws(CommandFailure) {
        picturesWritten += 1
        guard let directory else {
            try picture.withUnsafeBytes { bytes throws(CommandFailure) in try writeAll(bytes, to: STDOUT_FILENO, name: "stdout") }
            return
        }
        let path = "\(directory)/frame-\(zeroPadded(picturesWritten, 6)).\(fileExtension)"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw CommandFailure.io("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        try picture.withUnsafeBytes { bytes throws(CommandFailure) in try writeAll(bytes, to: descriptor, name: path) }
    }
}

/// Counts pictures and, on a terminal, redraws one progress line at most 4 times a second.
struct Progress {
    let enabled: Bool
    private let start = SystemClock().uptime
    private var lastReport: UInt64 = 0
    private(set) var framesDecoded = 0
    private(set) var lastFrame: DecodedFrame?

    init(enabled: Bool) { self.enabled = enabled }

    var elapsedSeconds: Double { Double(SystemClock().uptime - start) / 1e9 }

    mutating func frameDecoded(_ frame: DecodedFrame) {
        framesDecoded += 1
        lastFrame = frame
    }

    mutating func report() {
        guard enabled else { return }
        let now = SystemClock().uptime
        guard now - lastReport > 250_000_000 else { return }
        lastReport = now
        let seconds = elapsedSeconds
        printError("\rframes \(framesDecoded)  \(fixed(Double(framesDecoded) / max(seconds, 1e-9), 1)) fps  \(fixed(seconds, 1)) s")
    }

    func finishLine() {
        if enabled && lastReport > 0 { printError("\r\u{1B}[K") }
    }
}

/// `--compare-encoders`: each picture the chosen encoder made, against TurboJPEG's at the same
/// options (`JPEGComparison`).
final class EncoderComparison {
    private let reference: any PictureEncoding
    private(set) var pictures = 0
    private(set) var deviceEncodes = 0
    private var minimum = Double.infinity
    private var finiteSum = 0.0
    private var identical = 0

    init() throws(ImagingError) {
        reference = try TurboJPEGEncoderFactory(reason: "the reference of --compare-encoders").makeEncoder()
    }

    /// `onDevice`: the picture was still on the GPU after the chosen encoder made `picture`.
    func compare(_ picture: EncodedPicture, of frame: DecodedFrame, onDevice: Bool, _ options: PictureOptions) throws(ImagingError) {
        let expected = try reference.encode(frame, options)
        let psnr = try JPEGComparison.psnr(picture, against: expected)
        pictures += 1
        if onDevice { deviceEncodes += 1 }
        minimum = min(minimum, psnr)
        if psnr.isFinite { finiteSum += psnr } else { identical += 1 }
    }

    /// One line of JSON; the mean is over the pictures that differ at all (identical ones have
    /// no finite PSNR), the minimum over all; both null when every picture was identical.
    func json(encoder: PictureEncoderIdentity, downloads: Int) -> String {
        let differing = pictures - identical
        func number(_ value: Double?) -> String {
            guard let value, value.isFinite else { return "null" }
            return fixed(value, 2)
        }
        let fields = [
            "\"encoder\":\(JSONString.quoted(encoder.name))", "\"reason\":\(JSONString.quoted(encoder.reason))", "\"pictures\":\(pictures)",
            "\"deviceEncodes\":\(deviceEncodes)", "\"identicalPictures\":\(identical)",
            "\"psnrMinDB\":\(number(pictures > 0 ? minimum : nil))",
            "\"psnrMeanDB\":\(number(differing > 0 ? finiteSum / Double(differing) : nil))", "\"downloads\":\(downloads)",
        ]
        return "{\"encoderComparison\":{" + fields.joined(separator: ",") + "}}"
    }
}
