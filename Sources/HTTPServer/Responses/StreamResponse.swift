import CMicroHTTPD
import Synchronization
import Timekeeping

/// The state behind one streamed response: the source, the chunk being copied out, and the
/// heartbeat. libmicrohttpd owns it through the content-reader `cls` (retained when the
/// response is created, released in the free callback when the connection is done with it).
final class StreamResponse: Sendable {
    private struct ReaderState {
        var chunk: StreamChunk?
        var segment = 0
        var offset = 0
        /// When bytes last went out (an `uptime`).
        var lastProgress: UInt64
        /// The size of the last chunk the source gave.
        var lastChunkBytes = 0
        /// Looks at the send queue in a row that found the client still behind.
        var backlogRechecks = 0
        var idleDue = false
        var endRequested = false
        /// When `endForShutdown` asked for the end (an `uptime`).
        var endRequestedAt: UInt64?
        /// The source's last chunk before a shutdown was asked for.
        var lastChunkTaken = false
        var finishedNormally = false
        /// libmicrohttpd is done with the response: the heartbeat stops.
        var released = false
    }

    private let context: ConnectionContext
    private let source: any StreamSource
    private let heartbeat: Duration
    private let clock: any ServiceClock
    private let reader: Mutex<ReaderState>
    private let waker: StreamWaker

    init(context: ConnectionContext, source: any StreamSource, heartbeat: Duration, clock: any ServiceClock) {
        self.context = context
        self.source = source
        self.heartbeat = heartbeat
        self.clock = clock
        self.reader = Mutex(ReaderState(lastProgress: clock.uptime))
        self.waker = StreamWaker { [context] in context.wakeStream() }
    }

    func makeMHDResponse() -> OpaquePointer? {
        let retained = Unmanaged.passRetained(self).toOpaque()
        guard
            let response = MHD_create_response_from_callback(
                ft_mhd_size_unknown(), 32 * 1024, streamReaderCallback, retained, streamFreeCallback)
        else {
            Unmanaged<StreamResponse>.fromOpaque(retained).release()
            source.close(.clientGone)  // libmicrohttpd will never pull, so never free it either
            return nil
        }
        startHeartbeat()
        return response
    }

    /// A tick every `heartbeat` until the response is released.
    private func startHeartbeat() {
        guard heartbeat > .zero else { return }
        clock.schedule(at: clock.deadline(after: heartbeat)) { [weak self] in self?.heartbeatTick() }
    }

    private func heartbeatTick() {
        let now = clock.uptime
        let (due, released) = reader.withLock { state -> (Bool, Bool) in
            guard !state.released else { return (false, true) }
            guard now - min(now, state.lastProgress) >= heartbeat.nanoseconds else { return (false, false) }
            state.idleDue = true
            return (true, false)
        }
        if released { return }
        if due { context.wakeStream() }
        startHeartbeat()
    }

    /// A newest-wins source may leave this much in the socket's send queue (or its last chunk,
    /// when larger) before it is pulled again. The queue is looked at again after
    /// `backlogRecheck`, twice as long each time the client is still behind, up to
    /// `longestBacklogRecheck`: a client that drains soon is served soon, and one that is gone
    /// without a word (its TCP retrying for minutes) costs a look twice a second.
    static let unsentAllowance = 64 << 10
    static let backlogRecheck = Duration.milliseconds(20)
    static let longestBacklogRecheck = Duration.milliseconds(500)

    /// When a newest-wins source must wait for the client to take what the socket holds: how
    /// long until the queue is looked at again; nil when it need not wait.
    private func waitForClient() -> Duration? {
        guard source.newestWins, let unsent = context.unsentBytes else { return nil }
        return reader.withLock { state -> Duration? in
            guard unsent > max(Self.unsentAllowance, state.lastChunkBytes) else {
                state.backlogRechecks = 0
                return nil
            }
            defer { state.backlogRechecks += 1 }
            return min(Self.backlogRecheck * (1 << min(state.backlogRechecks, 8)), Self.longestBacklogRecheck)
        }
    }

    private func wakeUnlessReleased() {
        guard !reader.withLock({ $0.released }) else { return }
        context.wakeStream()
    }

    /// stop(): end the stream cleanly at the next pull (after the chunk in flight).
    func endForShutdown() {
        let now = clock.uptime
        reader.withLock { state in
            state.endRequested = true
            if state.endRequestedAt == nil { state.endRequestedAt = now }
        }
        context.wakeStream()
    }

    /// How long a stream told to end may go without sending a byte before `stop()` stops
    /// waiting for it: its client has stopped reading (libmicrohttpd pulls only when the
    /// socket takes more), so its end would never go out.
    static let shutdownStallAllowance = Duration.seconds(1)

    /// Told to end, and nothing went out for `shutdownStallAllowance` since (or since the end
    /// was asked for).
    var isStalledAtShutdown: Bool {
        let now = clock.uptime
        return reader.withLock { state in
            guard let askedAt = state.endRequestedAt, !state.released else { return false }
            let since = max(askedAt, state.lastProgress)
            return now >= since && now - since >= Self.shutdownStallAllowance.nanoseconds
        }
    }

    /// Content-reader callback: fill `buffer` with up to `capacity` bytes.
    func read(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
        while true {
            let copied = copyPending(into: buffer, capacity: capacity)
            if copied > 0 { return copied }
            let (idle, endRequested) = reader.withLock { state -> (Bool, Bool) in
                defer { state.idleDue = false }
                return (state.idleDue, state.endRequested)
            }
            if endRequested {
                let last = reader.withLock { state -> StreamChunk? in
                    guard !state.lastChunkTaken else { return nil }
                    state.lastChunkTaken = true
                    return source.lastChunkBeforeShutdown()
                }
                if let last {
                    reader.withLock { state in
                        state.chunk = last
                        state.segment = 0
                        state.offset = 0
                    }
                    continue
                }
                reader.withLock { $0.finishedNormally = true }
                return ft_mhd_reader_end_of_stream()
            }
            if let recheck = waitForClient() {
                if context.peerHasClosed { return endForDepartedClient() }
                clock.schedule(at: clock.deadline(after: recheck)) { [weak self] in self?.wakeUnlessReleased() }
                if let answer = suspendUntilWoken() { return answer }
                continue
            }
            switch source.next(waker: waker, idle: idle) {
            case .chunk(let chunk):
                reader.withLock { state in
                    state.lastChunkBytes = chunk.byteCount
                    state.chunk = chunk
                    state.segment = 0
                    state.offset = 0
                }
            case .end:
                reader.withLock { $0.finishedNormally = true }
                return ft_mhd_reader_end_of_stream()
            case .failure:
                return ft_mhd_reader_end_with_error()
            case .pending:
                // Nothing went out for a heartbeat and nothing will now: libmicrohttpd does not
                // watch a suspended connection, so a client that left is looked for here (a
                // viewer of a session with no picture yet would otherwise be held for ever).
                if idle && context.peerHasClosed { return endForDepartedClient() }
                if let answer = suspendUntilWoken() { return answer }
            }
        }
    }

    /// Ends the answer of a client that left; libmicrohttpd's line for it is expected, not a warning.
    private func endForDepartedClient() -> Int {
        context.core.expectStreamEndedForDepartedClient()
        return ft_mhd_reader_end_with_error()
    }

    /// Suspends the connection until the stream is woken: the content reader's answer, or nil
    /// to pull again at once (a wake came first).
    private func suspendUntilWoken() -> Int? {
        switch context.suspendForStream() {
        case .suspended: return 0
        case .retry: return nil
        case .stop:
            reader.withLock { $0.finishedNormally = true }
            return ft_mhd_reader_end_of_stream()
        }
    }

    private func copyPending(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
        reader.withLock { state in
            guard let chunk = state.chunk else { return 0 }
            var written = 0
            while written < capacity, state.segment < chunk.segments.count {
                let remaining = capacity - written
                let copied: Int
                switch chunk.segments[state.segment] {
                case .bytes(let bytes):
                    copied = bytes.withUnsafeBytes { copy($0, from: state.offset, to: buffer + written, max: remaining) }
                case .storage(let storage):
                    copied = copy(storage.bytes, from: state.offset, to: buffer + written, max: remaining)
                }
                written += copied
                state.offset += copied
                if state.offset >= chunk.segments[state.segment].count {
                    state.segment += 1
                    state.offset = 0
                }
            }
            if state.segment >= chunk.segments.count { state.chunk = nil }
            if written > 0 { state.lastProgress = clock.uptime }
            return written
        }
    }

    private func copy(_ source: UnsafeRawBufferPointer, from offset: Int, to destination: UnsafeMutableRawPointer, max: Int)
        -> Int
    {
        let count = min(max, source.count - offset)
        guard count > 0, let base = source.baseAddress else { return 0 }
        destination.copyMemory(from: base + offset, byteCount: count)
        return count
    }

    /// Free callback: the connection is done with the response (finished, client gone, or
    /// server stopping). Release everything and tell the source.
    func released() {
        let finished = reader.withLock { state in
            defer {
                state.released = true
                state.chunk = nil
            }
            return state.finishedNormally
        }
        let reason: StreamCloseReason =
            context.core.isStopping ? .serverShutdown : (finished ? .finished : .clientGone)
        source.close(reason)
    }
}
