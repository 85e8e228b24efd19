import TestSupport
import Dispatch
import Foundation
import HTTPServer
import Synchronization
import Timekeeping

#if canImport(Glibc)
import Glibc
#endif

/// What a test route needs: `AuthTests`' authorizer asks for its token on `.token` routes; the
/// other tests start their servers without an authorizer, where every route is open.
enum TestAccess: Sendable {
    case open
    case token
}

/// Starts a real server on an ephemeral loopback port, runs `body`, always stops it; `clock`
/// times its deadlines (a test that moves time passes its `ManualClock`).
func withServer<T>(
    clock: any ServiceClock = SystemClock(),
    configure: (inout HTTPServerConfiguration) -> Void = { _ in },
    authorizer: (any RequestAuthorizer<TestAccess>)? = nil,
    routes: (inout Router<TestAccess>) -> Void,
    _ body: (HTTPServer) throws -> T
) throws -> T {
    var configuration = HTTPServerConfiguration()
    configuration.host = "127.0.0.1"
    configuration.port = 0
    configuration.shutdownGracePeriod = .seconds(2)
    configure(&configuration)
    var router = Router<TestAccess>()
    routes(&router)
    let server = HTTPServer(configuration: configuration, router: router, authorizer: authorizer, clock: clock)
    try server.start()
    defer { server.stop() }
    return try body(server)
}

/// A thread-safe box for values tests collect from server threads.
final class Recorder<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    func record(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
}

/// Byte storage that counts its live instances, to prove zero-copy responses release it.
final class CountedBytes: ByteStorage, @unchecked Sendable {
    static let live = Atomic<Int>(0)
    let storage: SharedBytes
    var bytes: UnsafeRawBufferPointer { storage.bytes }
    init(_ array: [UInt8]) {
        storage = SharedBytes(array)
        Self.live.add(1, ordering: .relaxed)
    }
    deinit { Self.live.subtract(1, ordering: .relaxed) }
}

/// A stream source for the server's streaming tests: publishing replaces the previous chunk,
/// and each viewer gets the newest chunk it has not sent yet (what an MJPEG producer does).
final class TestBroadcast: Sendable {
    private struct State {
        var latest: StreamChunk?
        var sequence: UInt64 = 0
        var finished = false
        var trailer: StreamChunk?
        var lastSent: [ObjectIdentifier: UInt64] = [:]
        var trailerSent: Set<ObjectIdentifier> = []
        var waiting: [ObjectIdentifier: StreamWaker] = [:]
    }

    private let state = Mutex(State())
    private let onViewerCountChange: (@Sendable (Int) -> Void)?

    /// `onViewerCountChange` runs on whichever thread attached or closed a viewer; keep it cheap.
    init(onViewerCountChange: (@Sendable (Int) -> Void)? = nil) {
        self.onViewerCountChange = onViewerCountChange
    }

    var viewerCount: Int { state.withLock { $0.lastSent.count } }

    /// Replaces the newest chunk and wakes every waiting viewer.
    func publish(_ chunk: StreamChunk) {
        let wakers = state.withLock { state -> [StreamWaker] in
            guard !state.finished else { return [] }
            state.latest = chunk
            state.sequence &+= 1
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for waker in wakers { waker.wake() }
    }

    /// Ends every viewer's stream after an optional last chunk (e.g. a multipart closing
    /// delimiter). Viewers attaching afterwards get only the trailer.
    func finish(trailer: StreamChunk? = nil) {
        let wakers = state.withLock { state -> [StreamWaker] in
            guard !state.finished else { return [] }
            state.finished = true
            state.trailer = trailer
            defer { state.waiting = [:] }
            return Array(state.waiting.values)
        }
        for waker in wakers { waker.wake() }
    }

    /// A source for one new viewer. It starts with the newest chunk already published, if any.
    func makeSource() -> any StreamSource {
        let viewer = Viewer(broadcast: self)
        let count = state.withLock { state -> Int in
            state.lastSent[ObjectIdentifier(viewer)] = 0
            return state.lastSent.count
        }
        onViewerCountChange?(count)
        return viewer
    }

    fileprivate func next(for viewer: ObjectIdentifier, waker: StreamWaker, idle: Bool) -> StreamPoll {
        state.withLock { state in
            guard let lastSent = state.lastSent[viewer] else { return .end }
            if let latest = state.latest, state.sequence != lastSent, !state.finished {
                state.lastSent[viewer] = state.sequence
                return .chunk(latest)
            }
            if state.finished {
                if let trailer = state.trailer, !state.trailerSent.contains(viewer) {
                    state.trailerSent.insert(viewer)
                    return .chunk(trailer)
                }
                return .end
            }
            if idle, let latest = state.latest {
                return .chunk(latest)
            }
            state.waiting[viewer] = waker
            return .pending
        }
    }

    fileprivate func close(_ viewer: ObjectIdentifier) {
        let count = state.withLock { state -> Int? in
            state.waiting[viewer] = nil
            state.trailerSent.remove(viewer)
            guard state.lastSent.removeValue(forKey: viewer) != nil else { return nil }
            return state.lastSent.count
        }
        if let count { onViewerCountChange?(count) }
    }

    private final class Viewer: StreamSource {
        let broadcast: TestBroadcast
        init(broadcast: TestBroadcast) { self.broadcast = broadcast }

        func next(waker: StreamWaker, idle: Bool) -> StreamPoll {
            broadcast.next(for: ObjectIdentifier(self), waker: waker, idle: idle)
        }

        func close(_ reason: StreamCloseReason) {
            broadcast.close(ObjectIdentifier(self))
        }
    }
}

/// A bounded body sink drained by a test's own thread (`next()` blocks): what a route's
/// consumer does, with knobs to be slow or to stop listening.
final class TestSink: RequestBodySink {
    enum Event: Sendable, Equatable {
        case bytes([UInt8])
        case end
        case aborted(RequestBodyAbort)
    }

    private struct State {
        var chunks: [[UInt8]] = []
        var queued = 0
        var highest = 0
        var terminal: Event?
        var terminalTaken = false
        var refusal: HTTPError?
        var producerWaiting = false
        var wake: (@Sendable () -> Void)?
    }

    let capacity: Int
    private let state = Mutex(State())
    private let arrived = DispatchSemaphore(value: 0)

    init(capacity: Int) { self.capacity = capacity }

    func write(_ bytes: UnsafeRawBufferPointer) -> RequestBodyWrite {
        let result = state.withLock { state -> RequestBodyWrite in
            if let refusal = state.refusal { return .refused(refusal) }
            let taken = min(capacity - state.queued, bytes.count)
            if taken < bytes.count { state.producerWaiting = true }
            guard taken > 0 else { return .accepted(0) }
            state.chunks.append(Array(UnsafeRawBufferPointer(rebasing: bytes[..<taken])))
            state.queued += taken
            state.highest = max(state.highest, state.queued)
            return .accepted(taken)
        }
        arrived.signal()
        return result
    }

    func finish() { terminate(.end) }
    func abort(_ reason: RequestBodyAbort) { terminate(.aborted(reason)) }
    func setWake(_ wake: @escaping @Sendable () -> Void) { state.withLock { $0.wake = wake } }

    private func terminate(_ event: Event) {
        state.withLock { state in if state.terminal == nil { state.terminal = event } }
        arrived.signal()
    }

    /// Stops listening: the next write is refused with `error` (the server answers it at once),
    /// and the consumer's `next()` ends.
    func refuse(_ error: HTTPError) {
        let wake = state.withLock { state -> (@Sendable () -> Void)? in
            state.refusal = error
            state.chunks = []
            state.queued = 0
            return state.wake
        }
        wake?()
        arrived.signal()
    }

    /// Blocks until the next event, at most `timeout` (`WaitTimeout`); nil once the terminal
    /// event was taken or the sink stopped listening.
    func next(timeout: Duration = defaultWaitLimit) throws -> Event? {
        while true {
            let (event, wake) = state.withLock { state -> (Event?, (@Sendable () -> Void)?) in
                if !state.chunks.isEmpty {
                    let chunk = state.chunks.removeFirst()
                    state.queued -= chunk.count
                    guard state.producerWaiting, state.queued <= capacity / 2 else { return (.bytes(chunk), nil) }
                    state.producerWaiting = false
                    return (.bytes(chunk), state.wake)
                }
                if let terminal = state.terminal, !state.terminalTaken {
                    state.terminalTaken = true
                    return (terminal, nil)
                }
                return (nil, nil)
            }
            wake?()
            if let event { return event }
            if state.withLock({ $0.terminalTaken || $0.refusal != nil }) { return nil }
            try arrived.wait(for: "the upload's next body bytes or its end", timeout: timeout)
        }
    }

    var highestQueued: Int { state.withLock { $0.highest } }

    /// Whether any body bytes arrived (the upload is under way).
    var hasReceivedBytes: Bool { highestQueued > 0 }
}

/// Slow clients that hold their connections open: a thread sends `piece` on every one of
/// them, then sleeps `pause` ms, until `stop()`. A client the server closed is passed over.
final class Trickler: Sendable {
    private let running = Atomic<Bool>(true)

    init(_ clients: [RawClient], sending piece: String, everyMilliseconds pause: UInt32) {
        Thread { [self] in
            while running.load(ordering: .relaxed) {
                for client in clients { try? client.send(piece) }
                usleep(pause * 1000)
            }
        }.start()
    }

    func stop() { running.store(false, ordering: .relaxed) }
}
