import Testing
import VideoCoding

/// Bytes land once, in slabs a pool hands out again: the pool, the writer, and the splitter
/// cutting units out of landed bytes without copies.
@Suite(.timeLimit(.minutes(10))) struct SlabTests {
    @Test func aSlabLetGoOfIsHandedOutAgain() {
        let pool = SlabPool(slabBytes: 64, maxIdleSlabs: 2)
        var first: SlabBytes? = SlabBytes(pool.slab(), offset: 0, count: 8)
        let address = first!.withUnsafeBytes { $0.baseAddress }
        #expect(pool.usage == SlabPool.Usage(inUse: 1, idle: 0, allocated: 1))
        first = nil
        #expect(pool.usage == SlabPool.Usage(inUse: 0, idle: 1, allocated: 1))
        let again = SlabBytes(pool.slab(), offset: 0, count: 8)
        #expect(again.withUnsafeBytes { $0.baseAddress } == address)
        #expect(pool.usage == SlabPool.Usage(inUse: 1, idle: 0, allocated: 1))
    }

    @Test func idleSlabsPastTheBoundAreFreed() {
        let pool = SlabPool(slabBytes: 64, maxIdleSlabs: 2)
        var slabs: [Slab] = (0..<3).map { _ in pool.slab() }
        #expect(pool.usage.inUse == 3)
        slabs = []
        #expect(slabs.isEmpty)
        #expect(pool.usage == SlabPool.Usage(inUse: 0, idle: 2, allocated: 3))
        pool.trim(keeping: 1)
        #expect(pool.usage.idle == 1)
    }

    /// Past `maxIdleSlabs`, a quarter of the slabs in use may wait idle (a history's GOP coming
    /// back at once is asked for again); the bound falls with the use, down to `maxIdleSlabs`.
    @Test func idleSlabsFollowAQuarterOfThoseInUse() {
        let pool = SlabPool(slabBytes: 64, maxIdleSlabs: 2)
        var slabs: [Slab] = (0..<40).map { _ in pool.slab() }
        slabs.removeLast(10)
        #expect(pool.usage == SlabPool.Usage(inUse: 30, idle: 7, allocated: 40))
        slabs.append(contentsOf: (0..<7).map { _ in pool.slab() })
        #expect(pool.usage == SlabPool.Usage(inUse: 37, idle: 0, allocated: 40))
        slabs = []
        #expect(slabs.isEmpty)
        #expect(pool.usage == SlabPool.Usage(inUse: 0, idle: 2, allocated: 40))
    }

    @Test func landedBytesGoOnInTheNextSlabInOrder() {
        let pool = SlabPool(slabBytes: 8, maxIdleSlabs: 4)
        var writer = SlabWriter(pool: pool)
        let input = (0..<20).map(UInt8.init)
        var pieces: [SlabBytes] = []
        input.withUnsafeBytes { writer.land($0) { pieces.append($0) } }
        #expect(pieces.map(\.count) == [8, 8, 4])
        #expect(pieces.flatMap { Array($0) } == input)
        // 6 bytes do not fit in the 4 left: a contiguous landing starts a new slab.
        let contiguous = [UInt8](repeating: 7, count: 6).withUnsafeBytes { writer.landContiguous($0) }
        #expect(contiguous.offset == 0 && contiguous == [7, 7, 7, 7, 7, 7])
        #expect(!contiguous.isFollowed(by: pieces[2]))
        // Larger than a slab: memory of its own.
        let large = [UInt8](repeating: 9, count: 20).withUnsafeBytes { writer.landContiguous($0) }
        #expect(!large.slab.isPooled && large.count == 20)
    }

    @Test func aFillWritesInPlaceAndHandsOutWhatWasWritten() {
        let pool = SlabPool(slabBytes: 16, maxIdleSlabs: 1)
        var writer = SlabWriter(pool: pool)
        let first = writer.fill(upTo: 10) { room in
            room.copyBytes(from: [1, 2, 3])
            return 3
        }
        let second = writer.fill(upTo: 100) { room in
            #expect(room.count == 13, "the rest of the slab, not more")
            room.copyBytes(from: [4])
            return 1
        }
        #expect(first == [1, 2, 3] && second == [4])
        #expect(first.isFollowed(by: second))
    }

    /// A synthetic Annex B stream: units of many sizes, three- and four-byte start codes,
    /// zeros inside units and trailing zero padding.
    static func stream() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var stream: [UInt8] = []
        for index in 0..<200 {
            stream += index % 3 == 0 ? [0, 0, 0, 1] : [0, 0, 1]
            let size = [1, 5, 40, 300, 2_000][index % 5]
            var unit = (0..<size).map { _ in UInt8.random(in: 1...255, using: &generator) }
            unit[0] = 0x65
            if size > 10 { unit[size / 2] = 0; unit[size / 2 + 1] = 0; unit[size / 2 + 2] = 3 }
            stream += unit
            if index % 7 == 0 { stream += [0, 0] }
        }
        return stream
    }

    @Test(arguments: [1, 7, 64, 1_000, 100_000])
    func unitsCutFromLandedBytesAreTheUnitsOfRawBytes(pieceSize: Int) {
        let stream = Self.stream()
        let raw = split(stream, pieces: Array(repeating: pieceSize, count: stream.count / pieceSize + 1))

        let pool = SlabPool(slabBytes: 4_096, maxIdleSlabs: 8)
        var writer = SlabWriter(pool: pool)
        var splitter = AnnexBSplitter(pool: pool)
        var landed = SplitResult()
        var kept: [SlabBytes] = []
        for start in stride(from: 0, to: stream.count, by: pieceSize) {
            stream[start..<min(stream.count, start + pieceSize)].withUnsafeBytes { piece in
                writer.land(piece) { bytes in
                    splitter.push(bytes) { event in
                        landed.record(event)
                        if case .unit(let unit) = event { kept.append(unit.bytes) }
                    }
                }
            }
        }
        splitter.finish { event in
            landed.record(event)
            if case .unit(let unit) = event { kept.append(unit.bytes) }
        }
        #expect(landed == raw)
        // Only units that straddle two slabs are copied; every other one is a region of the
        // slab its bytes landed in.
        #expect(splitter.assembledUnits < splitter.emittedUnits / 4, "\(splitter.assembledUnits) of \(splitter.emittedUnits) copied")
        let allPooled = kept.allSatisfy { $0.slab.isPooled }
        #expect(allPooled)
        // The units keep their slabs out of the pool; letting go of them returns every slab.
        #expect(pool.usage.inUse > 0)
        writer.release()
        splitter.finish { _ in }
        kept = []
        landed = SplitResult()
        #expect(pool.usage.inUse == 0, "\(pool.usage)")
    }
}

/// Bytes kept where no history counts slabs are copied out of them; a dropped oversized unit
/// takes its memory with it.
@Suite(.timeLimit(.minutes(10))) struct SlabRetentionTests {
    struct Held: Sendable, SlabDetachable {
        let bytes: SlabBytes
        func detached() -> Held { Held(bytes: bytes.detached()) }
    }

    @Test func unitsHeldBeforeTheParameterSetsLetGoOfTheirSlabs() {
        let pool = SlabPool(slabBytes: 4_096, maxIdleSlabs: 4)
        var wait = ParameterSetWait<Held>(active: true)
        for index in 0..<3 {
            var writer = SlabWriter(pool: pool)
            let landed = [UInt8](repeating: UInt8(index), count: 20).withUnsafeBytes { writer.landContiguous($0) }
            #expect(wait.pass(Held(bytes: landed), bytes: 20, haveParameterSets: false).isEmpty)
        }
        // Only the wait holds the units now, and none of them holds a slab of the pool.
        #expect(pool.usage.inUse == 0, "\(pool.usage)")
        let released = wait.pass(Held(bytes: [9]), bytes: 1, haveParameterSets: true)
        #expect(released.map { Array($0.bytes) } == [Array(repeating: 0, count: 20), Array(repeating: 1, count: 20), Array(repeating: 2, count: 20), [9]])
    }

    @Test func aDroppedOversizedUnitTakesItsMemoryWithIt() {
        let pool = SlabPool(slabBytes: 64, maxIdleSlabs: 4)
        var splitter = AnnexBSplitter(maxNALBytes: 1_000, pool: pool)
        var units: [AnnexBUnit] = []
        var dropped = 0
        let collect: (SplitterEvent) -> Void = { event in
            switch event {
            case .unit(let unit): units.append(unit)
            case .dropped: dropped += 1
            }
        }
        let big = [0, 0, 1] + [UInt8](repeating: 0x41, count: 600)
        let oversized = [0, 0, 1] + [UInt8](repeating: 0x42, count: 2_000)
        let small = [0, 0, 1] + [UInt8](repeating: 0x43, count: 10) + [0, 0, 1]
        // In pieces, so that each unit is assembled rather than read in place.
        for piece in [big, oversized, small] {
            for start in stride(from: 0, to: piece.count, by: 50) {
                splitter.push(Array(piece[start..<min(piece.count, start + 50)]), collect)
            }
        }
        #expect(dropped == 1)
        #expect(units.map(\.bytes.count) == [600, 10])
        // The 600-byte unit grew by doubling: it is handed out in memory sized to it.
        #expect(units[0].bytes.slab.capacity == 600)
        // The small one is not written into what was left of the dropped unit's memory.
        #expect(units[1].bytes.slab.capacity <= 64, "\(units[1].bytes.slab.capacity)")
    }
}
