import Decoding
import Synchronization
import Timekeeping
import VideoCoding

/// Decoders kept open between catch-ups (an on-demand session waking, a picture from the past),
/// so that a catch-up does not pay for opening one: on NVDEC that is most of a short catch-up.
/// It sits with the `CatchUpPool` whose jobs use it (one per server), not in Decoding, because
/// when to keep a decoder and for how long is the server's policy, and a decoder there stays a
/// one-stream object that knows nothing of being reused.
///
/// A decoder is reused only for what it was opened for: the same back end and device, codec,
/// decoder threads, and stream shape (coded size, profile, chroma, bit depth), so libavcodec
/// finds the same parameters and keeps its hardware decoder and surfaces instead of
/// reinitialising; and only by the session that used it (`Owner`: a session made again with the
/// same id is another). Its frame pool keeps the buffers of its earlier pictures, and what a
/// damaged picture's decoder cannot reconstruct (H.265 does not conceal) shows what such a buffer
/// held: another session's pixels, were it lent across. A decoder goes back when its catch-up's
/// `AccessUnitDecoder` lets it go: it is drained there and its pictures thrown away (a picture of one catch-up never reaches
/// another) and the next user's supervisor sends the parameter sets again, as to any new
/// decoder. Pictures of an earlier use still alive keep their surfaces, and still count in the
/// decoder's own `deviceFramesHeld` budget, which travels with it.
///
/// Bounded: at most `limits.perDevice` idle decoders per device (software counts as one) and
/// `limits.total` in all; past either the longest idle goes. One idle longer than
/// `limits.idleTimeout` is closed at the next lend, return or reading of `usage`: no timer.
/// A decoder that turned its stream down (a hardware refusal) is not kept.
///
/// Any thread. A decoder is used by one thread at a time: out of the pool, by the catch-up
/// that borrowed it; inside, by nobody.
public final class WarmDecoderPool: Sendable {
    public struct Limits: Sendable, Equatable {
        public var perDevice: Int
        public var total: Int
        public var idleTimeout: Duration

        public init(perDevice: Int, total: Int, idleTimeout: Duration = .seconds(30)) {
            self.perDevice = max(0, perDevice)
            self.total = max(0, total)
            self.idleTimeout = idleTimeout
        }

        /// For `slots` catch-ups at once: as many warm per device and twice that in all, but at
        /// most 4 and 8: an idle decoder's memory (its surfaces, on a GPU) is outside the decoder
        /// memory budget, so only a few wait.
        public static func forCatchUps(slots: Int) -> Limits {
            Limits(perDevice: min(max(1, slots), 4), total: min(max(1, slots) * 2, 8))
        }
    }

    public struct Usage: Sendable, Equatable {
        /// Decoders waiting warm now.
        public var idle: Int
        /// Lends that found a warm decoder, and those that opened one.
        public var hits: Int
        public var misses: Int
        /// Closed for idling too long, and for the bounds.
        public var expired: Int
        public var evicted: Int
    }

    /// One session, for its life: the only borrower of the decoders it gave back.
    public struct Owner: Hashable, Sendable {
        private static let made = Atomic<UInt64>(0)
        private let serial: UInt64

        private init(serial: UInt64) { self.serial = serial }

        /// An owner no session had before.
        public static func make() -> Owner {
            Owner(serial: made.add(1, ordering: .relaxed).newValue)
        }
    }

    /// What a decoder must match to be reused.
    struct Key: Hashable {
        var owner: Owner
        var backend: DecoderBackend
        var device: HardwareDeviceID?
        var codec: VideoCodec
        var threads: Int
        var threadType: DecoderThreadType
        var shape: Shape?
    }

    /// The stream parameters libavcodec reinitialises its decoder for when they change.
    struct Shape: Hashable {
        var codedWidth: Int
        var codedHeight: Int
        var profileIdc: Int
        var chromaFormat: String
        var bitDepth: Int
        var bitDepthChroma: Int

        init(_ format: StreamFormat) {
            codedWidth = format.codedWidth
            codedHeight = format.codedHeight
            profileIdc = format.profileIdc
            chromaFormat = format.chromaFormat
            bitDepth = format.bitDepth
            bitDepthChroma = format.bitDepthChroma
        }
    }

    /// A decoder in the pool. Only ever touched by the thread that holds it (see the type's note).
    final class Parked: @unchecked Sendable {
        let decoder: any PictureDecoder
        let key: Key
        let since: UInt64

        init(_ decoder: any PictureDecoder, key: Key, since: UInt64) {
            self.decoder = decoder
            self.key = key
            self.since = since
        }
    }

    private struct State {
        /// Oldest return first.
        var idle: [Parked] = []
        var hits = 0
        var misses = 0
        var expired = 0
        var evicted = 0
    }

    public let limits: Limits
    private let clock: any ServiceClock
    private let state = Mutex(State())

    public init(limits: Limits, clock: any ServiceClock) {
        self.limits = limits
        self.clock = clock
    }

    public var usage: Usage {
        let (usage, closing) = state.withLock { state in
            let closing = expire(&state)
            return (
                Usage(idle: state.idle.count, hits: state.hits, misses: state.misses, expired: state.expired, evicted: state.evicted),
                closing)
        }
        _ = closing  // closed here, outside the lock
        return usage
    }

    /// The factory one catch-up's decoders come from: warm ones of this pool that `owner` gave
    /// back for a stream of `format` (the first unit's), or new ones from `factory`.
    public func lender(making factory: any PictureDecoderFactory, for format: StreamFormat?, owner: Owner)
        -> any PictureDecoderFactory
    {
        Lender(pool: self, factory: factory, owner: owner, shape: format.map(Shape.init))
    }

    /// Closes the idle decoders `owner` gave back (its session ended): nobody may borrow them.
    public func discard(owner: Owner) {
        let closing = state.withLock { state -> [Parked] in
            let (gone, kept) = (state.idle.filter { $0.key.owner == owner }, state.idle.filter { $0.key.owner != owner })
            state.idle = kept
            return gone
        }
        _ = closing  // closed here, outside the lock
    }

    fileprivate func borrow(_ key: Key) -> (any PictureDecoder)? {
        let (found, closing) = state.withLock { state -> (Parked?, [Parked]) in
            let closing = expire(&state)
            guard let position = state.idle.lastIndex(where: { $0.key == key }) else {
                state.misses += 1
                return (nil, closing)
            }
            state.hits += 1
            return (state.idle.remove(at: position), closing)
        }
        _ = closing
        return found?.decoder
    }

    /// Takes a drained decoder back, closing what the bounds leave no room for.
    fileprivate func giveBack(_ decoder: any PictureDecoder, key: Key) {
        let parked = Parked(decoder, key: key, since: clock.uptime)
        let closing = state.withLock { state -> [Parked] in
            var closing = expire(&state)
            state.idle.append(parked)
            while let position = overBound(state.idle, device: key.device) {
                closing.append(state.idle.remove(at: position))
                state.evicted += 1
            }
            return closing
        }
        _ = closing
    }

    /// The longest idle decoder to close for the bounds, after one for `device` was added.
    private func overBound(_ idle: [Parked], device: HardwareDeviceID?) -> Int? {
        if idle.filter({ $0.key.device == device }).count > limits.perDevice {
            return idle.firstIndex { $0.key.device == device }
        }
        return idle.count > limits.total ? idle.startIndex : nil
    }

    /// Removes the decoders idle past `idleTimeout`; the caller closes them outside the lock.
    private func expire(_ state: inout State) -> [Parked] {
        let now = clock.uptime
        let timeout = UInt64(limits.idleTimeout.components.seconds) * 1_000_000_000
            + UInt64(limits.idleTimeout.components.attoseconds / 1_000_000_000)
        let (stale, fresh) = (state.idle.filter { now &- $0.since >= timeout }, state.idle.filter { now &- $0.since < timeout })
        state.idle = fresh
        state.expired += stale.count
        return stale
    }

    /// One catch-up's factory: the key's shape is the stream's, the rest comes with each plan.
    private struct Lender: PictureDecoderFactory {
        let pool: WarmDecoderPool
        let factory: any PictureDecoderFactory
        let owner: Owner
        let shape: Shape?

        func makeDecoder(_ plan: DecoderPlan, codec: VideoCodec, options: DecoderOptions) throws(DecodeError)
            -> any PictureDecoder
        {
            let key = Key(
                owner: owner, backend: plan.backend, device: plan.lease?.device, codec: codec, threads: options.threads,
                threadType: options.threadType, shape: shape)
            if let warm = pool.borrow(key) {
                warm.reuseForAnotherStream()
                return BorrowedDecoder(warm, key: key, pool: pool)
            }
            return BorrowedDecoder(try factory.makeDecoder(plan, codec: codec, options: options), key: key, pool: pool)
        }
    }
}

/// A warm pool's decoder for the length of one catch-up: it goes back, drained, when let go.
final class BorrowedDecoder: PictureDecoder {
    private let inner: any PictureDecoder
    private let key: WarmDecoderPool.Key
    private let pool: WarmDecoderPool
    /// Turned its stream down: no use to the next stream of the same shape.
    private var refused = false

    init(_ inner: any PictureDecoder, key: WarmDecoderPool.Key, pool: WarmDecoderPool) {
        self.inner = inner
        self.key = key
        self.pool = pool
    }

    var codec: VideoCodec { inner.codec }
    var options: DecoderOptions { inner.options }
    var backend: DecoderBackend { inner.backend }
    var framesDecoded: UInt64 { inner.framesDecoded }
    var decodeErrors: Int { inner.decodeErrors }
    var lastError: DecodeError? { inner.lastError }
    var isProbingReorderDelay: Bool { inner.isProbingReorderDelay }
    func endReorderProbe() -> DecodeOutput { inner.endReorderProbe() }

    func decode(accessUnit bytes: UnsafeRawBufferPointer, pts: Int64?, index: Int64?) -> DecodeOutput {
        let output = inner.decode(accessUnit: bytes, pts: pts, index: index)
        if output.hardwareRefusal != nil || output.decodedInSoftware != nil { refused = true }
        return output
    }

    func drain() -> DecodeOutput { inner.drain() }
    func reuseForAnotherStream() { inner.reuseForAnotherStream() }

    deinit {
        guard !refused else { return }
        // What the catch-up left inside stays with it: thrown away, never handed to the next.
        _ = inner.drain()
        pool.giveBack(inner, key: key)
    }
}
