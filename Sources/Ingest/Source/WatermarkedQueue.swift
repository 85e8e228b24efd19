/// The one bounded queue between an input's producer and its consumer, as a value its owner
/// keeps under its lock together with whatever else must change in the same critical section:
/// the elements with their weights (their bytes), held below `watermark.high`; the element that
/// ends the queue, delivered after the others; and each side's `WaitingSide`. Every call that
/// lets a waiting side go on returns that side's wake-up, to run once the lock is released.
///
/// Producer: `append` while `room` (or `fits`) allows it; otherwise `producerWaits()`, and go on
/// when the producer's wake-up runs: the consumer drained the queue to `watermark.low`. Then
/// `end(with:)`. Consumer: `take` until the end; after `take` found nothing, the consumer's
/// wake-up runs at the next element. After the end is taken (or the queue closed) both
/// wake-ups are let go: they usually capture the other side, which holds the queue.
struct WatermarkedQueue<Element: Sendable>: Sendable {
    typealias Wake = WaitingSide.Wake

    let watermark: HighLowWatermark
    /// Weight waiting now.
    private(set) var queuedWeight = 0
    /// The most weight that ever waited at once.
    private(set) var highestWeight = 0

    private var slots: [Slot] = []
    private var head = 0
    private var ending = Ending.open
    private var producer = WaitingSide()
    /// The consumer has nothing and wants to hear of the next element (true from the start).
    private var consumer = WaitingSide(waiting: true)

    private struct Slot: Sendable {
        /// Let go once taken, so the array does not hold what the consumer has.
        var element: Element?
        let weight: Int
    }

    private enum Ending: Sendable {
        case open
        /// Delivered after the queued elements.
        case pending(Element)
        /// The end was taken, or the queue closed: nothing follows.
        case over
    }

    init(watermark: HighLowWatermark) {
        self.watermark = watermark
    }

    // MARK: - Producer

    /// Weight that fits before the high watermark.
    var room: Int { max(0, watermark.high - queuedWeight) }

    /// Whether an element of `weight` may go in whole now: below the high watermark, or alone
    /// (one larger than the watermark still goes, into an empty queue), or weightless.
    func fits(weight: Int) -> Bool {
        weight == 0 || queuedWeight == 0 || queuedWeight + weight <= watermark.high
    }

    /// True once the end is set (or the queue closed): nothing more may be appended.
    var isEnded: Bool {
        if case .open = ending { return false }
        return true
    }

    /// Returns the consumer's wake-up if it waited.
    mutating func append(_ element: Element, weight: Int) -> Wake? {
        precondition(!isEnded, "an element appended after the queue's end")
        slots.append(Slot(element: element, weight: weight))
        queuedWeight += weight
        highestWeight = max(highestWeight, queuedWeight)
        return consumer.wakeIfWaiting()
    }

    /// The producer holds more than fits: its wake-up runs once the consumer drained the queue
    /// to the low watermark (or by `wakeProducer`, `interruptProducer`, `close`).
    mutating func producerWaits() {
        producer.wait()
    }

    mutating func setProducerWake(_ wake: @escaping Wake) {
        guard !isOver else { return }
        producer.setWake(wake)
    }

    /// A waiting producer may go on whatever the queue holds (it was let in): its wake-up.
    mutating func wakeProducer() -> Wake? {
        producer.wakeIfWaiting()
    }

    /// The producer must learn something now (it was refused): its wake-up, waiting or not.
    mutating func interruptProducer() -> Wake? {
        producer.wakeNow()
    }

    /// `last` follows the queued elements (or, `droppingQueued`, comes next), replacing an end
    /// set before that was not taken yet. Returns the consumer's wake-up if it waited.
    mutating func end(with last: Element, droppingQueued: Bool) -> Wake? {
        guard !isOver else { return nil }
        if droppingQueued { dropQueued() }
        ending = .pending(last)
        return consumer.wakeIfWaiting()
    }

    // MARK: - Consumer

    /// True once the end was taken or the queue closed: `take` has nothing more.
    var isOver: Bool {
        if case .over = ending { return true }
        return false
    }

    /// The next element, then the end, then nil (the consumer now waits). `wake`: the
    /// producer's wake-up, when this take drained the queue to the low watermark.
    mutating func take() -> (element: Element?, wake: Wake?) {
        if head < slots.count {
            let slot = slots[head]
            slots[head].element = nil
            head += 1
            // Taken slots are dropped once they are half the array, so a queue that never runs
            // empty (a consumer slightly slower than its producer) does not grow.
            if head == slots.count {
                slots.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 64 && head * 2 >= slots.count {
                slots.removeFirst(head)
                head = 0
            }
            queuedWeight -= slot.weight
            return (slot.element, queuedWeight <= watermark.low ? producer.wakeIfWaiting() : nil)
        }
        if case .pending(let last) = ending {
            ending = .over
            producer.release()
            consumer.release()
            return (last, nil)
        }
        consumer.wait()
        return (nil, nil)
    }

    /// Sets the consumer's wake-up, and returns it when an element already waits (run it at once).
    mutating func setConsumerWake(_ wake: @escaping Wake) -> Wake? {
        guard !isOver else { return nil }
        consumer.setWake(wake)
        let pending: Bool =
            if case .pending = ending { true } else { head < slots.count }
        return pending ? consumer.wakeNow() : nil
    }

    /// The consumer stops listening: what waits is dropped and nothing follows. Returns the
    /// producer's wake-up, waiting or not, so that it learns.
    mutating func close() -> Wake? {
        dropQueued()
        ending = .over
        let wake = producer.wakeNow()
        producer.release()
        consumer.release()
        return wake
    }

    private mutating func dropQueued() {
        slots.removeAll()
        head = 0
        queuedWeight = 0
    }
}
