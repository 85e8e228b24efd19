import Containers
import FoundationEssentials
import ArgumentParser
import Decoding
import Imaging
import VideoCoding

#if canImport(Glibc)
    import Glibc
#endif

/// Reads a file or standard input (`-`) in fixed-size pieces, so any input size costs the
/// same memory. Every failure is a `CommandFailure.io` naming the path.
struct InputReader {
    let path: String
    private let descriptor: Int32
    private var buffer: [UInt8]

    init(path: String, chunkSize: Int = 1 << 20) throws(CommandFailure) {
        self.path = path
        if path == "-" {
            descriptor = STDIN_FILENO
        } else {
            let opened = open(path, O_RDONLY | O_CLOEXEC)
            guard opened >= 0 else {
                throw CommandFailure.io("cannot open \(path): \(String(cString: strerror(errno)))")
            }
            var info = stat()
            if fstat(opened, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
                close(opened)
                throw CommandFailure.io("cannot read \(path): it is a directory")
            }
            descriptor = opened
        }
        buffer = [UInt8](repeating: 0, count: chunkSize)
    }

    /// Calls `body` with each piece until end of input. The offline commands read Annex B: an
    /// input whose first piece begins a container is refused (exit 4) before `body` sees it.
    mutating func forEachChunk(_ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        defer { if descriptor != STDIN_FILENO { close(descriptor) } }
        let fd = descriptor
        let path = path
        var first = true
        try buffer.withUnsafeMutableBytes { storage in
            while true {
                let count = read(fd, storage.baseAddress, storage.count)
                if count < 0 {
                    if errno == EINTR { continue }
                    throw CommandFailure.io("cannot read \(path): \(String(cString: strerror(errno)))")
                }
                if count == 0 { return }
                let chunk = UnsafeRawBufferPointer(rebasing: storage[0..<count])
                if first, let refusal = CommandFailure.container(chunk, input: path) { throw refusal }
                first = false
                try body(chunk)
            }
        }
    }
}

/// Writes all bytes to a descriptor, retrying short writes and EINTR.
func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32, name: String) throws(CommandFailure) {
    var offset = 0
    while offset < bytes.count {
        let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
        if written < 0 {
            if errno == EINTR { continue }
            throw CommandFailure.io("cannot write \(name): \(String(cString: strerror(errno)))")
        }
        offset += written
    }
}

/// Standard error, unbuffered: progress and summaries never mix with picture bytes on stdout.
func printError(_ message: String) {
    var line = message
    if !line.hasSuffix("\n") && !line.hasSuffix("\r") { line += "\n" }
    line.utf8CString.withUnsafeBytes { raw in
        try? writeAll(UnsafeRawBufferPointer(rebasing: raw.dropLast()), to: STDERR_FILENO, name: "stderr")
    }
}

/// A failure of `decode` or `probe`: the line for standard error and the documented exit code.
struct CommandFailure: Error, CustomStringConvertible {
    let message: String
    let exitCode: ExitCode

    var description: String { message }

    /// An input whose first bytes begin a container (exit 4): the offline commands read Annex B,
    /// and MPEG-TS would otherwise read as Annex B with garbage pictures (its packets hold start
    /// codes). Nil for anything else, and while `first` is too short to tell.
    static func container(_ first: some Collection<UInt8>, input: String) -> CommandFailure? {
        guard case .container(let format) = Sniffer.sniff(ArraySlice(first.prefix(Sniffer.decisiveLength)), complete: false)
        else { return nil }
        return CommandFailure(
            message: "\(input) is \(format.displayName), not an H.264 or H.265 Annex B stream: push it to frametap serve, "
                + "which reads containers, or take its video out first (ffmpeg -i IN -map 0:v -c copy -f h264 OUT.264; "
                + "-f hevc for H.265)",
            exitCode: ExitStatus.notVideo)
    }

    /// `--codec` named one codec and the input carries the other's parameter sets: read as the
    /// stated codec, nothing in it decodes (exit 1).
    static func otherCodec(than stated: VideoCodec, input: String) -> CommandFailure {
        let other = VideoCodec.allCases.first { $0 != stated }?.displayName ?? "another codec's"
        return CommandFailure(
            message: "no decodable picture in \(input): it carries \(other) parameter sets, but --codec says \(stated.displayName)",
            exitCode: ExitStatus.noDecodablePicture)
    }

    /// Reading the input or writing the output failed (exit 3).
    static func io(_ message: String) -> CommandFailure {
        CommandFailure(message: message, exitCode: ExitStatus.inputOutput)
    }

    /// Decoding failed (exit 1).
    init(_ error: DecodeError) {
        self.init(message: error.message, exitCode: ExitStatus.noDecodablePicture)
    }

    /// A picture could not be encoded (exit 1).
    init(_ error: ImagingError) {
        self.init(message: error.message, exitCode: ExitStatus.noDecodablePicture)
    }

    private init(message: String, exitCode: ExitCode) {
        self.message = message
        self.exitCode = exitCode
    }
}

/// `value` with leading zeros to `width` digits.
func zeroPadded(_ value: Int, _ width: Int) -> String {
    let digits = String(value)
    return String(repeating: "0", count: max(0, width - digits.count)) + digits
}
