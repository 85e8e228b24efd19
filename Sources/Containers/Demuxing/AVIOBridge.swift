import CFFmpeg

/// An `AVIOContext` whose bytes come from a `DemuxByteInput` instead of a file or a socket:
/// libavformat's demuxers read a push through it with no temporary file, and memory bounded by
/// its buffer and the `SeekWindow`.
///
/// It is not seekable (`seekable = 0`): demuxers then read through forward seeks and leave out
/// what only a seekable file allows (an MP4's `mfra` at the end, Matroska's cues). Backward
/// seeks reach `seek`, which serves them from the window of kept bytes, or fails; `failedSeek`
/// then says where the demuxer wanted to go.
///
/// Used on the demuxer's thread only.
final class AVIOBridge {
    static let bufferSize = 32 * 1024

    private(set) var context: UnsafeMutablePointer<AVIOContext>?
    private let input: any DemuxByteInput
    private var window: SeekWindow
    /// The offset of a seek before the kept bytes, if the demuxer tried one.
    private(set) var failedSeek: Int?
    /// The input said to stop.
    private(set) var interrupted = false

    /// `offset`: the stream offset of the input's first byte, which libavformat then reads
    /// positions from (a demuxer started afresh inside a stream, `MP4BoxScreen`).
    init(input: any DemuxByteInput, windowCapacity: Int, startingAt offset: Int = 0) throws(ContainerError) {
        self.input = input
        window = SeekWindow(capacity: windowCapacity, startingAt: offset)
        guard let buffer = av_malloc(Self.bufferSize) else {
            throw ContainerError(.invalidContainer, "could not allocate the demuxer's input buffer")
        }
        let context = avio_alloc_context(
            buffer.assumingMemoryBound(to: UInt8.self), Int32(Self.bufferSize), 0, nil,
            { opaque, buffer, size in
                guard let opaque, let buffer, size > 0 else { return ft_averror_eof() }
                let bridge = Unmanaged<AVIOBridge>.fromOpaque(opaque).takeUnretainedValue()
                return bridge.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: Int(size)))
            },
            nil,
            { opaque, offset, whence in
                guard let opaque else { return Int64(ft_averror(ENOSYS)) }
                return Unmanaged<AVIOBridge>.fromOpaque(opaque).takeUnretainedValue().seek(offset, whence: whence)
            })
        guard let context else {
            var buffer: UnsafeMutableRawPointer? = buffer
            av_freep(&buffer)
            throw ContainerError(.invalidContainer, "could not allocate the demuxer's input")
        }
        context.pointee.seekable = 0
        context.pointee.pos = Int64(offset)
        self.context = context
        // Unretained: the bridge outlives its context (freed in deinit), and only the demuxer
        // that holds the bridge calls back into it.
        context.pointee.opaque = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        guard let context else { return }
        // libavformat may have replaced the buffer (a larger one for probing); free whatever it holds now.
        withUnsafeMutablePointer(to: &context.pointee.buffer) { pointer in
            pointer.withMemoryRebound(to: UnsafeMutableRawPointer?.self, capacity: 1) { av_freep($0) }
        }
        var optional: UnsafeMutablePointer<AVIOContext>? = context
        avio_context_free(&optional)
    }

    /// The most bytes kept for seeking back (`--container-seek-window`).
    var windowCapacity: Int { window.capacity }

    /// Bytes taken from the input so far.
    var bytesRead: Int { window.end }

    /// The demuxer returned a packet starting at `offset`: it will not seek back before it.
    func retain(from offset: Int) {
        window.retain(from: offset)
    }

    /// Bytes held for seeking back now.
    var heldBytes: Int { window.heldBytes }

    private func read(into buffer: UnsafeMutableRawBufferPointer) -> Int32 {
        if window.bufferedAhead > 0 { return Int32(window.read(into: buffer)) }
        switch input.read(into: buffer) {
        case .bytes(let count):
            window.append(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            return Int32(count)
        case .end:
            return ft_averror_eof()
        case .interrupted:
            interrupted = true
            return ft_averror_exit()
        }
    }

    private func seek(_ offset: Int64, whence: Int32) -> Int64 {
        let whence = whence & ~Int32(AVSEEK_FORCE)
        let target: Int
        switch whence {
        case Int32(AVSEEK_SIZE): return -1  // a stream's size is not known
        case SEEK_SET: target = Int(offset)
        case SEEK_CUR: target = window.cursor + Int(offset)
        default: return Int64(ft_averror(ENOSYS))
        }
        if window.seek(to: target) { return Int64(target) }
        guard target > window.end else {
            failedSeek = target
            return Int64(ft_averror(ESPIPE))
        }
        // Forward, past what was read: read through to it (libavformat does this itself for
        // most forward seeks on an input that is not seekable).
        _ = window.seek(to: window.end)
        var scratch = [UInt8](repeating: 0, count: Self.bufferSize)
        while window.end < target {
            let wanted = min(scratch.count, target - window.end)
            let result = scratch.withUnsafeMutableBytes { input.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[..<wanted])) }
            switch result {
            case .bytes(let count):
                scratch.withUnsafeBytes { window.append(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            case .end:
                return ft_averror_eof().int64
            case .interrupted:
                interrupted = true
                return ft_averror_exit().int64
            }
        }
        return Int64(target)
    }
}

extension Int32 {
    fileprivate var int64: Int64 { Int64(self) }
}
