import Decoding
import Dispatch
import Foundation
import Testing
import TestSupport
import Timekeeping

@testable import Sessions

/// Pictures decoded on demand or from the history are the ones decode=all gives, number for
/// number and byte for byte.
@Suite(.enabled(if: Streams.ffmpegAvailable, "needs the ffmpeg CLI to make streams"), .timeLimit(.minutes(10)))
struct PictureIdentityTests {
    static let streams: [String] = [
        "bframes.264", "opengop.264", "bframes.265", "main_bframes_176x144.264", "main_bframes_176x144.265",
        "open_gop_176x144.265", "radl_176x144.265", "res_change_176x144_320x240.264", "res_change_176x144_320x240.265",
        "intrarefresh.264", "intrarefresh-joined.264", "intrarefresh-b.264", "recoverypoints.265", "recoverypoints-long.265",
    ]

    static func stream(_ name: String) throws -> [UInt8] {
        switch name {
        case "bframes.264": try Streams.h264BFrames()
        case "opengop.264": try Streams.h264OpenGOP()
        case "bframes.265": try Streams.h265BFrames()
        case "intrarefresh.264": try Streams.h264IntraRefresh()
        case "intrarefresh-joined.264": try Streams.h264IntraRefreshJoined()
        case "intrarefresh-b.264": try Streams.h264IntraRefreshBFrames()
        case "recoverypoints.265": try Streams.h265RecoveryPoints()
        case "recoverypoints-long.265": try Streams.h265RecoveryPoints(pocCount: 15)
        default: try Fixture.bytes(name)
        }
    }

    /// Every picture decode=all gives, asked for by its number from an on-demand session's
    /// history, is the same picture: each is decoded from its own GOP's keyframe (the GOP
    /// before for an open GOP's leading pictures), yet has the live decode's number and bytes.
    @Test(arguments: streams)
    func everyPictureFromThePastEqualsTheLiveOne(_ name: String) async throws {
        let stream = try Self.stream(name)
        let live = try await OnDemand.livePictures(stream)
        #expect(live.count >= 20, "\(live.count) pictures")
        let session = try makeSession(configuration: OnDemand.configuration())
        _ = try await push(stream, to: session, flush: true)
        #expect(session.status().counters.framesDecoded == 0, "nothing decoded while nobody looked")
        for (number, bytes) in live.sorted(by: { $0.key < $1.key }) {
            let answer = try await OnDemand.pastPicture(session, .number(number))
            let served = try answer.get().served
            #expect(served?.sequence == number, "\(name) #\(number)")
            #expect(served.map { Array($0.picture.bytes) } == bytes, "\(name) #\(number)")
        }
        // Numbers no picture had are not in the history.
        #expect(try await OnDemand.isNotInHistory(session, .number((live.keys.max() ?? 0) + 1000)))
    }

    /// A stream pushed without a flush: its newest GOP may still grow, so a picture only a drain
    /// would give out has no number yet. Every number asked for is the live decode's picture, or
    /// `not_in_history`, never another picture (a drain at the edge numbered the last pictures as
    /// if the access unit the reader still held were not coming: the last number gave the picture
    /// after it). Cut inside the stream too, where the edge is a GOP's middle.
    @Test(arguments: ["bframes.264", "bframes.265"], [1.0, 0.55])
    func picturesAtTheLiveEdgeAreTheLiveOnesOrNotYetHeld(_ name: String, share: Double) async throws {
        let stream = try Self.stream(name)
        let live = try await OnDemand.livePictures(stream)
        let session = try makeSession(configuration: OnDemand.configuration())
        _ = try await push(Array(stream.prefix(Int(Double(stream.count) * share))), to: session, flush: false)
        var served = 0
        var unsettled = 0
        for (number, bytes) in live.sorted(by: { $0.key < $1.key }) {
            let answer = try await OnDemand.pastPicture(session, .number(number))
            switch answer {
            case .success(let picture):
                #expect(picture.served?.sequence == number, "\(name) #\(number)")
                #expect(picture.served.map { Array($0.picture.bytes) == bytes } == true, "\(name) #\(number): another picture")
                served += 1
            case .failure(let error):
                #expect(error.code == .notInHistory, "\(name) #\(number): \(error)")
                if number <= session.historySummary().lastSeq ?? 0 {
                    #expect(error.message.contains("among the newest of a stream still arriving"), "\(name) #\(number): \(error)")
                    unsettled += 1
                }
            }
        }
        #expect(served >= Int(Double(live.count) * share) - 8, "\(name): \(served) of \(live.count) served")
        #expect(unsettled > 0, "\(name): the newest pictures held are not settled yet, and say so")
    }

    /// A stream that cannot reorder (Baseline) pushed without a flush, asked for by the time of
    /// its newest access unit from a catch-up decoder with frame threads (which holds pictures
    /// back until a drain): the answer is that unit's own picture, the live decode's, not an
    /// earlier one standing in for it.
    @Test func theNewestPictureByTimeIsItsOwn() async throws {
        let stream = try Fixture.bytes(Fixture.baseline)
        let live = try await OnDemand.livePictures(stream)
        let session = try makeSession(configuration: OnDemand.configuration(catchUpThreads: 2))
        _ = try await push(stream, to: session, flush: false)
        let held = session.historySummary()
        let newest = try #require(held.to)
        let last = try #require(held.lastSeq)
        let served = try #require(try await OnDemand.pastPicture(session, .time(newest)).get().served)
        #expect(served.sequence == last)
        #expect(Array(served.picture.bytes) == live[last])
        session.close()
    }

    /// Asked for by time, one access unit's arrival after another, a stream with B-frames gives
    /// the picture on screen then: numbers that only go up (a B-frame shown before the P-frame
    /// that arrived first is not skipped and then shown), each the live decode's picture.
    /// Without a flush, the newest GOP's first access units come before any of its pictures can
    /// be shown: those times give the GOP before's last picture.
    @Test(arguments: ["bframes.264", "bframes.265"], [true, false])
    func picturesByTimeGoForwardInOutputOrder(_ name: String, flush: Bool) async throws {
        let stream = try Self.stream(name)
        let live = try await OnDemand.livePictures(stream)
        let session = try makeSession(configuration: OnDemand.configuration())
        // Small pieces: the access units arrive at different times.
        _ = try await push(stream, to: session, flush: flush, chunk: 211)
        let units = session.status().counters.accessUnits
        var previous: UInt64 = 0
        var wentBack: [String] = []
        for index in 0..<Int64(units) {
            let arrived = try #require(session.history.arrival(index)).date
            let served = try #require(try await OnDemand.pastPicture(session, .time(arrived)).get().served)
            if served.sequence < previous { wentBack.append("unit \(index): #\(served.sequence) after #\(previous)") }
            previous = max(previous, served.sequence)
            #expect(Array(served.picture.bytes) == live[served.sequence], "\(name) unit \(index) #\(served.sequence)")
        }
        #expect(wentBack.isEmpty, "\(wentBack)")
        if flush { #expect(previous == live.keys.max(), "the last unit's time gives the last picture") }
        session.close()
    }

    /// The last picture of a push without a flush ends only where the next push begins (or at
    /// a flush), yet it arrived with its push: the history keeps that time, not the next push's.
    @Test func aPushsLastPictureArrivedWithItsPush() async throws {
        let stream = try Self.stream("bframes.264")
        let session = try makeSession(configuration: OnDemand.configuration())
        // Cut right before a start code: the push's last unit is whole, its end not shown yet.
        let half = try #require((stream.count / 2..<stream.count - 4).first { stream[$0..<($0 + 4)] == [0, 0, 0, 1] })
        _ = try await push(Array(stream[..<half]), to: session, flush: false)
        let pending = Int64(session.status().counters.accessUnits)
        let before = try #require(session.history.arrival(pending - 1)).date
        try await Task.sleep(for: .milliseconds(400))
        _ = try await push(Array(stream[half...]), to: session, flush: false)
        let pendingArrived = try #require(session.history.arrival(pending)).date
        #expect(pendingArrived.timeIntervalSince(before) < 0.2, "it arrived with the first push, not 0.4 s later")
        let next = try #require(session.history.arrival(pending + 1)).date
        #expect(next.timeIntervalSince(pendingArrived) >= 0.3)
        // At a flush too: the last unit keeps its push's time.
        let last = Int64(session.status().counters.accessUnits)
        try await Task.sleep(for: .milliseconds(400))
        _ = try await push([], to: session, flush: true)
        let flushed = try #require(session.history.arrival(last)).date
        #expect(flushed.timeIntervalSince(next) < 0.3, "the flush 0.4 s later is not its arrival")
        session.close()
    }

    /// A stream that a flush ended, and one pushed later: the new stream's access units arrived
    /// with their own push (stream offsets start again at a flush).
    @Test func aNewStreamsUnitsArriveWithItsPush() async throws {
        let stream = try Self.stream("bframes.264")
        let session = try makeSession(configuration: OnDemand.configuration())
        _ = try await push(stream, to: session, flush: true)
        let first = Int64(session.status().counters.accessUnits)
        let ended = try #require(session.history.arrival(first - 1)).date
        try await Task.sleep(for: .milliseconds(400))
        _ = try await push(stream, to: session, flush: true, chunk: 1 << 20)
        for index in first..<Int64(session.status().counters.accessUnits) {
            let arrived = try #require(session.history.arrival(index)).date
            #expect(arrived.timeIntervalSince(ended) >= 0.3, "unit \(index) arrived with the second push")
        }
        session.close()
    }

    /// A live push whose newest GOP has only begun (its keyframe and the unit after it):
    /// none of that GOP's pictures can be shown yet, so its time gives the GOP before's last.
    @Test(arguments: ["bframes.264", "bframes.265"])
    func aTimeRightAfterAKeyframeGivesTheGOPBeforesLast(_ name: String) async throws {
        let stream = try Self.stream(name)
        let live = try await OnDemand.livePictures(stream)
        let ingest = try AccessUnitIngest(codec: name.hasSuffix(".265") ? .h265 : .h264, live: true)
        var units: [(start: Int, keyframe: Bool)] = []
        _ = stream.withUnsafeBytes { raw in
            ingest.push(raw) { unit in
                let first = unit.unit.nalUnits[0].streamOffset
                let start = first >= 4 && stream[(first - 4)..<first] == [0, 0, 0, 1] ? first - 4 : first - 3
                units.append((start, unit.unit.isKeyframe))
                return []
            }
        }
        let second = try #require(units.indices.dropFirst().first { units[$0].keyframe })
        // Through the second keyframe and the unit after it, and the start of the next one.
        let session = try makeSession(configuration: OnDemand.configuration())
        _ = try await push(Array(stream[..<(units[second + 2].start + 40)]), to: session, flush: false)
        let arrived = try #require(session.history.arrival(Int64(second + 1))).date
        let served = try #require(try await OnDemand.pastPicture(session, .time(arrived)).get().served)
        #expect(served.sequence == UInt64(second), "the GOP before's last picture")
        #expect(Array(served.picture.bytes) == live[served.sequence])
        session.close()
    }

    /// When the GOP before an open GOP is no longer held, its leading pictures cannot be
    /// decoded (`not_in_history`), and its other pictures keep their numbers and bytes: the
    /// decoder skips the leading ones and counts them.
    @Test(arguments: [("open_gop_176x144.265", 0.6), ("opengop.264", 0.5)])
    func anOpenGOPWithoutTheGOPBeforeKeepsItsNumbers(_ name: String, share: Double) async throws {
        let stream = try Self.stream(name)
        let live = try await OnDemand.livePictures(stream)
        // Room for the last two GOPs (with their RASL or leading B pictures): the older ones are dropped.
        let room = Int(Double(stream.count) * share) + live.count * CompressedHistory.unitOverhead
        let session = try makeSession(configuration: OnDemand.configuration(historyBytes: room))
        _ = try await push(stream, to: session, flush: true)
        let held = session.historySummary()
        let first = try #require(held.firstSeq)
        #expect(held.gopsDropped > 0 && first > 1, "the oldest GOPs were dropped (first held: \(first))")
        var leading = 0
        var decoded = 0
        for number in first...(try #require(held.lastSeq)) {
            switch try await OnDemand.pastPicture(session, .number(number)) {
            case .success(let answer):
                #expect(answer.served.map { Array($0.picture.bytes) } == live[number], "\(name) #\(number)")
                decoded += 1
            case .failure(let error):
                #expect(error.code == .notInHistory, "\(name) #\(number): \(error)")
                #expect(decoded == 0, "only the leading pictures, which come first, are missing (#\(number))")
                leading += 1
            }
        }
        #expect(leading > 0, "the oldest GOP held has leading pictures")
        #expect(decoded > 0)
        session.close()
    }

    /// Intra refresh whose oldest GOPs were dropped: the oldest GOP held starts at a recovery
    /// point with no GOP before it, so its first pictures cannot be shown; the history says it
    /// holds pictures from the GOP after, and every one of those is served as decode=all gave it.
    @Test func anIntraRefreshHistoryServesEveryPictureItSaysItHolds() async throws {
        let stream = try Streams.h264IntraRefresh()
        let live = try await OnDemand.livePictures(stream)
        let room = Int(Double(stream.count) * 0.55) + live.count * CompressedHistory.unitOverhead
        let session = try makeSession(configuration: OnDemand.configuration(historyBytes: room))
        _ = try await push(stream, to: session, flush: true)
        let held = session.historySummary()
        let first = try #require(held.firstSeq)
        let last = try #require(held.lastSeq)
        #expect(held.gopsDropped > 0, "the oldest GOPs were dropped")
        #expect(first > 1 && (first - 1) % 12 == 0, "held from a recovery point: \(first)")
        var served = 0
        for number in first...last where live[number] != nil {
            let answer = try await OnDemand.pastPicture(session, .number(number))
            #expect(try answer.get().served.map { Array($0.picture.bytes) } == live[number], "#\(number)")
            served += 1
        }
        #expect(served >= 12)
        session.close()
    }

    /// A session woken in the middle of a GOP (the push stops there) catches up from the last
    /// keyframe and shows the newest picture decode=all shows at that point, with its number.
    /// With a frame-threaded catch-up decoder (the default, 2 threads) the newest picture out
    /// may be one picture older: a frame thread holds one back.
    @Test(
        arguments: [
            "bframes.264", "opengop.264", "bframes.265", "open_gop_176x144.265", "res_change_176x144_320x240.265",
            "intrarefresh.264", "intrarefresh-b.264", "recoverypoints.265",
        ], [1, 2])
    func aWokenSessionShowsTheLivePicture(_ name: String, catchUpThreads: Int) async throws {
        let stream = try Self.stream(name)
        let live = try await OnDemand.livePictures(stream)
        // Cut a little after the middle, inside a GOP.
        let cut = stream.count * 5 / 8
        let reference = try makeSession("cut-all", options: SessionOptions(decode: .all))
        _ = try await push(Array(stream[..<cut]), to: reference, flush: false)
        let expected = try #require(reference.latestSequence)
        let session = try makeSession(configuration: OnDemand.configuration(catchUpThreads: catchUpThreads))
        _ = try await push(Array(stream[..<cut]), to: session, flush: false)
        #expect(session.status().decoder == .idle)
        let served = try #require(try await picture(session, PictureRequest(format: .yuv)).get().served)
        if catchUpThreads == 1 {
            #expect(served.sequence == expected, "\(name)")
        } else {
            #expect(served.sequence <= expected && served.sequence + 2 >= expected, "\(name): \(served.sequence) for \(expected)")
        }
        #expect(Array(served.picture.bytes) == live[served.sequence], "\(name) #\(served.sequence)")
        #expect(session.status().decoder == .live)
        // Live from here on: the rest of the stream decodes as it arrives, numbered as decode=all.
        _ = try await push(Array(stream[cut...]), to: session, flush: true)
        let last = try #require(session.latestSequence)
        #expect(last == live.keys.max(), "\(name)")
        let newest = try #require(try await picture(session, PictureRequest(format: .yuv)).get().served)
        #expect(Array(newest.picture.bytes) == live[last])
        reference.close()
        session.close()
    }
}

/// The decoder's life on demand: woken by requests and viewers, released by the clock.
@Suite(.enabled(if: Streams.ffmpegAvailable, "needs the ffmpeg CLI to make streams"), .timeLimit(.minutes(10)))
struct OnDemandLifeCycleTests {
    /// Linger and release follow the injected clock: the decoder and its memory stay while
    /// requests come within the linger, and go once it passed without one.
    @Test func lingerAndReleaseFollowTheClock() async throws {
        let clock = ManualClock()
        let (registry, services, events) = OnDemand.registryWithEvents(linger: .seconds(10), clock: clock)
        let start = events.newestID
        let session = try registry.openSession(try SessionID("linger")).session
        _ = try await push(try Streams.h264BFrames(), to: session, flush: false)
        #expect(session.status().decoder == .idle)
        #expect(!session.status().decoding)
        #expect(services.decoderMemory.usage.decoders == 0, "an idle session holds no decoder memory")

        _ = try await picture(session).get()
        #expect(session.status().decoder == .live)
        #expect(services.decoderMemory.usage.decoders == 1)
        clock.advance(by: .seconds(9))
        try OnDemand.settle(session)
        #expect(session.status().decoder == .live, "within the linger")
        _ = try await picture(session).get()  // at 9 s: the linger runs to 19 s
        clock.advance(by: .seconds(9))
        try OnDemand.settle(session)
        #expect(session.status().decoder == .live, "18 s: still within the linger of the second request")
        clock.advance(by: .seconds(1.5))
        try OnDemand.settle(session)
        #expect(session.status().decoder == .idle, "19.5 s: released")
        #expect(services.decoderMemory.usage.decoders == 0, "and its memory with it")
        let kinds = OnDemand.eventKinds(events, after: start, session: session.id)
        #expect(kinds.filter { $0 == .decoderStarted }.count == 1)
        #expect(kinds.last == .decoderStopped)
        // Asked again: woken again.
        _ = try await picture(session).get()
        #expect(session.status().decoder == .live)
        registry.shutdown()
    }

    /// A picture decoded on demand from access units that arrived 30 s before is 30 s old: its
    /// age counts from its access unit's arrival, not from the decode (which made a lost
    /// camera's last picture look fresh).
    @Test func aPictureDecodedOnDemandIsAsOldAsItsAccessUnit() async throws {
        let clock = ManualClock()
        let (registry, _, _) = OnDemand.registryWithEvents(linger: .seconds(10), clock: clock)
        let session = try registry.openSession(try SessionID("old")).session
        _ = try await push(try Streams.h264BFrames(), to: session, flush: false)
        clock.advance(by: .seconds(30))
        let served = try #require(try await picture(session).get().served)
        #expect(served.ageMilliseconds(now: clock.uptime) >= 30_000)
        let age = try #require(session.status().latestFrame?.ageMs)
        #expect(age >= 30_000)
        registry.shutdown()
    }

    /// A session deleted while it catches up: the waiting request is told, and the catch-up
    /// slot and the decoder memory are given back.
    @Test func deleteDuringACatchUp() async throws {
        let configuration = OnDemand.configuration(slots: 1)
        let services = OnDemand.services(configuration)
        let session = try makeSession(configuration: configuration, services: services)
        _ = try await push(try Streams.h264BFrames(), to: session, flush: false)
        let answer = Outcome<Result<PictureAnswer, SessionError>>()
        // The catch-up starts on the decode queue, behind the first hold; its first turn queues
        // behind the second.
        let granted = try QueueHold(session.loop.decodeQueue, "the decode queue")
        session.requestPicture(PictureRequest(), clientHas: PictureAnswerCondition()) { answer.set($0) }
        let hold = try QueueHold(session.loop.decodeQueue, "the decode queue, after the grant", after: granted)
        #expect(session.status().decoder == .catchingUp)
        #expect(services.catchUpPool.usage.busy == 1)
        session.close()
        hold.release()
        guard case .failure(let error) = try await answer.value(waitingFor: "the deleted session's picture answer") else {
            Issue.record("the request of a deleted session fails")
            return
        }
        #expect(error.code == .sessionNotFound)
        try OnDemand.settle(session, turns: 3)
        #expect(services.catchUpPool.usage.busy == 0, "the slot is free again")
        #expect(services.decoderMemory.usage.decoders == 0)
    }

    /// Requests while the stream changes resolution: each answer is the newest picture at its
    /// size, and pictures from before the change still come from the history at theirs. A size
    /// that would enlarge a past picture too far is refused before its decode.
    @Test(arguments: ["res_change_176x144_320x240.264", "res_change_176x144_320x240.265"])
    func requestsDuringAResolutionChange(_ name: String) async throws {
        let stream = try Fixture.bytes(name)
        let live = try await OnDemand.livePictures(stream)
        let configuration = OnDemand.configuration()
        let services = SessionServices.forTests(configuration, clock: SystemClock())
        let session = try makeSession(configuration: configuration, services: services)
        // The second stream's parameter sets start where the first stream's pictures end.
        let change = try #require(OnDemand.changedParameterSets(in: stream))
        _ = try await push(Array(stream[..<change]), to: session, flush: false)
        let before = try #require(try await picture(session, PictureRequest(format: .yuv)).get().served)
        #expect(before.picture.width == 176)
        _ = try await push(Array(stream[change...]), to: session, flush: true)
        let after = try #require(try await picture(session, PictureRequest(format: .yuv)).get().served)
        #expect(after.picture.width == 320)
        #expect(Array(after.picture.bytes) == live[after.sequence])
        // The first picture, from before the change, at its own size, and scaled on request.
        let first = try #require(try await OnDemand.pastPicture(session, .number(1)).get().served)
        #expect(first.picture.width == 176)
        #expect(Array(first.picture.bytes) == live[1])
        let small = try #require(
            try await OnDemand.pastPicture(session, .number(after.sequence), PictureRequest(format: .jpeg, width: 160))
                .get().served)
        #expect(small.picture.width == 160)
        let decodes = services.catchUpPool.warmDecoders.usage
        guard case .failure(let enlarged) = try await OnDemand.pastPicture(session, .number(1), PictureRequest(format: .jpeg, width: 353)) else {
            Issue.record("352 is the most a 176-wide picture may be enlarged to")
            return
        }
        #expect(enlarged.code == .invalidParameter && enlarged.message.contains("enlarges the 176x144 picture"))
        #expect(services.catchUpPool.warmDecoders.usage == decodes, "refused before a decoder was taken")
        let enlargedAfter = try await OnDemand.pastPicture(session, .number(after.sequence - 1), PictureRequest(format: .jpeg, width: 640))
        #expect(try enlargedAfter.get().served?.picture.width == 640, "within 2x of the picture's own size")
        session.close()
    }

    /// MJPEG viewers wake the decoder and keep it while they watch; after the last leaves, the
    /// linger runs out on the clock and the decoder goes; a new viewer wakes it again.
    @Test func mjpegViewersJoiningAndLeaving() async throws {
        let clock = ManualClock()
        let configuration = OnDemand.configuration(linger: .seconds(5))
        let session = try makeSession(configuration: configuration, clock: clock)
        let stream = try Streams.h264BFrames()
        let half = stream.count / 2
        _ = try await push(Array(stream[..<half]), to: session, flush: false)
        let first = try session.subscribe(PictureRequest())
        let second = try session.subscribe(PictureRequest())
        let part = try #require(try await OnDemand.nextPart(first))
        #expect(part.sequence == session.latestSequence)
        #expect(session.status().decoder == .live)
        first.cancel()
        clock.advance(by: .seconds(30))
        try OnDemand.settle(session)
        #expect(session.status().decoder == .live, "one viewer still watches")
        // It sees the rest of the stream as it is decoded live.
        _ = try await push(Array(stream[half...]), to: session, flush: true)
        let newest = try #require(session.latestSequence)
        #expect(try await OnDemand.part(of: second, reaching: newest)?.sequence == newest)
        second.cancel()
        clock.advance(by: .seconds(4))
        try OnDemand.settle(session)
        #expect(session.status().decoder == .live, "within the linger after the last viewer left")
        clock.advance(by: .seconds(2))
        try OnDemand.settle(session)
        #expect(session.status().decoder == .idle)
        let third = try session.subscribe(PictureRequest())
        #expect(session.status().decoder != .idle)
        #expect(try await OnDemand.nextPart(third) != nil)
        third.cancel()
        session.close()
    }

    /// Starting and stopping the decoder are events (with why); pictures are not.
    @Test func decoderStartAndStopAreEventsPicturesAreNot() async throws {
        let clock = ManualClock()
        let (registry, _, events) = OnDemand.registryWithEvents(linger: .seconds(1), clock: clock)
        let start = events.newestID
        let session = try registry.openSession(try SessionID("events")).session
        let stream = try Streams.h264BFrames()
        _ = try await push(Array(stream[..<(stream.count / 2)]), to: session, flush: false)
        _ = try await picture(session).get()
        // 20 more pictures decoded live: no event for any of them.
        _ = try await push(Array(stream[(stream.count / 2)...]), to: session, flush: true)
        clock.advance(by: .seconds(2))
        try OnDemand.settle(session)
        let details: [(SessionEvent.Kind, String?)] = {
            guard case .events(let found, _) = events.read(after: start, session: session.id, limit: 1000) else { return [] }
            return found.map { ($0.kind, $0.details.reason) }
        }()
        let decoderEvents = details.filter { $0.0 == .decoderStarted || $0.0 == .decoderStopped }
        #expect(decoderEvents.map(\.0) == [.decoderStarted, .decoderStopped])
        #expect(decoderEvents.map(\.1) == ["picture_request", "idle"])
        #expect(details.filter { $0.0 == .pictureFirst }.count == 1)
        #expect(details.count < 12, "\(details.map(\.0))")
        registry.shutdown()
    }

    /// Past the catch-up queue a request is refused with when to come back; a queued one waits
    /// its turn and is answered.
    @Test func pastTheQueueARequestIsRefusedWithRetryAfter() async throws {
        let configuration = OnDemand.configuration(slots: 1, queue: 1)
        let services = OnDemand.services(configuration)
        let stream = try Streams.h264BFrames()
        let sessions = try (0..<3).map { try makeSession("queue\($0)", configuration: configuration, services: services) }
        for session in sessions { _ = try await push(stream, to: session, flush: false) }
        // Hold the one slot: the first session's catch-up cannot start its decode queue turn.
        let hold = try QueueHold(sessions[0].loop.decodeQueue, "the first session's decode queue")
        let firstAnswer = Outcome<Result<PictureAnswer, SessionError>>()
        sessions[0].requestPicture(PictureRequest(), clientHas: PictureAnswerCondition()) { firstAnswer.set($0) }
        #expect(services.catchUpPool.usage.busy == 1)
        let queuedAnswer = Outcome<Result<PictureAnswer, SessionError>>()
        sessions[1].requestPicture(PictureRequest(), clientHas: PictureAnswerCondition()) { queuedAnswer.set($0) }
        #expect(services.catchUpPool.usage.queued == 1)
        #expect(sessions[1].status().decoder == .queued)
        guard case .failure(let refusal) = try await picture(sessions[2]) else {
            Issue.record("the third request finds the queue full")
            return
        }
        #expect(refusal.code == .catchUpQueueFull)
        #expect((refusal.retryAfterSeconds ?? 0) >= 1)
        #expect(sessions[2].status().decoder == .idle)
        // A picture from the past is refused the same way.
        guard case .failure(let pastRefusal) = try await OnDemand.pastPicture(sessions[2], .number(1)) else {
            Issue.record("a past picture finds the queue full too")
            return
        }
        #expect(pastRefusal.code == .catchUpQueueFull)
        hold.release()
        #expect(try await firstAnswer.value(waitingFor: "the first catch-up's picture").get().served != nil)
        #expect(try await queuedAnswer.value(waitingFor: "the queued catch-up's picture").get().served != nil)
        for session in sessions { session.close() }
    }

    /// A picture from outside the history is `not_in_history`, with the range held.
    @Test func outsideTheHistoryIsNotInHistoryWithTheRange() async throws {
        let clock = ManualClock()
        let session = try makeSession(configuration: OnDemand.configuration(), clock: clock)
        guard case .failure(let empty) = try await OnDemand.pastPicture(session, .number(1)) else {
            Issue.record("nothing is held yet")
            return
        }
        #expect(empty.code == .notInHistory)
        let stream = try Streams.h264BFrames()
        _ = try await push(stream, to: session, flush: true)
        let held = session.historySummary()
        #expect(held.firstSeq == 1)
        #expect(held.gops == 5)
        for target in [PastPictureTarget.number(10_000), .time(clock.now.addingTimeInterval(-60)), .time(clock.now.addingTimeInterval(60))] {
            guard case .failure(let error) = try await OnDemand.pastPicture(session, target) else {
                Issue.record("\(target) is outside")
                continue
            }
            #expect(error.code == .notInHistory)
            #expect(error.facts["firstSeq"] == .number(1))
            #expect(error.facts["lastSeq"] == held.lastSeq.map(SessionError.Fact.number))
            #expect(error.facts["heldFrom"] != nil && error.facts["heldTo"] != nil)
        }
        // Inside, by time: the newest picture received by then.
        let byTime = try #require(try await OnDemand.pastPicture(session, .time(clock.now)).get().served)
        #expect(byTime.receivedAt != nil)
        session.close()
    }
}

extension OnDemand {
    /// The first MJPEG part of at least `sequence` a viewer gets (older ones skipped).
    static func part(of viewer: Viewer, reaching sequence: UInt64) async throws -> ServedPicture? {
        for _ in 0..<200 {
            guard let part = try await nextPart(viewer) else { return nil }
            if part.sequence >= sequence { return part }
        }
        return nil
    }

    /// The next new MJPEG part a viewer gets, repeats skipped (waiting for it without a sleep).
    static func nextPart(_ viewer: Viewer) async throws -> ServedPicture? {
        while true {
            switch viewer.poll() {
            case .picture(let served, let repeated):
                if !repeated { return served }
            case .ended: return nil
            case .wait:
                let ready = Signal()
                viewer.notifyWhenReady { ready.signal() }
                try await ready.wait(for: "the viewer's next new part")
            }
        }
    }

    /// Where the parameter sets of a changed sequence start in an Annex B stream (the start code
    /// of its H.264 SPS, or of the H.265 VPS before its SPS): the first SPS whose bytes differ
    /// from the stream's first one.
    static func changedParameterSets(in stream: [UInt8]) -> Int? {
        let starts = annexBUnitStarts(stream)
        func end(_ position: Int) -> Int {
            position + 1 < starts.count ? starts[position + 1] - 3 : stream.count
        }
        func isSPS(_ header: UInt8) -> Bool { header & 0x9F == 7 || (header >> 1) & 0x3F == 33 }
        func isVPS(_ header: UInt8) -> Bool { (header >> 1) & 0x3F == 32 }
        var first: ArraySlice<UInt8>?
        for (position, start) in starts.enumerated() where isSPS(stream[start]) {
            var bytes = stream[start..<end(position)]
            while bytes.last == 0 { bytes = bytes.dropLast() }
            guard let known = first else {
                first = bytes
                continue
            }
            guard bytes != known else { continue }
            var opening = position
            if opening > 0, isVPS(stream[starts[opening - 1]]) { opening -= 1 }
            let code = starts[opening] - 3
            return code > 0 && stream[code - 1] == 0 ? code - 1 : code
        }
        return nil
    }

    /// A registry of on-demand sessions on `clock` whose events go to a log the test reads.
    static func registryWithEvents(
        linger: Duration, clock: ManualClock
    ) -> (registry: SessionRegistry, services: SessionServices, events: SessionEventLog) {
        let configuration = configuration(linger: linger)
        let services = services(configuration, clock: clock)
        let events = SessionEventLog(clock: clock)
        let registry = makeRegistry(configuration, services: services, events: events)
        return (registry, services, events)
    }

    static func eventKinds(_ log: SessionEventLog, after cursor: UInt64, session: SessionID) -> [SessionEvent.Kind] {
        guard case .events(let events, _) = log.read(after: cursor, session: session, limit: 10_000) else { return [] }
        return events.map(\.kind)
    }
}
