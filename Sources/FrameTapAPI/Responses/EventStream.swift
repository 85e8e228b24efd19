import HTTPServer
import Sessions
import Synchronization
import Timekeeping

/// `GET /events`: server-sent events from the session event log. Each reader is a cursor into
/// the log's bounded history, pulled by the server whenever the client can take more; a reader
/// that falls behind the history gets `resync` instead of a queue that grows.
extension FrameTapAPI {
    func events(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse {
        var session: SessionID?
        if let name = try QueryReader(request).text("session") {
            do {
                session = try SessionID(name)
            } catch {
                throw HTTPError(error)
            }
        }
        let log = registry.events
        // A resume (EventSource sends the last id it saw) reads on after that id; a new reader
        // starts with what happens from now on.
        var cursor = log.newestID
        if let header = request.headers["Last-Event-ID"]?.trimmingWhitespace(), !header.isEmpty {
            guard let resumeAfter = UInt64(header) else {
                throw .badRequest("Last-Event-ID '\(header.prefix(40))' is not an event id.", code: "invalid_parameter")
            }
            cursor = resumeAfter
        }
        return HTTPResponse(
            headers: [
                "Content-Type": ServerSentEvents.contentType, "Cache-Control": "no-cache, no-store",
                "X-Accel-Buffering": "no",
            ],
            body: .stream(
                EventStreamSource(
                    log: log, encoded: encodedEvents, session: session, cursor: cursor, clock: registry.clock,
                    keepalive: registry.configuration.eventKeepaliveInterval)))
    }
}

/// One `GET /events` reader.
final class EventStreamSource: StreamSource {
    /// How long a browser waits before it reconnects (the SSE `retry:` field).
    static let reconnectMilliseconds = 2000

    private let log: SessionEventLog
    private let encoded: EncodedEvents
    private let session: SessionID?
    private let clock: any ServiceClock
    /// A comment this often when nothing happens (`ServerConfiguration.eventKeepaliveInterval`).
    private let keepaliveNanoseconds: UInt64
    private let state: Mutex<State>

    private struct State {
        var cursor: UInt64
        var opened = false
        var lastSentAt: UInt64
        var waitToken: UInt64?
    }

    init(
        log: SessionEventLog, encoded: EncodedEvents, session: SessionID?, cursor: UInt64, clock: any ServiceClock,
        keepalive: Duration
    ) {
        self.log = log
        self.encoded = encoded
        keepaliveNanoseconds = keepalive.nanoseconds
        self.session = session
        self.clock = clock
        state = Mutex(State(cursor: cursor, lastSentAt: clock.uptime))
    }

    func next(waker: StreamWaker, idle: Bool) -> StreamPoll {
        let now = clock.uptime
        // Registered before reading, so an event published in between still wakes the reader.
        let token = log.waitForNext { waker.wake() }
        let (previousToken, cursor, opened) = state.withLock { state in
            defer {
                state.waitToken = token
                state.opened = true
            }
            return (state.waitToken, state.cursor, state.opened)
        }
        if let previousToken { log.cancelWait(previousToken) }

        var bytes: [UInt8] = []
        // The first bytes go out at once: they carry the response headers to the client.
        if !opened {
            bytes += ServerSentEvents.block([.retry(milliseconds: Self.reconnectMilliseconds), .comment("frametap events")])
        }
        switch log.read(after: cursor, session: session) {
        case .gap(let newest, let reason):
            bytes += Self.serverSentEvent(log.resync(newest: newest, reason: reason))
            state.withLock { $0.cursor = newest }
        case .events(let events, let next):
            // A read scans to the newest event, so with none of this reader's the cursor is at
            // the newest and the registered waiter covers what comes next.
            for event in events { bytes += encoded.bytes(of: event) }
            state.withLock { $0.cursor = next }
        }
        if bytes.isEmpty, idle {
            let (quietFor, cursor) = state.withLock { (now &- $0.lastSentAt, $0.cursor) }
            // The id moves a filtered reader's Last-Event-ID past other sessions' events (an
            // event without data updates it and dispatches nothing), so its resume after a long
            // quiet spell does not read as history lost.
            if quietFor >= keepaliveNanoseconds { bytes = ServerSentEvents.block([.comment("keepalive"), .id(cursor)]) }
        }
        guard !bytes.isEmpty else { return .pending }
        state.withLock { $0.lastSentAt = now }
        return .chunk(StreamChunk(bytes: bytes))
    }

    /// An event as the stream sends it: its id, its kind as the event type, its JSON as data.
    static func serverSentEvent(_ event: SessionEvent) -> [UInt8] {
        ServerSentEvents.block([.id(event.id), .event(event.kind.rawValue), .data(WireJSON.bytes(SessionEventJSON(event)))])
    }

    func close(_ reason: StreamCloseReason) {
        if let token = state.withLock({ $0.waitToken }) { log.cancelWait(token) }
    }
}

/// Each event as the streams send it, encoded once for all of its readers: 150 readers of an
/// event cost one JSON encoding, not 150. As many are kept as the event log may hold (up to twice
/// its capacity), so a reader far behind does not push out what the others are about to read.
final class EncodedEvents: Sendable {
    static let capacity = 2 * SessionEventLog.defaultCapacity

    private struct State {
        var bytes: [UInt64: [UInt8]] = [:]
        /// The ids kept, oldest at `oldest` once the ring is full.
        var ring: [UInt64] = []
        var oldest = 0
    }

    private let state = Mutex(State())

    func bytes(of event: SessionEvent) -> [UInt8] {
        if let kept = state.withLock({ $0.bytes[event.id] }) { return kept }
        let encoded = EventStreamSource.serverSentEvent(event)
        state.withLock { state in
            guard state.bytes[event.id] == nil else { return }
            if state.ring.count < Self.capacity {
                state.ring.append(event.id)
            } else {
                state.bytes[state.ring[state.oldest]] = nil
                state.ring[state.oldest] = event.id
                state.oldest = (state.oldest + 1) % Self.capacity
            }
            state.bytes[event.id] = encoded
        }
        return encoded
    }

    /// Events kept now (for tests).
    var count: Int { state.withLock { $0.bytes.count } }
}
