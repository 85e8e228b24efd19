import Foundation
import Testing
import TestSupport
import VideoCoding

@testable import Ingest

/// A spooled push is read back after its whole body arrived; each piece read back carries the
/// time its bytes arrived, not the time it was read.
@Suite(.timeLimit(.minutes(10))) struct SpoolReplayTests {
    @Test func piecesReadBackCarryTheirBytesArrivalTimes() throws {
        let clock = ManualClock()
        let queue = UploadQueue<Refusal>(watermark: HighLowWatermark(capacity: 1 << 20), clock: clock)
        let file = try SpoolFile(directory: NSTemporaryDirectory(), budget: SpoolBudget(limit: 1 << 20))
        let replay = SpoolReplay(upload: queue, file: file, clock: clock, wantsBytes: { true }, spooled: {})
        defer { replay.close() }
        // Three stretches a second apart, each longer than one read back.
        let size = SpoolReplay<Refusal>.readSize * 2 + 100
        var sent: [(value: UInt8, at: UInt64)] = []
        for value in UInt8(1)...3 {
            sent.append((value, clock.uptime))
            for _ in 0..<2 {
                #expect([UInt8](repeating: value, count: size / 2).withUnsafeBytes { queue.offer($0) } == .accepted(size / 2))
            }
            clock.advance(by: .seconds(1))
        }
        queue.finish()
        clock.advance(by: .seconds(60))
        var events = 0
        while let event = replay.next() {
            events += 1
            guard case .bytes(let bytes, let receivedAt) = event else { break }
            let last = bytes.withUnsafeBytes { $0[$0.count - 1] }
            #expect(receivedAt == sent[Int(last) - 1].at, "a piece ending in stretch \(last)")
            #expect(events < 100)
        }
        #expect(events > 6)
    }

    /// An hour of pieces 10 ms apart: the table stays bounded, and every byte's time is off by
    /// less than the resolution it came to, evenly (the first stretches no longer than the last).
    @Test func aLongTimelineStaysBoundedAndEvenlyClose() {
        var timeline = ArrivalTimeline()
        let step: UInt64 = 10_000_000
        let pieces = 360_000
        for piece in 0..<pieces {
            timeline.recordArrival(count: 10, at: UInt64(piece + 1) * step)
        }
        #expect(timeline.stretchCount <= ArrivalTimeline.maxStretches)
        let resolution = timeline.resolution
        #expect(resolution <= 2 * UInt64(pieces) * step / UInt64(ArrivalTimeline.maxStretches) * 2)
        var previous: UInt64 = 0
        for piece in stride(from: 0, to: pieces, by: 97) {
            let sent = UInt64(piece + 1) * step
            let arrived = timeline.arrival(ofBytesBefore: piece * 10 + 10) ?? 0
            #expect(arrived >= sent, "never before its bytes came")
            #expect(arrived - sent < resolution, "piece \(piece): \(arrived - sent) ns late")
            #expect(arrived >= previous)
            previous = arrived
        }
    }
}
