/// The bytes a demuxer read lately, so that it can seek back among them.
///
/// A push is a stream: its bytes arrive once and cannot be asked for again. Demuxers mostly read
/// forward (libavformat reads through a forward seek on an input that is not seekable), but some
/// look back: MPEG-TS rereads its first packets after finding the programs, and an MP4 whose
/// `moov` box comes after its media data must go back to that data once it has read the `moov`.
/// So the bytes from the oldest position the demuxer may still return to are kept, up to
/// `capacity`; a seek before the kept bytes fails, and the demuxer reports what it could not read.
///
/// The demuxer says how far back it may still go with `retain(from:)`: nothing is kept before the
/// last packet it returned (a demuxer of a stream that cannot seek returns packets in file order).
struct SeekWindow {
    /// The most bytes kept.
    let capacity: Int
    /// Offset of the first byte kept.
    private(set) var start = 0
    /// Offset after the last byte taken from the input.
    private(set) var end = 0
    /// Offset of the next byte the demuxer reads; `start...end`.
    private(set) var cursor = 0
    /// The lowest offset the demuxer may still seek back to.
    private(set) var retainedFrom = 0
    /// Bytes the demuxer might have needed were dropped to stay within `capacity`.
    private(set) var droppedRetainedBytes = false
    /// Kept bytes, oldest first, and the offset of each chunk's first byte; together they cover
    /// `start..<end` (the first chunk may begin before `start`).
    private var chunks: [[UInt8]] = []
    private var chunkOffsets: [Int] = []
    private var headIndex = 0

    /// `offset`: where the first byte appended lies in the stream (a demuxer started afresh
    /// inside one reads offsets as the stream numbers them).
    init(capacity: Int, startingAt offset: Int = 0) {
        precondition(capacity >= 0 && offset >= 0)
        self.capacity = capacity
        start = offset
        end = offset
        cursor = offset
        retainedFrom = offset
    }

    /// Bytes held right now.
    var heldBytes: Int { chunks[headIndex...].reduce(0) { $0 + $1.count } }

    /// Bytes between the cursor and what the input delivered: a read is served from here first.
    var bufferedAhead: Int { end - cursor }

    /// New bytes from the input, read at the cursor (which must be at `end`).
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        precondition(cursor == end, "new input is read only at the end of what was read before")
        guard !bytes.isEmpty else { return }
        let offset = end
        end += bytes.count
        cursor = end
        if end - max(retainedFrom, end - capacity) > 0 {
            chunks.append(Array(bytes))
            chunkOffsets.append(offset)
        }
        trim()
    }

    /// Copies kept bytes at the cursor into `buffer` (at most what is ahead of the cursor).
    mutating func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var copied = 0
        while copied < buffer.count, cursor < end, let index = chunkIndex(containing: cursor) {
            let chunk = chunks[index]
            let within = cursor - chunkOffsets[index]
            let count = min(chunk.count - within, buffer.count - copied)
            chunk.withUnsafeBytes { source in
                UnsafeMutableRawBufferPointer(rebasing: buffer[copied..<(copied + count)])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[within..<(within + count)]))
            }
            copied += count
            cursor += count
        }
        return copied
    }

    /// Moves the cursor among the kept bytes (`start...end`); false when `offset` is outside.
    mutating func seek(to offset: Int) -> Bool {
        guard offset >= start, offset <= end else { return false }
        cursor = offset
        return true
    }

    /// The demuxer will not seek back before `offset` any more.
    mutating func retain(from offset: Int) {
        guard offset > retainedFrom else { return }
        retainedFrom = min(offset, end)
        trim()
    }

    /// Drops what is before the retained offset, and the oldest bytes beyond `capacity`.
    private mutating func trim() {
        let keepFrom = max(retainedFrom, end - capacity, start)
        if keepFrom > retainedFrom && retainedFrom < end && keepFrom > start { droppedRetainedBytes = true }
        start = max(start, keepFrom)
        // The cursor never points at dropped bytes: a demuxer that seeked back reads on from there.
        if cursor < start { cursor = start }
        while headIndex < chunks.count, chunkOffsets[headIndex] + chunks[headIndex].count <= start {
            chunks[headIndex] = []
            headIndex += 1
        }
        if headIndex == chunks.count {
            chunks.removeAll(keepingCapacity: true)
            chunkOffsets.removeAll(keepingCapacity: true)
            headIndex = 0
        } else if headIndex >= 32 && headIndex * 2 >= chunks.count {
            chunks.removeFirst(headIndex)
            chunkOffsets.removeFirst(headIndex)
            headIndex = 0
        }
    }

    private func chunkIndex(containing offset: Int) -> Int? {
        var low = headIndex
        var high = chunks.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if offset < chunkOffsets[middle] {
                high = middle - 1
            } else if offset >= chunkOffsets[middle] + chunks[middle].count {
                low = middle + 1
            } else {
                return middle
            }
        }
        return nil
    }
}
