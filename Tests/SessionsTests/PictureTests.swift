import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Sessions

@Suite struct PictureTests {
    private func decodedSession(configuration: ServerConfiguration = testConfiguration()) async throws -> Session {
        let session = try makeSession(configuration: configuration)
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        return session
    }

    @Test func noPictureYetIs404() async throws {
        let session = try makeSession()
        let result = await picture(session)
        guard case .failure(let error) = result else {
            Issue.record("expected no_frame_yet")
            return
        }
        #expect(error.code == .noFrameYet)
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
        done.wait()
        let served = results.withLock { $0 }
        #expect(served.count == 64)
        #expect(session.encodeCount == 1)
        #expect(served.allSatisfy { $0.picture === served[0].picture })
        #expect(served[0].etag == "\"\(Fixture.baselineFrames)\"")
        #expect(Array(served[0].picture.bytes.prefix(2)) == [0xFF, 0xD8])

        // The source width is the same picture: no new encode. Another size is one more.
        _ = try await picture(session, PictureRequest(width: 176)).get()
        #expect(session.encodeCount == 1)
        let thumb = try await picture(session, PictureRequest(width: 88)).get().served
        #expect(thumb?.picture.width == 88 && thumb?.picture.height == 72)
        #expect(thumb?.etag == "\"\(Fixture.baselineFrames)-w88\"")
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
        let session = try await decodedSession()
        let latest = try #require(session.latestSequence)
        let started = ContinuousClock.now
        async let answer = picture(session, after: latest, wait: .seconds(10))
        #expect(await eventually { session.waitingRequests == 1 })
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        let served = try await answer.get().served
        #expect((served?.sequence ?? 0) > latest)
        #expect(ContinuousClock.now - started < .seconds(5))
    }

    @Test func longPollTimesOutWith304() async throws {
        let session = try await decodedSession()
        let served = try #require(try await picture(session).get().served)
        let started = ContinuousClock.now
        let answer = try await picture(session, ifNoneMatch: served.etag, wait: .milliseconds(200)).get()
        let elapsed = ContinuousClock.now - started
        guard case .notModified(let etag) = answer else {
            Issue.record("expected 304 after the wait")
            return
        }
        #expect(etag == served.etag)
        #expect(elapsed >= .milliseconds(180))
        #expect(session.waitingRequests == 0)
    }

    @Test func subscriberSkipsToTheNewestPicture() async throws {
        let session = try makeSession()
        let viewer = try session.subscribe(PictureRequest(format: .jpeg), maxFPS: nil)
        guard case .wait = viewer.poll() else {
            Issue.record("no picture yet: the viewer must wait")
            return
        }
        let woken = Flag()
        viewer.notifyWhenReady { woken.set() }
        // The viewer does not pull while 20 pictures are decoded (a slow client).
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        #expect(await eventually { woken.count == 1 })
        var last: ServedPicture?
        while case .picture(let served, _) = viewer.poll() { last = served }
        if last == nil || last?.sequence != UInt64(Fixture.baselineFrames) {
            // The wake-up came for an earlier picture; the next pull gets the newest.
            _ = await eventually {
                if case .picture(let served, _) = viewer.poll() { last = served }
                return last?.sequence == UInt64(Fixture.baselineFrames)
            }
        }
        #expect(last?.sequence == UInt64(Fixture.baselineFrames))
        // Skipped pictures were never encoded for it: far fewer encodes than pictures.
        #expect(session.encodeCount < Fixture.baselineFrames / 2)
        viewer.cancel()
        #expect(session.subscriberCount == 0)
    }

    @Test func idleViewerGetsTheLastPictureRepeated() async throws {
        let session = try await decodedSession(configuration: testConfiguration(repeatInterval: .milliseconds(150)))
        let viewer = try session.subscribe(PictureRequest(), maxFPS: 30)
        var first: ServedPicture?
        _ = await eventually {
            if case .picture(let served, let repeated) = viewer.poll() {
                #expect(!repeated)
                first = served
            } else {
                viewer.notifyWhenReady {}
            }
            return first != nil
        }
        #expect(first != nil)
        guard case .wait = viewer.poll() else {
            Issue.record("nothing new: the viewer must wait")
            return
        }
        let woken = Flag()
        viewer.notifyWhenReady { woken.set() }
        #expect(await eventually(timeout: .seconds(2)) { woken.count == 1 })
        guard case .picture(let again, let repeated) = viewer.poll() else {
            Issue.record("expected the repeat")
            return
        }
        #expect(repeated)
        #expect(again.sequence == first?.sequence)
        #expect(again.picture === first?.picture)
    }

    @Test func fpsCapDelaysTheNextPart() async throws {
        let session = try await decodedSession()
        let viewer = try session.subscribe(PictureRequest(), maxFPS: 2)
        var delivered = 0
        _ = await eventually {
            if case .picture = viewer.poll() { delivered += 1 }
            return delivered == 1
        }
        _ = try await push(try Fixture.bytes(Fixture.baseline), to: session, flush: true)
        // A newer picture exists, but the next part is due 500 ms after the first.
        guard case .wait = viewer.poll() else {
            Issue.record("the fps cap must hold the next part back")
            return
        }
        let started = ContinuousClock.now
        let woken = Flag()
        viewer.notifyWhenReady { woken.set() }
        #expect(await eventually(timeout: .seconds(3)) { woken.count == 1 })
        #expect(ContinuousClock.now - started >= .milliseconds(300))
        guard case .picture(let served, let repeated) = viewer.poll() else {
            Issue.record("expected the newest picture")
            return
        }
        #expect(!repeated)
        #expect(served.sequence == UInt64(2 * Fixture.baselineFrames))
    }

    @Test func closeEndsViewersAndFailsWaiters() async throws {
        let session = try await decodedSession()
        let viewer = try session.subscribe(PictureRequest())
        while case .picture = viewer.poll() {}
        let woken = Flag()
        viewer.notifyWhenReady { woken.set() }
        let latest = try #require(session.latestSequence)
        async let waiting = picture(session, after: latest, wait: .seconds(10))
        #expect(await eventually { session.waitingRequests == 1 })
        session.close()
        #expect(woken.count == 1)
        guard case .ended = viewer.poll() else {
            Issue.record("expected the end")
            return
        }
        guard case .failure(let error) = await waiting else {
            Issue.record("expected session_not_found")
            return
        }
        #expect(error.code == .sessionNotFound)
        #expect(throws: SessionError.self) { _ = try session.beginUpload() }
    }
}
