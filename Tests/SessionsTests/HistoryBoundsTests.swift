import Foundation
import Testing
import TestSupport
import Timekeeping

@testable import Sessions

/// The compressed history stays inside `--history-seconds` and `--history-bytes` whatever the
/// stream, in whole GOPs, oldest first.
@Suite(.enabled(if: Streams.ffmpegAvailable, "needs the ffmpeg CLI to make the stream"), .timeLimit(.minutes(10)))
struct HistoryBoundsTests {
    /// 4 s of 720p with heavy noise at a fixed quantizer: about 57 Mbit/s, a keyframe
    /// every half second. Made here, not committed (it is 28 MB or so).
    static func fastStream() throws -> [UInt8] {
        try Streams.make(
            "50mbit.264", encoder: "libx264", size: "1280x720", frames: 120,
            parameters: "keyint=15:min-keyint=15:scenecut=0:bframes=0:qp=26", extra: ["-vf", "noise=alls=24:allf=t+u"])
    }

    struct Bounds: Sendable, CustomStringConvertible {
        let seconds: Double
        let bytes: Int
        var description: String { "\(seconds) s, \(bytes >> 20) MiB" }
    }

    @Test(arguments: [
        Bounds(seconds: 2, bytes: 8 << 20),  // the bytes bind
        Bounds(seconds: 1, bytes: 64 << 20),  // the time binds
        Bounds(seconds: 10, bytes: 1 << 20),  // one GOP is larger than the whole bound
    ])
    func historyStaysWithinItsBoundsUnderA50MbitPush(_ bounds: Bounds) async throws {
        let stream = try Self.fastStream()
        let megabitsPerSecond = Double(stream.count * 8) / 4 / 1e6
        #expect(megabitsPerSecond >= 50, "\(megabitsPerSecond) Mbit/s")
        let clock = ManualClock()
        let configuration = OnDemand.configuration(
            historySeconds: .milliseconds(Int64(bounds.seconds * 1000)), historyBytes: bounds.bytes)
        let session = try makeSession(configuration: configuration, clock: clock)
        // Real time on the session's clock: a thirtieth of a second of stream per thirtieth of a second.
        let piece = stream.count / 120
        let upload = try session.beginUpload(flush: true) { _ in }
        var largest = 0
        var longest = 0.0
        for start in stride(from: 0, to: stream.count, by: piece) {
            try await send(Array(stream[start..<min(stream.count, start + piece)]), to: upload, chunk: 64 << 10)
            try OnDemand.settle(session, turns: 1)
            clock.advance(by: .milliseconds(33))
            let held = session.historySummary()
            largest = max(largest, held.bytes)
            if let from = held.from, let to = held.to { longest = max(longest, to.timeIntervalSince(from)) }
        }
        upload.finish()
        try OnDemand.settle(session)
        let held = session.historySummary()
        #expect(largest <= bounds.bytes, "held at most \(largest) bytes")
        #expect(longest <= bounds.seconds, "held at most \(longest) s")
        #expect(held.gopsDropped > 0)
        if bounds.bytes < 4 << 20 {
            // A half-second GOP is about 3.5 MB: none fits, so none is held, and nothing can
            // be decoded from the past.
            #expect(held.gops == 0)
            #expect(held.newestGOPTooLarge)
            #expect(held.notHeld.message.contains("newest GOP passed --history-bytes"), "\(held.notHeld.message)")
            #expect(try await OnDemand.isNotInHistory(session, .time(clock.now)))
        } else {
            #expect(held.gops >= 1)
            let newest = try #require(try await OnDemand.pastPicture(session, .time(clock.now)).get().served)
            #expect(newest.picture.width == 1280)
        }
        session.close()
    }
}
