import Ingest
import Testing
import TestSupport
import VideoCoding

/// The one queue between the HTTP server and a session's ingest worker, on its own: no
/// sockets, no decoder, no sleeps.
@Suite(.timeLimit(.minutes(10))) struct UploadQueueTests {
    private func queue(capacity: Int = 100, maxBytes: Int? = nil, admitted: Bool = true) -> UploadQueue<Refusal> {
        UploadQueue(
            watermark: HighLowWatermark(capacity: capacity), maxBytes: maxBytes, admitted: admitted, clock: ManualClock())
    }

    private func offer(_ queue: UploadQueue<Refusal>, _ count: Int, value: UInt8 = 1) -> UploadQueue<Refusal>.Offer {
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
        let tooLarge = Refusal(IngestError(.bodyTooLarge, "request body exceeds 100 bytes"))
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
        let gone = Refusal.consumer("the session was deleted")
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
            let queue: UploadQueue<Refusal>
            init(_ queue: UploadQueue<Refusal>) { self.queue = queue }
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

    /// A session's pushes land one after another in the same slabs: a client that pushes one
    /// small access unit per request does not keep a slab alive for each.
    @Test func pushesSharingALandingGoOnInTheSameSlab() {
        let landing = SlabLanding(pool: SlabPool(slabBytes: 1 << 10, maxIdleSlabs: 4))
        var pieces: [SlabBytes] = []
        for push in 0..<3 {
            let queue = UploadQueue<Refusal>(
                watermark: HighLowWatermark(capacity: 100), clock: ManualClock(), landing: landing)
            #expect(offer(queue, 30, value: UInt8(push + 1)) == .accepted(30))
            queue.finish()
            guard case .bytes(let bytes, _) = queue.take() else {
                Issue.record("push \(push): expected bytes")
                return
            }
            pieces.append(bytes)
        }
        #expect(pieces.map(Array.init) == [[UInt8](repeating: 1, count: 30), [UInt8](repeating: 2, count: 30), [UInt8](repeating: 3, count: 30)])
        #expect(pieces[0].isFollowed(by: pieces[1]) && pieces[1].isFollowed(by: pieces[2]))
    }
}
