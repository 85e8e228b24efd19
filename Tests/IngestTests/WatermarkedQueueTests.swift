import Containers
import Testing
import TestSupport
import VideoCoding

@testable import Ingest

/// The one bounded queue as a value, and the demuxer's output queue, whose producer is a
/// thread that blocks on it.
@Suite(.timeLimit(.minutes(10))) struct WatermarkedQueueTests {
    private typealias Queue = WatermarkedQueue<Int>

    @Test func anElementGoesInWholeBelowTheHighMarkOrAlone() {
        var queue = Queue(watermark: HighLowWatermark(low: 50, high: 100))
        #expect(queue.fits(weight: 100))
        #expect(queue.fits(weight: 500), "one larger than the mark goes into an empty queue")
        _ = queue.append(1, weight: 60)
        #expect(queue.room == 40)
        #expect(!queue.fits(weight: 41))
        #expect(queue.fits(weight: 40))
        #expect(queue.fits(weight: 0), "a weightless element always goes")
    }

    @Test func theProducerIsWokenOnceWhenTheConsumerDrainsToTheLowMark() {
        var queue = Queue(watermark: HighLowWatermark(low: 50, high: 100))
        let producer = Flag()
        queue.setProducerWake { producer.set() }
        for element in 0..<10 { _ = queue.append(element, weight: 10) }
        queue.producerWaits()
        for expected in 0..<4 {
            let (element, wake) = queue.take()
            #expect(element == expected)
            #expect(wake == nil, "above the low mark the producer waits on")
        }
        let (_, atLow) = queue.take()
        atLow?()
        #expect(producer.count == 1)
        #expect(queue.take().wake == nil, "woken once per wait")
    }

    @Test func theConsumerIsWokenByTheFirstElementAfterItFoundNone() {
        var queue = Queue(watermark: HighLowWatermark(capacity: 100))
        let consumer = Flag()
        #expect(queue.setConsumerWake { consumer.set() } == nil, "nothing waits yet")
        queue.append(1, weight: 1)?()
        queue.append(2, weight: 1)?()
        #expect(consumer.count == 1)
        #expect(queue.take().element == 1)
        #expect(queue.take().element == 2)
        #expect(queue.take().element == nil)
        queue.append(3, weight: 1)?()
        #expect(consumer.count == 2)
    }

    @Test func theEndFollowsTheElementsAndThenNothingIsWoken() {
        var queue = Queue(watermark: HighLowWatermark(capacity: 100))
        let woken = Flag()
        queue.setProducerWake { woken.set() }
        _ = queue.setConsumerWake { woken.set() }
        _ = queue.append(1, weight: 10)
        _ = queue.end(with: -1, droppingQueued: false)
        // An end set before it was taken is replaced by a later one.
        _ = queue.end(with: -2, droppingQueued: false)
        #expect(queue.isEnded)
        #expect(queue.take().element == 1)
        #expect(queue.take().element == -2)
        #expect(queue.isOver)
        #expect(queue.take().element == nil)
        #expect(queue.setConsumerWake { woken.set() } == nil)
        #expect(queue.close() == nil, "the wake-ups were let go with the end")
        #expect(woken.count == 0)
    }

    @Test func closingDropsWhatWaitsAndWakesTheProducerWaitingOrNot() {
        var queue = Queue(watermark: HighLowWatermark(capacity: 100))
        let producer = Flag()
        queue.setProducerWake { producer.set() }
        _ = queue.append(1, weight: 10)
        queue.close()?()
        #expect(producer.count == 1)
        #expect(queue.queuedWeight == 0)
        #expect(queue.take().element == nil)
        #expect(queue.isEnded)
    }

    @Test func aDemuxingThreadWaitsForRoomAndGoesOnOnceDrained() {
        let outputs = DemuxOutputQueue(watermark: HighLowWatermark(low: 50, high: 100))
        let appended = Flag()
        BlockingThread.start(name: "test-producer") {
            for _ in 0..<2 {
                if outputs.append(.bytes(SlabBytes([UInt8](repeating: 0, count: 60)), receivedAt: 0)) { appended.set() }
            }
        }
        #expect(eventually { appended.count == 1 }, "the first output went in")
        #expect(outputs.queuedBytes == 60, "the second waits: 120 bytes pass the high mark")
        guard case .bytes(let first, _) = outputs.take() else {
            Issue.record("the first output comes out")
            return
        }
        #expect(first.count == 60)
        #expect(eventually { appended.count == 2 }, "the thread went on once the queue was drained to the low mark")
        outputs.close()
    }

    @Test func closingLetsABlockedThreadGo() {
        let outputs = DemuxOutputQueue(watermark: HighLowWatermark(capacity: 100))
        let refused = Flag()
        BlockingThread.start(name: "test-producer") {
            outputs.append(.bytes(SlabBytes([UInt8](repeating: 0, count: 100)), receivedAt: 0))
            if !outputs.append(.bytes([1], receivedAt: 0)) { refused.set() }
        }
        #expect(eventually { outputs.queuedBytes == 100 }, "the first output went in")
        outputs.close()
        #expect(eventually { refused.count == 1 }, "the blocked thread was told the queue closed")
        #expect(outputs.take() == nil)
    }
}
