import Decoding
import FoundationEssentials
import Imaging
import Synchronization
import Timekeeping

/// Everyone who waits for a session's newest picture, and the newest picture itself: long
/// polls (`latest.jpg?wait=`) and MJPEG viewers, served from one newest-only slot with no
/// per-client queue, in the manner of pikvm/ustreamer. A new picture wakes them; each then
/// takes the newest encoding for its options from the picture cache. A viewer still busy
/// with the last part simply misses the pictures in between, so nothing a viewer does can
/// slow the decoder.
///
/// Owns: the newest picture, the long polls and the MJPEG viewers with their pacing.
final class ViewerSet: Sendable {
    private let state = Mutex(State())
    private let clock: any ServiceClock
    private let pictures: PictureCache
    /// A viewer with no new picture gets the last one again after this long (which also lets a
    /// suspended connection notice that its client left).
    private let repeatInterval: UInt64
    /// Called with the number of MJPEG viewers and long polls whenever one joins or leaves.
    private let onChange: @Sendable (_ viewers: Int, _ waiters: Int) -> Void

    init(
        clock: any ServiceClock, pictures: PictureCache, repeatInterval: Duration,
        onChange: @escaping @Sendable (_ viewers: Int, _ waiters: Int) -> Void
    ) {
        self.clock = clock
        self.pictures = pictures
        self.repeatInterval = repeatInterval.nanoseconds
        self.onChange = onChange
    }

    /// The newest undamaged picture, nil before the first one.
    var newest: PublishedFrame? { state.withLock { $0.newest } }
    var viewerCount: Int { state.withLock { $0.viewers.count } }
    var waiterCount: Int { state.withLock { $0.waiters.count } }
    var isEmpty: Bool { state.withLock { $0.viewers.isEmpty && $0.waiters.isEmpty } }

    // MARK: - The newest picture

    /// Makes `newest` the picture everyone gets, answers the long polls it satisfies and wakes
    /// the viewers.
    func publish(_ newest: PublishedFrame) {
        let (waiters, viewers) = state.withLock { $0.publish(newest) }
        for waiter in waiters {
            pictures.serve(newest, waiter.request) { waiter.completion($0.map { .picture($0) }) }
        }
        if !waiters.isEmpty { reportCounts() }
        for id in viewers { evaluate(id) }
    }

    // MARK: - Long polls

    /// The newest picture for `request`: served at once when the client has an older one (or
    /// none), 304 when it has this one, or (with `wait`) held until a newer one comes or the
    /// wait ends (then 304, or 404 `no_frame_yet` when the session still has no picture).
    /// `completion` runs exactly once, synchronously when the answer is known now (cached
    /// picture, 304, error), otherwise on the encode queue or a timer.
    func requestPicture(
        _ request: PictureRequest, clientHas: PictureAnswerCondition, wait: Duration,
        completion: @escaping @Sendable (Result<PictureAnswer, SessionError>) -> Void
    ) {
        let quality = request.effectiveQuality(sessionDefault: pictures.defaultQuality)
        let deadline = clock.uptime + wait.nanoseconds
        let decision = state.withLock { state in
            state.admit(
                request, quality: quality, clientHas: clientHas, wait: wait > .zero, incarnation: pictures.incarnation,
                completion: completion)
        }
        switch decision {
        case .failed(let error): completion(.failure(error))
        case .notModified(let etag): completion(.success(.notModified(etag: etag)))
        case .serve(let newest):
            pictures.serve(newest, request) { completion($0.map { .picture($0) }) }
        case .waiting(let id):
            reportCounts()
            clock.schedule(at: deadline) { [weak self] in self?.expireWaiter(id) }
        }
    }

    private func expireWaiter(_ id: UInt64) {
        let expired = state.withLock { $0.expireWaiter(id, incarnation: pictures.incarnation) }
        guard let (waiter, etag) = expired else { return }
        reportCounts()
        // 304 says the client's picture is still the newest; with no picture at all there is
        // nothing it could hold, and the answer is the one it gets without a wait.
        guard let etag else {
            return waiter.completion(
                .failure(SessionError(.noFrameYet, "the session has no picture yet (none came in the wait)")))
        }
        waiter.completion(.success(.notModified(etag: etag)))
    }

    // MARK: - MJPEG viewers

    /// Registers a viewer; `minInterval` (nanoseconds, 0 for none) caps its parts per second.
    func addViewer(request: PictureRequest, minInterval: UInt64) throws(SessionError) -> UInt64 {
        let id = try state.withLock { state throws(SessionError) -> UInt64 in
            guard !state.closed else { throw SessionError(.sessionNotFound, "the session was closed") }
            return state.addViewer(ViewerState(request: request, minInterval: minInterval))
        }
        reportCounts()
        return id
    }

    /// The viewer left. Returns false when it was already gone.
    @discardableResult
    func removeViewer(_ id: UInt64) -> Bool {
        let removed = state.withLock { $0.viewers.removeValue(forKey: id) != nil }
        if removed { reportCounts() }
        return removed
    }

    func poll(_ id: UInt64) -> ViewerPoll {
        var plan = ViewerPlan()
        let answer = state.withLock { state -> ViewerPoll in
            guard !state.closed, var viewer = state.viewers[id] else { return .ended }
            let now = clock.uptime
            skipToCachedNewest(&viewer, newest: state.newest, now: now)
            if let part = viewer.deliver(at: now, repeatInterval: repeatInterval, newest: state.newest?.sequence ?? 0) {
                state.viewers[id] = viewer
                return part
            }
            plan = viewer.plan(id: id, newest: state.newest, now: now, repeatInterval: repeatInterval)
            state.viewers[id] = viewer
            return .wait
        }
        run(plan)
        return answer
    }

    /// Calls `callback` once when `poll` has something (a newer picture, a repeat that is due,
    /// or the end), at once on this thread when it already has.
    func notifyWhenReady(_ id: UInt64, _ callback: @escaping @Sendable () -> Void) {
        var plan = ViewerPlan()
        let callNow = state.withLock { state -> Bool in
            guard !state.closed, var viewer = state.viewers[id] else { return true }
            let now = clock.uptime
            skipToCachedNewest(&viewer, newest: state.newest, now: now)
            if viewer.hasDeliverable(at: now, repeatInterval: repeatInterval, newest: state.newest?.sequence ?? 0) {
                state.viewers[id] = viewer
                return true
            }
            viewer.callback = callback
            plan = viewer.plan(id: id, newest: state.newest, now: now, repeatInterval: repeatInterval)
            state.viewers[id] = viewer
            return false
        }
        if callNow { callback() }
        run(plan)
    }

    /// Something changed for a viewer (new picture, encode done, timer): wake it if it waits
    /// and has something now, otherwise start what it needs next.
    private func evaluate(_ id: UInt64) {
        var plan = ViewerPlan()
        let callback = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.closed, var viewer = state.viewers[id], viewer.callback != nil else { return nil }
            let now = clock.uptime
            skipToCachedNewest(&viewer, newest: state.newest, now: now)
            if viewer.hasDeliverable(at: now, repeatInterval: repeatInterval, newest: state.newest?.sequence ?? 0) {
                defer { viewer.callback = nil; state.viewers[id] = viewer }
                return viewer.callback
            }
            plan = viewer.plan(id: id, newest: state.newest, now: now, repeatInterval: repeatInterval)
            state.viewers[id] = viewer
            return nil
        }
        callback?()
        run(plan)
    }

    /// Newest-only: when the newest picture is already encoded for a viewer's options (another
    /// reader paid for it), the viewer takes that instead of an older one or a pending encode.
    private func skipToCachedNewest(_ viewer: inout ViewerState, newest: PublishedFrame?, now: UInt64) {
        // Not while the fps gate is shut: taken now, it would go out when the gate opens, old by then.
        guard let newest, viewer.gateOpen(at: now),
            newest.sequence > max(viewer.lastDeliveredSequence, viewer.ready?.sequence ?? 0)
        else { return }
        if let cached = pictures.cachedServed(newest, viewer.request.fitting(newest.frame)) { viewer.ready = cached }
    }

    private func run(_ plan: ViewerPlan) {
        if let encode = plan.encode {
            pictures.serve(encode.picture, encode.request) { [weak self] result in
                self?.encoded(encode.viewer, sequence: encode.picture.sequence, result)
            }
        }
        if let timer = plan.timer {
            clock.schedule(at: timer.due) { [weak self] in self?.timerFired(timer.viewer, due: timer.due) }
        }
    }

    private func encoded(_ id: UInt64, sequence: UInt64, _ result: Result<ServedPicture, SessionError>) {
        // A failed encode skips the picture (the cache recorded the error); the next one tries
        // again, and until it comes the last picture is repeated as if nothing newer had.
        var prefetch = ViewerPlan()
        state.withLock { state in
            guard var viewer = state.viewers[id] else { return }
            viewer.encodeInFlight = false
            // A part not taken yet means a reader that is not reading: no encode ahead for it.
            let tookTheLast = viewer.ready == nil
            switch result {
            case .failure:
                viewer.failedSequence = max(viewer.failedSequence, sequence)
            case .success(let served):
                if served.sequence > max(viewer.lastDeliveredSequence, viewer.ready?.sequence ?? 0) { viewer.ready = served }
            }
            if tookTheLast { prefetch = viewer.prefetch(id: id, newest: state.newest) }
            state.viewers[id] = viewer
        }
        evaluate(id)
        run(prefetch)
    }

    private func timerFired(_ id: UInt64, due: UInt64) {
        state.withLock { state in
            if state.viewers[id]?.timerDue == due { state.viewers[id]?.timerDue = nil }
        }
        evaluate(id)
    }

    // MARK: - Close

    /// Ends every viewer (their next poll answers `.ended`) and fails every long poll.
    func close(failing failure: SessionError) {
        let (waiters, callbacks) = state.withLock { $0.close() }
        for waiter in waiters { waiter.completion(.failure(failure)) }
        for callback in callbacks { callback() }
        if !waiters.isEmpty || !callbacks.isEmpty { reportCounts() }
    }

    private func reportCounts() {
        let (viewers, waiters) = state.withLock { ($0.viewers.count, $0.waiters.count) }
        onChange(viewers, waiters)
    }
}

/// What one MJPEG viewer's poll gets.
public enum ViewerPoll: Sendable {
    /// Send this part now. `repeated`: the same picture again because nothing newer came.
    case picture(ServedPicture, repeated: Bool)
    /// Nothing to send yet: suspend, then ask `notifyWhenReady`.
    case wait
    /// The session is gone: write the closing boundary and end the response.
    case ended
}

extension ViewerSet {
    struct Waiter {
        let newerThan: UInt64
        let request: PictureRequest
        let quality: Int
        let completion: @Sendable (Result<PictureAnswer, SessionError>) -> Void
    }

    enum Admission {
        case failed(SessionError)
        case notModified(etag: String)
        case serve(PublishedFrame)
        case waiting(id: UInt64)
    }

    /// The viewer set's bookkeeping as a value.
    struct State {
        private(set) var newest: PublishedFrame?
        private(set) var waiters: [UInt64: Waiter] = [:]
        var viewers: [UInt64: ViewerState] = [:]
        private var nextID: UInt64 = 1
        private(set) var closed = false

        mutating func publish(_ picture: PublishedFrame) -> (waiters: [Waiter], viewers: [UInt64]) {
            guard !closed else { return ([], []) }
            newest = picture
            var answered: [Waiter] = []
            for (id, waiter) in waiters where waiter.newerThan < picture.sequence {
                answered.append(waiter)
                waiters[id] = nil
            }
            return (answered, viewers.compactMap { $0.value.callback == nil ? nil : $0.key })
        }

        mutating func admit(
            _ request: PictureRequest, quality: Int, clientHas: PictureAnswerCondition, wait: Bool, incarnation: String,
            completion: @escaping @Sendable (Result<PictureAnswer, SessionError>) -> Void
        ) -> Admission {
            guard !closed else { return .failed(SessionError(.sessionNotFound, "the session was closed")) }
            let newerThan = clientHas.newerThan(incarnation: incarnation)
            if wait, (newest?.sequence ?? 0) <= (newerThan ?? 0) {
                let id = nextID
                nextID += 1
                waiters[id] = Waiter(newerThan: newerThan ?? 0, request: request, quality: quality, completion: completion)
                return .waiting(id: id)
            }
            guard let newest else { return .failed(SessionError(.noFrameYet, "the session has no picture yet")) }
            let etag = PictureETag.make(
                sequence: newest.sequence, request: request, effectiveQuality: quality, incarnation: incarnation)
            if clientHas.holds(etag) { return .notModified(etag: etag) }
            if let after = clientHas.after, newest.sequence <= after { return .notModified(etag: etag) }
            return .serve(newest)
        }

        /// The wait ended: the waiter (if still waiting) and the tag of the current picture for it.
        mutating func expireWaiter(_ id: UInt64, incarnation: String) -> (Waiter, String?)? {
            guard let waiter = waiters.removeValue(forKey: id) else { return nil }
            let etag = newest.map {
                PictureETag.make(
                    sequence: $0.sequence, request: waiter.request, effectiveQuality: waiter.quality, incarnation: incarnation)
            }
            return (waiter, etag)
        }

        mutating func addViewer(_ viewer: ViewerState) -> UInt64 {
            let id = nextID
            nextID += 1
            viewers[id] = viewer
            return id
        }

        mutating func close() -> (waiters: [Waiter], callbacks: [@Sendable () -> Void]) {
            closed = true
            newest = nil
            defer {
                waiters = [:]
                viewers = [:]
            }
            return (Array(waiters.values), viewers.values.compactMap(\.callback))
        }
    }
}

/// One MJPEG viewer's pacing: what it was sent last and when, and what is ready for it.
struct ViewerState {
    let request: PictureRequest
    /// Nanoseconds between parts (the fps cap), 0 for none.
    let minInterval: UInt64
    var lastDeliveredSequence: UInt64 = 0
    /// Uptime of the last part sent, a repeat included, 0 before the first: repeats count from it.
    var lastDeliveredAt: UInt64 = 0
    /// Uptime of the last new picture sent, 0 before the first: the fps gate counts from it (a
    /// repeat once a second must not hold back a new picture for ever below 1 fps).
    var lastNewPictureAt: UInt64 = 0
    var lastPicture: ServedPicture?
    /// Encoded, newer than the last part, not yet taken.
    var ready: ServedPicture?
    /// Highest sequence whose encode this viewer asked for.
    var requestedSequence: UInt64 = 0
    /// An encode for this viewer is under way: it asks for no other until it ends, so a viewer
    /// the encoder cannot keep up with skips pictures instead of queueing encodes (each of which
    /// would keep its decoded picture, and the decoder's pool with it, alive).
    var encodeInFlight = false
    /// Highest sequence whose encode for this viewer failed.
    var failedSequence: UInt64 = 0
    var callback: (@Sendable () -> Void)?
    /// Uptime the pending pacing timer fires at.
    var timerDue: UInt64?

    init(request: PictureRequest, minInterval: UInt64) {
        self.request = request
        self.minInterval = minInterval
    }

    func gateOpen(at now: UInt64) -> Bool {
        lastNewPictureAt == 0 || now >= lastNewPictureAt + minInterval
    }

    /// The last picture goes again a repeat interval after the last part, while no newer one
    /// may go instead: with a newer picture and the fps gate open, the viewer waits for that
    /// picture's encode. The interval counts from when a part was handed out, so a viewer that
    /// takes longer than it to read a part would otherwise get the old picture again each time.
    func repeatDue(at now: UInt64, interval: UInt64, newest: UInt64) -> Bool {
        guard lastPicture != nil, now >= lastDeliveredAt + interval else { return false }
        return !newerMayGo(at: now, newest: newest)
    }

    /// A picture newer than the last part, whose encode has not failed, and the fps gate open.
    func newerMayGo(at now: UInt64, newest: UInt64) -> Bool {
        newest > max(lastDeliveredSequence, failedSequence) && gateOpen(at: now)
    }

    func hasDeliverable(at now: UInt64, repeatInterval: UInt64, newest: UInt64) -> Bool {
        (ready != nil && gateOpen(at: now)) || repeatDue(at: now, interval: repeatInterval, newest: newest)
    }

    /// `newest`: the sequence of the session's newest picture.
    mutating func deliver(at now: UInt64, repeatInterval: UInt64, newest: UInt64) -> ViewerPoll? {
        if let ready, gateOpen(at: now) {
            self.ready = nil
            lastDeliveredSequence = ready.sequence
            lastDeliveredAt = now
            lastNewPictureAt = now
            lastPicture = ready
            return .picture(ready, repeated: false)
        }
        if let lastPicture, repeatDue(at: now, interval: repeatInterval, newest: newest) {
            lastDeliveredAt = now
            return .picture(lastPicture, repeated: true)
        }
        return nil
    }

    /// For a viewer with nothing to send: encode the newest picture when it is newer than what
    /// the viewer has and its fps gate is open; otherwise a timer for when the gate opens or a
    /// repeat falls due.
    mutating func plan(id: UInt64, newest: PublishedFrame?, now: UInt64, repeatInterval: UInt64) -> ViewerPlan {
        var plan = ViewerPlan()
        let have = max(lastDeliveredSequence, ready?.sequence ?? 0)
        let newerExists = (newest?.sequence ?? 0) > have
        let gateOpen = gateOpen(at: now)
        if let newest, newerExists, gateOpen, !encodeInFlight, requestedSequence < newest.sequence {
            requestedSequence = newest.sequence
            encodeInFlight = true
            plan.encode = (id, newest, request.fitting(newest.frame))
        }
        var due: UInt64?
        if !gateOpen, newerExists || ready != nil {
            due = lastNewPictureAt + minInterval
        }
        // No repeat timer while a newer picture may go: its encode's completion wakes the viewer
        // (a timer for a repeat time already past would fire again and again meanwhile).
        if lastPicture != nil, !newerMayGo(at: now, newest: newest?.sequence ?? 0) {
            let repeatAt = lastDeliveredAt + repeatInterval
            due = min(due ?? repeatAt, repeatAt)
        }
        if let due, timerDue.map({ due < $0 }) ?? true {
            timerDue = due
            plan.timer = (id, due)
        }
        return plan
    }
}

extension ViewerState {
    /// A viewer without an fps cap whose part is ready while a newer picture exists starts that
    /// picture's encode now, while it writes the ready one (still one encode in flight): it
    /// does not wait for its next poll to ask. Capped viewers do not: the picture would be old
    /// when their gate opens.
    mutating func prefetch(id: UInt64, newest: PublishedFrame?) -> ViewerPlan {
        var plan = ViewerPlan()
        guard minInterval == 0, !encodeInFlight, let ready, let newest, newest.sequence > ready.sequence,
            requestedSequence < newest.sequence
        else { return plan }
        requestedSequence = newest.sequence
        encodeInFlight = true
        plan.encode = (id, newest, request.fitting(newest.frame))
        return plan
    }
}

/// What a viewer needs started once the lock is released.
struct ViewerPlan {
    var encode: (viewer: UInt64, picture: PublishedFrame, request: PictureRequest)?
    var timer: (viewer: UInt64, due: UInt64)?
}
