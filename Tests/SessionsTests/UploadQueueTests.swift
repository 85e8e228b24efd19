import Decoding
import Imaging
import Synchronization
import Testing
import TestSupport

@testable import Sessions

/// The one queue between the HTTP server and a session's ingest worker, on its own: no
/// sockets, no decoder, no sleeps.
@Suite(.timeLimit(.minutes(10))) struct UploadQueueTests {
    private func queue(capacity: Int = 100, maxBytes: Int? = nil, admitted: Bool = true) -> UploadQueue {
        UploadQueue(
            watermark: HighLowWatermark(capacity: capacity), maxBytes: maxBytes, admitted: admitted, clock: ManualClock())
    }

    private func offer(_ queue: UploadQueue, _ count: Int, value: UInt8 = 1) -> UploadQueue.Offer {
        [UInt8](repeating: value, count: count).withUnsafeBytes { queue.offer($0) }
    }

    @Test func theProducerPausesAtTheHighMarkAndResumesAtTheLowOne() {
        let queue = queue(capacity: 100)
        let producerWoken = Flag()
        queue.setProducerWake { producerWoken.set() }
        #expect(offer(queue, 60) == .accepted(60))
        // Only 40 fit: the rest stays with the producer, which must pause.
        #expect(offer(queue, 60) == .accepted(40))
        #expect(queue.queuedBytes == 100)
        // Taking one piece leaves 40 > 50? No: 40 <= 50, the low mark, so the producer is woken.
        guard case .bytes(let first, _) = queue.take() else {
            Issue.record("expected bytes")
            return
        }
        #expect(first.count == 60)
        #expect(producerWoken.count == 1)
        #expect(queue.highestQueuedBytes == 100)
    }

    @Test func noWakeUpAboveTheLowMark() {
        let queue = queue(capacity: 100)
        let producerWoken = Flag()
        queue.setProducerWake { producerWoken.set() }
        for _ in 0..<10 { _ = offer(queue, 10) }
        #expect(offer(queue, 10) == .accepted(0))
        for _ in 0..<4 { _ = queue.take() }  // 60 left: above low (50)
        #expect(producerWoken.count == 0)
        _ = queue.take()  // 50 left: at low
        #expect(producerWoken.count == 1)
    }

    @Test func theConsumerIsWokenOncePerArrivalAfterItFoundNothing() {
        let queue = queue()
        let consumerWoken = Flag()
        queue.setConsumerWake { consumerWoken.set() }
        _ = offer(queue, 1)
        _ = offer(queue, 1)
        // Woken by the first arrival only: it has not looked again since.
        #expect(consumerWoken.count == 1)
        _ = queue.take()
        _ = queue.take()
        #expect(queue.take() == nil)
        _ = offer(queue, 1)
        #expect(consumerWoken.count == 2)
    }

    @Test func bytesComeBeforeTheEnd() {
        let queue = queue()
        _ = offer(queue, 5, value: 7)
        queue.finish()
        #expect(queue.isProducerDone)
        guard case .bytes(let bytes, _) = queue.take() else {
            Issue.record("the queued bytes come first")
            return
        }
        #expect(bytes == [7, 7, 7, 7, 7])
        #expect(queue.take() == .end)
        #expect(queue.take() == nil)
    }

    @Test func aClientThatLeavesStillDeliversWhatArrived() {
        let queue = queue()
        _ = offer(queue, 5)
        queue.abort(.clientGone)
        #expect(queue.take() != nil)
        #expect(queue.take() == .stopped(.clientGone))
    }

    @Test func shutdownDropsWhatWasQueued() {
        let queue = queue()
        _ = offer(queue, 50)
        queue.abort(.serverShutdown)
        #expect(queue.queuedBytes == 0)
        #expect(queue.take() == .stopped(.serverShutdown))
    }

    @Test func theLimitRefusesThePieceThatPassesItAndKeepsTheBytesBefore() {
        let queue = queue(capacity: 1000, maxBytes: 100)
        #expect(offer(queue, 80) == .accepted(80))
        let tooLarge = SessionError(.bodyTooLarge, "request body exceeds 100 bytes")
        #expect(offer(queue, 30) == .refused(tooLarge))
        #expect(offer(queue, 1) == .refused(tooLarge))
        guard case .bytes(let bytes, _) = queue.take() else {
            Issue.record("the bytes before the limit are delivered")
            return
        }
        #expect(bytes.count == 80)
        #expect(queue.take() == .stopped(.refused(tooLarge)))
    }

    @Test func aConsumerRefusalDropsTheQueueAndWakesBothSides() {
        let queue = queue(capacity: 100)
        let producerWoken = Flag()
        let consumerWoken = Flag()
        queue.setProducerWake { producerWoken.set() }
        _ = offer(queue, 100)
        #expect(offer(queue, 1) == .accepted(0))  // full: the producer pauses
        #expect(queue.take() != nil)  // (this also wakes it once: 0 left)
        #expect(queue.take() == nil)
        queue.setConsumerWake { consumerWoken.set() }
        let gone = SessionError(.sessionNotFound, "the session was deleted")
        queue.refuse(gone)
        #expect(producerWoken.count == 2)
        #expect(consumerWoken.count == 1)
        #expect(offer(queue, 1) == .refused(gone))
        #expect(queue.take() == .stopped(.refused(gone)))
    }

    @Test func anUnadmittedQueueTakesNothingUntilAdmitted() {
        let queue = queue(admitted: false)
        let producerWoken = Flag()
        queue.setProducerWake { producerWoken.set() }
        #expect(offer(queue, 10) == .accepted(0))
        #expect(queue.take() == nil)
        queue.admit()
        #expect(producerWoken.count == 1)
        #expect(offer(queue, 10) == .accepted(10))
    }

    /// The wake-ups usually capture the other side, which holds the queue: after the terminal
    /// event they are let go, so neither outlives the upload.
    @Test func theWakeUpsAreReleasedAfterTheTerminalEvent() {
        final class Holder: Sendable {
            let queue: UploadQueue
            init(_ queue: UploadQueue) { self.queue = queue }
        }
        weak var released: Holder?
        do {
            let queue = queue()
            let holder = Holder(queue)
            released = holder
            queue.setConsumerWake { _ = holder.queue.queuedBytes }
            queue.setProducerWake { _ = holder.queue.queuedBytes }
            _ = offer(queue, 10)
            queue.finish()
            _ = queue.take()
            #expect(queue.take() == .end)
            queue.setConsumerWake { _ = holder }  // too late: ignored, nothing follows
        }
        #expect(released == nil)
    }
}

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
        guard case .failed(let error) = state.admit(request, quality: 85, clientHas: .init(), wait: false, completion: { _ in })
        else {
            Issue.record("no picture yet")
            return
        }
        #expect(error.code == .noFrameYet)
        guard case .waiting = state.admit(request, quality: 85, clientHas: .init(), wait: true, completion: { _ in })
        else {
            Issue.record("a long poll waits for the first picture")
            return
        }
        #expect(state.waiters.count == 1)
    }

    @Test func expiredWaitersAnswerWithTheCurrentTag() {
        var state = ViewerSet.State()
        guard case .waiting(let id) = state.admit(
            PictureRequest(width: 160), quality: 85, clientHas: .init(after: 0), wait: true, completion: { _ in })
        else {
            Issue.record("expected a waiter")
            return
        }
        let expired = state.expireWaiter(id, defaultQuality: 85)
        #expect(expired.isNone == false)
        #expect(expired.flatMap { $0.1 } == nil, "no picture: no tag")
        #expect(state.expireWaiter(id, defaultQuality: 85).isNone, "a waiter expires once")
    }

    @Test func viewerPacingGatesAndRepeats() throws {
        var viewer = ViewerState(request: PictureRequest(), minInterval: 500)
        let picture = ServedPicture(
            published: PublishedFrame(
                frame: try DecodedFrameFactory.tiny(), sequence: 1, backend: .software, at: ManualClock()),
            picture: try EncodedPictureFactory.tiny(), etag: "\"1\"")
        viewer.ready = picture
        guard case .picture(_, false) = viewer.deliver(at: 1000, repeatInterval: 10_000) else {
            Issue.record("the first part goes at once")
            return
        }
        viewer.ready = picture
        #expect(viewer.deliver(at: 1400, repeatInterval: 10_000).isNone, "the fps gate holds it")
        #expect(!viewer.deliver(at: 1500, repeatInterval: 10_000).isNone)
        #expect(viewer.deliver(at: 2000, repeatInterval: 10_000).isNone, "nothing new and no repeat due")
        guard case .picture(_, true) = viewer.deliver(at: 11_500, repeatInterval: 10_000) else {
            Issue.record("after the repeat interval the last part goes again")
            return
        }
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
        try PictureEncoder().encode(try DecodedFrameFactory.tiny(), PictureOptions(width: 16))
    }
}

extension Optional {
    var isNone: Bool {
        if case .none = self { return true }
        return false
    }
}
