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
///
/// Three files, one concern each: reading the request (the access handler's calls, here),
/// getting its answer out (`ConnectionContext+Answering.swift`: queued, deferred, streamed or
/// sent early) and its end (`ConnectionContext+Ending.swift`: the server's stop, completion).
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
        /// Nil until the access handler's first call read the head (libmicrohttpd may refuse a
        /// request before that, see `answerUnparsableContentLength`).
        var request: HTTPRequest?
        var route: Router<ServerCore.AccessCheck?>.Route?
        /// What the request is counted under: its route's pattern, or for a 405 the pattern of
        /// the path's route; nil when no route has the path.
        var routePattern: String?
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
    /// Read and written only by `ConnectionContext`'s own files (not private only because
    /// Swift has no access level for a type's extensions in other files).
    let state: Mutex<State>

    init(core: ServerCore, connection: MHDConnectionHandle, id: UInt64, rawTarget: [UInt8]) {
        self.core = core
        self.connection = connection
        self.id = id
        self.startedAt = core.clock.uptime
        self.rawTarget = rawTarget
        self.state = Mutex(State())
    }

    var hasStarted: Bool { state.withLock { $0.started } }

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
        var routePattern: String?

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
            case .methodNotAllowed(let allowed, let pattern):
                routePattern = pattern
                if let preflight = core.configuration.crossOrigin?.preflight(request, allowed: allowed) {
                    // Answered at the final call, before any access check: a preflight has no token.
                    state.withLock {
                        $0.request = request
                        $0.stage = .complete
                        $0.answer = .ready(preflight)
                    }
                    return MHD_Result.YES
                }
                rejection = .methodNotAllowed(allowed: allowed)
            case .found(let matched, let parameters):
                route = matched
                routePattern = matched.pattern
                request.take(route: matched.pattern, parameters: parameters)
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
            $0.routePattern = routePattern
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
                if total > core.configuration.maxDiscardBytes || core.clock.uptime > until {
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
                state.request?.body = body
            case .streamingBody(let sink, _):
                finishedSink = sink
            case .discardingBody:
                return .closeAfterEarlyAnswer
            case .headers, .complete:
                break
            }
            state.stage = .complete
            core.deadlines.bodyEnded(connection.pointer)
            guard case .notYet = state.answer, let route = state.route, case .buffered(let handler) = route.action,
                let request = state.request
            else { return .answer }
            return .run(handler, request)
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

    // MARK: refusing

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

    // MARK: suspend / resume

    /// Must hold the lock: suspend and resume are serialized with our own bookkeeping, so a
    /// resume can never overtake the suspend it answers.
    func resumeLocked(_ state: inout State) {
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
                sink.abort(.bodyTimeout)
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

}
