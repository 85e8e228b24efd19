import Decoding
import Imaging
import Testing
import TestSupport

@testable import Sessions

/// The picture cache's and the viewer set's bookkeeping, as values.
@Suite(.timeLimit(.minutes(10))) struct SessionPartStateTests {
    @Test func theCacheKeepsTheNewestAndThePreviousPictureOnly() throws {
        var state = PictureCache.State()
        func key(_ sequence: UInt64, width: Int = 10) -> PictureKey {
            PictureKey(sequence: sequence, format: .jpeg, width: width, height: 10, quality: 85)
        }
        let picture = try EncodedPictureFactory.tiny()
        for sequence: UInt64 in 1...3 {
            guard case .encode = state.lookup(key(sequence), { _ in }) else {
                Issue.record("a first lookup starts an encode")
                return
            }
            #expect(state.finish(key(sequence), .success(picture)).count == 1)
        }
        #expect(state.encodes == 3)
        state.newestChanged(previous: 2, newest: 3)
        #expect(state.pictures.keys.map(\.sequence).sorted() == [2, 3])
        // An encode that finishes for a retired picture is not kept.
        _ = state.lookup(key(1, width: 20), { _ in })
        _ = state.finish(key(1, width: 20), .success(picture))
        #expect(state.pictures[key(1, width: 20)] == nil)
    }

    @Test func concurrentLookupsOfOneKeyJoinOneEncode() throws {
        var state = PictureCache.State()
        let key = PictureKey(sequence: 1, format: .jpeg, width: 10, height: 10, quality: 85)
        guard case .encode = state.lookup(key, { _ in }) else {
            Issue.record("the first starts the encode")
            return
        }
        for _ in 0..<5 {
            guard case .joined = state.lookup(key, { _ in }) else {
                Issue.record("the others join it")
                return
            }
        }
        #expect(state.finish(key, .success(try EncodedPictureFactory.tiny())).count == 6)
        guard case .hit = state.lookup(key, { _ in }) else {
            Issue.record("then it is cached")
            return
        }
    }

    @Test func theCacheHoldsAtMostItsCapacity() throws {
        var state = PictureCache.State()
        let picture = try EncodedPictureFactory.tiny()
        for width in 1...(PictureCache.State.capacity + 5) {
            let key = PictureKey(sequence: 1, format: .jpeg, width: width, height: 10, quality: 85)
            _ = state.lookup(key, { _ in })
            _ = state.finish(key, .success(picture))
        }
        #expect(state.pictures.count == PictureCache.State.capacity)
    }

    @Test func aLongPollWaitsOnlyWhenTheClientHasTheNewestPicture() {
        var state = ViewerSet.State()
        let request = PictureRequest()
        // No picture yet: without a wait that is "no frame yet", with one the client waits.
        guard case .failed(let error) = state.admit(request, quality: 85, clientHas: .init(), wait: false, incarnation: "a", completion: { _ in })
        else {
            Issue.record("no picture yet")
            return
        }
        #expect(error.code == .noFrameYet)
        guard case .waiting = state.admit(request, quality: 85, clientHas: .init(), wait: true, incarnation: "a", completion: { _ in })
        else {
            Issue.record("a long poll waits for the first picture")
            return
        }
        #expect(state.waiters.count == 1)
    }

    @Test func expiredWaitersAnswerWithTheCurrentTag() {
        var state = ViewerSet.State()
        guard case .waiting(let id) = state.admit(
            PictureRequest(width: 160), quality: 85, clientHas: .init(after: 0), wait: true, incarnation: "a",
            completion: { _ in })
        else {
            Issue.record("expected a waiter")
            return
        }
        let expired = state.expireWaiter(id, incarnation: "a")
        #expect(expired.isNone == false)
        #expect(expired.flatMap { $0.1 } == nil, "no picture: no tag")
        #expect(state.expireWaiter(id, incarnation: "a").isNone, "a waiter expires once")
    }

    /// An MJPEG viewer's size once the stream's fell below half of it: the largest the picture
    /// may be served at, of the shape asked for.
    @Test func aViewersSizeFitsAStreamThatShrank() throws {
        let frame = try DecodedFrameFactory.tiny()
        let (width, height) = (frame.width, frame.height)
        #expect(PictureRequest(width: width).fitting(frame) == PictureRequest(width: width))
        #expect(PictureRequest(width: 3 * width).fitting(frame) == PictureRequest(width: 2 * width))
        #expect(PictureRequest(height: 5 * height, quality: 70).fitting(frame) == PictureRequest(height: 2 * height, quality: 70))
        let both = PictureRequest(width: 4 * width, height: 3 * height).fitting(frame)
        #expect(both == PictureRequest(width: 2 * width, height: 3 * height / 2))
        #expect(PictureRequest().fitting(frame) == PictureRequest())
    }

    @Test func viewerPacingGatesAndRepeats() throws {
        var viewer = ViewerState(request: PictureRequest(), minInterval: 500)
        let picture = ServedPicture(
            published: PublishedFrame(
                frame: try DecodedFrameFactory.tiny(), sequence: 1, backend: .software, at: ManualClock()),
            picture: try EncodedPictureFactory.tiny(), etag: "\"1\"")
        viewer.ready = picture
        guard case .picture(_, false) = viewer.deliver(at: 1000, repeatInterval: 10_000, newest: 1) else {
            Issue.record("the first part goes at once")
            return
        }
        viewer.ready = picture
        #expect(viewer.deliver(at: 1400, repeatInterval: 10_000, newest: 1).isNone, "the fps gate holds it")
        #expect(!viewer.deliver(at: 1500, repeatInterval: 10_000, newest: 1).isNone)
        #expect(viewer.deliver(at: 2000, repeatInterval: 10_000, newest: 1).isNone, "nothing new and no repeat due")
        guard case .picture(_, true) = viewer.deliver(at: 11_500, repeatInterval: 10_000, newest: 1) else {
            Issue.record("after the repeat interval the last part goes again")
            return
        }
        // A viewer slower to read a part than the repeat interval: a newer picture exists and
        // may go, so it waits for that one's encode instead of getting the old one again.
        #expect(viewer.deliver(at: 30_000, repeatInterval: 10_000, newest: 2).isNone, "no repeat while a newer picture may go")
        #expect(!viewer.hasDeliverable(at: 30_000, repeatInterval: 10_000, newest: 2))
        #expect(!viewer.deliver(at: 30_000, repeatInterval: 10_000, newest: 1).isNone, "nothing newer: the repeat goes")
        // Waiting for the newer picture's encode: no timer for a repeat time already past.
        let newer = PublishedFrame(frame: try DecodedFrameFactory.tiny(), sequence: 2, backend: .software, at: ManualClock())
        let waiting = viewer.plan(id: 1, newest: newer, now: 50_000, repeatInterval: 10_000)
        #expect(waiting.encode?.picture.sequence == 2)
        #expect(waiting.timer == nil, "the encode's completion wakes the viewer")
        // That encode failed: the last picture is repeated until a newer one comes.
        viewer.failedSequence = 2
        #expect(!viewer.deliver(at: 50_000, repeatInterval: 10_000, newest: 2).isNone, "repeated after a failed encode")
        #expect(viewer.plan(id: 1, newest: newer, now: 50_000, repeatInterval: 10_000).timer != nil)
        // With the fps gate closed the newer picture cannot go yet: the repeat still does.
        var capped = ViewerState(request: PictureRequest(), minInterval: 50_000)
        capped.ready = picture
        _ = capped.deliver(at: 1000, repeatInterval: 10_000, newest: 1)
        #expect(!capped.deliver(at: 11_000, repeatInterval: 10_000, newest: 2).isNone, "the gate holds the newer one")
        // Repeats do not hold the gate shut: below one picture per repeat interval (fps < 1), the
        // newer picture goes when the interval since the last new one has passed.
        _ = capped.deliver(at: 21_000, repeatInterval: 10_000, newest: 2)
        _ = capped.deliver(at: 41_000, repeatInterval: 10_000, newest: 2)
        #expect(capped.gateOpen(at: 51_000), "50 000 after the last new picture, repeats in between")
        let second = PublishedFrame(frame: try DecodedFrameFactory.tiny(), sequence: 2, backend: .software, at: ManualClock())
        #expect(capped.plan(id: 2, newest: second, now: 51_000, repeatInterval: 10_000).encode?.picture.sequence == 2)
    }

    /// One encode at a time per viewer: one the encoder cannot keep up with skips pictures
    /// rather than queueing an encode for each (each keeps its decoded picture alive).
    @Test func aViewerWaitsForItsEncodeBeforeAskingAnother() throws {
        var viewer = ViewerState(request: PictureRequest(width: 100), minInterval: 0)
        let frame = try DecodedFrameFactory.tiny()
        let first = PublishedFrame(frame: frame, sequence: 1, backend: .software, at: ManualClock())
        let second = PublishedFrame(frame: frame, sequence: 2, backend: .software, at: ManualClock())
        let third = PublishedFrame(frame: frame, sequence: 3, backend: .software, at: ManualClock())
        #expect(viewer.plan(id: 1, newest: first, now: 10, repeatInterval: 1_000).encode?.picture.sequence == 1)
        #expect(viewer.plan(id: 1, newest: second, now: 20, repeatInterval: 1_000).encode == nil, "the first is still encoding")
        viewer.encodeInFlight = false  // its completion
        #expect(viewer.plan(id: 1, newest: third, now: 30, repeatInterval: 1_000).encode?.picture.sequence == 3, "the newest, 2 skipped")
        // Its part ready and a newer picture out: the next encode starts while it writes.
        viewer.encodeInFlight = false
        viewer.ready = ServedPicture(published: third, picture: try EncodedPictureFactory.tiny(), etag: "\"3-w100\"")
        let fourth = PublishedFrame(frame: frame, sequence: 4, backend: .software, at: ManualClock())
        #expect(viewer.prefetch(id: 1, newest: fourth).encode?.picture.sequence == 4)
        #expect(viewer.prefetch(id: 1, newest: fourth).encode == nil, "one at a time")
        var capped = ViewerState(request: PictureRequest(width: 100), minInterval: 1_000)
        capped.ready = viewer.ready
        #expect(capped.prefetch(id: 2, newest: fourth).encode == nil, "a capped viewer asks when its gate opens")
    }
}

/// Real decoded and encoded pictures for the state tests: the first picture of a fixture.
enum DecodedFrameFactory {
    static func tiny() throws -> DecodedFrame {
        let decoder = try StreamDecoder(options: .lowLatency(backend: .software))
        var frames = decoder.push(try Fixture.bytes(Fixture.baseline)).frames
        frames += decoder.finish().frames
        guard let first = frames.first else { throw SessionError(.noFrameYet, "the fixture decoded to nothing") }
        return first
    }
}

enum EncodedPictureFactory {
    static func tiny() throws -> EncodedPicture {
        try TurboJPEGEncoder().encode(try DecodedFrameFactory.tiny(), PictureOptions(width: 16))
    }
}

extension Optional {
    var isNone: Bool {
        if case .none = self { return true }
        return false
    }
}
