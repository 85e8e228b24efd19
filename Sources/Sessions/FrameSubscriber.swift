import Decoding
import Dispatch
import Foundation
import Imaging

public enum SubscriberPoll: Sendable {
    /// Send this part now. `repeated`: the same picture again because nothing newer came.
    case picture(ServedPicture, repeated: Bool)
    /// Nothing to send yet: suspend, then call `notifyWhenReady`.
    case wait
    /// The session is gone: write the closing boundary and end the response.
    case ended
}

/// One MJPEG viewer (`GET /sessions/{id}/frames.mjpeg`): a newest-only hand-off with no
/// per-client queue, in the manner of pikvm/ustreamer. A new picture notifies the viewer;
/// the viewer then pulls the newest encoded picture. A viewer still busy sending the last
/// part simply misses the pictures in between, and nothing it does slows the decoder.
/// Encodings are shared with every other reader of the same options.
///
/// The HTTP layer's content reader loop:
///
///     switch subscriber.poll() {
///     case .picture(let served, _): write the part (headers + served.picture.bytes)
///     case .wait:  suspend the connection; subscriber.notifyWhenReady { resume it }
///     case .ended: write the closing boundary, end the response
///     }
///     ... and when the response is freed (client gone): subscriber.cancel()
public final class FrameSubscriber: Sendable {
    public let session: Session
    public let request: PictureRequest
    /// Most parts per second, nil for as many as decoded.
    public let maxFPS: Double?
    let id: UInt64

    init(session: Session, id: UInt64, request: PictureRequest, maxFPS: Double?) {
        self.session = session
        self.id = id
        self.request = request
        self.maxFPS = maxFPS
    }

    /// Non-blocking; any thread. Starts the encode of the newest picture when one is due.
    public func poll() -> SubscriberPoll { session.pollSubscriber(id) }

    /// Calls `callback` once when `poll` has something (a newer picture, a repeat being due,
    /// or the end), immediately on this thread if that is already so. Call it after suspending.
    public func notifyWhenReady(_ callback: @escaping @Sendable () -> Void) {
        session.armSubscriber(id, callback)
    }

    /// The viewer left: forget it. Idempotent.
    public func cancel() { session.removeSubscriber(id) }
}

struct SubscriberState {
    let request: PictureRequest
    /// Nanoseconds between parts (the fps cap), 0 for none.
    let minInterval: UInt64
    var lastDeliveredSequence: UInt64 = 0
    /// Uptime of the last part sent, 0 before the first.
    var lastDeliveredAt: UInt64 = 0
    var lastPicture: ServedPicture?
    /// Encoded, newer than the last part, not yet taken.
    var ready: ServedPicture?
    /// Highest sequence whose encode this viewer asked for.
    var requestedSequence: UInt64 = 0
    var callback: (@Sendable () -> Void)?
    /// Uptime the pending pacing timer fires at.
    var timerDue: UInt64?

    func gateOpen(at now: UInt64) -> Bool {
        lastDeliveredAt == 0 || now >= lastDeliveredAt + minInterval
    }

    func repeatDue(at now: UInt64, interval: UInt64) -> Bool {
        lastPicture != nil && now >= lastDeliveredAt + interval
    }

    func hasDeliverable(at now: UInt64, repeatInterval: UInt64) -> Bool {
        (ready != nil && gateOpen(at: now)) || repeatDue(at: now, interval: repeatInterval)
    }

    mutating func deliver(at now: UInt64, repeatInterval: UInt64) -> SubscriberPoll? {
        if let ready, gateOpen(at: now) {
            self.ready = nil
            lastDeliveredSequence = ready.sequence
            lastDeliveredAt = now
            lastPicture = ready
            return .picture(ready, repeated: false)
        }
        if let lastPicture, repeatDue(at: now, interval: repeatInterval) {
            lastDeliveredAt = now
            return .picture(lastPicture, repeated: true)
        }
        return nil
    }
}

extension Session {
    /// Registers an MJPEG viewer. Throws `.sessionNotFound` after delete and
    /// `.invalidParameter` for bad options (fps must be 0.1...120 when given).
    public func subscribe(_ request: PictureRequest, maxFPS: Double? = nil) throws(SessionError) -> FrameSubscriber {
        let request = try request.validated()
        if let maxFPS, !(0.1...120).contains(maxFPS) {
            throw SessionError(.invalidParameter, "fps must be 0.1...120")
        }
        let minInterval = maxFPS.map { UInt64(1e9 / $0) } ?? 0
        let now = Date()
        let nowUptime = Self.uptime()
        let subscriberID = try state.withLock { state throws(SessionError) -> UInt64 in
            guard !state.closed else { throw .notFound(id) }
            let subscriberID = state.nextSubscriberID
            state.nextSubscriberID += 1
            state.subscribers[subscriberID] = SubscriberState(request: request, minInterval: minInterval)
            state.lastActivity = now
            state.lastActivityUptime = nowUptime
            return subscriberID
        }
        metrics.mjpegClients.increment()
        logger.debug("MJPEG viewer joined", metadata: ["viewer": "\(subscriberID)"])
        return FrameSubscriber(session: self, id: subscriberID, request: request, maxFPS: maxFPS)
    }

    /// Viewers currently registered.
    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    func removeSubscriber(_ id: UInt64) {
        let now = Date()
        let nowUptime = Self.uptime()
        let removed = state.withLock { state -> Bool in
            guard state.subscribers.removeValue(forKey: id) != nil else { return false }
            // Leaving counts as activity: the idle timeout starts from the last viewer's exit.
            state.lastActivity = now
            state.lastActivityUptime = nowUptime
            return true
        }
        if removed {
            metrics.mjpegClients.decrement()
            logger.debug("MJPEG viewer left", metadata: ["viewer": "\(id)"])
        }
    }

    func pollSubscriber(_ id: UInt64) -> SubscriberPoll {
        var plan = SubscriberPlan()
        let answer = state.withLock { state -> SubscriberPoll in
            guard !state.closed, var subscriber = state.subscribers[id] else { return .ended }
            let now = Self.uptime()
            let repeatInterval = configuration.mjpegRepeatInterval.nanoseconds
            state.skipToCachedNewest(&subscriber, configuration: configuration)
            if let part = subscriber.deliver(at: now, repeatInterval: repeatInterval) {
                state.subscribers[id] = subscriber
                return part
            }
            plan = state.plan(&subscriber, id: id, now: now, configuration: configuration)
            state.subscribers[id] = subscriber
            return .wait
        }
        plan.run(session: self)
        return answer
    }

    func armSubscriber(_ id: UInt64, _ callback: @escaping @Sendable () -> Void) {
        var plan = SubscriberPlan()
        let callNow = state.withLock { state -> Bool in
            guard !state.closed, var subscriber = state.subscribers[id] else { return true }
            let now = Self.uptime()
            state.skipToCachedNewest(&subscriber, configuration: configuration)
            if subscriber.hasDeliverable(at: now, repeatInterval: configuration.mjpegRepeatInterval.nanoseconds) {
                state.subscribers[id] = subscriber
                return true
            }
            subscriber.callback = callback
            plan = state.plan(&subscriber, id: id, now: now, configuration: configuration)
            state.subscribers[id] = subscriber
            return false
        }
        if callNow { callback() }
        plan.run(session: self)
    }

    /// Something changed for a viewer (new picture, encode done, timer): wake it if it waits
    /// and has something now, otherwise start what it needs next.
    func evaluateSubscriber(_ id: UInt64) {
        var plan = SubscriberPlan()
        let callback = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.closed, var subscriber = state.subscribers[id] else { return nil }
            let now = Self.uptime()
            state.skipToCachedNewest(&subscriber, configuration: configuration)
            if subscriber.callback != nil,
                subscriber.hasDeliverable(at: now, repeatInterval: configuration.mjpegRepeatInterval.nanoseconds)
            {
                let callback = subscriber.callback
                subscriber.callback = nil
                state.subscribers[id] = subscriber
                return callback
            }
            if subscriber.callback != nil {
                plan = state.plan(&subscriber, id: id, now: now, configuration: configuration)
            }
            state.subscribers[id] = subscriber
            return nil
        }
        callback?()
        plan.run(session: self)
    }

    fileprivate func subscriberEncoded(_ id: UInt64, _ result: Result<ServedPicture, SessionError>) {
        if case .success(let served) = result {
            state.withLock { state in
                guard var subscriber = state.subscribers[id] else { return }
                if served.sequence > subscriber.lastDeliveredSequence,
                    served.sequence > (subscriber.ready?.sequence ?? 0)
                {
                    subscriber.ready = served
                    state.subscribers[id] = subscriber
                }
            }
        }
        // On failure the picture is skipped (the error is already recorded by the encoder);
        // the next picture tries again.
        evaluateSubscriber(id)
    }

    fileprivate func subscriberTimerFired(_ id: UInt64, due: UInt64) {
        state.withLock { state in
            if state.subscribers[id]?.timerDue == due { state.subscribers[id]?.timerDue = nil }
        }
        evaluateSubscriber(id)
    }
}

/// What a viewer needs started once the lock is released.
struct SubscriberPlan {
    var encode: (id: UInt64, frame: PublishedFrame, request: PictureRequest, quality: Int)?
    var timer: (id: UInt64, due: UInt64)?

    func run(session: Session) {
        if let encode {
            session.servedPicture(encode.frame, request: encode.request, quality: encode.quality) {
                [weak session] result in
                session?.subscriberEncoded(encode.id, result)
            }
        }
        if let timer {
            let now = Session.uptime()
            let delay = timer.due > now ? timer.due - now : 0
            let deadline = DispatchTime.now() + .nanoseconds(Int(clamping: delay))
            Session.timerQueue.asyncAfter(deadline: deadline) { [weak session] in
                session?.subscriberTimerFired(timer.id, due: timer.due)
            }
        }
    }
}

extension State {
    /// Newest-only: when the newest picture is already encoded for a viewer's options (another
    /// reader paid for it), take that instead of an older ready one or a pending encode.
    mutating func skipToCachedNewest(_ subscriber: inout SubscriberState, configuration: ServerConfiguration) {
        guard let latest,
            latest.sequence > max(subscriber.lastDeliveredSequence, subscriber.ready?.sequence ?? 0),
            let key = try? PictureKey(
                sequence: latest.sequence, frame: latest.frame, request: subscriber.request, defaultQuality: quality,
                limit: configuration.pictureSizeLimit),
            let picture = cache[key]
        else { return }
        let effectiveQuality = subscriber.request.effectiveQuality(sessionDefault: quality)
        subscriber.ready = ServedPicture(
            picture: picture, sequence: latest.sequence,
            etag: PictureETag.make(sequence: latest.sequence, request: subscriber.request, effectiveQuality: effectiveQuality),
            pts: latest.frame.pts, isKeyframe: latest.frame.isKeyframe, decodedAt: latest.frame.decodedAt,
            backend: latest.backend, decodedAtUptime: latest.frame.decodedAtUptimeNanoseconds)
    }

    /// For a viewer with nothing to send: encode the newest picture when it is newer than what
    /// the viewer has and its fps gate is open; otherwise arm a timer for when the gate opens
    /// or a repeat falls due.
    func plan(
        _ subscriber: inout SubscriberState, id: UInt64, now: UInt64, configuration: ServerConfiguration
    ) -> SubscriberPlan {
        var plan = SubscriberPlan()
        let have = max(subscriber.lastDeliveredSequence, subscriber.ready?.sequence ?? 0)
        let newerExists = (latest?.sequence ?? 0) > have
        let gateOpen = subscriber.gateOpen(at: now)
        if let latest, newerExists, gateOpen, subscriber.requestedSequence < latest.sequence {
            subscriber.requestedSequence = latest.sequence
            plan.encode = (id, latest, subscriber.request, quality)
        }
        var due: UInt64?
        if !gateOpen, newerExists || subscriber.ready != nil {
            due = subscriber.lastDeliveredAt + subscriber.minInterval
        }
        if subscriber.lastPicture != nil {
            let repeatAt = subscriber.lastDeliveredAt + configuration.mjpegRepeatInterval.nanoseconds
            due = min(due ?? repeatAt, repeatAt)
        }
        if let due, subscriber.timerDue.map({ due < $0 }) ?? true {
            subscriber.timerDue = due
            plan.timer = (id, due)
        }
        return plan
    }
}
