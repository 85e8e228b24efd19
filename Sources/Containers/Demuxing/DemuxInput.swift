/// Where a demuxer over FrameTap's own I/O reads its bytes: a push's bytes as they arrive, or a
/// pulled HTTP body. Read on the demuxer's thread, which it may block.
public protocol DemuxByteInput: AnyObject {
    /// Blocks until at least one byte is there (and copies at most `buffer.count`), the input
    /// ends, or the demuxer is to stop.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> DemuxInputRead
}

public enum DemuxInputRead: Sendable, Equatable {
    /// This many bytes (at least one) were copied.
    case bytes(Int)
    /// No more bytes will come: the demuxer drains what it holds.
    case end
    /// The demuxer is to stop now (its session is closing).
    case interrupted
}

/// A byte input over bytes already in memory (tests, fuzzing, a sniffed prefix).
public final class InMemoryInput: DemuxByteInput {
    private let bytes: [UInt8]
    private let pieceSize: Int
    private var offset = 0

    /// `pieceSize`: the most bytes one read returns, as a network would deliver them.
    public init(_ bytes: [UInt8], pieceSize: Int = .max) {
        self.bytes = bytes
        self.pieceSize = max(1, pieceSize)
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer) -> DemuxInputRead {
        guard offset < bytes.count else { return .end }
        let count = min(buffer.count, pieceSize, bytes.count - offset)
        bytes.withUnsafeBytes { source in
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<(offset + count)]))
        }
        offset += count
        return .bytes(count)
    }
}

/// Some bytes first (those a caller read to tell what the input is), then the rest of an input.
final class PrefixedInput: DemuxByteInput {
    private var prefix: ArraySlice<UInt8>
    private let rest: any DemuxByteInput

    init(prefix: [UInt8], rest: any DemuxByteInput) {
        self.prefix = prefix[...]
        self.rest = rest
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> DemuxInputRead {
        guard !prefix.isEmpty else { return rest.read(into: buffer) }
        let count = min(buffer.count, prefix.count)
        prefix.prefix(count).withUnsafeBytes { buffer.copyMemory(from: $0) }
        prefix = prefix.dropFirst(count)
        return .bytes(count)
    }
}
