import Dispatch
import Foundation
import Synchronization
import Testing
import TestSupport

@testable import Sessions

@Suite(.timeLimit(.minutes(10))) struct PictureTests {
    private func decodedSession(configuration: ServerConfiguration = testConfiguration()) async throws -> Session {
        let session = try makeSession(configuration: configuration)
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        return session
    }

    /// `no_frame_yet` says what the session waits for: its stream's first bytes, then a point
    /// decoding can start from.
    @Test func noPictureYetIs404SayingWhatItWaitsFor() async throws {
        let session = try makeSession()
        guard case .failure(let error) = try await picture(session) else {
            Issue.record("expected no_frame_yet")
            return
        }
        #expect(error.code == .noFrameYet && error.facts["waitingFor"] == .text("stream"), "\(error)")
        // The parameter sets and no picture yet: the first keyframe is what it waits for.
        let stream = try Fixture.bytes(Fixture.baseline)
        let firstSlice = try #require(annexBUnitStarts(stream).first { (stream[$0] & 0x1F) == 5 })
        _ = try await push(Array(stream[..<(firstSlice - 3)]), to: session, flush: false)
        guard case .failure(let waiting) = try await picture(session) else {
            Issue.record("expected no_frame_yet")
            return
        }
        #expect(waiting.facts["waitingFor"] == .text("keyframe"), "\(waiting)")
        #expect(waiting.message.contains("decoding starts at a keyframe (an IDR picture or a recovery point)"), "\(waiting)")
        // Bytes that decode to nothing: no keyframe mends that, and the answer says why.
        let garbage = try makeSession("garbage")
        _ = try await upload(Array(repeating: 0x5A, count: 4096) + [0, 0, 1, 0x65, 1, 2, 3], to: garbage, flush: true)
        guard case .failure(let failed) = try await picture(garbage) else {
            Issue.record("expected no_frame_yet")
            return
        }
        #expect(failed.facts["waitingFor"] == .text("decodable_picture"), "\(failed)")
    }

    @Test func concurrentRequestsShareOneEncode() async throws {
        let session = try await decodedSession()
        let results = Mutex<[ServedPicture]>([])
        let done = DispatchGroup()
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            done.enter()
            session.requestPicture(PictureRequest(format: .jpeg)) { result in
                if case .success(.picture(let served)) = result { results.withLock { $0.append(served) } }
                done.leave()
            }
        }
        try done.wait(for: "the answers to 64 concurrent picture requests")
        let served = results.withLock { $0 }
        #expect(served.count == 64)
        #expect(session.encodeCount == 1)
        #expect(served.allSatisfy { $0.picture === served[0].picture })
        #expect(served[0].etag == "\"\(Fixture.baselineFrames)@\(session.pictures.incarnation)\"")
        #expect(Array(served[0].picture.bytes.prefix(2)) == [0xFF, 0xD8])

        // The source width is the same picture: no new encode. Another size is one more.
        _ = try await picture(session, PictureRequest(width: 176)).get()
        #expect(session.encodeCount == 1)
        let thumb = try await picture(session, PictureRequest(width: 88)).get().served
        #expect(thumb?.picture.width == 88 && thumb?.picture.height == 72)
        #expect(thumb?.etag == "\"\(Fixture.baselineFrames)-w88@\(session.pictures.incarnation)\"")
        _ = try await picture(session, PictureRequest(width: 88)).get()
        #expect(session.encodeCount == 2)
        // Raw formats ignore quality, so different qualities share one encode.
        _ = try await picture(session, PictureRequest(format: .yuv, quality: 10)).get()
        _ = try await picture(session, PictureRequest(format: .yuv, quality: 90)).get()
        #expect(session.encodeCount == 3)
    }

    @Test func ifNoneMatchAndAfterAnswer304() async throws {
        let session = try await decodedSession()
        let served = try #require(try await picture(session).get().served)
        guard case .notModified(let etag) = try await picture(session, ifNoneMatch: served.etag).get() else {
            Issue.record("expected 304")
            return
        }
        #expect(etag == served.etag)
        guard case .notModified = try await picture(session, after: served.sequence).get() else {
            Issue.record("expected 304 for after=latest")
            return
        }
        // A tag for other options is a different representation.
        #expect(try await picture(session, PictureRequest(width: 88), ifNoneMatch: served.etag).get().served != nil)
    }

    @Test func longPollResumesOnANewPicture() async throws {
        let clock = ManualClock()
        let session = try makeSession(clock: clock)
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        let latest = try #require(session.latestSequence)
        let answer = Outcome<Result<PictureAnswer, SessionError>>()
        session.requestPicture(PictureRequest(), clientHas: PictureAnswerCondition(after: latest), wait: .seconds(10)) { answer.set($0) }
        #expect(session.waitingRequests == 1)
        clock.advance(by: .seconds(5))
        #expect(answer.current == nil, "still waiting half way through")
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        let served = try await answer.value(waitingFor: "the long poll's answer").get().served
        #expect((served?.sequence ?? 0) > latest)
        #expect(session.waitingRequests == 0)
    }

    @Test func longPollTimesOutWith304() async throws {
        let clock = ManualClock()
        let session = try makeSession(clock: clock)
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        let served = try #require(try await picture(session).get().served)
        let answer = Outcome<Result<PictureAnswer, SessionError>>()
        session.requestPicture(PictureRequest(), clientHas: PictureAnswerCondition(entityTags: [served.etag]), wait: .milliseconds(200)) {
            answer.set($0)
        }
        clock.advance(by: .milliseconds(199))
        #expect(answer.current == nil)
        #expect(session.waitingRequests == 1)
        clock.advance(by: .milliseconds(1))
        guard case .notModified(let etag) = try #require(answer.current).get() else {
            Issue.record("expected 304 after the wait")
            return
        }
        #expect(etag == served.etag)
        #expect(session.waitingRequests == 0)
    }

    @Test func longPollWaitIsCappedByTheConfiguration() async throws {
        let clock = ManualClock()
        var configuration = testConfiguration()
        configuration.maxLongPoll = .seconds(2)
        let session = try makeSession(configuration: configuration, clock: clock)
        let answer = Outcome<Result<PictureAnswer, SessionError>>()
        session.requestPicture(PictureRequest(), wait: .seconds(3600)) { answer.set($0) }
        clock.advance(by: .milliseconds(1999))
        #expect(answer.current == nil)
        clock.advance(by: .milliseconds(1))
        // No picture came: the answer is the one without a wait, not a 304 for a picture the
        // client cannot hold.
        guard case .failure(let error) = try #require(answer.current) else {
            Issue.record("expected no_frame_yet when the capped wait ends before any picture")
            return
        }
        #expect(error.code == .noFrameYet)
    }

    @Test func subscriberSkipsToTheNewestPicture() async throws {
        let session = try makeSession()
        let viewer = try session.subscribe(PictureRequest(format: .jpeg), maxFPS: nil)
        guard case .wait = viewer.poll() else {
            Issue.record("no picture yet: the viewer must wait")
            return
        }
        let woken = Signal()
        viewer.notifyWhenReady { woken.signal() }
        // The viewer does not pull while 20 pictures are decoded (a slow client).
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        try await woken.wait(for: "the viewer's wake-up for a new picture")
        var last: ServedPicture?
        while last?.sequence != UInt64(Fixture.baselineFrames) {
            switch viewer.poll() {
            case .picture(let served, _): last = served
            case .wait:
                // The wake-up came for an earlier picture; the newest one is being encoded.
                let next = Signal()
                viewer.notifyWhenReady { next.signal() }
                try await next.wait(for: "the newest picture's encode for the viewer")
            case .ended:
                Issue.record("the session did not end")
                return
            }
        }
        // Skipped pictures were never encoded for it: far fewer encodes than pictures.
        #expect(session.encodeCount < Fixture.baselineFrames / 2)
        viewer.cancel()
        #expect(session.viewerCount == 0)
    }

    /// Expects `viewer` to have nothing for now and not to be woken a millisecond before `delay`
    /// has passed on `clock`, then lets it pass; returns the flag the wake-up sets.
    private func expectWait(_ viewer: Viewer, for delay: Duration, on clock: ManualClock, _ why: Comment) throws -> Flag {
        let waits = if case .wait = viewer.poll() { true } else { false }
        try #require(waits, why)
        let woken = Flag()
        viewer.notifyWhenReady { woken.set() }
        clock.advance(by: delay - .milliseconds(1))
        #expect(woken.count == 0)
        clock.advance(by: .milliseconds(1))
        return woken
    }

    /// Takes the viewer's next part, waiting (for an encode) when needed; nil at the end.
    private func nextPart(_ viewer: Viewer) async throws -> (ServedPicture, repeated: Bool)? {
        while true {
            switch viewer.poll() {
            case .picture(let served, let repeated): return (served, repeated)
            case .ended: return nil
            case .wait:
                let ready = Signal()
                viewer.notifyWhenReady { ready.signal() }
                try await ready.wait(for: "the viewer's next part")
            }
        }
    }

    @Test func idleViewerGetsTheLastPictureRepeated() async throws {
        let clock = ManualClock()
        let session = try makeSession(configuration: testConfiguration(repeatInterval: .seconds(1)), clock: clock)
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        let viewer = try session.subscribe(PictureRequest(), maxFPS: 30)
        let first = try #require(try await nextPart(viewer))
        #expect(!first.repeated)
        let woken = try expectWait(viewer, for: .seconds(1), on: clock, "nothing new: the viewer must wait")
        #expect(woken.count == 1)
        guard case .picture(let again, let repeated) = viewer.poll() else {
            Issue.record("expected the repeat")
            return
        }
        #expect(repeated)
        #expect(again.sequence == first.0.sequence)
        #expect(again.picture === first.0.picture)
    }

    @Test func fpsCapDelaysTheNextPart() async throws {
        let clock = ManualClock()
        let session = try makeSession(clock: clock)
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        let viewer = try session.subscribe(PictureRequest(), maxFPS: 2)
        #expect(try await nextPart(viewer) != nil)
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        // A newer picture exists, but the next part is due 500 ms after the first.
        _ = try expectWait(viewer, for: .milliseconds(500), on: clock, "the fps cap must hold the next part back")
        let part = try #require(try await nextPart(viewer))
        #expect(!part.repeated)
        #expect(part.0.sequence == UInt64(2 * Fixture.baselineFrames))
    }

    @Test func closeEndsViewersAndFailsWaiters() async throws {
        let session = try await decodedSession()
        let viewer = try session.subscribe(PictureRequest())
        _ = try await nextPart(viewer)
        let woken = Flag()
        viewer.notifyWhenReady { woken.set() }
        let latest = try #require(session.latestSequence)
        let waiting = Outcome<Result<PictureAnswer, SessionError>>()
        session.requestPicture(PictureRequest(), clientHas: PictureAnswerCondition(after: latest), wait: .seconds(10)) { waiting.set($0) }
        #expect(session.waitingRequests == 1)
        session.close()
        #expect(woken.count == 1)
        guard case .ended = viewer.poll() else {
            Issue.record("expected the end")
            return
        }
        guard case .failure(let error) = try #require(waiting.current) else {
            Issue.record("expected session_not_found")
            return
        }
        #expect(error.code == .sessionNotFound)
        #expect(throws: SessionError.self) { _ = try session.beginUpload(flush: false) { _ in } }
    }
}
