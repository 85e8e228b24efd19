import Decoding
import Foundation
import Testing
import TestSupport
import VideoCoding

@testable import Sessions

/// The history keeps whole slabs alive, whatever part of them its units use: its byte bound
/// holds for that memory too, so a stream of small units each alone in its slab (a push that
/// pads every unit with garbage) cannot keep more than the bound alive.
@Suite(.timeLimit(.minutes(10))) struct HistorySlabTests {
    /// The fixture's access units, each NAL unit moved alone into a slab of `pool`.
    static func sparseUnits(pool: SlabPool) throws -> [IndexedAccessUnit] {
        let ingest = try AccessUnitIngest(codec: .h264)
        var units: [IndexedAccessUnit] = []
        _ = try Fixtures.bytes("baseline_176x144.264").withUnsafeBytes { bytes in
            ingest.push(bytes) { unit in
                units.append(unit)
                return []
            }
        }
        _ = ingest.finish { unit in
            units.append(unit)
            return []
        }
        return units.map { indexed in
            var unit = indexed.unit
            unit.nalUnits = unit.nalUnits.map { nal in
                var writer = SlabWriter(pool: pool)
                let moved = nal.bytes.withUnsafeBytes { writer.landContiguous($0) }
                return AnnexBUnit(bytes: moved, streamOffset: nal.streamOffset)
            }
            return IndexedAccessUnit(index: indexed.index, unit: unit)
        }
    }

    @Test func slabsTheUnitsKeepAliveCountAgainstTheByteBound() throws {
        let pool = SlabPool(slabBytes: 64 << 10, maxIdleSlabs: 0)
        let bound = 1 << 20
        let history = CompressedHistory(limits: .init(seconds: .seconds(3600), bytes: bound))
        var most = 0
        for round in 0..<10 {
            // Slabs of their own each round, as a push's units would have.
            let units = try Self.sparseUnits(pool: pool)
            try #require(units.count >= 20)
            for unit in units {
                let index = Int64(round * units.count) + unit.index
                history.append(IndexedAccessUnit(index: index, unit: unit.unit), receivedAt: Date(), receivedUptime: UInt64(index))
                most = max(most, history.summary.slabBytes)
            }
        }
        let summary = history.summary
        // The units' own bytes are a few kB: only the slabs bind.
        #expect(summary.bytes < bound / 8, "\(summary.bytes) bytes held")
        #expect(most <= bound + CompressedHistory.sharedSlabBytes, "at most \(most) bytes of slabs held")
        #expect(summary.gopsDropped > 0, "\(summary)")
        // What the history holds is what keeps the pool's slabs in use (the units above hold theirs too).
        #expect(summary.slabBytes == history.summary.slabBytes)
    }

    @Test func droppedGOPsGiveTheirSlabsBack() throws {
        let pool = SlabPool(slabBytes: 64 << 10, maxIdleSlabs: 1_000)
        var history: CompressedHistory? = CompressedHistory(limits: .init(seconds: .seconds(3600), bytes: 512 << 10))
        do {
            let units = try Self.sparseUnits(pool: pool)
            for unit in units {
                history!.append(unit, receivedAt: Date(), receivedUptime: UInt64(unit.index))
            }
            #expect(history!.summary.slabBytes <= (512 << 10) + CompressedHistory.sharedSlabBytes)
        }
        // The units made for the test are gone: only the history holds slabs now.
        let held = history!.summary.slabBytes
        #expect(pool.usage.inUse * (64 << 10) == held, "\(pool.usage), history \(held)")
        history = nil
        #expect(pool.usage.inUse == 0)
    }
}
