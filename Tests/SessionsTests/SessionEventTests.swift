import Foundation
import Synchronization
import Testing
import TestSupport
import Timekeeping

@testable import Sessions

/// The event log as GET /events reads it, and the events a session's life makes.
@Suite(.timeLimit(.minutes(10))) struct SessionEventTests {
    private func kinds(_ read: SessionEventLog.Read) -> [String] {
        guard case .events(let events, _) = read else { return ["gap"] }
        return events.map(\.kind.rawValue)
    }

    @Test func readersKeepACursorFilterBySessionAndGetResyncForAGap() throws {
        let clock = ManualClock()
        let log = SessionEventLog(capacity: 4, clock: clock)
        let start = log.newestID
        let a = try SessionID("a"), b = try SessionID("b")
        log.publish(.sessionCreated, session: a)
        log.publish(.sessionCreated, session: b)
        log.publish(.uploadStarted, session: a, details: .with { $0.multipart = false })
        #expect(kinds(log.read(after: start)) == ["session.created", "session.created", "upload.started"])
        // Filtered: b's event is skipped, and the cursor moves past it all the same.
        guard case .events(let ofA, let cursor) = log.read(after: start, session: a) else {
            Issue.record("expected events")
            return
        }
        #expect(ofA.map(\.kind) == [.sessionCreated, .uploadStarted])
        #expect(cursor == log.newestID)
        #expect(ofA[0].id < ofA[1].id)
        #expect(ofA[1].session == a && ofA[1].at == clock.now)
        #expect(ofA[1].details.multipart == false && ofA[1].details.frames == nil)
        #expect(kinds(log.read(after: log.newestID)) == [])

        // A resume from an id this process never issued (a restart, a made-up header).
        guard case .gap(let newest, let reason) = log.read(after: log.newestID + 10) else {
            Issue.record("expected a gap")
            return
        }
        #expect(newest == log.newestID && reason == "unknown_id")
        // A reader that fell behind the bounded history (capacity 4, so at most 8 are kept).
        for _ in 0..<20 { log.publish(.viewersChanged, session: b) }
        guard case .gap(_, let behind) = log.read(after: start) else {
            Issue.record("expected a gap")
            return
        }
        #expect(behind == "history_lost")
        #expect(log.resync(newest: newest, reason: behind).kind == .resync)
        // What is left is bounded, and the newest events are still there.
        guard case .events(let recent, _) = log.read(after: log.newestID - 4, limit: 100) else {
            Issue.record("expected events")
            return
        }
        #expect(recent.count == 4)
    }

    @Test func aWaitingReaderIsWokenOnceAndForgottenWhenItLeaves() throws {
        let log = SessionEventLog(clock: ManualClock())
        let woken = Flag()
        _ = log.waitForNext { woken.set() }
        let leaving = log.waitForNext { woken.set() }
        log.cancelWait(leaving)
        #expect(log.waitingReaders == 1)
        log.publish(.sessionCreated, session: try SessionID("a"))
        log.publish(.sessionRemoved, session: try SessionID("a"))
        #expect(woken.count == 1)
        #expect(log.waitingReaders == 0)
    }

    @Test func aSessionsLifeMakesItsEventsButPicturesDoNot() async throws {
        let log = SessionEventLog(clock: SystemClock())
        let registry = makeRegistry(events: log)
        let start = log.newestID
        let id = try SessionID("life")
        let (session, _) = try registry.openSession(id)
        _ = try await push(Fixture.bytes(Fixture.baseline), to: session, flush: true)
        _ = try await push(Fixture.bytes(Fixture.baseline), to: session, flush: true)
        let viewer = try session.subscribe(PictureRequest())
        viewer.cancel()
        _ = try? await push(Array("not a stream".utf8), to: session, flush: true)
        try registry.delete(id)
        guard case .events(let events, _) = log.read(after: start, limit: 100) else {
            Issue.record("expected events")
            return
        }
        let kinds = events.map(\.kind.rawValue)
        // 40 pictures, yet one picture.first and one format.changed.
        #expect(kinds == [
            "session.created", "upload.started", "format.changed", "picture.first", "upload.ended",
            "upload.started", "upload.ended", "viewers.changed", "viewers.changed",
            "upload.started", "session.error", "upload.ended", "session.removed",
        ])
        #expect(events[4].details.result == "ok")
        #expect(events[4].details.frames == Fixture.baselineFrames)
        #expect(events[7].details.viewers == 1)
        #expect(events[10].details.code == "invalid_data")
        #expect(events[11].details.result == "invalid_data")
        #expect(events[12].details.reason == "deleted")
        #expect(events[0].details.backend == "software")
    }

    /// A push that takes the session over starts once the push it ended has ended: a reader
    /// of `/events` never sees two uploads under way at once.
    @Test func aTakeoverStartsAfterThePushItEndedEnds() async throws {
        let log = SessionEventLog(clock: SystemClock())
        let registry = makeRegistry(events: log)
        let start = log.newestID
        let (session, _) = try registry.openSession(try SessionID("taken"))
        let stream = try Fixture.bytes(Fixture.baseline)
        let vanished = Outcome<Result<UploadSummary, SessionError>>()
        let lost = try session.beginUpload(flush: false) { vanished.set($0) }
        try await send(Array(stream.prefix(3000)), to: lost)
        let answer = Outcome<Result<UploadSummary, SessionError>>()
        let takeover = try session.beginUpload(flush: true, takeover: true) { answer.set($0) }
        try await send(stream, to: takeover)
        takeover.finish()
        #expect(try await answer.value(waitingFor: "the takeover push's answer").get().frames == Fixture.baselineFrames)
        guard case .failure(let error) = try await vanished.value(waitingFor: "the taken-over push's answer") else {
            Issue.record("the taken-over push must fail")
            return
        }
        #expect(error.code == .pushTakenOver)
        guard case .events(let events, _) = log.read(after: start, limit: 100) else {
            Issue.record("expected events")
            return
        }
        let uploads = events.filter { $0.kind == .uploadStarted || $0.kind == .uploadEnded }
        #expect(uploads.map(\.kind) == [.uploadStarted, .uploadEnded, .uploadStarted, .uploadEnded])
        #expect(uploads.map(\.details.result) == [nil, "push_taken_over", nil, "ok"])
    }

    @Test func aFloodingSessionIsHeldToItsBudgetAndSilentOnceRemoved() throws {
        let clock = ManualClock()
        let log = SessionEventLog(capacity: 1024, clock: clock)
        let start = log.newestID
        let sink = SessionEventSink(log: log, session: try SessionID("flood"))
        for _ in 0..<200 { sink.emit(.formatChanged) }
        #expect(log.newestID - start == UInt64(SessionEventSink.burst))
        clock.advance(by: .seconds(1))
        let beforeRefill = log.newestID
        for _ in 0..<200 { sink.emit(.formatChanged) }
        // The first admitted after the drops says how many went: never a silent gap. The
        // budget pays for that too.
        let admitted = UInt64(SessionEventSink.burst + SessionEventSink.perSecond)
        #expect(log.newestID - start == admitted)
        guard case .events(let refilled, _) = log.read(after: beforeRefill) else {
            Issue.record("expected events")
            return
        }
        #expect(refilled.first?.kind == .eventsDropped && refilled.first?.details.dropped == 150)
        #expect(refilled.dropFirst().allSatisfy { $0.kind == .formatChanged })
        sink.silence()
        clock.advance(by: .seconds(10))
        sink.emit(.uploadEnded)
        #expect(log.newestID - start == admitted)
    }

    /// An upload's end goes exactly when its start went, uploads overlapping or not: a reader
    /// sees no upload that never ends, and a start dropped takes its end with it. The start pays
    /// for both, so the budget holds.
    @Test func anUploadsEndFollowsItsStart() throws {
        let clock = ManualClock()
        let log = SessionEventLog(capacity: 4096, clock: clock)
        let sink = SessionEventSink(log: log, session: try SessionID("pushes"))
        let start = log.newestID
        // Two at a time: the second starts before the first ends, as a push queued behind another.
        for _ in 0..<100 {
            let first = sink.emit(.uploadStarted)
            let second = sink.emit(.uploadStarted)
            if first { sink.emitPaid(.uploadEnded) } else { sink.countDropped() }
            if second { sink.emitPaid(.uploadEnded) } else { sink.countDropped() }
        }
        func all(after id: UInt64) -> [SessionEvent] {
            var cursor = id
            var events: [SessionEvent] = []
            while case .events(let batch, let next) = log.read(after: cursor), !batch.isEmpty {
                events += batch
                cursor = next
            }
            return events
        }
        let events = all(after: start)
        #expect(events.count == Int(SessionEventSink.burst))
        #expect(events.filter { $0.kind == .uploadStarted }.count == events.filter { $0.kind == .uploadEnded }.count)
        // A rare event after the flood still comes, after the count of what was dropped.
        clock.advance(by: .seconds(1))
        sink.emit(.error) { $0.code = "codec_mismatch" }
        let after = all(after: events.last?.id ?? start)
        #expect(after.map(\.kind) == [.eventsDropped, .error])
        #expect(after.first?.details.dropped == 350, "175 starts and their ends")
    }

    /// An upload's end is announced once, only when its start went, and waits for the start to
    /// be decided when the session closed between the upload's making and its announcement.
    @Test func anUploadsEndWaitsForItsStart() {
        let ends = Atomic<Int>(0)
        let early = UploadAnnouncement()
        let drops = Atomic<Int>(0)
        early.announceEnd({ ends.add(1, ordering: .relaxed) }, dropped: { drops.add(1, ordering: .relaxed) })
        #expect(ends.load(ordering: .relaxed) == 0, "the start is not decided yet")
        early.startDecided(went: true)
        #expect(ends.load(ordering: .relaxed) == 1)
        early.announceEnd({ ends.add(1, ordering: .relaxed) }, dropped: { drops.add(1, ordering: .relaxed) })
        #expect(ends.load(ordering: .relaxed) == 1, "once")

        let dropped = UploadAnnouncement()
        dropped.announceEnd({ ends.add(1, ordering: .relaxed) }, dropped: { drops.add(1, ordering: .relaxed) })
        dropped.startDecided(went: false)
        #expect(ends.load(ordering: .relaxed) == 1, "no end for a start that was dropped")
        #expect(drops.load(ordering: .relaxed) == 1, "but it is counted as dropped")

        let usual = UploadAnnouncement()
        usual.startDecided(went: true)
        usual.announceEnd({ ends.add(1, ordering: .relaxed) }, dropped: { drops.add(1, ordering: .relaxed) })
        #expect(ends.load(ordering: .relaxed) == 2 && drops.load(ordering: .relaxed) == 1)
    }

    @Test func ratesCountPicturesAndBitsOverTheWindow() {
        var meter = InputRateMeter(startedAt: 0)
        let second: UInt64 = 1_000_000_000
        #expect(meter.rates(at: 0) == SessionRates(picturesPerSecond: 0, bitsPerSecond: 0, windowSeconds: 1))
        // 10 seconds of 25 pictures and 12,500 bytes a second.
        for tick in 0..<250 { meter.record(bytes: 500, pictures: 1, at: UInt64(tick) * second / 25) }
        let rates = meter.rates(at: 10 * second)
        #expect(rates.windowSeconds == 4, "four whole seconds plus none of the fifth")
        #expect(rates.picturesPerSecond == 25, "\(rates)")
        #expect(rates.bitsPerSecond == 100_000, "\(rates)")
        // Mid-second, the partial second counts over the time it covers.
        var upToMidSecond = InputRateMeter(startedAt: 0)
        for tick in 0..<(25 * 19 / 2) { upToMidSecond.record(bytes: 500, pictures: 1, at: UInt64(tick) * second / 25) }
        let midSecond = upToMidSecond.rates(at: 9 * second + second / 2)
        #expect(abs(midSecond.picturesPerSecond - 25) <= 0.5, "\(midSecond)")
        // The stream stopped: the rates fall to zero once the window has passed.
        #expect(meter.rates(at: 17 * second).picturesPerSecond == 0)
    }
}
