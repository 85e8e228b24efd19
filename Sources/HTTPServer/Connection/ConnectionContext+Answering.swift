import CMicroHTTPD
import Glibc
import FoundationEssentials
import Synchronization
import Timekeeping

/// How a request's answer gets out: queued to libmicrohttpd when it is known, waited for
/// suspended while a deferred answer's promise is open, pulled from a stream source, or written
/// to the socket before the body ended.
extension ConnectionContext {
    // MARK: answers written to the socket directly

    /// libmicrohttpd 0.9.75 answers a `Content-Length` it cannot parse by itself, before the
    /// application sees the request, and sends that answer's status line and headers twice (a
    /// bug). It logs the reason first, on this connection's thread, which is when this runs:
    /// when this connection is the one (its headers are parsed by then), the proper problem is
    /// written directly and the socket's sending side shut, so libmicrohttpd's own answer
    /// never reaches the client. Returns whether it answered.
    func answerUnparsableContentLength() -> Bool {
        guard lookupHeader(connection.pointer, "Transfer-Encoding") == nil,
            let value = lookupHeader(connection.pointer, "Content-Length"), !RequestEdge.isValidLength(value)
        else { return false }
        let problem = RequestEdge.malformedLength(value)
        let claimed = state.withLock { state -> Bool in
            guard !state.started else { return false }
            state.started = true
            state.stage = .complete
            state.answer = .sentEarly(problem.status)
            return true
        }
        guard claimed else { return false }
        let bytes = EarlyResponse.serialize(.problem(problem), for: core.configuration, clock: core.clock)
        _ = bytes.withUnsafeBytes { ft_mhd_send_raw(connection.pointer, $0.baseAddress, $0.count, 1000) }
        _ = ft_mhd_shutdown_write(connection.pointer)
        return true
    }

    /// libmicrohttpd 0.9.75 answers a chunked body whose framing breaks with a page of HTML of its
    /// own, and logs the reason first, on this connection's thread, which is when this runs: when
    /// this connection reads a chunked body it has not answered, its body's sink learns why the
    /// body ends (first, so that the refusal is what the push records), then the problem is
    /// written directly and the socket's sending side shut, so the HTML never reaches the client;
    /// the consumer's own answer, which follows, is dropped. Returns whether the problem went out.
    func answerMalformedChunk() -> Bool {
        let body = state.withLock { state -> ChunkedBody? in
            guard Self.readsChunkedBody(state), Self.hasNotAnswered(state) else { return nil }
            if case .streamingBody(let sink, _) = state.stage { return .streamed(sink) }
            return .buffered
        }
        guard let body else { return false }
        if case .streamed(let sink) = body { sink.abort(.malformedChunk) }
        return state.withLock { state in
            // The sink's consumer may have answered in between; then that answer stands.
            if case .sentEarly = state.answer { return true }
            guard Self.readsChunkedBody(state), Self.hasNotAnswered(state) else { return false }
            answerEarlyLocked(.problem(RequestEdge.malformedChunk()), &state, consumerWillAnswer: body.hasSink)
            return true
        }
    }

    /// Whether this connection could be the one whose chunked body broke: libmicrohttpd is
    /// reading a chunked body for it on the calling thread, answered or not (one whose answer
    /// went out early is still read, to drop the rest).
    var mayBeReadingChunkedBodyOnThisThread: Bool {
        pthread_equal(thread, pthread_self()) != 0 && state.withLock { Self.readsChunkedBody($0) }
    }

    private enum ChunkedBody {
        case buffered
        case streamed(any RequestBodySink)

        var hasSink: Bool {
            if case .streamed = self { true } else { false }
        }
    }

    /// A suspended connection is not read, so its body cannot be the one that broke.
    private static func readsChunkedBody(_ state: State) -> Bool {
        guard !state.closed, !state.suspended, state.request?.headers["Transfer-Encoding"] != nil else { return false }
        switch state.stage {
        case .bufferingBody, .streamingBody, .discardingBody: return true
        case .headers, .complete: return false
        }
    }

    private static func hasNotAnswered(_ state: State) -> Bool {
        switch state.stage {
        case .bufferingBody, .streamingBody: break
        case .headers, .discardingBody, .complete: return false
        }
        switch state.answer {
        case .notYet, .pending: return true
        case .ready, .queued, .sentEarly: return false
        }
    }

    /// Sends `response` now, mid-body, from whichever thread decided it (see the type's
    /// comment): written to the socket directly, whose sending side is then shut, so nothing
    /// libmicrohttpd might still write (its own answer to broken chunk framing, say) reaches
    /// the client after it; then the rest of the body is dropped, for at most
    /// `maxDiscardDuration` even if the client goes quiet. Must hold the lock: it serialises
    /// this with the connection's end (after `closed` the socket may be gone). Returns whether
    /// the answer was written whole. The first early answer is the one sent: a second one (the
    /// body's reader and the answer's worker can both decide to answer, each under its own hold of
    /// the lock) changes nothing, and the body goes on being dropped. `consumerWillAnswer`: the
    /// body's sink was told why it ends, so its consumer still answers the pending promise (that
    /// answer is then dropped); cancelling it would cut the consumer's own ending short.
    @discardableResult
    func answerEarlyLocked(_ response: HTTPResponse, _ state: inout State, consumerWillAnswer: Bool = false) -> Bool {
        guard !state.closed else { return false }
        if case .sentEarly = state.answer { return true }
        if !consumerWillAnswer, case .pending(let promise, _) = state.answer {
            // Whoever held it learns the request is over before the client can act on the answer.
            promise.cancel(answering: nil)
        }
        let discardDuration = core.configuration.maxDiscardDuration
        state.stage = .discardingBody(dropped: 0, until: core.clock.deadline(after: discardDuration))
        state.answer = .sentEarly(response.status)
        var response = response
        core.configuration.crossOrigin?.decorate(&response.headers, for: state.request)
        let bytes = EarlyResponse.serialize(response, for: core.configuration, clock: core.clock)
        let written = bytes.withUnsafeBytes { buffer in
            ft_mhd_send_raw(connection.pointer, buffer.baseAddress, buffer.count, 100)
        }
        _ = ft_mhd_shutdown_write(connection.pointer)
        core.deadlines.cutOff(connection.pointer, after: discardDuration)
        // A suspended connection must read on, to drop the rest and notice the end.
        resumeLocked(&state)
        return written == bytes.count
    }

    func startDeferredIfNeeded() {
        let start: (ResponsePromise, DeferredResponse)? = state.withLock { state in
            guard case .ready(let response) = state.answer, case .deferred(let deferred) = response.special
            else { return nil }
            let promise = ResponsePromise { [self] answer in deliver(answer) }
            state.answer = .pending(promise, deferred)
            return (promise, deferred)
        }
        guard let (promise, deferred) = start else { return }
        if let timeout = deferred.timeout {
            promise.arm(timeout: timeout, clock: core.clock, onTimeout: deferred.onTimeout)
        }
        if core.isDraining {
            // A long poll too: its timeout answer (a 304) would tell a client with no picture that
            // its copy is current.
            promise.cancel(answering: .problem(.shuttingDown()))
            return
        }
        deferred.start(promise)
    }

    /// Queues the answer if it is known, otherwise suspends until `deliver` resumes us.
    func answerWhenReady() -> MHD_Result {
        while true {
            startDeferredIfNeeded()
            enum Step { case queue(HTTPResponse), suspended, done, retry, cancelForStop(ResponsePromise) }
            let step: Step = state.withLock { state in
                switch state.answer {
                case .notYet:
                    return .queue(.problem(.internalError("The route produced no answer.")))
                case .ready(var response):
                    if case .deferred = response.special { return .retry }  // starts on the next turn
                    state.answer = .queued(response.status)
                    core.configuration.crossOrigin?.decorate(&response.headers, for: state.request)
                    return .queue(response)
                case .pending(let promise, _):
                    if core.isStopping { return .cancelForStop(promise) }
                    guard case .complete = state.stage else { return .done }
                    state.suspended = true
                    MHD_suspend_connection(connection.pointer)
                    return .suspended
                case .queued, .sentEarly:
                    return .done
                }
            }
            switch step {
            case .queue(let response):
                return queue(response)
            case .suspended, .done:
                return MHD_Result.YES
            case .retry:
                continue
            case .cancelForStop(let promise):
                promise.cancel(answering: .problem(.shuttingDown()))
            }
        }
    }

    /// Promise side (any thread): store the answer and resume the connection if it waits. An
    /// answer that comes while the body still arrives goes out at the next access-handler call.
    private func deliver(_ response: HTTPResponse) {
        var response = response
        if response.special.map({ if case .deferred = $0 { true } else { false } }) == true {
            response = .problem(.internalError("A deferred answer cannot answer with another deferred answer."))
        }
        let (sink, leftToQueue) = state.withLock { state -> ((any RequestBodySink)?, Bool) in
            guard !state.closed, case .pending = state.answer else { return (nil, false) }
            guard case .streamingBody(let sink, _) = state.stage else {
                state.answer = .ready(response)
                resumeLocked(&state)
                return (nil, true)
            }
            // The body is still arriving: answer now, not when it ends (or never, for a live push).
            answerEarlyLocked(response, &state)
            return (sink, false)
        }
        // The answer came from the sink's consumer, which has stopped listening already.
        sink?.abort(.answeredEarly)
        // Dropped, or sent early (which writes no stream body).
        if !leftToQueue { Self.discard(response, core.isStopping ? .serverShutdown : .clientGone) }
    }

    /// An answer that will never be queued: a stream body is closed, so what its source holds
    /// (a multipart answer's upload slot and spool) is given back.
    static func discard(_ response: HTTPResponse, _ reason: StreamCloseReason) {
        if case .stream(let source) = response.body { source.close(reason) }
    }

    private func queue(_ response: HTTPResponse) -> MHD_Result {
        var response = response
        if core.isDraining && response.special == nil {
            response.headers.set("Connection", "close")
        }
        let mhdResponse: OpaquePointer?
        var ownsResponse = true
        switch response.special {
        case .reusable(let reusable):
            mhdResponse = reusable.handle.pointer
            ownsResponse = false
        case .deferred:
            mhdResponse = nil
        case nil:
            mhdResponse = makeResponse(status: response.status, headers: response.headers, body: response.body)
        }
        guard let mhdResponse else {
            core.configuration.logger.error("cannot create a response", metadata: ["status": "\(response.status)"])
            return MHD_Result.NO
        }
        let result = MHD_queue_response(connection.pointer, UInt32(response.status.code), mhdResponse)
        if ownsResponse { MHD_destroy_response(mhdResponse) }
        return result
    }

    private func makeResponse(status: HTTPStatus, headers: HTTPHeaders, body: HTTPBody) -> OpaquePointer? {
        let pointer: OpaquePointer?
        switch body {
        case .empty:
            pointer = MHD_create_response_from_buffer(0, nil, MHD_ResponseMemoryMode.RESPMEM_PERSISTENT)
        case .bytes(let bytes):
            pointer = Self.makeCopyingResponse(bytes)
        case .shared(let storage):
            pointer = makeZeroCopyResponse(storage)
        case .problem(let problem):
            pointer = Self.makeCopyingResponse(problem.problemJSON(typePrefix: core.configuration.problemTypePrefix))
        case .stream(let source):
            let stream = StreamResponse(
                context: self, source: source, heartbeat: core.configuration.heartbeatInterval,
                clock: core.clock)
            state.withLock { $0.stream = stream }
            // A stream made after stop() told this connection's streams to end is told too.
            if core.isDraining { stream.endForShutdown() }
            pointer = stream.makeMHDResponse()
        }
        guard let pointer else { return nil }
        guard applyHeaders(headers, to: pointer) else {
            MHD_destroy_response(pointer)
            return nil
        }
        return pointer
    }

    private static func makeCopyingResponse(_ bytes: [UInt8]) -> OpaquePointer? {
        bytes.withUnsafeBytes {
            MHD_create_response_from_buffer(
                $0.count, UnsafeMutableRawPointer(mutating: $0.baseAddress), MHD_ResponseMemoryMode.RESPMEM_MUST_COPY)
        }
    }

    // MARK: a streamed answer waiting for its source

    /// A stream source has something (any thread).
    func wakeStream() {
        state.withLock { state in
            if state.suspended { resumeLocked(&state) } else { state.wakePending = true }
        }
    }

    enum StreamWait { case suspended, retry, stop }

    /// Whether the client has closed the connection (a peek at its socket).
    var peerHasClosed: Bool { ft_mhd_peer_closed(connection.pointer) != 0 }

    /// Bytes in the socket's send queue the client has not taken yet; nil when unknown.
    var unsentBytes: Int? {
        let queued = ft_mhd_unsent_bytes(connection.pointer)
        return queued < 0 ? nil : queued
    }

    /// Reader side: nothing to send. Suspend unless a wake arrived since the last pull.
    func suspendForStream() -> StreamWait {
        state.withLock { state in
            if state.closed || core.isStopping { return .stop }
            if state.wakePending {
                state.wakePending = false
                return .retry
            }
            state.suspended = true
            MHD_suspend_connection(connection.pointer)
            return .suspended
        }
    }
}

/// A complete HTTP/1.1 response as bytes, for `ft_mhd_send_raw`: the few answers sent before
/// a request body ended (problems, small bodies), always with `Connection: close`.
enum EarlyResponse {
    static func serialize(_ response: HTTPResponse, for configuration: HTTPServerConfiguration, clock: any ServiceClock) -> [UInt8] {
        let body: [UInt8]
        switch response.body {
        case .bytes(let bytes): body = bytes
        case .shared(let storage): body = Array(storage.bytes)
        case .problem(let problem): body = problem.problemJSON(typePrefix: configuration.problemTypePrefix)
        case .empty, .stream: body = []
        }
        let date = Int(clock.now.timeIntervalSince1970)
        var head = "HTTP/1.1 \(response.status.code) \(response.status.reasonPhrase)\r\n"
        head += "Date: \(HTTPDate.string(secondsSince1970: date))\r\n"
        for field in response.headers
        where !["content-length", "connection", "transfer-encoding", "date"].contains(field.name.lowercased()) {
            head += "\(field.name): \(field.value)\r\n"
        }
        head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + body
    }
}

/// A header's value as libmicrohttpd parsed it, nil when absent (only on the connection's thread).
private func lookupHeader(_ connection: OpaquePointer, _ name: String) -> String? {
    MHD_lookup_connection_value(connection, MHD_ValueKind.HEADER_KIND, name).map { String(cString: $0) }
}
