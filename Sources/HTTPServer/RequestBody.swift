import Dispatch
import Synchronization

/// A streamed upload, handed from libmicrohttpd's threads to a consumer (a worker) through a
/// bounded queue. When the queue is full the server stops reading from the socket (the
/// connection is suspended, the client's TCP window fills up) until the consumer drains it,
/// so an upload of any size needs at most `capacity` bytes of memory here.
public final class RequestBodyStream: Sendable {
    public enum Event: Sendable, Equatable {
        case bytes([UInt8])
        /// The whole body arrived.
        case end
        /// The body will not complete; nothing more follows.
        case aborted(AbortReason)
    }

    public enum AbortReason: Sendable, Equatable {
        /// The client disconnected (or the connection failed or timed out) mid-upload.
        case clientGone
        /// The body passed the route's byte limit; the client gets a 413.
        case tooLarge(limit: Int)
        /// The server is shutting down.
        case serverShutdown
    }

    private struct State {
        var chunks: [[UInt8]] = []
        var queuedBytes = 0
        var highWaterMark = 0
        var totalBytes = 0
        var terminal: Event?
        var terminalDelivered = false
        var producerWaitingForSpace = false
        var discardRequested = false
        var readyHandler: (@Sendable () -> Void)?
        var consumerWaiting = false
        var blockedReader: DispatchSemaphore?
    }

    public let capacity: Int
    private let state = Mutex(State())
    /// Set by the server: resumes the suspended connection once space is available.
    private let resumeProducer: @Sendable () -> Void

    init(capacity: Int, resumeProducer: @escaping @Sendable () -> Void) {
        self.capacity = max(capacity, 1)
        self.resumeProducer = resumeProducer
    }

    // MARK: consumer side

    /// The next event without waiting, or nil when nothing is queued yet (then the ready
    /// handler, if set, runs as soon as something arrives).
    public func next() -> Event? {
        let (event, resume) = state.withLock { state -> (Event?, Bool) in
            if !state.chunks.isEmpty {
                let chunk = state.chunks.removeFirst()
                state.queuedBytes -= chunk.count
                // Resume at half capacity, not at the first free byte, so the connection is
                // not suspended and resumed for every 16 KiB piece.
                let resume = state.producerWaitingForSpace && state.queuedBytes <= capacity / 2
                if resume { state.producerWaitingForSpace = false }
                return (.bytes(chunk), resume)
            }
            if let terminal = state.terminal, !state.terminalDelivered {
                state.terminalDelivered = true
                // Nothing follows the terminal event. The handler usually captures the consumer,
                // which holds this stream: letting it go breaks that reference cycle.
                state.readyHandler = nil
                return (terminal, false)
            }
            state.consumerWaiting = true
            return (nil, false)
        }
        if resume { resumeProducer() }
        return event
    }

    /// Blocks the calling thread until the next event. Only for a dedicated worker thread,
    /// never a libmicrohttpd or Dispatch-pool thread. Returns nil after the terminal event
    /// was already delivered, or when `timeout` passes.
    public func waitForNext(timeout: Duration? = nil) -> Event? {
        enum Step { case retry, wait, exhausted }
        let deadline: DispatchTime = timeout.map { .now() + $0.dispatchInterval } ?? .distantFuture
        while true {
            if let event = next() { return event }
            let semaphore = DispatchSemaphore(value: 0)
            let step = state.withLock { state -> Step in
                if state.terminalDelivered { return .exhausted }
                if !state.chunks.isEmpty || state.terminal != nil { return .retry }
                state.blockedReader = semaphore
                return .wait
            }
            switch step {
            case .exhausted: return nil
            case .retry: continue
            case .wait:
                if semaphore.wait(timeout: deadline) == .timedOut {
                    state.withLock { $0.blockedReader = nil }
                    return next()
                }
            }
        }
    }

    /// `handler` runs (on a server thread; keep it cheap, e.g. schedule the worker) each time
    /// an event arrives after `next()` returned nil.
    public func setReadyHandler(_ handler: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            guard !state.terminalDelivered else { return false }
            state.readyHandler = handler
            return !state.chunks.isEmpty || state.terminal != nil
        }
        if runNow { handler() }
    }

    /// The consumer needs no more bytes (it failed or has what it needs). The server drops the
    /// rest of the upload (up to its discard limit) and then sends the route's answer.
    public func discardRemaining() {
        let resume = state.withLock { state -> Bool in
            state.discardRequested = true
            state.queuedBytes = 0
            state.chunks = []
            defer { state.producerWaitingForSpace = false }
            return state.producerWaitingForSpace
        }
        if resume { resumeProducer() }
    }

    /// Bytes queued right now.
    public var queuedBytes: Int { state.withLock { $0.queuedBytes } }
    /// The most bytes ever queued at once; never above `capacity`.
    public var highWaterMark: Int { state.withLock { $0.highWaterMark } }
    /// Bytes received from the client so far.
    public var totalBytes: Int { state.withLock { $0.totalBytes } }

    // MARK: server side

    enum OfferResult { case accepted(Int), discard }

    /// Takes as many leading bytes of `bytes` as fit. When not all fit, the caller must
    /// suspend the connection; the consumer resumes it after draining.
    func offer(_ bytes: UnsafeRawBufferPointer) -> OfferResult {
        let (result, wake) = state.withLock { state -> (OfferResult, (@Sendable () -> Void)?) in
            if state.discardRequested || state.terminal != nil { return (.discard, nil) }
            let room = capacity - state.queuedBytes
            let take = min(room, bytes.count)
            if take < bytes.count { state.producerWaitingForSpace = true }
            guard take > 0 else { return (.accepted(0), nil) }
            state.chunks.append(Array(bytes[0..<take]))
            state.queuedBytes += take
            state.totalBytes += take
            state.highWaterMark = max(state.highWaterMark, state.queuedBytes)
            return (.accepted(take), takeReaderWakeup(&state))
        }
        wake?()
        return result
    }

    /// Counts bytes that arrive after the consumer asked to discard.
    func countDiscarded(_ count: Int) {
        state.withLock { $0.totalBytes += count }
    }

    var isDiscarding: Bool { state.withLock { $0.discardRequested } }

    /// Ends the stream (once). Queued bytes are still delivered before a clean end; an
    /// abort drops them, since the consumer cannot use a partial body anyway.
    func terminate(_ event: Event) {
        let wake = state.withLock { state -> (@Sendable () -> Void)? in
            guard state.terminal == nil else { return nil }
            state.terminal = event
            if case .aborted = event {
                state.chunks = []
                state.queuedBytes = 0
            }
            return takeReaderWakeup(&state)
        }
        wake?()
    }

    private func takeReaderWakeup(_ state: inout State) -> (@Sendable () -> Void)? {
        var actions: [@Sendable () -> Void] = []
        if let semaphore = state.blockedReader {
            state.blockedReader = nil
            actions.append { semaphore.signal() }
        }
        if state.consumerWaiting, let handler = state.readyHandler {
            state.consumerWaiting = false
            actions.append(handler)
        }
        guard !actions.isEmpty else { return nil }
        let wakeups = actions
        return { for action in wakeups { action() } }
    }
}
