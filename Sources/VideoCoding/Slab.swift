import Synchronization

/// Memory that coded bytes land in once and are read from by everyone after: fixed-size slabs,
/// reused. An upload's bytes are copied into slabs as they arrive (`SlabWriter`), the splitter
/// cuts NAL units out of them without a copy (`SlabBytes`), and a session's history keeps those
/// units; a slab goes back to its pool when the last unit in it is let go (the history dropped
/// the GOP), and the next upload fills it again. Reused memory is already mapped and warm:
/// no fresh pages for the kernel to zero, no heap growing and shrinking under every push.
///
/// The pool keeps at most `maxIdleSlabs` slabs that nobody uses, or a quarter of the slabs in use
/// when that is more; past it, the coldest are freed. Any thread.
public final class SlabPool: Sendable {
    /// The pool every session shares: 256 KiB slabs (a 1080p picture of a camera is 20-200 KB,
    /// so few units straddle two slabs), up to 32 MiB of them idle, or a quarter of those in use.
    public static let shared = SlabPool(slabBytes: 256 << 10, maxIdleSlabs: 128)

    /// The size of every slab of this pool.
    public let slabBytes: Int
    /// Idle slabs kept whatever the use; past it, as many as a quarter of the slabs in use.
    ///
    /// Histories give their slabs back a whole GOP at a time, and sessions whose streams started
    /// together (cameras after a restart, a load generator) do it at the same moment: with a 10 s
    /// history of 2 s GOPs, a fifth of every slab in use comes back at once and is asked for again
    /// over the next GOP. A fixed bound below that frees the surplus and allocates it again: fresh
    /// pages, which the kernel must fault in and zero. A quarter of the slabs in use covers such a
    /// wave and stays proportional to what the histories hold, which `--history-bytes` bounds.
    public let maxIdleSlabs: Int

    /// What a pool holds (tests and the pool's gauges read it).
    public struct Usage: Sendable, Equatable {
        /// Slabs handed out and not yet back.
        public var inUse: Int
        /// Slabs back and waiting to be handed out again.
        public var idle: Int
        /// Slabs allocated since the pool was made (a reused slab is not counted again).
        public var allocated: Int

        public init(inUse: Int, idle: Int, allocated: Int) {
            self.inUse = inUse
            self.idle = idle
            self.allocated = allocated
        }
    }

    private struct State {
        /// Base addresses of idle slabs, most recently returned last (the warmest goes out first).
        var idle: [UnsafeMutableRawPointer] = []
        var inUse = 0
        var allocated = 0
    }

    private let state = Mutex(State())

    public init(slabBytes: Int, maxIdleSlabs: Int) {
        precondition(slabBytes > 0 && maxIdleSlabs >= 0, "a pool needs slabs of a positive size")
        self.slabBytes = slabBytes
        self.maxIdleSlabs = maxIdleSlabs
    }

    deinit {
        state.withLock { state in
            for base in state.idle { base.deallocate() }
        }
    }

    public var usage: Usage {
        state.withLock { Usage(inUse: $0.inUse, idle: $0.idle.count, allocated: $0.allocated) }
    }

    /// A slab for one writer: an idle one when there is one, a new one otherwise.
    public func slab() -> Slab {
        let reused = state.withLock { state -> SlabAddress? in
            state.inUse += 1
            if let base = state.idle.popLast() { return SlabAddress(base) }
            state.allocated += 1
            return nil
        }
        let base = reused?.pointer ?? UnsafeMutableRawPointer.allocate(byteCount: slabBytes, alignment: 64)
        return Slab(base: base, capacity: slabBytes, pool: self)
    }

    /// Idle slabs are freed, down to `keep` (a server lets go of memory after a burst).
    public func trim(keeping keep: Int = 0) {
        while let base = state.withLock({ state -> SlabAddress? in
            state.idle.count > keep ? SlabAddress(state.idle.removeFirst()) : nil
        }) {
            base.pointer.deallocate()
        }
    }

    fileprivate func recycle(_ base: UnsafeMutableRawPointer) {
        let address = SlabAddress(base)
        let surplus = state.withLock { state -> [SlabAddress] in
            state.inUse -= 1
            state.idle.append(address.pointer)
            // The bound falls as slabs come back: what it no longer covers goes, coldest first,
            // so a server whose sessions ended keeps `maxIdleSlabs` at most.
            let bound = max(maxIdleSlabs, state.inUse / 4)
            guard state.idle.count > bound else { return [] }
            let count = state.idle.count - bound
            let coldest = state.idle[..<count].map(SlabAddress.init)
            state.idle.removeFirst(count)
            return coldest
        }
        for slab in surplus { slab.pointer.deallocate() }
    }
}

/// An idle slab's address crossing the pool's lock: the pool alone owns an idle slab, so
/// handing its address out of the lock hands over that ownership.
private struct SlabAddress: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
    init(_ pointer: UnsafeMutableRawPointer) { self.pointer = pointer }
}

/// One block of memory that bytes are written into once, front to back, by one writer, and
/// then only read, by any thread, for as long as a `SlabBytes` holds it. It goes back to its
/// pool (or, made for one array's bytes, is freed) when the last holder lets go.
public final class Slab: Sendable {
    /// Written below the writer's fill mark only before the bytes there are handed out, and
    /// never after: whoever reads them got them through the lock of the queue that handed them
    /// over, which orders the write before the read. Hence the one unchecked property: the
    /// compiler cannot follow a write-once region inside shared memory.
    @usableFromInline nonisolated(unsafe) let base: UnsafeMutableRawPointer
    public let capacity: Int
    private let pool: SlabPool?

    fileprivate init(base: UnsafeMutableRawPointer, capacity: Int, pool: SlabPool?) {
        self.base = base
        self.capacity = capacity
        self.pool = pool
    }

    /// A slab of its own for `count` bytes (outside any pool), freed with its last holder.
    static func standalone(capacity: Int) -> Slab {
        Slab(base: UnsafeMutableRawPointer.allocate(byteCount: max(1, capacity), alignment: 16), capacity: capacity, pool: nil)
    }

    /// Whether the slab came from a pool (and goes back to it).
    public var isPooled: Bool { pool != nil }

    deinit {
        if let pool { pool.recycle(base) } else { base.deallocate() }
    }
}

/// Bytes that no longer change, in a slab: a NAL unit, an upload's piece. Copying one copies a
/// reference, not the bytes; the slab lives as long as any `SlabBytes` in it. Equal when the
/// bytes are equal, wherever they lie.
public struct SlabBytes: Sendable, RandomAccessCollection, Hashable, ExpressibleByArrayLiteral, CustomStringConvertible {
    public let slab: Slab
    /// Where the bytes start in the slab.
    public let offset: Int
    public let count: Int

    /// `count` bytes of `slab` from `offset`, which the slab's writer has written.
    public init(_ slab: Slab, offset: Int, count: Int) {
        precondition(offset >= 0 && count >= 0 && offset + count <= slab.capacity, "bytes outside their slab")
        self.slab = slab
        self.offset = offset
        self.count = count
    }

    /// A copy of `bytes` in memory of its own (tests, parameter sets from a container's
    /// description, anything that did not land in a pool).
    public init(_ bytes: some Collection<UInt8>) {
        let slab = Slab.standalone(capacity: bytes.count)
        let buffer = UnsafeMutableRawBufferPointer(start: slab.base, count: bytes.count)
        _ = buffer.initializeMemory(as: UInt8.self, from: bytes)
        self.init(slab, offset: 0, count: bytes.count)
    }

    /// A copy of raw bytes in memory of their own.
    public init(copying bytes: UnsafeRawBufferPointer) {
        let slab = Slab.standalone(capacity: bytes.count)
        if let source = bytes.baseAddress { slab.base.copyMemory(from: source, byteCount: bytes.count) }
        self.init(slab, offset: 0, count: bytes.count)
    }

    public init(arrayLiteral elements: UInt8...) {
        self.init(elements)
    }

    /// No bytes.
    public static let empty = SlabBytes([UInt8]())

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    @inlinable
    public subscript(position: Int) -> UInt8 {
        precondition(position >= 0 && position < count, "index out of range")
        return slab.base.load(fromByteOffset: offset + position, as: UInt8.self)
    }

    /// The bytes `range` of these, sharing their slab.
    public func region(_ range: Range<Int>) -> SlabBytes {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "range out of bounds")
        return SlabBytes(slab, offset: offset + range.lowerBound, count: range.count)
    }

    /// The same bytes in memory of their own, sized to them: for bytes kept long (a stream's
    /// parameter sets), which would otherwise hold a whole slab of other bytes.
    public func detached() -> SlabBytes {
        slab.isPooled || slab.capacity != count ? withUnsafeBytes { SlabBytes(copying: $0) } : self
    }

    /// Whether `next` begins right where these bytes end, in the same slab.
    public func isFollowed(by next: SlabBytes) -> Bool {
        next.slab === slab && next.offset == offset + count
    }

    /// Scoped access to the bytes; the slab stays alive for the whole closure.
    public func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        defer { withExtendedLifetime(slab) {} }
        return try body(UnsafeRawBufferPointer(start: slab.base + offset, count: count))
    }

    public static func == (lhs: SlabBytes, rhs: SlabBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.slab === rhs.slab && lhs.offset == rhs.offset { return true }
        return lhs.withUnsafeBytes { left in rhs.withUnsafeBytes { right in left.elementsEqual(right) } }
    }

    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    public var description: String { Array(self).description }
}

extension SlabBytes {
    /// Equal to an array of the same bytes (tests compare units with literals and arrays).
    public static func == (lhs: SlabBytes, rhs: [UInt8]) -> Bool {
        lhs.count == rhs.count && lhs.elementsEqual(rhs)
    }

    public static func == (lhs: [UInt8], rhs: SlabBytes) -> Bool { rhs == lhs }
}

/// Lands bytes in slabs of a pool, front to back: one writer's current slab, and a new one when
/// it is full. What was written is handed out as `SlabBytes`; the slab goes back to the pool once
/// the writer moved on and the last of its bytes was let go.
public struct SlabWriter: Sendable {
    public let pool: SlabPool
    private var slab: Slab?
    private var fill = 0

    public init(pool: SlabPool = .shared) {
        self.pool = pool
    }

    /// Copies `bytes` in, and hands out where they landed: one piece, or several when they did
    /// not fit in the current slab's room (the rest goes on in the next slab).
    public mutating func land(_ bytes: UnsafeRawBufferPointer, _ landed: (SlabBytes) -> Void) {
        var rest = bytes
        while !rest.isEmpty {
            let piece = landSome(rest)
            landed(piece)
            rest = UnsafeRawBufferPointer(rebasing: rest[piece.count...])
        }
    }

    /// Copies as many of `bytes` as the current slab has room for (a new slab when it is full),
    /// and hands out where they landed; at least one byte when `bytes` is not empty.
    public mutating func landSome(_ bytes: UnsafeRawBufferPointer) -> SlabBytes {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return .empty }
        if slab == nil || fill == slab!.capacity {
            slab = pool.slab()
            fill = 0
        }
        let slab = slab!
        let taken = min(bytes.count, slab.capacity - fill)
        (slab.base + fill).copyMemory(from: source, byteCount: taken)
        let landed = SlabBytes(slab, offset: fill, count: taken)
        fill += taken
        return landed
    }

    /// Copies `bytes` in, all in one place: after the current slab's bytes when they fit there,
    /// else at the start of a new slab, else (larger than a slab) in memory of their own. For
    /// bytes read as a whole later (a container's sample, whose units are regions of it).
    public mutating func landContiguous(_ bytes: UnsafeRawBufferPointer) -> SlabBytes {
        guard !bytes.isEmpty else { return .empty }
        guard bytes.count <= pool.slabBytes else { return SlabBytes(copying: bytes) }
        if slab == nil || slab!.capacity - fill < bytes.count {
            slab = pool.slab()
            fill = 0
        }
        return landSome(bytes)
    }

    /// Lets `body` write up to `count` bytes straight into the current slab (a new one when it
    /// has no room left; fewer than `count` when its room is smaller) and hands out the bytes it
    /// says it wrote: a read from a file lands in its final place.
    public mutating func fill<Failure: Error>(
        upTo count: Int, _ body: (UnsafeMutableRawBufferPointer) throws(Failure) -> Int
    ) throws(Failure) -> SlabBytes {
        guard count > 0 else { return .empty }
        if slab == nil || fill == slab!.capacity {
            slab = pool.slab()
            fill = 0
        }
        let slab = slab!
        let room = min(count, slab.capacity - fill)
        let written = try body(UnsafeMutableRawBufferPointer(start: slab.base + fill, count: room))
        precondition(written >= 0 && written <= room, "a fill wrote outside its room")
        let landed = SlabBytes(slab, offset: fill, count: written)
        fill += written
        return landed
    }

    /// Lets go of the current slab (it returns to the pool once its bytes are let go too):
    /// a writer that may wait long keeps no half-used slab meanwhile.
    public mutating func release() {
        slab = nil
        fill = 0
    }
}

extension RBSP {
    /// `unescape` of bytes in a slab, read through a raw buffer (not byte by byte through the
    /// collection's subscript).
    public static func unescape(_ bytes: SlabBytes) -> [UInt8] {
        bytes.withUnsafeBytes { unescape($0) }
    }
}

/// A `SlabWriter` several producers take turns at (one session's pushes, one after another):
/// each push goes on in the slab the one before filled part of, so a client that pushes one
/// small access unit per request does not keep a slab alive for each. Any thread.
public final class SlabLanding: Sendable {
    private let writer: Mutex<SlabWriter>

    public init(pool: SlabPool = .shared) {
        writer = Mutex(SlabWriter(pool: pool))
    }

    /// `SlabWriter.landSome`.
    public func landSome(_ bytes: UnsafeRawBufferPointer) -> SlabBytes {
        writer.withLock { $0.landSome(bytes) }
    }
}
