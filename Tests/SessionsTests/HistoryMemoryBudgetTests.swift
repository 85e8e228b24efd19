import Decoding
import Foundation
import Testing
import TestSupport
import VideoCoding

@testable import Sessions

/// Every session's history together stays within `--max-history-memory`: the history keeping
/// the most gives up GOPs first, and one keeping less than the others keeps its own.
@Suite(.timeLimit(.minutes(10))) struct HistoryMemoryBudgetTests {
    /// Each bound alone would let every history keep all it is given.
    static let ownBound = CompressedHistory.Limits(seconds: .seconds(3600), bytes: 64 << 20)

    /// Appends `rounds` of the fixture (each round a GOP from its keyframe, in slabs of its own).
    static func feed(_ history: CompressedHistory, rounds: Int, pool: SlabPool, whileFeeding: () -> Void = {}) throws {
        var next = history.endIndex
        for _ in 0..<rounds {
            for unit in try HistorySlabTests.sparseUnits(pool: pool) {
                history.append(IndexedAccessUnit(index: next, unit: unit.unit), receivedAt: Date(), receivedUptime: UInt64(next))
                next += 1
                whileFeeding()
            }
        }
    }

    @Test func theHistoryKeepingTheMostGivesFirst() throws {
        let pool = SlabPool(slabBytes: 16 << 10, maxIdleSlabs: 0)
        let budget = HistoryMemoryBudget(limit: 1 << 20)
        let small = CompressedHistory(limits: Self.ownBound, budget: budget)
        let hog = CompressedHistory(limits: Self.ownBound, budget: budget)
        try Self.feed(small, rounds: 1, pool: pool)
        let smallKeeps = small.summary.slabBytes
        #expect(smallKeeps > 0 && smallKeeps < budget.limit / 2, "\(smallKeeps) bytes")
        var most = 0
        try Self.feed(hog, rounds: 12, pool: pool) { most = max(most, budget.usage.bytes) }
        #expect(most <= budget.limit, "the sum stays within the bound at every step: at most \(most)")
        #expect(small.summary.gopsShed == 0 && small.summary.slabBytes == smallKeeps, "the smaller history keeps its own")
        let hogs = hog.summary
        #expect(hogs.gopsShed > 0 && hogs.gopsShed == hogs.gopsDropped, "\(hogs)")
        #expect(hogs.gops >= 1, "the hog keeps what fits")
        let usage = budget.usage
        #expect(usage.histories == 2 && usage.gopsShed == hogs.gopsShed)
        #expect(usage.bytes == max(small.summary.bytes, smallKeeps) + max(hogs.bytes, hogs.slabBytes))
    }

    /// Quiet histories whose one GOP lies in a slab of the shared pool's size each keep that
    /// whole slab alive, more memory than a busy history that has only begun: the slabs a
    /// history shares with bytes it does not hold are not held against it, so the busy one,
    /// whose own bytes are the most, gives first.
    @Test func aQuietHistoryIsNotHeldToTheSlabItShares() throws {
        let bigSlabs = SlabPool(slabBytes: SlabPool.shared.slabBytes, maxIdleSlabs: 0)
        let smallSlabs = SlabPool(slabBytes: 16 << 10, maxIdleSlabs: 0)
        let budget = HistoryMemoryBudget(limit: 3 * SlabPool.shared.slabBytes + (128 << 10))
        var quietOnes: [CompressedHistory] = []
        for _ in 0..<3 {
            // The fixture's keyframe alone, its NAL units side by side in one big slab.
            let keyframe = try #require(try HistorySlabTests.sparseUnits(pool: smallSlabs).first)
            var writer = SlabWriter(pool: bigSlabs)
            var unit = keyframe.unit
            unit.nalUnits = unit.nalUnits.map { nal in
                AnnexBUnit(bytes: nal.bytes.withUnsafeBytes { writer.landContiguous($0) }, streamOffset: nal.streamOffset)
            }
            let quiet = CompressedHistory(limits: Self.ownBound, budget: budget)
            quiet.append(IndexedAccessUnit(index: 0, unit: unit), receivedAt: Date(), receivedUptime: 0)
            #expect(quiet.summary.slabBytes == SlabPool.shared.slabBytes)
            quietOnes.append(quiet)
        }
        let busy = CompressedHistory(limits: Self.ownBound, budget: budget)
        var most = 0
        try Self.feed(busy, rounds: 3, pool: smallSlabs) { most = max(most, budget.usage.bytes) }
        #expect(most <= budget.limit)
        for quiet in quietOnes {
            #expect(quiet.summary.gopsShed == 0 && quiet.summary.gops == 1, "\(quiet.summary)")
        }
        #expect(busy.summary.gopsShed > 0)
    }

    /// Many histories each holding one GOP: the largest truncate theirs, and say why.
    @Test func historiesOfOneGOPEachAreTruncatedLargestFirst() throws {
        let pool = SlabPool(slabBytes: 16 << 10, maxIdleSlabs: 0)
        let budget = HistoryMemoryBudget(limit: 1 << 20)
        var histories: [CompressedHistory] = []
        for _ in 0..<6 {
            let history = CompressedHistory(limits: Self.ownBound, budget: budget)
            try Self.feed(history, rounds: 1, pool: pool)
            histories.append(history)
            #expect(budget.usage.bytes <= budget.limit)
        }
        let shed = histories.filter { $0.summary.newestGOPShed }
        #expect(!shed.isEmpty && shed.count < histories.count, "\(shed.count) of \(histories.count) gave their GOP")
        let summary = HistorySummary(try #require(shed.first).summary)
        #expect(!summary.newestGOPTooLarge)
        #expect(summary.notHeld.message.contains("--max-history-memory"), "\(summary.notHeld.message)")
        // A history that is gone no longer counts.
        let before = budget.usage
        histories.removeLast()
        #expect(budget.usage.histories == before.histories - 1)
        #expect(budget.usage.bytes <= before.bytes)
    }

    /// Reports are made outside the history's lock, so two may arrive out of order: the older
    /// is ignored, and what the budget counts is the newer.
    @Test func aReportOvertakenByANewerOneIsIgnored() {
        let budget = HistoryMemoryBudget(limit: 1 << 30)
        let history = CompressedHistory(limits: Self.ownBound, budget: budget)
        budget.report(history, .init(keeps: 100, owns: 100, number: 2))
        budget.report(history, .init(keeps: 500_000, owns: 500_000, number: 1))
        #expect(budget.usage.bytes == 100)
        budget.report(history, .init(keeps: 300, owns: 300, number: 3))
        #expect(budget.usage.bytes == 300)
    }

    /// A GOP a catch-up reads is not given up: another history gives instead.
    @Test func aPinnedGOPIsKeptAndAnotherGives() throws {
        let pool = SlabPool(slabBytes: 16 << 10, maxIdleSlabs: 0)
        let budget = HistoryMemoryBudget(limit: 1 << 20)
        let read = CompressedHistory(limits: Self.ownBound, budget: budget)
        try Self.feed(read, rounds: 2, pool: pool)
        read.pin(0)
        let other = CompressedHistory(limits: Self.ownBound, budget: budget)
        try Self.feed(other, rounds: 12, pool: pool)
        #expect(read.summary.gopsShed == 0)
        #expect(other.summary.gopsShed > 0)
        #expect(read.summary.slabBytes > other.summary.slabBytes, "the history keeping the most could not give")
        #expect(budget.usage.bytes <= budget.limit)
    }
}
