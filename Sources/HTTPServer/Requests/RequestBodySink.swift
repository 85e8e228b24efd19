/// Where a streamed upload's body goes: a bounded consumer that the server feeds from its
/// socket threads. The server never holds body bytes itself: a piece the sink cannot take
/// whole stays in libmicrohttpd's buffer, the connection is suspended (the client's TCP window
/// fills up) and resumed when the sink calls its wake-up. So an upload of any size costs the
/// sink's bound, whatever the body's size or the client's speed.
public protocol RequestBodySink: AnyObject, Sendable {
    /// Takes as many leading bytes as there is room for. Runs inside the connection's lock:
    /// keep it quick, and never call the wake-up from inside it.
    func write(_ bytes: UnsafeRawBufferPointer) -> RequestBodyWrite
    /// The whole body arrived.
    func finish()
    /// The body will not complete.
    func abort(_ reason: RequestBodyAbort)
    /// `wake` (callable from any thread, any number of times) resumes the suspended
    /// connection: call it when room was made after a short write, and when the sink starts
    /// refusing, so a paused client learns at once.
    func setWake(_ wake: @escaping @Sendable () -> Void)
}

public enum RequestBodyWrite: Sendable, Equatable {
    /// This many leading bytes were taken; fewer than offered means "full for now".
    case accepted(Int)
    /// The consumer stopped listening: this is the answer, sent at once (before the body ends).
    case refused(HTTPError)
}

public enum RequestBodyAbort: Sendable, Equatable {
    /// The client disconnected (or the connection failed) mid-upload.
    case clientGone
    /// The body delivered too little for too long (`bodyTimeout`); the server answers 408
    /// `body_timeout` itself and closes the connection.
    case bodyTimeout
    /// The body passed the route's byte limit; the server answers 413 itself.
    case tooLarge(limit: Int)
    /// The server is shutting down; it answers 503 itself.
    case serverShutdown
    /// The body's chunked framing broke; the server answers 400 `invalid_chunked_encoding`
    /// itself. The bytes before the fault were whole chunks.
    case malformedChunk
    /// The answer was decided before the body ended (the consumer's own failure, usually)
    /// and has been sent; nothing more follows.
    case answeredEarly
}
