import Decoding
import Foundation
import TestSupport
import Testing
import VideoCoding

import Sessions  // the public read only, as an output in a target of its own would use it

/// `Session.accessUnits`: the coded access units a session holds, read from outside it.
@Suite(.timeLimit(.minutes(10))) struct CompressedHistoryViewTests {
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

    /// A reader on another thread while the decode queue appends: every read is a consistent
    /// run of units (consecutive indices, a keyframe first), never a torn one, and a reader that
    /// follows the session from index to index gets every unit once. The reader runs on a
    /// thread of its own, so the pushes' tasks cannot starve it or be starved by it.
    @Test func aReaderRacingTheDecodeQueueSeesWholeRuns() async throws {
        // Room for every unit however long the pushes take (on a loaded machine, the six
        // pushes have taken over 10 s, the default time bound, which then dropped the oldest).
        var configuration = testConfiguration()
        configuration.historySeconds = .seconds(3600)
        let session = try makeSession(configuration: configuration)
        let stream = try Fixture.bytes(Fixture.repeatHeaders)
        let history = session.accessUnits
        let pushed = Flag()
        let reader = Outcome<(reads: Int, following: Int64, problems: [String])>()
        DispatchQueue.global().async {
            var (reads, following, problems) = (0, Int64(0), [String]())
            while true {
                let last = pushed.count > 0  // one more read once the pushes ended
                let run = history.fromLastKeyframe()
                if let first = run.first, !first.isKeyframe { problems.append("run from \(first.index) starts without a keyframe") }
                if !zip(run, run.dropFirst()).allSatisfy({ $0.index + 1 == $1.index }) {
                    problems.append("run \(run.map(\.index)) has a hole")
                }
                switch history.read(from: following) {
                case .units(let tail):
                    if let first = tail.first, first.index != following { problems.append("read from \(following) began at \(first.index)") }
                    if !zip(tail, tail.dropFirst()).allSatisfy({ $0.index + 1 == $1.index }) {
                        problems.append("read from \(following) has a hole")
                    }
                    following = (tail.last?.index).map { $0 + 1 } ?? following
                case .dropped:
                    problems.append("read from \(following) was dropped")
                }
                reads += 1
                if last { break }
                usleep(200)
            }
            reader.set((reads, following, problems))
        }
        for round in 0..<6 { _ = try await push(stream, to: session, flush: round == 5, chunk: 512) }
        pushed.set()
        let result = try await reader.value(waitingFor: "the racing reader's result")
        #expect(result.problems.isEmpty, "\(result.problems.prefix(5))")
        #expect(result.following == 120, "a reader following the session got every unit once")
        #expect(result.reads > 1)
    }
}
