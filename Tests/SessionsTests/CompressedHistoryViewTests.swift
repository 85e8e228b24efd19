import Decoding
import Foundation
import Testing
import VideoCoding

import Sessions  // the public read only, as an output in a target of its own would use it

/// `Session.accessUnits`: the coded access units a session holds, read from outside it.
@Suite struct CompressedHistoryViewTests {
    @Test func readsFromTheLastKeyframeAndFromAnIndex() async throws {
        let session = try makeSession()
        #expect(session.accessUnits.fromLastKeyframe().isEmpty)
        guard case .units(let none) = session.accessUnits.read(from: 0) else {
            Issue.record("an empty history answered dropped")
            return
        }
        #expect(none.isEmpty)

        // 20 access units, an IDR (with its SPS and PPS) every 8.
        _ = try await push(try Fixture.bytes(Fixture.repeatHeaders), to: session, flush: true)
        let history = session.accessUnits
        #expect(history.endIndex == 20)
        let last = history.fromLastKeyframe()
        #expect(last.map(\.index) == Array(16..<20))
        #expect(last.map(\.isKeyframe) == [true, false, false, false])
        #expect(last.map(\.endsStream) == [false, false, false, true], "the push ended with a flush")
        #expect(last.allSatisfy { $0.unit.codec == .h264 && $0.unit.sequence.format.width == 176 })

        guard case .units(let all) = history.read(from: 0) else {
            Issue.record("the whole history answered dropped")
            return
        }
        #expect(all.map(\.index) == Array(0..<20))
        #expect(all.filter(\.isKeyframe).map(\.index) == [0, 8, 16])
        #expect(zip(all, all.dropFirst()).allSatisfy { $0.receivedAt <= $1.receivedAt })
        guard case .units(let some) = history.read(from: 5, limit: 3), case .units(let newer) = history.read(from: 20)
        else {
            Issue.record("a held index answered dropped")
            return
        }
        #expect(some.map(\.index) == [5, 6, 7])
        #expect(newer.isEmpty, "nothing newer than the newest yet")
    }

    /// A keyframe that does not carry its parameter sets (they came once, at the start) is
    /// decodable on its own only with the sets the held unit names put in front.
    @Test func aKeyframeStartsADecoderWithTheParameterSetsItUses() async throws {
        let session = try makeSession()
        _ = try await push(try Fixture.bytes("headers_once_176x144.265"), to: session, flush: true)
        let units = session.accessUnits.fromLastKeyframe()
        let keyframe = try #require(units.first)
        #expect(keyframe.isKeyframe && keyframe.index == 16 && units.count == 4)
        #expect(keyframe.unit.parameterSets.map(\.key.kind) == [.vps, .sps, .pps])
        #expect(keyframe.unit.parameterSets.allSatisfy { !$0.carriedByAccessUnit })

        func pictures(startingDecoder: Bool) throws -> Int {
            var stream = keyframe.annexB(startingDecoder: startingDecoder)
            for unit in units.dropFirst() { stream += unit.annexB() }
            let decoder = try StreamDecoder(options: .lowLatency(backend: .software), codec: .h265)
            return decoder.push(stream).frames.count + decoder.finish().frames.count
        }
        #expect(try pictures(startingDecoder: true) == 4)
        #expect(try pictures(startingDecoder: false) == 0, "without its parameter sets nothing decodes")
        #expect(keyframe.annexB().count < keyframe.annexB(startingDecoder: true).count)
    }

    @Test func anIndexTheBoundsDroppedAnswersDropped() async throws {
        // One second of history at most: the older GOPs of a long push go.
        var configuration = testConfiguration()
        configuration.historySeconds = .milliseconds(1)
        let session = try makeSession(configuration: configuration)
        let stream = try Fixture.bytes(Fixture.repeatHeaders)
        for _ in 0..<3 {
            _ = try await push(stream, to: session, flush: false)
            try await Task.sleep(for: .milliseconds(5))
        }
        _ = try await push(stream, to: session, flush: true)
        guard case .dropped = session.accessUnits.read(from: 0) else {
            Issue.record("the first access unit is still held")
            return
        }
        let newest = session.accessUnits.fromLastKeyframe()
        #expect(newest.first?.isKeyframe == true)
        #expect(newest.last?.index == session.accessUnits.endIndex - 1)
    }

    /// Readers on other threads while the decode queue appends: every read is a consistent
    /// run of units (consecutive indices, a keyframe first), never a torn one.
    @Test func readsWhileTheSessionAppendsSeeWholeRuns() async throws {
        let session = try makeSession()
        let stream = try Fixture.bytes(Fixture.repeatHeaders)
        let pushed = Flag()
        let pushes = Task {
            defer { pushed.set() }
            for round in 0..<6 { _ = try await push(stream, to: session, flush: round == 5, chunk: 512) }
        }
        var reads = 0
        var following: Int64 = 0
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let finished = pushed.count > 0
            let run = session.accessUnits.fromLastKeyframe()
            if let first = run.first {
                #expect(first.isKeyframe)
                #expect(zip(run, run.dropFirst()).allSatisfy { $0.index + 1 == $1.index })
            }
            if case .units(let tail) = session.accessUnits.read(from: following) {
                #expect(tail.first.map { $0.index == following } ?? true)
                #expect(zip(tail, tail.dropFirst()).allSatisfy { $0.index + 1 == $1.index })
                following = (tail.last?.index).map { $0 + 1 } ?? following
            }
            reads += 1
            if finished { break }
            try await Task.sleep(for: .microseconds(200))
        }
        #expect(pushed.count > 0, "the six pushes ended within 60 s")
        try await pushes.value
        #expect(following == 120, "a reader following the session got every unit once")
        #expect(reads > 1)
    }
}
