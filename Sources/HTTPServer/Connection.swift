import CMicroHTTPD
import Synchronization

/// Wraps an MHD_Connection pointer so it can cross threads. It is only dereferenced by
/// libmicrohttpd; we use it for suspend/resume/queue, and only while the request lives
/// (`ConnectionContext.State.closed` guards every use from other threads).
struct MHDConnectionHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// One request on one connection, from its headers to NOTIFY_COMPLETED. Owned by
/// libmicrohttpd's `*con_cls` slot (retained there, released in the completed callback).
///
/// Two questions describe where a request is:
/// - `Stage`: how far the request itself was read (headers → body → complete);
/// - `Answer`: what is known about the response (nothing yet → ready → pending on a
///   promise → queued to libmicrohttpd).
/// Suspension is orthogonal: the connection is suspended while waiting for the body
/// consumer (upload backpressure), for a promise, or for a stream source.
final class ConnectionContext: Sendable {
    enum Stage {
        case headers
        /// Collecting a small body in memory for a buffered route.
        case bufferingBody([UInt8])
        /// Handing pieces to a streamed-upload consumer.
        case streamingBody(RequestBodyStream)
        /// The answer is decided; the rest of the upload is read and dropped.
        case discardingBody(dropped: Int)
        case complete
    }

    enum Answer {
        /// The handler runs when the request is complete (buffered routes).
        case notYet
        case ready(HTTPResponse)
        case pending(ResponsePromise, DeferredResponse)
        case queued(HTTPStatus)
    }

    struct State {
        var request: HTTPRequest
        var route: Router.Route?
        var stage = Stage.headers
        var answer = Answer.notYet
        var suspended = false
        /// A stream source woke us while we were not suspended: pull again before suspending.
        var wakePending = false
        /// NOTIFY_COMPLETED ran: the MHD connection must not be touched any more.
        var closed = false
        var stream: StreamResponse?
    }

    let core: ServerCore
    let connection: MHDConnectionHandle
    let id: UInt64
    let startedAt = ContinuousClock.now
    private let state: Mutex<State>

    init(core: ServerCore, connection: MHDConnectionHandle, id: UInt64) {
        self.core = core
        self.connection = connection
        self.id = id
        self.state = Mutex(State(request: HTTPRequest(method: .get, path: "/")))
    }

    // MARK: libmicrohttpd access-handler calls

    /// First call: the headers are in. Route, authenticate, check the announced size, and
    /// for streamed uploads start the handler now so its consumer is ready for the body.
    func headersReceived(_ request: HTTPRequest) -> MHD_Result {
        var request = request
        var rejection: HTTPError?
        var uploadStart: (UploadHandler, Int)?
        var route: Router.Route?

        if core.isDraining {
            rejection = .shuttingDown()
        } else {
            switch core.router.match(method: request.method, path: request.path) {
            case .notFound:
                rejection = .notFound("No route for \(request.path).")
            case .methodNotAllowed(let allowed):
                rejection = .methodNotAllowed(allowed: allowed)
            case .found(let matched, let parameters):
                route = matched
                request.pathParameters = parameters
                request.route = matched.pattern
                if matched.requiresAuth, let auth = core.auth {
                    let outcome = auth.check(request)
                    if outcome != .allowed { rejection = .unauthorized(invalidToken: outcome == .invalid) }
                }
                if rejection == nil, let limit = matched.maxBodyBytes, let length = request.contentLength,
                    length > limit
                {
                    rejection = .bodyTooLarge(limit: limit)
                }
                if rejection == nil, case .streamed(let capacity, let handler) = matched.action {
                    uploadStart = (handler, capacity)
                }
            }
        }
        state.withLock {
            $0.request = request
            $0.route = route
        }

        if let rejection {
            return reject(rejection, hasBody: request.hasBody)
        }
        if let (handler, capacity) = uploadStart {
            let body = RequestBodyStream(capacity: capacity) { [self] in resumeForBody() }
            let response: HTTPResponse
            do {
                response = try handler(request, body)
            } catch {
                body.terminate(.aborted(.clientGone))
                return reject(error, hasBody: request.hasBody)
            }
            if !request.hasBody { body.terminate(.end) }
            state.withLock {
                $0.stage = request.hasBody ? .streamingBody(body) : .complete
                $0.answer = .ready(response)
            }
            // A deferred answer starts now, so the worker holds the promise during the upload.
            startDeferredIfNeeded()
            return MHD_Result.YES
        }
        state.withLock { $0.stage = request.hasBody ? .bufferingBody([]) : .complete }
        return MHD_Result.YES
    }

    /// A piece of the body. Leaving bytes in `size` (not consumed) is only allowed together
    /// with suspending the connection.
    func bodyReceived(_ bytes: UnsafeRawBufferPointer, size: UnsafeMutablePointer<Int>) -> MHD_Result {
        enum Next { case consumed, keepRest, closeConnection, cancelPromise(ResponsePromise) }
        let next: Next = state.withLock { state in
            switch state.stage {
            case .headers, .complete:
                return .consumed
            case .discardingBody(let dropped):
                let total = dropped + bytes.count
                if total > core.configuration.maxDiscardBytes { return .closeConnection }
                state.stage = .discardingBody(dropped: total)
                return .consumed
            case .bufferingBody(var collected):
                let limit = state.route?.maxBodyBytes ?? Int.max
                if collected.count + bytes.count > limit {
                    state.stage = .discardingBody(dropped: bytes.count)
                    state.answer = .ready(.problem(.bodyTooLarge(limit: limit)))
                    return .consumed
                }
                state.stage = .complete  // drop the array's reference before appending, no copy-on-write
                collected.append(contentsOf: bytes)
                state.stage = .bufferingBody(collected)
                return .consumed
            case .streamingBody(let body):
                if let limit = state.route?.maxBodyBytes, body.totalBytes + bytes.count > limit {
                    body.terminate(.aborted(.tooLarge(limit: limit)))
                    state.stage = .discardingBody(dropped: bytes.count)
                    let previous = state.answer
                    state.answer = .ready(.problem(.bodyTooLarge(limit: limit)))
                    if case .pending(let promise, _) = previous { return .cancelPromise(promise) }
                    return .consumed
                }
                switch body.offer(bytes) {
                case .discard:
                    body.countDiscarded(bytes.count)
                    return .consumed
                case .accepted(let taken):
                    size.pointee -= taken
                    if taken == bytes.count { return .consumed }
                    // Queue full: keep the rest in MHD's buffer and stop reading until the
                    // consumer drained half the queue (RequestBodyStream.next resumes us).
                    if core.isStopping { return .closeConnection }
                    state.suspended = true
                    MHD_suspend_connection(connection.pointer)
                    return .keepRest
                }
            }
        }
        switch next {
        case .consumed:
            size.pointee = 0
            return MHD_Result.YES
        case .keepRest:
            return MHD_Result.YES
        case .closeConnection:
            return MHD_Result.NO
        case .cancelPromise(let promise):
            size.pointee = 0
            promise.cancel(answering: nil)
            return MHD_Result.YES
        }
    }

    /// The last call (upload_data_size 0 after the headers, or again after a resume): run a
    /// buffered handler, then queue the answer or wait for it suspended.
    func requestComplete() -> MHD_Result {
        let handlerToRun: (RequestHandler, HTTPRequest)? = state.withLock { state in
            switch state.stage {
            case .bufferingBody(let body):
                state.request.body = body
            case .streamingBody(let stream):
                stream.terminate(.end)
            case .headers, .discardingBody, .complete:
                break
            }
            state.stage = .complete
            guard case .notYet = state.answer, let route = state.route,
                case .buffered(let handler) = route.action
            else { return nil }
            return (handler, state.request)
        }
        if let (handler, request) = handlerToRun {
            let response: HTTPResponse
            do {
                response = try handler(request)
            } catch {
                response = .problem(error)
            }
            state.withLock { $0.answer = .ready(response) }
        }
        return answerWhenReady()
    }

    // MARK: answering

    private func reject(_ error: HTTPError, hasBody: Bool) -> MHD_Result {
        if hasBody {
            // Queued before the body: libmicrohttpd skips the upload and closes the
            // connection after answering, which is what an unwanted upload deserves.
            state.withLock {
                $0.stage = .complete
                $0.answer = .ready(.problem(error))
            }
            return answerWhenReady()
        }
        // No body: answer at the final call, which keeps the connection alive (an answer
        // queued during the first call makes libmicrohttpd close it).
        state.withLock {
            $0.stage = .complete
            $0.answer = .ready(.problem(error))
        }
        return MHD_Result.YES
    }

    private func startDeferredIfNeeded() {
        let start: (ResponsePromise, DeferredResponse)? = state.withLock { state in
            guard case .ready(let response) = state.answer, case .deferred(let deferred) = response.special
            else { return nil }
            let promise = ResponsePromise { [self] answer in deliver(answer) }
            state.answer = .pending(promise, deferred)
            return (promise, deferred)
        }
        guard let (promise, deferred) = start else { return }
        if let timeout = deferred.timeout {
            promise.arm(timeout: timeout, onTimeout: deferred.onTimeout)
        }
        if core.isDraining {
            promise.cancel(answering: deferred.timeout != nil ? deferred.onTimeout() : .problem(.shuttingDown()))
            return
        }
        deferred.start(promise)
    }

    /// Queues the answer if it is known, otherwise suspends until `deliver` resumes us.
    private func answerWhenReady() -> MHD_Result {
        while true {
            startDeferredIfNeeded()
            enum Step { case queue(HTTPResponse), suspended, done, retry, cancelForStop(ResponsePromise) }
            let step: Step = state.withLock { state in
                switch state.answer {
                case .notYet:
                    return .queue(.problem(.internalError("The route produced no answer.")))
                case .ready(let response):
                    if case .deferred = response.special { return .retry }  // starts on the next turn
                    state.answer = .queued(response.status)
                    return .queue(response)
                case .pending(let promise, _):
                    if core.isStopping { return .cancelForStop(promise) }
                    guard case .complete = state.stage else { return .done }
                    state.suspended = true
                    MHD_suspend_connection(connection.pointer)
                    return .suspended
                case .queued:
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

    /// Promise side (any thread): store the answer and resume the connection if it waits.
    private func deliver(_ response: HTTPResponse) {
        var response = response
        if response.special.map({ if case .deferred = $0 { true } else { false } }) == true {
            response = .problem(.internalError("A deferred answer cannot answer with another deferred answer."))
        }
        let discard: RequestBodyStream? = state.withLock { state in
            guard !state.closed, case .pending = state.answer else { return nil }
            state.answer = .ready(response)
            resumeLocked(&state)
            // The answer is decided while the upload still runs: its remaining bytes cannot
            // change it, so stop queueing them for the consumer.
            if case .streamingBody(let body) = state.stage { return body }
            return nil
        }
        discard?.discardRemaining()
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
            pointer = bytes.withUnsafeBytes {
                MHD_create_response_from_buffer(
                    $0.count, UnsafeMutableRawPointer(mutating: $0.baseAddress), MHD_ResponseMemoryMode.RESPMEM_MUST_COPY)
            }
        case .shared(let storage):
            pointer = makeZeroCopyResponse(storage)
        case .stream(let source):
            let stream = StreamResponse(context: self, source: source, heartbeat: core.configuration.heartbeatInterval)
            state.withLock { $0.stream = stream }
            pointer = stream.makeMHDResponse()
        }
        guard let pointer else { return nil }
        guard applyHeaders(headers, to: pointer) else {
            MHD_destroy_response(pointer)
            return nil
        }
        return pointer
    }

    // MARK: suspend / resume

    /// Must hold the lock: suspend and resume are serialized with our own bookkeeping, so a
    /// resume can never overtake the suspend it answers.
    private func resumeLocked(_ state: inout State) {
        guard state.suspended, !state.closed else { return }
        state.suspended = false
        MHD_resume_connection(connection.pointer)
    }

    /// The upload consumer made room.
    private func resumeForBody() {
        state.withLock { resumeLocked(&$0) }
    }

    /// A stream source has something (any thread).
    func wakeStream() {
        state.withLock { state in
            if state.suspended { resumeLocked(&state) } else { state.wakePending = true }
        }
    }

    enum StreamWait { case suspended, retry, stop }

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

    // MARK: shutdown and completion

    /// stop(): end streams and answer waiting deferred responses now.
    func endWaiting() {
        let (stream, pending) = state.withLock { state -> (StreamResponse?, (ResponsePromise, DeferredResponse)?) in
            if case .pending(let promise, let deferred) = state.answer { return (state.stream, (promise, deferred)) }
            return (state.stream, nil)
        }
        if let stream { stream.endForShutdown() }
        if let (promise, deferred) = pending {
            promise.cancel(answering: deferred.timeout != nil ? deferred.onTimeout() : .problem(.shuttingDown()))
        }
    }

    /// stop(), after `stopping` is set: nothing suspends any more, so one resume each is enough.
    func resumeForStop() {
        state.withLock { resumeLocked(&$0) }
    }

    /// NOTIFY_COMPLETED: the request is over (answered, or the connection died).
    func completed(_ code: MHD_RequestTerminationCode) {
        let (stage, answer, route, method) = state.withLock { state in
            state.closed = true
            state.suspended = false
            // Drop what this context holds: a pending promise's delivery closure refers back to
            // this context, and an upload consumer's ready handler too, so keeping them here
            // would make a reference cycle that outlives the connection.
            defer {
                state.stage = .complete
                state.stream = nil
                if case .queued = state.answer {} else { state.answer = .notYet }
            }
            return (state.stage, state.answer, state.route?.pattern, state.request.method)
        }
        let outcome: RequestRecord.Outcome =
            switch code {
            case .REQUEST_TERMINATED_COMPLETED_OK: .completed
            case .REQUEST_TERMINATED_TIMEOUT_REACHED: .timedOut
            case .REQUEST_TERMINATED_DAEMON_SHUTDOWN: .serverShutdown
            case .REQUEST_TERMINATED_CLIENT_ABORT, .REQUEST_TERMINATED_READ_ERROR: .clientGone
            default: .failed
            }
        if case .streamingBody(let body) = stage {
            body.terminate(.aborted(outcome == .serverShutdown ? .serverShutdown : .clientGone))
        }
        var status: HTTPStatus?
        switch answer {
        case .pending(let promise, _): promise.cancel(answering: nil)
        case .queued(let sent): status = sent
        case .notYet, .ready: break
        }
        core.forget(self)
        core.configuration.requestObserver?(
            RequestRecord(
                method: method, route: route, status: status, duration: ContinuousClock.now - startedAt,
                outcome: outcome))
    }

    var isClosed: Bool { state.withLock { $0.closed } }
}
