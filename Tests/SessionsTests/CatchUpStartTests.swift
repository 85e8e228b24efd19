import Decoding
import Foundation
import Testing
import TestSupport
import VideoCoding

@testable import Sessions

/// Where a catch-up to the newest picture starts (`CompressedHistory.catchUpStart`), on GOPs made
/// from one real access unit: at the last GOP when a decoder shows one of its pictures in time,
/// further back only as far as a gradual recovery needs, and never further than the bound.
@Suite(.timeLimit(.minutes(10)))
struct CatchUpStartTests {
    /// A history of GOPs of `length` units each, every first one a keyframe with `recovery`
    /// (`CodedAccessUnit.recoveryDistance`); `extra` units after the last GOP's keyframe.
    static func history(gops: Int, length: Int, recovery: Int, extra: Int) throws -> CompressedHistory {
        let ingest = try AccessUnitIngest(codec: .h264)
        var template: CodedAccessUnit?
        _ = try Fixtures.bytes("baseline_176x144.264").withUnsafeBytes { bytes in
            ingest.push(bytes) { unit in
                if template == nil { template = unit.unit }
                return []
            }
        }
        var unit = try #require(template)
        unit.sequence.reorderedPictures = 0
        let history = CompressedHistory(limits: .init(seconds: .seconds(3600), bytes: 64 << 20))
        let count = (gops - 1) * length + 1 + extra
        for index in 0..<count {
            unit.isKeyframe = index % length == 0
            unit.recoveryDistance = unit.isKeyframe && index > 0 ? recovery : 0
            history.append(IndexedAccessUnit(index: Int64(index), unit: unit), receivedAt: Date(), receivedUptime: UInt64(index))
        }
        return history
    }

    @Test func anIDRStreamCatchesUpFromItsLastGOP() throws {
        // The last GOP holds exactly as many units as a decoder keeps back: it shows one in time.
        #expect(try Self.history(gops: 3, length: 5, recovery: 0, extra: 0).pinCatchUpStart(delay: 1) == 10)
        #expect(try Self.history(gops: 3, length: 5, recovery: 0, extra: 3).pinCatchUpStart(delay: 1) == 10)
    }

    @Test func aGradualRecoveryGoesBackAsFarAsItNeeds() throws {
        // Recovery within 7 units: the newest picture a decoder shows (unit 17) is 2 units into
        // the last GOP, 7 into the one before.
        #expect(try Self.history(gops: 4, length: 5, recovery: 7, extra: 3).pinCatchUpStart(delay: 1) == 10)
        // Past its own recovery: the last GOP.
        #expect(try Self.history(gops: 4, length: 10, recovery: 7, extra: 9).pinCatchUpStart(delay: 1) == 30)
        // Recoveries that never end stop at the bound.
        let far = try Self.history(gops: 20, length: 2, recovery: 1_000, extra: 1)
        #expect(try #require(far.pinCatchUpStart(delay: 1)) == Int64(19 - CompressedHistory.maxGOPsBackForRecovery) * 2)
    }
}
