/// One NAL unit as the splitter found it, before any codec reads its header: H.264 and H.265
/// each build their own NAL unit model from it, sharing `bytes` (their slab, not a copy).
public struct AnnexBUnit: Sendable, Equatable {
    /// From the NAL unit header on; no start code, no trailing zero bytes; emulation prevention
    /// kept. Never empty.
    public let bytes: SlabBytes
    /// Offset of the first header byte since the start of the stream (the last `finish()`).
    public let streamOffset: Int

    public init(bytes: SlabBytes, streamOffset: Int) {
        self.bytes = bytes
        self.streamOffset = streamOffset
    }

    /// A unit of these bytes, copied into memory of their own (tests, tools).
    public init(bytes: [UInt8], streamOffset: Int) {
        self.init(bytes: SlabBytes(bytes), streamOffset: streamOffset)
    }
}

/// What the splitter reports while it reads a byte stream.
public enum SplitterEvent: Sendable {
    case unit(AnnexBUnit)
    /// A unit was larger than `maxNALBytes`; its bytes were discarded (`.nalTooLarge`). `prefix`
    /// is its first bytes (at most `AnnexBSplitter.prefixLength`, fewer only for caps that small),
    /// for the access-unit assemblers' `unitDropped(prefix:)`.
    case dropped(BitstreamError, prefix: ArraySlice<UInt8>)
}

/// Cuts an Annex B byte stream (H.264 §B.2, H.265 §B.2, the same format) into NAL units,
/// whatever the size of the pieces it receives: pushing one byte at a time gives the same units
/// as pushing the whole stream.
///
/// A unit is emitted when the start code after it arrives, or at `finish()`. All zero bytes before
/// a start code are removed from the unit before it (the zero_byte of a four-byte start code and
/// trailing_zero_8bits; a NAL unit never ends in a zero byte, §7.4.1). Empty units are skipped.
///
/// Bytes land once: pieces that already lie in a slab (`push(_: SlabBytes)`, an upload's) are
/// cut without a copy, each unit a region of the slab its bytes arrived in, as long as the
/// pieces it came in follow each other there. A unit whose bytes do not (it straddles two
/// slabs, or came as raw bytes) is assembled in a slab of the splitter's own, from the same pool.
///
/// Memory stays bounded: a unit that grows past `maxNALBytes` is reported as `.dropped` at once,
/// the rest of its bytes are skipped without being buffered, and splitting resumes at the next
/// start code. Zero bytes are not copied until a non-zero byte proves they are part of the unit,
/// so padding between units costs nothing and never counts against the limit.
public struct AnnexBSplitter: Sendable {
    public let maxNALBytes: Int
    /// The NAL size cap every FrameTap entry point uses unless configured otherwise: far above
    /// any real slice (an 8K intra picture in one slice is a few MB), small enough to bound memory.
    public static let defaultMaxNALBytes = 8 << 20
    /// How many first bytes of a unit `pendingUnitPrefix` and `.dropped` give: enough for every
    /// slice header field that can end an access unit early (H.264's first_mb_in_slice,
    /// slice_type and pic_parameter_set_id; H.265's first_slice_segment_in_pic_flag, the first
    /// bit after its two-byte header).
    public static let prefixLength = 16
    /// Every byte pushed since this splitter was made (not reset by `finish()`).
    public private(set) var bytesConsumed = 0
    /// Bytes before the first start code of a stream that were not zero padding (garbage skipped).
    public private(set) var discardedBytes = 0
    /// Units reported as `.dropped` since this splitter was made.
    public private(set) var droppedUnits = 0
    /// Units emitted since this splitter was made.
    public private(set) var emittedUnits = 0
    /// Units that had to be copied (assembled) rather than cut from the slab they arrived in.
    public private(set) var assembledUnits = 0

    private enum Mode: Sendable {
        case seekingFirstStartCode
        case collecting
        case discardingOversizedUnit
    }

    private var mode = Mode.seekingFirstStartCode
    /// The unit being collected: where its bytes are so far.
    private var unit = CollectedUnit.empty
    /// Consecutive zero bytes at the end of everything seen. While collecting, they are not in
    /// the unit yet: they are either inside the unit (then taken) or padding/start code (dropped).
    private var zeroRun = 0
    /// Stream offset of the next byte to arrive.
    private var position = 0
    /// The stream offset the next pushed byte will have (`AnnexBUnit.streamOffset` counts the
    /// same way): back to 0 at `finish()`, where a stream ends.
    public var nextStreamOffset: Int { position }
    private var unitOffset = 0
    private var skippedBeforeFirstStartCode = 0
    /// The landed pieces that followed each other in one slab up to now (`LandedRun.slabOffset`
    /// says where a stream offset lies in it).
    private var run: LandedRun?
    private var assembly: UnitAssembly

    private enum CollectedUnit: Sendable {
        case empty
        /// Stream offsets `start..<start + count`, all inside the current landed run.
        case inPlace(start: Int, count: Int)
        /// In `assembly`.
        case assembled
    }

    private struct LandedRun: Sendable {
        var slab: Slab
        var slabStart: Int
        var streamStart: Int
        /// Slab offset right after the last landed byte.
        var slabEnd: Int

        /// Where the byte at `streamOffset` (from `streamStart` on) lies in `slab`.
        func slabOffset(ofStream streamOffset: Int) -> Int { slabStart + (streamOffset - streamStart) }
    }

    public init(maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes, pool: SlabPool = .shared) {
        precondition(maxNALBytes > 0, "maxNALBytes must be positive")
        self.maxNALBytes = maxNALBytes
        assembly = UnitAssembly(pool: pool)
    }

    public mutating func push(_ bytes: [UInt8], _ handle: (SplitterEvent) -> Void) {
        bytes.withUnsafeBytes { push($0, handle) }
    }

    /// Raw bytes (a file, a container's sample): units are assembled in the splitter's own slabs.
    public mutating func push(_ bytes: UnsafeRawBufferPointer, _ handle: (SplitterEvent) -> Void) {
        guard bytes.count > 0 else { return }
        leaveRun()
        scan(bytes, handle)
    }

    /// Bytes that landed in a slab already (an upload's): the units they hold are regions of it.
    public mutating func push(_ bytes: SlabBytes, _ handle: (SplitterEvent) -> Void) {
        guard bytes.count > 0 else { return }
        if let run, run.slab === bytes.slab, run.slabEnd == bytes.offset {
            self.run!.slabEnd = bytes.offset + bytes.count
        } else {
            leaveRun()
            run = LandedRun(slab: bytes.slab, slabStart: bytes.offset, streamStart: position, slabEnd: bytes.offset + bytes.count)
        }
        bytes.withUnsafeBytes { scan($0, handle) }
    }

    private mutating func scan(_ bytes: UnsafeRawBufferPointer, _ handle: (SplitterEvent) -> Void) {
        let count = bytes.count
        guard count > 0, let base = bytes.baseAddress else { return }
        // Byte-sized loads from any memory are valid; binding to UInt8 lets appends use memcpy.
        let p = base.assumingMemoryBound(to: UInt8.self)
        let pieceStart = position
        bytesConsumed += count

        var segmentStart = 0
        var searchFrom = 0
        // Start codes whose zero bytes arrived with an earlier piece.
        if zeroRun >= 2 && p[0] == 1 {
            startCode(p, segmentStart: 0, oneAt: 0, pieceStart: pieceStart, handle)
            segmentStart = 1
            searchFrom = 1
        } else if zeroRun >= 1 && count >= 2 && p[0] == 0 && p[1] == 1 {
            startCode(p, segmentStart: 0, oneAt: 1, pieceStart: pieceStart, handle)
            segmentStart = 2
            searchFrom = 2
        }
        while true {
            let zero = Self.firstZero(p, from: searchFrom, end: count)
            // A start code beginning in the last two bytes is completed by the next piece.
            if zero + 2 >= count { break }
            if p[zero + 1] != 0 {
                searchFrom = zero + 2
            } else if p[zero + 2] == 1 {
                startCode(p, segmentStart: segmentStart, oneAt: zero + 2, pieceStart: pieceStart, handle)
                segmentStart = zero + 3
                searchFrom = zero + 3
            } else {
                searchFrom = zero + 1
            }
        }
        consume(p, segmentStart, count, pieceStart: pieceStart, handle)
        position = pieceStart + count
    }

    /// Bytes skipped so far as belonging to no NAL unit, those waiting for a start code
    /// included (`discardedBytes` counts them once the start code, or the end, comes; zeros that
    /// may begin a start code are not counted yet).
    public var skippedBytes: Int {
        discardedBytes + (mode == .seekingFirstStartCode ? max(0, skippedBeforeFirstStartCode - zeroRun) : 0)
    }

    /// Whether a unit is being collected (its end has not arrived).
    public var hasPendingUnit: Bool {
        guard mode == .collecting else { return false }
        if case .empty = unit { return false }
        return true
    }

    /// The first bytes (at most `prefixLength`) of the unit whose end has not arrived yet, nil
    /// when none is being collected. They never change as more bytes come, so a consumer may act
    /// on them early (see the assemblers' `nextUnitEndsAccessUnit(prefix:)`).
    public var pendingUnitPrefix: ArraySlice<UInt8>? {
        guard mode == .collecting else { return nil }
        switch unit {
        case .empty:
            return nil
        case .inPlace(let start, let count):
            return ArraySlice(inRun(start, min(count, Self.prefixLength)))
        case .assembled:
            return ArraySlice(assembly.prefix(Self.prefixLength))
        }
    }

    /// End of stream: emits the last unit and resets, so the next push starts a new stream
    /// (stream offsets start again at 0; the counters keep running). The splitter keeps no
    /// slab of its own after this.
    public mutating func finish(_ handle: (SplitterEvent) -> Void) {
        switch mode {
        case .collecting:
            emitUnit(handle)
        case .seekingFirstStartCode:
            discardedBytes += skippedBeforeFirstStartCode - zeroRun
        case .discardingOversizedUnit:
            break
        }
        mode = .seekingFirstStartCode
        forgetUnit()
        zeroRun = 0
        position = 0
        unitOffset = 0
        skippedBeforeFirstStartCode = 0
        run = nil
        assembly.release()
    }

    /// The input broke off (a client disconnected mid-upload): the unit being collected is
    /// incomplete, so it is dropped instead of being completed by whatever bytes come next.
    /// The splitter waits for the next start code; stream offsets keep counting.
    public mutating func abandonIncompleteUnit() {
        if mode == .collecting { discardedBytes += unitCount + zeroRun }
        mode = .seekingFirstStartCode
        forgetUnit()
        zeroRun = 0
        skippedBeforeFirstStartCode = 0
        run = nil
        assembly.release()
    }

    /// Splits a complete stream in one go.
    public static func split(_ bytes: [UInt8], maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes) -> [AnnexBUnit] {
        var splitter = AnnexBSplitter(maxNALBytes: maxNALBytes)
        var units: [AnnexBUnit] = []
        let collect: (SplitterEvent) -> Void = { event in
            if case .unit(let unit) = event { units.append(unit) }
        }
        splitter.push(bytes, collect)
        splitter.finish(collect)
        return units
    }

    // MARK: - Scanning

    /// Index of the first zero byte in `p[from..<end]`, or `end`. Eight bytes per step: compressed
    /// data has few zero bytes, so most steps find none.
    @inline(__always)
    private static func firstZero(_ p: UnsafePointer<UInt8>, from start: Int, end: Int) -> Int {
        var index = start
        while index + 8 <= end {
            let word = UInt64(littleEndian: UnsafeRawPointer(p + index).loadUnaligned(as: UInt64.self))
            // Sets the high bit of the lowest zero byte (higher bits may be false positives).
            let found = (word &- 0x0101_0101_0101_0101) & ~word & 0x8080_8080_8080_8080
            if found != 0 { return index + found.trailingZeroBitCount >> 3 }
            index += 8
        }
        while index < end {
            if p[index] == 0 { return index }
            index += 1
        }
        return end
    }

    private mutating func startCode(
        _ p: UnsafePointer<UInt8>, segmentStart: Int, oneAt: Int, pieceStart: Int,
        _ handle: (SplitterEvent) -> Void
    ) {
        consume(p, segmentStart, oneAt, pieceStart: pieceStart, handle)
        switch mode {
        case .collecting:
            emitUnit(handle)
        case .seekingFirstStartCode:
            // The zeros just before the 0x000001 are leading_zero_8bits/zero_byte, not garbage.
            discardedBytes += skippedBeforeFirstStartCode - zeroRun
            skippedBeforeFirstStartCode = 0
        case .discardingOversizedUnit:
            break
        }
        mode = .collecting
        zeroRun = 0
        unitOffset = pieceStart + oneAt + 1
    }

    /// Takes `p[start..<end]` (stream offsets from `pieceStart + start`), which holds no start code.
    private mutating func consume(
        _ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int, pieceStart: Int, _ handle: (SplitterEvent) -> Void
    ) {
        guard end > start else { return }
        var lastNonZero = end - 1
        while lastNonZero >= start && p[lastNonZero] == 0 { lastNonZero -= 1 }
        let trailingZeros = end - 1 - lastNonZero
        let allZero = lastNonZero < start

        switch mode {
        case .seekingFirstStartCode:
            skippedBeforeFirstStartCode += end - start
        case .discardingOversizedUnit:
            break
        case .collecting:
            if allZero { break }
            let kept = lastNonZero + 1 - start
            if unitCount + zeroRun + kept > maxNALBytes {
                droppedUnits += 1
                handle(.dropped(
                    BitstreamError(
                        .nalTooLarge,
                        "NAL unit at stream offset \(unitOffset) exceeds \(maxNALBytes) bytes; skipped to the next start code"),
                    prefix: prefixOfDroppedUnit(then: p + start, count: kept)))
                forgetUnit()
                mode = .discardingOversizedUnit
                break
            }
            take(p + start, count: kept, streamOffset: pieceStart + start)
        }
        zeroRun = allZero ? zeroRun + (end - start) : trailingZeros
    }

    /// Adds the held zeros and then `count` bytes at `streamOffset` to the unit: in place when
    /// all of it lies in the current landed run, otherwise in the assembly.
    private mutating func take(_ bytes: UnsafePointer<UInt8>, count: Int, streamOffset: Int) {
        let from = streamOffset - zeroRun
        switch unit {
        case .empty:
            if let run, from >= run.streamStart {
                unit = .inPlace(start: from, count: zeroRun + count)
                return
            }
        case .inPlace(let start, let collected):
            if start + collected == from, run != nil {
                unit = .inPlace(start: start, count: collected + zeroRun + count)
                return
            }
            moveToAssembly()
        case .assembled:
            break
        }
        assembly.append(zeros: zeroRun, bytes, count: count)
        unit = .assembled
    }

    /// The unit collected in place so far goes into the assembly (its bytes are about to stop
    /// following each other in one slab).
    private mutating func moveToAssembly() {
        guard case .inPlace(let start, let count) = unit, let run else { return }
        let at = run.slabOffset(ofStream: start)
        assembly.append(zeros: 0, UnsafePointer((run.slab.base + at).assumingMemoryBound(to: UInt8.self)), count: count)
        unit = .assembled
    }

    /// The landed run ends (the next bytes are raw, or lie elsewhere): a unit collected in it is
    /// copied out first.
    private mutating func leaveRun() {
        guard run != nil else { return }
        if mode == .collecting { moveToAssembly() }
        run = nil
    }

    private var unitCount: Int {
        switch unit {
        case .empty: 0
        case .inPlace(_, let count): count
        case .assembled: assembly.count
        }
    }

    private func inRun(_ start: Int, _ count: Int) -> [UInt8] {
        guard let run else { return [] }
        return Array(UnsafeRawBufferPointer(start: run.slab.base + run.slabOffset(ofStream: start), count: count))
    }

    private mutating func forgetUnit() {
        unit = .empty
        assembly.discard()
    }

    /// The first bytes of the unit being dropped: those collected, the zeros held back, then
    /// `count` new bytes. All of them exceed the cap, so for a cap of at least `prefixLength`
    /// bytes the prefix is complete and the same whatever the chunking.
    private func prefixOfDroppedUnit(then bytes: UnsafePointer<UInt8>, count: Int) -> ArraySlice<UInt8> {
        var prefix: [UInt8] =
            switch unit {
            case .empty: []
            case .inPlace(let start, let collected): inRun(start, min(collected, Self.prefixLength))
            case .assembled: assembly.prefix(Self.prefixLength)
            }
        prefix.append(contentsOf: repeatElement(0, count: min(zeroRun, Self.prefixLength - prefix.count)))
        prefix.append(contentsOf: UnsafeBufferPointer(start: bytes, count: min(count, Self.prefixLength - prefix.count)))
        return prefix[...]
    }

    private mutating func emitUnit(_ handle: (SplitterEvent) -> Void) {
        let bytes: SlabBytes
        switch unit {
        case .empty:
            return
        case .inPlace(let start, let count):
            guard let run else { preconditionFailure("a unit collected in place outlived its landed run") }
            bytes = SlabBytes(run.slab, offset: run.slabOffset(ofStream: start), count: count)
        case .assembled:
            bytes = assembly.take()
            assembledUnits += 1
        }
        unit = .empty
        emittedUnits += 1
        handle(.unit(AnnexBUnit(bytes: bytes, streamOffset: unitOffset)))
    }
}

/// Where the splitter copies a unit whose bytes did not arrive in one slab: the unit grows at the
/// end of a pool slab; one that outgrows the slab's room moves to a fresh slab, or, larger than a
/// slab, to memory of its own.
private struct UnitAssembly: Sendable {
    let pool: SlabPool
    private var slab: Slab?
    /// Where the unit being assembled starts (earlier units of the slab are handed out already).
    private var start = 0
    private(set) var count = 0

    init(pool: SlabPool) {
        self.pool = pool
    }

    mutating func append(zeros: Int, _ bytes: UnsafePointer<UInt8>, count added: Int) {
        let needed = count + zeros + added
        if slab == nil || start + needed > slab!.capacity {
            let grown = needed <= pool.slabBytes ? pool.slab() : Slab.standalone(capacity: max(needed, 2 * count))
            if let slab, count > 0 { grown.base.copyMemory(from: slab.base + start, byteCount: count) }
            slab = grown
            start = 0
        }
        let base = slab!.base + start + count
        if zeros > 0 { base.initializeMemory(as: UInt8.self, repeating: 0, count: zeros) }
        (base + zeros).copyMemory(from: bytes, byteCount: added)
        count = needed
    }

    func prefix(_ length: Int) -> [UInt8] {
        guard let slab else { return [] }
        return Array(UnsafeRawBufferPointer(start: slab.base + start, count: min(length, count)))
    }

    /// The unit assembled: handed out, and the next one goes after it.
    mutating func take() -> SlabBytes {
        var bytes = SlabBytes(slab!, offset: start, count: count)
        start += count
        count = 0
        if !slab!.isPooled {
            // A unit in memory of its own keeps it alone, sized to it (it grew by doubling).
            if bytes.slab.capacity > bytes.count + bytes.count / 8 { bytes = bytes.detached() }
            slab = nil
            start = 0
        }
        return bytes
    }

    /// The unit under way is dropped; memory of its own (an oversized unit's) goes with it.
    mutating func discard() {
        count = 0
        if let slab, !slab.isPooled {
            self.slab = nil
            start = 0
        }
    }

    /// No unit under way: the current slab is let go.
    mutating func release() {
        slab = nil
        start = 0
        count = 0
    }
}
