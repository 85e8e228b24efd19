/// One NAL unit as the splitter found it, before any codec reads its header: H.264 and H.265
/// each build their own NAL unit model from it, sharing `bytes` (an array is not copied).
public struct AnnexBUnit: Sendable, Equatable {
    /// From the NAL unit header on; no start code, no trailing zero bytes; emulation prevention
    /// kept. Never empty.
    public let bytes: [UInt8]
    /// Offset of the first header byte since the start of the stream (the last `finish()`).
    public let streamOffset: Int

    public init(bytes: [UInt8], streamOffset: Int) {
        self.bytes = bytes
        self.streamOffset = streamOffset
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

    private enum Mode: Sendable {
        case seekingFirstStartCode
        case collecting
        case discardingOversizedUnit
    }

    private var mode = Mode.seekingFirstStartCode
    private var unit: [UInt8] = []
    /// Consecutive zero bytes at the end of everything seen. While collecting, they are not in
    /// `unit` yet: they are either inside the unit (then copied) or padding/start code (dropped).
    private var zeroRun = 0
    /// Stream offset of the next byte to arrive.
    private var position = 0
    private var unitOffset = 0
    private var skippedBeforeFirstStartCode = 0

    public init(maxNALBytes: Int = AnnexBSplitter.defaultMaxNALBytes) {
        precondition(maxNALBytes > 0, "maxNALBytes must be positive")
        self.maxNALBytes = maxNALBytes
    }

    public mutating func push(_ bytes: [UInt8], _ handle: (SplitterEvent) -> Void) {
        bytes.withUnsafeBytes { push($0, handle) }
    }

    public mutating func push(_ bytes: UnsafeRawBufferPointer, _ handle: (SplitterEvent) -> Void) {
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
        consume(p, segmentStart, count, handle)
        position = pieceStart + count
    }

    /// Bytes skipped so far as belonging to no NAL unit, those waiting for a start code
    /// included (`discardedBytes` counts them once the start code, or the end, comes; zeros that
    /// may begin a start code are not counted yet).
    public var skippedBytes: Int {
        discardedBytes + (mode == .seekingFirstStartCode ? max(0, skippedBeforeFirstStartCode - zeroRun) : 0)
    }

    /// The first bytes (at most `prefixLength`) of the unit whose end has not arrived yet, nil
    /// when none is being collected. They never change as more bytes come, so a consumer may act
    /// on them early (see the assemblers' `nextUnitEndsAccessUnit(prefix:)`).
    public var pendingUnitPrefix: ArraySlice<UInt8>? {
        mode == .collecting && !unit.isEmpty ? unit.prefix(Self.prefixLength) : nil
    }

    /// End of stream: emits the last unit and resets, so the next push starts a new stream
    /// (stream offsets start again at 0; the counters keep running).
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
        unit = []
        zeroRun = 0
        position = 0
        unitOffset = 0
        skippedBeforeFirstStartCode = 0
    }

    /// The input broke off (a client disconnected mid-upload): the unit being collected is
    /// incomplete, so it is dropped instead of being completed by whatever bytes come next.
    /// The splitter waits for the next start code; stream offsets keep counting.
    public mutating func abandonIncompleteUnit() {
        if mode == .collecting { discardedBytes += unit.count + zeroRun }
        mode = .seekingFirstStartCode
        unit = []
        zeroRun = 0
        skippedBeforeFirstStartCode = 0
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
        consume(p, segmentStart, oneAt, handle)
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

    /// Takes `p[start..<end]`, which holds no start code.
    private mutating func consume(
        _ p: UnsafePointer<UInt8>, _ start: Int, _ end: Int, _ handle: (SplitterEvent) -> Void
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
            if unit.count + zeroRun + kept > maxNALBytes {
                droppedUnits += 1
                handle(.dropped(
                    BitstreamError(
                        .nalTooLarge,
                        "NAL unit at stream offset \(unitOffset) exceeds \(maxNALBytes) bytes; skipped to the next start code"),
                    prefix: prefixOfDroppedUnit(then: p + start, count: kept)))
                unit = []
                mode = .discardingOversizedUnit
                break
            }
            if zeroRun > 0 { unit.append(contentsOf: repeatElement(0, count: zeroRun)) }
            unit.append(contentsOf: UnsafeBufferPointer(start: p + start, count: kept))
        }
        zeroRun = allZero ? zeroRun + (end - start) : trailingZeros
    }

    /// The first bytes of the unit being dropped: those collected, the zeros held back, then
    /// `count` new bytes. All of them exceed the cap, so for a cap of at least `prefixLength`
    /// bytes the prefix is complete and the same whatever the chunking.
    private func prefixOfDroppedUnit(then bytes: UnsafePointer<UInt8>, count: Int) -> ArraySlice<UInt8> {
        var prefix = Array(unit.prefix(Self.prefixLength))
        prefix.append(contentsOf: repeatElement(0, count: min(zeroRun, Self.prefixLength - prefix.count)))
        prefix.append(contentsOf: UnsafeBufferPointer(start: bytes, count: min(count, Self.prefixLength - prefix.count)))
        return prefix[...]
    }

    private mutating func emitUnit(_ handle: (SplitterEvent) -> Void) {
        guard !unit.isEmpty else { return }
        let bytes = unit
        unit = []
        emittedUnits += 1
        handle(.unit(AnnexBUnit(bytes: bytes, streamOffset: unitOffset)))
    }
}
