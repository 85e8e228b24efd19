import Decoding
import Dispatch
import Foundation
import H264
import Imaging

/// A picture ready to send, with what the response headers need.
public struct ServedPicture: Sendable {
    /// Immutable bytes at a stable address, shared by every reader of this representation.
    public let picture: EncodedPicture
    public let sequence: UInt64
    /// Quoted entity tag (`"17"`, `"17-w160"`).
    public let etag: String
    public let pts: Int64?
    public let isKeyframe: Bool
    /// Wall-clock decode time (for `Last-Modified`).
    public let decodedAt: Date
    public let backend: DecoderBackend
    let decodedAtUptime: UInt64

    /// Milliseconds since the decoder produced the picture.
    public var ageMilliseconds: Int { Int((Session.uptime() &- decodedAtUptime) / 1_000_000) }
}

public enum PictureAnswer: Sendable {
    case picture(ServedPicture)
    /// 304: the client's picture is still the newest (or no newer one came before the wait
    /// ended). `etag` is the current picture's tag for these options, nil before the first picture.
    case notModified(etag: String?)
}

extension Session {
    /// `GET /sessions/{id}/frame/latest.{jpg,yuv,rgb}`.
    ///
    /// - `ifNoneMatch`: the raw header; a tag equal to the current one answers 304.
    /// - `after`: the sequence the client has; without `wait`, not newer answers 304.
    /// - `wait`: long-poll (capped at `maxLongPoll`) until a picture newer than `after`, or than
    ///   the newest sequence named in `ifNoneMatch`, or than nothing (the first picture);
    ///   on timeout 304.
    ///
    /// `completion` runs exactly once: synchronously on the calling thread when the answer is
    /// known at once (cached picture, 304, error), otherwise later on the encode worker or the
    /// timer queue. Encoding never happens on the calling thread; N simultaneous requests for
    /// the same picture and options share one encode.
    public func requestPicture(
        _ request: PictureRequest, ifNoneMatch: String? = nil, after: UInt64? = nil, wait: Duration = .zero,
        completion: @escaping @Sendable (Result<PictureAnswer, SessionError>) -> Void
    ) {
        do {
            _ = try request.validated()
        } catch {
            completion(.failure(error))
            return
        }
        let wait = min(max(wait, .zero), configuration.maxLongPoll)
        let parsed = ifNoneMatch.map { PictureETag.parse(ifNoneMatch: $0) }
        let newerThan: UInt64? = after ?? parsed.flatMap { $0.tags.compactMap(PictureETag.sequence(of:)).max() }
        let now = Date()
        let nowUptime = Self.uptime()

        enum Next {
            case fail(SessionError)
            case answer(PictureAnswer)
            case serve(PublishedFrame, quality: Int)
            case waiting(id: UInt64)
        }
        let next = state.withLock { state -> Next in
            guard !state.closed else { return .fail(.notFound(id)) }
            state.lastActivity = now
            state.lastActivityUptime = nowUptime
            let quality = request.effectiveQuality(sessionDefault: state.quality)
            if wait > .zero, (state.latest?.sequence ?? 0) <= (newerThan ?? 0) {
                let waiterID = state.nextWaiterID
                state.nextWaiterID += 1
                state.waiters[waiterID] = Waiter(
                    newerThan: newerThan ?? 0, request: request, quality: quality, completion: completion)
                return .waiting(id: waiterID)
            }
            guard let latest = state.latest else {
                return .fail(SessionError(.noFrameYet, "session '\(id)' has no picture yet"))
            }
            let etag = PictureETag.make(sequence: latest.sequence, request: request, effectiveQuality: quality)
            if let parsed, parsed.wildcard || parsed.tags.contains(etag) { return .answer(.notModified(etag: etag)) }
            if let after, latest.sequence <= after { return .answer(.notModified(etag: etag)) }
            return .serve(latest, quality: quality)
        }
        switch next {
        case .fail(let error): completion(.failure(error))
        case .answer(let answer): completion(.success(answer))
        case .serve(let latest, let quality): serve(latest, request: request, quality: quality, completion: completion)
        case .waiting(let waiterID):
            Self.timerQueue.asyncAfter(deadline: .now() + .nanoseconds(Int(wait.nanoseconds))) { [weak self] in
                self?.expireWaiter(waiterID)
            }
        }
    }

    private func expireWaiter(_ waiterID: UInt64) {
        let expired = state.withLock { state -> (Waiter, String?)? in
            guard let waiter = state.waiters.removeValue(forKey: waiterID) else { return nil }
            let etag = state.latest.map {
                PictureETag.make(sequence: $0.sequence, request: waiter.request, effectiveQuality: waiter.quality)
            }
            return (waiter, etag)
        }
        if let (waiter, etag) = expired { waiter.completion(.success(.notModified(etag: etag))) }
    }

    /// Number of long-polls waiting for a newer picture.
    public var waitingRequests: Int { state.withLock { $0.waiters.count } }

    func serve(
        _ published: PublishedFrame, request: PictureRequest, quality: Int,
        completion: @escaping @Sendable (Result<PictureAnswer, SessionError>) -> Void
    ) {
        servedPicture(published, request: request, quality: quality) { result in
            completion(result.map { .picture($0) })
        }
    }

    func servedPicture(
        _ published: PublishedFrame, request: PictureRequest, quality: Int,
        completion: @escaping @Sendable (Result<ServedPicture, SessionError>) -> Void
    ) {
        let key: PictureKey
        do {
            key = try PictureKey(
                sequence: published.sequence, frame: published.frame, request: request, defaultQuality: quality,
                limit: configuration.pictureSizeLimit)
        } catch {
            completion(.failure(error))
            return
        }
        let etag = PictureETag.make(sequence: published.sequence, request: request, effectiveQuality: quality)
        encodedPicture(published.frame, key: key) { result in
            completion(
                result.map { picture in
                    ServedPicture(
                        picture: picture, sequence: published.sequence, etag: etag, pts: published.frame.pts,
                        isKeyframe: published.frame.isKeyframe, decodedAt: published.frame.decodedAt,
                        backend: published.backend, decodedAtUptime: published.frame.decodedAtUptimeNanoseconds)
                })
        }
    }

    /// The cache and in-flight coalescing: a hit completes at once on the calling thread; a
    /// key being encoded gets the completion added; otherwise one encode is queued.
    func encodedPicture(_ frame: DecodedFrame, key: PictureKey, completion: @escaping EncodeCompletion) {
        enum Lookup {
            case hit(EncodedPicture)
            case joined
            case encode
            case closed
        }
        let lookup = state.withLock { state -> Lookup in
            guard !state.closed else { return .closed }
            if let hit = state.cache[key] { return .hit(hit) }
            if state.inFlight[key] != nil {
                state.inFlight[key]!.append(completion)
                return .joined
            }
            state.inFlight[key] = [completion]
            return .encode
        }
        switch lookup {
        case .hit(let picture): completion(.success(picture))
        case .joined: break
        case .closed: completion(.failure(.notFound(id)))
        case .encode: encodeQueue.async { [self] in runEncode(frame, key: key) }
        }
    }

    /// Cached encoding for a key, without encoding (used by MJPEG viewers to skip to the newest).
    func cachedPicture(_ key: PictureKey) -> EncodedPicture? {
        state.withLock { $0.cache[key] }
    }

    private func runEncode(_ frame: DecodedFrame, key: PictureKey) {
        dispatchPrecondition(condition: .onQueue(encodeQueue))
        let clock = ContinuousClock()
        let start = clock.now
        let result: Result<EncodedPicture, SessionError>
        do {
            result = .success(try encoding.encode(frame, key.encoderOptions))
        } catch {
            result = .failure(SessionError(error))
        }
        let duration = clock.now - start
        let waiting = state.withLock { state -> [EncodeCompletion] in
            let waiting = state.inFlight.removeValue(forKey: key) ?? []
            if case .success(let picture) = result {
                state.encodes += 1
                // Only pictures still current are worth keeping (the latest and the one before).
                if !state.closed, key.sequence >= state.cacheFloor {
                    state.insertCache(picture, for: key)
                }
            }
            return waiting
        }
        switch result {
        case .success: metrics.recordEncode(format: key.format.rawValue, duration: duration)
        case .failure(let error): recordError(error)
        }
        for completion in waiting { completion(result) }
    }
}
