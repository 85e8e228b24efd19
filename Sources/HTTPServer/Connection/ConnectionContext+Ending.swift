import CMicroHTTPD
import Synchronization

/// The end of a request: what the server's stop waits for and ends on this connection, and
/// NOTIFY_COMPLETED, which releases what the request held and reports it.
extension ConnectionContext {
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
            case pending(ResponsePromise)
            case upload(any RequestBodySink)
        }
        let work: Work = state.withLock { state in
            if case .streamingBody(let sink, _) = state.stage {
                // Told to keep nothing more before the answer goes out, so nothing is decoded after it.
                sink.abort(.serverShutdown)
                answerEarlyLocked(.problem(.shuttingDown()), &state)
                return .upload(sink)
            }
            if case .pending(let promise, _) = state.answer { return .pending(promise) }
            if let stream = state.stream { return .stream(stream) }
            return .none
        }
        switch work {
        case .none: break
        case .stream(let stream): stream.endForShutdown()
        case .pending(let promise):
            // A long poll too: its timeout answer (a 304) would tell a client with no picture that
            // its copy is current.
            promise.cancel(answering: .problem(.shuttingDown()))
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
        let ending = state.withLock { state -> (Stage, Answer, String?, HTTPMethod?)? in
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
            return (state.stage, state.answer, state.routePattern, state.request?.method)
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
        case .ready(let response): Self.discard(response, outcome == .serverShutdown ? .serverShutdown : .clientGone)
        case .notYet: break
        }
        // The wait for the next head begins before the request stops counting as active.
        core.deadlines.requestEnded(connection.pointer)
        core.forget(self)
        core.configuration.requestObserver?(
            RequestRecord(
                method: method, route: route, status: status,
                duration: .nanoseconds(core.clock.uptime - startedAt), outcome: outcome))
    }
}
