@testable import Containers
import Testing
import VideoCoding

/// Pieces of MPEG-TS PES packets as libavformat hands them on, joined into access units.
@Suite(.timeLimit(.minutes(10)))
struct PESPiecesTests {
    static let description = SampleDescription(codec: .h264, configuration: [], samplesAreAccessUnits: true)
    static let full = PESPieces.bufferBytes - 100

    static func piece(_ count: Int, _ byte: UInt8, key: Bool = false) -> DemuxedSample {
        DemuxedSample(payload: [UInt8](repeating: byte, count: count), description: description, isKeyframe: key)
    }

    static func payloads(_ step: PESPieces.Step) -> [[UInt8]]? {
        guard case .samples(let samples) = step else { return nil }
        return samples.map(\.payload)
    }

    @Test func aPESBelowTheBufferGoesOnAtOnce() {
        var pieces = PESPieces(maxBytes: 1 << 20)
        #expect(Self.payloads(pieces.take(Self.piece(1000, 1), position: 0, hasTimestamp: true)) == [[UInt8](repeating: 1, count: 1000)])
        #expect(pieces.finish() == nil)
    }

    @Test func aPieceThatFilledTheBufferWaitsForTheRestAtItsPosition() {
        var pieces = PESPieces(maxBytes: 1 << 20)
        #expect(Self.payloads(pieces.take(Self.piece(Self.full, 1, key: true), position: 564, hasTimestamp: true)) == [])
        #expect(Self.payloads(pieces.take(Self.piece(Self.full, 2), position: 564, hasTimestamp: false)) == [])
        guard case .samples(let joined) = pieces.take(Self.piece(300, 3), position: 564, hasTimestamp: false) else {
            Issue.record("joined")
            return
        }
        #expect(joined.count == 1 && joined[0].payload.count == 2 * Self.full + 300 && joined[0].isKeyframe)
        #expect(joined[0].payload.first == 1 && joined[0].payload.last == 3)
    }

    /// A whole PES whose size happens to fall in the buffer's last TS packet: handed on with the
    /// next PES, which has a timestamp or another position.
    @Test func aHeldPESIsWholeWhenTheNextPacketStartsAnother() {
        var pieces = PESPieces(maxBytes: 1 << 20)
        _ = pieces.take(Self.piece(Self.full, 1), position: 0, hasTimestamp: true)
        #expect(Self.payloads(pieces.take(Self.piece(10, 2), position: 300_000, hasTimestamp: true))?.map(\.count) == [Self.full, 10])
        _ = pieces.take(Self.piece(Self.full, 1), position: 400_000, hasTimestamp: true)
        #expect(Self.payloads(pieces.take(Self.piece(10, 2), position: 600_000, hasTimestamp: false))?.map(\.count) == [Self.full, 10])
        _ = pieces.take(Self.piece(Self.full, 1), position: 700_000, hasTimestamp: true)
        #expect(pieces.finish()?.payload.count == Self.full, "the end hands the held piece on")
    }

    @Test func piecesWithoutAPositionAreNeverJoined() {
        var pieces = PESPieces(maxBytes: 1 << 20)
        #expect(Self.payloads(pieces.take(Self.piece(Self.full, 1), position: -1, hasTimestamp: true))?.count == 1)
        #expect(Self.payloads(pieces.take(Self.piece(Self.full, 1), position: -1, hasTimestamp: false))?.count == 1)
    }

    @Test func aPESPastTheBoundIsRefused() {
        var pieces = PESPieces(maxBytes: 2 * Self.full)
        _ = pieces.take(Self.piece(Self.full, 1), position: 0, hasTimestamp: true)
        _ = pieces.take(Self.piece(Self.full, 1), position: 0, hasTimestamp: false)
        guard case .tooLarge = pieces.take(Self.piece(10, 1), position: 0, hasTimestamp: false) else {
            Issue.record("a PES past maxBytes is tooLarge")
            return
        }
        #expect(pieces.finish() == nil)
    }
}
