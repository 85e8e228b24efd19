import CMicroHTTPD
import FoundationEssentials
import Synchronization
import Timekeeping

#if canImport(Glibc)
    import Glibc
#endif

/// An MHD_Connection as the address libmicrohttpd gave us: the object is libmicrohttpd's,
/// never dereferenced here, and its calls we make from other threads (suspend, resume, queue)
/// are thread-safe. Held as an address, the handle is plainly `Sendable`. Used only while the
/// request lives (`ConnectionContext.State.closed` guards every use from other threads).
struct MHDConnectionHandle: Sendable {
    private let address: UInt

    init(_ connection: OpaquePointer) { address = UInt(bitPattern: connection) }

    var pointer: OpaquePointer { OpaquePointer(bitPattern: address)! }
}

/// One request on one connection, from its URI callback to NOTIFY_COMPLETED (or to its
/// connection's close, where libmicrohttpd never reports it completed). Owned by `ServerCore`;
/// libmicrohttpd's `*con_cls` slot holds it unretained.
///
/// Two questions describe where a request is:
/// - `Stage`: how far the request itself was read (headers → body → complete);
/// - `Answer`: what is known about the response (nothing yet → ready → pending on a
///   promise → queued to libmicrohttpd, or sent early).
/// Suspension is orthogonal: the connection is suspended while waiting for the body's sink
/// (upload backpressure), for a promise, or for a stream source.
///
/// An answer decided while the body still arrives (the sink refused, a limit was passed, the
/// server stops) is sent at once, written to the socket directly because libmicrohttpd cannot
/// queue a response mid-body; then the rest of the body is read and dropped, at most
/// `maxDiscardBytes` or for `maxDiscardDuration`, and the connection is closed.
final class ConnectionContext: Sendable {
    enum Stage {
        case headers
        /// Collecting a small body in memory for a buffered route.
        case bufferingBody([UInt8])
        /// Handing pieces to a streamed upload's sink.
        case streamingBody(any RequestBodySink, received: Int)
        /// The answer went out before the body ended; the rest is read and dropped, until the
        /// `uptime` `until` at the latest.
        case discardingBody(dropped: Int, until: UInt64)
        case complete
    }

    enum Answer {
        /// The handler runs when the request is complete (buffered routes).
        case notYet
        case ready(HTTPResponse)
        case pending(ResponsePromise, DeferredResponse)
        case queued(HTTPStatus)
        /// Written to the socket before the body ended (see the type's comment).
        case sentEarly(HTTPStatus)
    }

    struct State {
        /// The access handler's first call (the headers) happened.
        var started = false
        var request: HTTPRequest
        var route: Router<ServerCore.AccessCheck?>.Route?
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
    /// When the request began (an `uptime`), for its duration.
    let startedAt: UInt64
    /// The request line's target as the client sent it, still percent-encoded.
    let rawTarget: [UInt8]
    /// The libmicrohttpd thread that runs this connection (it is where the context is made).
    let thread = pthread_self()
    private let state: Mutex<State>

    init(core: ServerCore, connection: MHDConnectionHandle, id: UInt64, rawTarget: [UInt8]) {
        self.core = core
        self.connection = connection
        self.id = id
        self.startedAt = core.configuration.clock.uptime
        self.rawTarget = rawTarget
        self.state = Mutex(State(request: HTTPRequest(method: .get, segments: [])))
    }

    var hasStarted: Bool { state.withLock { $0.started } }

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
        let bytes = EarlyResponse.serialize(.problem(problem), for: core.configuration)
        _ = bytes.withUnsafeBytes { ft_mhd_send_raw(connection.pointer, $0.baseAddress, $0.count, 1000) }
        _ = ft_mhd_shutdown_write(connection.pointer)
        return true
    }

    // MARK: libmicrohttpd access-handler calls

    /// First call: the headers are in. Check the request's framing and target, route,
    /// authenticate, check the announced size, and for streamed uploads start the handler now
    /// so its sink is ready for the body. Nothing of a body is read before all of this passed.
    func headersReceived(method: HTTPMethod, version: String, headers: HTTPHeaders, defect: HeaderDefect?) -> MHD_Result {
        state.withLock { $0.started = true }
        core.deadlines.headersArrived(connection.pointer)
        if let error = RequestEdge.check(version: version, headers: headers, defect: defect) {
            state.withLock { $0.request = HTTPRequest(method: method, segments: [], headers: headers, version: version) }
            return reject(error, hasBody: true)
        }
        let target: RequestTarget
        do {
            target = try RequestTarget.parse(rawTarget, dotSegments: .keep)
        } catch {
            state.withLock { $0.request = HTTPRequest(method: method, segments: [], headers: headers, version: version) }
            return reject(error.problem, hasBody: true)
        }
        var request = HTTPRequest(
            method: method, segments: target.segments, query: target.query, headers: headers, version: version)
        var rejection: HTTPError?
        var uploadHandler: UploadHandler?
        var route: Router<ServerCore.AccessCheck?>.Route?

        if core.isDraining {
            rejection = .shuttingDown()
        } else {
            switch core.router.match(method: request.method, segments: request.segments) {
            case .misplacedDotSegment:
                // Parsed again the strict way only to say where the dot segment is.
                do {
                    _ = try RequestTarget.parse(rawTarget, dotSegments: .reject)
                    rejection = RequestTargetError(.dotSegment, at: 0).problem
                } catch {
                    rejection = error.problem
                }
            case .notFound:
                rejection = .notFound("No route for \(request.path).")
            case .methodNotAllowed(let allowed):
                rejection = .methodNotAllowed(allowed: allowed)
            case .found(let matched, let parameters):
                route = matched
                request.pathParameters = parameters
                request.route = matched.pattern
                if let check = matched.access { rejection = check(request) }
                if rejection == nil, let limit = matched.maxBodyBytes, let length = request.contentLength,
                    length > limit
                {
                    rejection = .bodyTooLarge(limit: limit)
                }
                if rejection == nil, case .streamed(let handler) = matched.action {
                    uploadHandler = handler
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
        if let uploadHandler {
            let sink: any RequestBodySink
            let response: HTTPResponse
            do {
                (sink, response) = try uploadHandler(request)
            } catch {
                return reject(error, hasBody: request.hasBody)
            }
            if !request.hasBody { sink.finish() }
            // Weak: the sink is kept by this context's stage, so a strong capture would be a cycle.
            sink.setWake { [weak self] in self?.resumeForBody() }
            state.withLock {
                $0.stage = request.hasBody ? .streamingBody(sink, received: 0) : .complete
                $0.answer = .ready(response)
            }
            if request.hasBody { core.deadlines.bodyStarted(connection.pointer) }
            // A deferred answer starts now, so its worker holds the promise during the upload.
            startDeferredIfNeeded()
            return MHD_Result.YES
        }
        state.withLock { $0.stage = request.hasBody ? .bufferingBody([]) : .complete }
        if request.hasBody { core.deadlines.bodyStarted(connection.pointer) }
        return MHD_Result.YES
    }

    /// A piece of the body. Leaving bytes in `size` (not consumed) is only allowed together
    /// with suspending the connection.
    func bodyReceived(_ bytes: UnsafeRawBufferPointer, size: UnsafeMutablePointer<Int>) -> MHD_Result {
        enum Next {
            case consumed, keepRest, closeConnection
            case answerEarly(HTTPResponse, abort: (any RequestBodySink, RequestBodyAbort)?)
        }
        let next: Next = state.withLock { state in
            switch state.stage {
            case .bufferingBody, .streamingBody:
                core.deadlines.bodyReceived(connection.pointer, bytes.count)
            case .headers, .complete, .discardingBody:
                break
            }
            switch state.stage {
            case .headers, .complete:
                return .consumed
            case .discardingBody(let dropped, let until):
                let total = dropped + bytes.count
                if total > core.configuration.maxDiscardBytes || core.configuration.clock.uptime > until {
                    return .closeConnection
                }
                state.stage = .discardingBody(dropped: total, until: until)
                return .consumed
            case .bufferingBody(var collected):
                let limit = state.route?.maxBodyBytes ?? Int.max
                if collected.count + bytes.count > limit {
                    return .answerEarly(.problem(.bodyTooLarge(limit: limit)), abort: nil)
                }
                state.stage = .complete  // drop the array's reference before appending, no copy-on-write
                collected.append(contentsOf: bytes)
                state.stage = .bufferingBody(collected)
                return .consumed
            case .streamingBody(let sink, let received):
                if core.isDraining {
                    return .answerEarly(.problem(.shuttingDown()), abort: (sink, .serverShutdown))
                }
                if let limit = state.route?.maxBodyBytes, received + bytes.count > limit {
                    return .answerEarly(.problem(.bodyTooLarge(limit: limit)), abort: (sink, .tooLarge(limit: limit)))
                }
                switch sink.write(bytes) {
                case .refused(let error):
                    return .answerEarly(.problem(error), abort: nil)
                case .accepted(let taken):
                    size.pointee -= taken
                    state.stage = .streamingBody(sink, received: received + taken)
                    if taken == bytes.count { return .consumed }
                    // Full: keep the rest in libmicrohttpd's buffer and stop reading until the
                    // sink made room (its wake-up resumes us).
                    if core.isStopping { return .closeConnection }
                    state.suspended = true
                    MHD_suspend_connection(connection.pointer)
                    core.deadlines.bodyPaused(connection.pointer)
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
            core.expectDeliberateClose()
            return MHD_Result.NO
        case .answerEarly(let response, let abort):
            size.pointee = 0
            if let (sink, reason) = abort { sink.abort(reason) }
            let sent = state.withLock { answerEarlyLocked(response, &$0) }
            state.withLock { state in
                if case .discardingBody(_, let until) = state.stage {
                    state.stage = .discardingBody(dropped: bytes.count, until: until)
                }
            }
            guard sent else {
                core.expectDeliberateClose()
                return MHD_Result.NO
            }
            return MHD_Result.YES
        }
    }

    /// The last call (upload_data_size 0 after the headers, or again after a resume): run a
    /// buffered handler, then queue the answer or wait for it suspended.
    func requestComplete() -> MHD_Result {
        enum Next { case run(RequestHandler, HTTPRequest), answer, closeAfterEarlyAnswer }
        var finishedSink: (any RequestBodySink)?
        let next: Next = state.withLock { state in
            switch state.stage {
            case .bufferingBody(let body):
                state.request.body = body
            case .streamingBody(let sink, _):
                finishedSink = sink
            case .discardingBody:
                return .closeAfterEarlyAnswer
            case .headers, .complete:
                break
            }
            state.stage = .complete
            core.deadlines.bodyEnded(connection.pointer)
            guard case .notYet = state.answer, let route = state.route, case .buffered(let handler) = route.action
            else { return .answer }
            return .run(handler, state.request)
        }
        finishedSink?.finish()
        switch next {
        case .closeAfterEarlyAnswer:
            // The answer already went out, with `Connection: close`.
            core.expectDeliberateClose()
            return MHD_Result.NO
        case .run(let handler, let request):
            let response: HTTPResponse
            do {
                response = try handler(request)
            } catch {
                response = .problem(error)
            }
            state.withLock { $0.answer = .ready(response) }
            return answerWhenReady()
        case .answer:
            return answerWhenReady()
        }
    }

    // MARK: answering

    private func reject(_ error: HTTPError, hasBody: Bool) -> MHD_Result {
        if hasBody || error.headers["Connection"] == "close" {
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

    /// Sends `response` now, mid-body, from whichever thread decided it (see the type's
    /// comment): written to the socket directly, whose sending side is then shut, so nothing
    /// libmicrohttpd might still write (its own answer to broken chunk framing, say) reaches
    /// the client after it; then the rest of the body is dropped, for at most
    /// `maxDiscardDuration` even if the client goes quiet. Must hold the lock: it serialises
    /// this with the connection's end (after `closed` the socket may be gone). Returns whether
    /// the answer was written whole.
    @discardableResult
    private func answerEarlyLocked(_ response: HTTPResponse, _ state: inout State) -> Bool {
        guard !state.closed else { return false }
        if case .pending(let promise, _) = state.answer {
            // Whoever held it learns the request is over before the client can act on the answer.
            promise.cancel(answering: nil)
        }
        let discardDuration = core.configuration.maxDiscardDuration
        state.stage = .discardingBody(dropped: 0, until: core.configuration.clock.deadline(after: discardDuration))
        state.answer = .sentEarly(response.status)
        let bytes = EarlyResponse.serialize(response, for: core.configuration)
        let written = bytes.withUnsafeBytes { buffer in
            ft_mhd_send_raw(connection.pointer, buffer.baseAddress, buffer.count, 100)
        }
        _ = ft_mhd_shutdown_write(connection.pointer)
        core.deadlines.cutOff(connection.pointer, after: discardDuration)
        // A suspended connection must read on, to drop the rest and notice the end.
        resumeLocked(&state)
        return written == bytes.count
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
            promise.arm(timeout: timeout, clock: core.configuration.clock, onTimeout: deferred.onTimeout)
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
        let sink = state.withLock { state -> (any RequestBodySink)? in
            guard !state.closed, case .pending = state.answer else { return nil }
            guard case .streamingBody(let sink, _) = state.stage else {
                state.answer = .ready(response)
                resumeLocked(&state)
                return nil
            }
            // The body is still arriving: answer now, not when it ends (or never, for a live push).
            answerEarlyLocked(response, &state)
            return sink
        }
        // The answer came from the sink's consumer, which has stopped listening already.
        sink?.abort(.answeredEarly)
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
                clock: core.configuration.clock)
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

    private static func makeCopyingResponse(_ bytes: [UInt8]) -> OpaquePointer? {
        bytes.withUnsafeBytes {
            MHD_create_response_from_buffer(
                $0.count, UnsafeMutableRawPointer(mutating: $0.baseAddress), MHD_ResponseMemoryMode.RESPMEM_MUST_COPY)
        }
    }

    // MARK: suspend / resume

    /// Must hold the lock: suspend and resume are serialized with our own bookkeeping, so a
    /// resume can never overtake the suspend it answers.
    private func resumeLocked(_ state: inout State) {
        guard state.suspended, !state.closed else { return }
        state.suspended = false
        MHD_resume_connection(connection.pointer)
    }

    /// The body's sink made room, or started refusing.
    private func resumeForBody() {
        state.withLock { state in
            guard state.suspended else { return }
            resumeLocked(&state)
            if case .streamingBody = state.stage { core.deadlines.bodyResumed(connection.pointer) }
        }
    }

    /// The body delivered too little for too long (`ConnectionDeadlines`): answer 408 now, as
    /// for any answer decided mid-body, and stop listening. False when the body is not being
    /// read any more, or `stillCurrent` says this connection is not the one that timed out.
    func answerBodyTimeout(stillCurrent: () -> Bool) -> Bool {
        let configuration = core.configuration
        return state.withLock { state -> Bool in
            guard !state.closed, stillCurrent() else { return false }
            switch state.stage {
            case .streamingBody(let sink, _):
                // Told to keep nothing more before the answer goes out, as at shutdown.
                sink.abort(.clientGone)
            case .bufferingBody:
                break
            case .headers, .discardingBody, .complete:
                return false
            }
            answerEarlyLocked(
                .problem(.bodyTimeout(minimumBytes: configuration.bodyProgressBytes, within: configuration.bodyTimeout)),
                &state)
            return true
        }
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

    /// What `stop()` still waits for on this connection.
    enum ShutdownWork { case none, answering, upload }

    var shutdownWork: ShutdownWork {
        let (work, stream) = state.withLock { state -> (ShutdownWork, StreamResponse?) in
            if state.closed { return (.none, nil) }
            switch state.stage {
            case .streamingBody, .discardingBody: return (.upload, nil)
            default: return (.answering, state.stream)
            }
        }
        // A stream whose client stopped reading would hold the stop for the whole grace period.
        if let stream, stream.isStalledAtShutdown { return .none }
        return work
    }

    /// stop(): end streams and answer waiting deferred responses now; an upload whose body is
    /// still arriving is answered 503 at once (at its next access-handler call) and its sink
    /// told to keep nothing more.
    func endWaiting() {
        enum Work {
            case none
            case stream(StreamResponse)
            case pending(ResponsePromise, DeferredResponse)
            case upload(any RequestBodySink)
        }
        let work: Work = state.withLock { state in
            if case .streamingBody(let sink, _) = state.stage {
                // Told to keep nothing more before the answer goes out, so nothing is decoded after it.
                sink.abort(.serverShutdown)
                answerEarlyLocked(.problem(.shuttingDown()), &state)
                return .upload(sink)
            }
            if case .pending(let promise, let deferred) = state.answer { return .pending(promise, deferred) }
            if let stream = state.stream { return .stream(stream) }
            return .none
        }
        switch work {
        case .none: break
        case .stream(let stream): stream.endForShutdown()
        case .pending(let promise, let deferred):
            promise.cancel(answering: deferred.timeout != nil ? deferred.onTimeout() : .problem(.shuttingDown()))
        case .upload: break
        }
    }

    /// stop(), after `stopping` is set: nothing suspends any more, so one resume each is enough.
    func resumeForStop() {
        state.withLock { resumeLocked(&$0) }
    }

    /// NOTIFY_COMPLETED: the request is over (answered, or the connection died); or its
    /// connection closed without it (see `ServerCore.connectionNotified`). Runs once.
    func completed(_ code: MHD_RequestTerminationCode) {
        let ending = state.withLock { state -> (Stage, Answer, String?, HTTPMethod)? in
            guard !state.closed else { return nil }
            state.closed = true
            state.suspended = false
            // Drop what this context holds: a pending promise's delivery closure refers back to
            // this context, and so might a sink, so keeping them here would make a reference
            // cycle that outlives the connection.
            defer {
                state.stage = .complete
                state.stream = nil
                switch state.answer {
                case .queued, .sentEarly: break
                default: state.answer = .notYet
                }
            }
            return (state.stage, state.answer, state.route?.pattern, state.request.method)
        }
        guard let (stage, answer, route, method) = ending else { return }
        var outcome: RequestRecord.Outcome =
            switch code {
            case .REQUEST_TERMINATED_COMPLETED_OK: .completed
            case .REQUEST_TERMINATED_TIMEOUT_REACHED: .timedOut
            case .REQUEST_TERMINATED_DAEMON_SHUTDOWN: .serverShutdown
            case .REQUEST_TERMINATED_CLIENT_ABORT, .REQUEST_TERMINATED_READ_ERROR: .clientGone
            default: .failed
            }
        if case .streamingBody(let sink, _) = stage {
            sink.abort(outcome == .serverShutdown ? .serverShutdown : .clientGone)
        }
        var status: HTTPStatus?
        switch answer {
        case .pending(let promise, _): promise.cancel(answering: nil)
        case .queued(let sent): status = sent
        case .sentEarly(let sent):
            status = sent
            outcome = .answeredEarly
        case .notYet, .ready: break
        }
        core.forget(self)
        core.deadlines.requestEnded(connection.pointer)
        core.configuration.requestObserver?(
            RequestRecord(
                method: method, route: route, status: status,
                duration: .nanoseconds(core.configuration.clock.uptime - startedAt), outcome: outcome))
    }
}

/// A complete HTTP/1.1 response as bytes, for `ft_mhd_send_raw`: the few answers sent before
/// a request body ended (problems, small bodies), always with `Connection: close`.
enum EarlyResponse {
    static func serialize(_ response: HTTPResponse, for configuration: HTTPServerConfiguration) -> [UInt8] {
        let body: [UInt8]
        switch response.body {
        case .bytes(let bytes): body = bytes
        case .shared(let storage): body = Array(storage.bytes)
        case .problem(let problem): body = problem.problemJSON(typePrefix: configuration.problemTypePrefix)
        case .empty, .stream: body = []
        }
        let date = Int(configuration.clock.now.timeIntervalSince1970)
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
