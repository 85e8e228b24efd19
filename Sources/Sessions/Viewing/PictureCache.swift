import Decoding
import Dispatch
import Imaging
import Synchronization
import Timekeeping

/// The encoded pictures of one session: each (picture, size, quality, format) is encoded at
/// most once, on the session's serial encode queue, and the result is shared by every reader;
/// a request for a picture already being encoded joins that encode. Only encodings of the
/// newest picture and the one before it are kept, at most `State.capacity` of them.
///
/// Owns: the encoder (made by the configuration's `PictureEncoderFactory` at the first encode,
/// bound to the encode queue), the cached encodings, the encodes in flight, and the session's
/// default JPEG quality.
final class PictureCache: Sendable {
    typealias Completion = @Sendable (Result<EncodedPicture, SessionError>) -> Void

    /// The cache's bookkeeping as a value: what a lookup, a finished encode or a new newest
    /// picture does to it, and which waiting readers to answer.
    struct State {
        /// Encodings kept; beyond it the oldest go (a client walking through many thumbnail
        /// sizes must not grow memory).
        static let capacity = 16

        enum Lookup {
            case hit(EncodedPicture)
            /// An encode of this key is running; the completion was added to it.
            case joined
            /// Nobody encodes this key: the caller must start the encode.
            case encode
            case closed
        }

        private(set) var pictures: [PictureKey: EncodedPicture] = [:]
        private var order: [PictureKey] = []
        /// Encodings of pictures older than this are neither kept nor stored.
        private var floor: UInt64 = 0
        private var inFlight: [PictureKey: [Completion]] = [:]
        private(set) var encodes = 0
        private(set) var closed = false
        /// What the encoder said of itself after its last encode; nil before the first.
        var encoder: PictureEncoderIdentity?

        mutating func lookup(_ key: PictureKey, _ completion: @escaping Completion) -> Lookup {
            guard !closed else { return .closed }
            if let hit = pictures[key] { return .hit(hit) }
            if inFlight[key] != nil {
                inFlight[key]!.append(completion)
                return .joined
            }
            inFlight[key] = [completion]
            return .encode
        }

        /// An encode ended: keeps the result if its picture is still current, and returns every
        /// reader waiting for it.
        mutating func finish(_ key: PictureKey, _ result: Result<EncodedPicture, SessionError>) -> [Completion] {
            let waiting = inFlight.removeValue(forKey: key) ?? []
            guard case .success(let picture) = result else { return waiting }
            encodes += 1
            if !closed, key.sequence >= floor, pictures.updateValue(picture, forKey: key) == nil {
                order.append(key)
                while order.count > Self.capacity { pictures[order.removeFirst()] = nil }
            }
            return waiting
        }

        /// A new newest picture: encodings older than the previous newest go. The previous one's
        /// stay, because a reader that took it as the newest just before must still find them.
        mutating func newestChanged(previous: UInt64?, newest: UInt64) {
            floor = previous ?? newest
            guard order.contains(where: { $0.sequence < floor }) else { return }
            order.removeAll { key in
                guard key.sequence < floor else { return false }
                pictures[key] = nil
                return true
            }
        }

        /// Drops everything; returns the readers still waiting for an encode.
        mutating func close() -> [Completion] {
            closed = true
            pictures = [:]
            order = []
            defer { inFlight = [:] }
            return inFlight.values.flatMap { $0 }
        }
    }

    private let state = Mutex(State())
    private let encoder: QueueBound<(any PictureEncoding)?>
    private let encoderFactory: any PictureEncoderFactory
    private let metrics: FrameTapMetrics
    /// Called with every encode failure (it is counted and shown as the session's last error).
    private let onFailure: @Sendable (SessionError) -> Void
    private let quality: Atomic<Int>
    private let sizeLimit: PictureSizeLimit
    /// Times the encodes, for the metrics.
    private let clock: any ServiceClock

    /// What this session's picture tags end in (`PictureETag`).
    let incarnation: String

    init(
        encodeQueue: DispatchQueue, encoderFactory: any PictureEncoderFactory, defaultQuality: Int,
        sizeLimit: PictureSizeLimit, metrics: FrameTapMetrics, clock: any ServiceClock,
        incarnation: String = PictureETag.newIncarnation(), onFailure: @escaping @Sendable (SessionError) -> Void
    ) {
        self.incarnation = incarnation
        encoder = QueueBound(nil, queue: encodeQueue)
        self.encoderFactory = encoderFactory
        self.clock = clock
        self.sizeLimit = sizeLimit
        quality = Atomic(defaultQuality)
        self.metrics = metrics
        self.onFailure = onFailure
    }

    /// The tag of picture `sequence` as `request` asks for it.
    func etag(sequence: UInt64, _ request: PictureRequest, quality: Int) -> String {
        PictureETag.make(sequence: sequence, request: request, effectiveQuality: quality, incarnation: incarnation)
    }

    /// The JPEG quality of requests that do not name one (`PUT /sessions/{id}` changes it).
    var defaultQuality: Int {
        get { quality.load(ordering: .relaxed) }
        set { quality.store(newValue, ordering: .relaxed) }
    }

    /// Encodes done so far (each key at most once while it is cached).
    var encodeCount: Int { state.withLock { $0.encodes } }

    /// Which encoder serves and why, as it said after its last encode; nil before the first.
    var encoderIdentity: PictureEncoderIdentity? { state.withLock { $0.encoder } }

    /// Which encoder the factory chose and why: what the session will encode with.
    var chosenEncoder: PictureEncoderIdentity { encoderFactory.identity }

    /// Throws what `serve` would fail with for `published` as `request` asks (a size over the
    /// limit or enlarged too far), without encoding.
    func check(_ published: PublishedFrame, _ request: PictureRequest) throws(SessionError) {
        try check(request, sourceWidth: published.frame.width, sourceHeight: published.frame.height)
    }

    /// The same for a picture of that size still to be decoded (one from the past): a request
    /// that would be refused costs no decode.
    func check(_ request: PictureRequest, sourceWidth: Int, sourceHeight: Int) throws(SessionError) {
        _ = try PictureKey.size(of: request, sourceWidth: sourceWidth, sourceHeight: sourceHeight, limit: sizeLimit)
    }

    /// `published` as `request` asks, if it is already encoded; never encodes (MJPEG viewers
    /// skip to the newest picture when another reader already paid for it).
    func cachedServed(_ published: PublishedFrame, _ request: PictureRequest) -> ServedPicture? {
        let quality = request.effectiveQuality(sessionDefault: defaultQuality)
        guard let key = try? PictureKey(published: published, request: request, quality: quality, limit: sizeLimit),
            let picture = state.withLock({ $0.pictures[key] })
        else { return nil }
        let etag = etag(sequence: published.sequence, request, quality: quality)
        return ServedPicture(published: published, picture: picture, etag: etag)
    }

    /// `published` encoded as `request` asks, with what a response needs. Completes at once on
    /// the calling thread when cached or invalid, otherwise later on the encode queue.
    func serve(
        _ published: PublishedFrame, _ request: PictureRequest,
        completion: @escaping @Sendable (Result<ServedPicture, SessionError>) -> Void
    ) {
        let quality = request.effectiveQuality(sessionDefault: defaultQuality)
        let key: PictureKey
        do {
            key = try PictureKey(published: published, request: request, quality: quality, limit: sizeLimit)
        } catch {
            completion(.failure(error))
            return
        }
        let etag = etag(sequence: published.sequence, request, quality: quality)
        encoded(published.frame, key: key) { result in
            completion(result.map { ServedPicture(published: published, picture: $0, etag: etag) })
        }
    }

    func encoded(_ frame: DecodedFrame, key: PictureKey, completion: @escaping Completion) {
        switch state.withLock({ $0.lookup(key, completion) }) {
        case .hit(let picture): completion(.success(picture))
        case .joined: break
        case .closed: completion(.failure(SessionError(.sessionNotFound, "the session was closed")))
        case .encode: encoder.queue.async { [self] in runEncode(frame, key: key) }
        }
    }

    func newestChanged(previous: UInt64?, newest: UInt64) {
        state.withLock { $0.newestChanged(previous: previous, newest: newest) }
    }

    /// Frees every encoding and the encoder; readers still waiting get `failure`.
    func close(failing failure: SessionError) {
        let waiting = state.withLock { $0.close() }
        encoder.queue.async { [encoder] in encoder.withValue { $0 = nil } }
        for completion in waiting { completion(.failure(failure)) }
    }

    private func runEncode(_ frame: DecodedFrame, key: PictureKey) {
        let start = clock.uptime
        let (result, identity) = encoder.withValue { encoder -> (Result<EncodedPicture, SessionError>, PictureEncoderIdentity?) in
            do throws(ImagingError) {
                if encoder == nil { encoder = try encoderFactory.makeEncoder() }
                return (.success(try encoder!.encode(frame, key.encoderOptions)), encoder!.identity)
            } catch {
                return (.failure(SessionError(error)), encoder?.identity)
            }
        }
        let duration = Duration.nanoseconds(clock.uptime - start)
        let waiting = state.withLock { state in
            if let identity { state.encoder = identity }
            return state.finish(key, result)
        }
        switch result {
        case .success: metrics.recordEncode(format: key.format.rawValue, duration: duration)
        case .failure(let error): onFailure(error)
        }
        for completion in waiting { completion(result) }
    }
}
