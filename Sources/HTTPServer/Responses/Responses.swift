import CMicroHTTPD
import Synchronization
import Timekeeping

/// Immutable bytes at a stable address for the object's whole life, so a response can point
/// libmicrohttpd at them instead of copying (one encoded JPEG served to many clients).
/// Conformers must never mutate or move the bytes while the object lives.
public protocol ByteStorage: AnyObject, Sendable {
    var bytes: UnsafeRawBufferPointer { get }
}

/// An owned, immutable copy of some bytes with a stable address: written once before init
/// returns, never again, and freed in deinit. The address is kept in a Mutex, which makes
/// sharing it checked (reading it is an uncontended lock, once per response).
public final class SharedBytes: ByteStorage, Sendable {
    private let memory: Mutex<UnsafeRawBufferPointer>

    public var bytes: UnsafeRawBufferPointer { memory.withLock { $0 } }

    public init(_ array: [UInt8]) {
        memory = Mutex(Self.copy(array))
    }

    public convenience init(_ string: String) {
        self.init(Array(string.utf8))
    }

    private static func copy(_ array: [UInt8]) -> sending UnsafeRawBufferPointer {
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: array.count, alignment: 16)
        array.withUnsafeBytes { source in
            if source.count > 0 { memory.copyMemory(from: source) }
        }
        return UnsafeRawBufferPointer(memory)
    }

    deinit { UnsafeMutableRawBufferPointer(mutating: bytes).deallocate() }
}

/// What a response carries after its headers.
public enum HTTPBody: Sendable {
    case empty
    /// Copied once into libmicrohttpd.
    case bytes([UInt8])
    /// Served from `storage` without copying; the storage stays alive until the last
    /// connection using it is done.
    case shared(any ByteStorage)
    /// Unknown length, pulled from the source as the client can take it (chunked on HTTP/1.1).
    case stream(any StreamSource)
    /// An RFC 9457 problem document, written when the answer goes out, with the server's
    /// `HTTPServerConfiguration.problemTypePrefix`.
    case problem(HTTPError)
}

/// A handler's answer. Most are direct (status, headers, body); two special forms exist:
/// `reusing(_:)` queues a prepared libmicrohttpd response object, and `deferred(...)` answers
/// later from any thread without blocking one.
public struct HTTPResponse: Sendable {
    public var status: HTTPStatus
    public var headers: HTTPHeaders
    public var body: HTTPBody
    let special: Special?

    enum Special: Sendable {
        case reusable(ReusableResponse)
        case deferred(DeferredResponse)
    }

    public init(status: HTTPStatus = .ok, headers: HTTPHeaders = HTTPHeaders(), body: HTTPBody = .empty) {
        self.status = status
        self.headers = headers
        self.body = body
        self.special = nil
    }

    private init(special: Special, status: HTTPStatus, headers: HTTPHeaders) {
        self.status = status
        self.headers = headers
        self.body = .empty
        self.special = special
    }

    /// Queues a prepared response. Its status, headers and body are fixed; changing `status`
    /// or `headers` of the returned value has no effect.
    public static func reusing(_ response: ReusableResponse) -> HTTPResponse {
        HTTPResponse(special: .reusable(response), status: response.status, headers: response.headers)
    }

    /// Answers later. `start` runs once on the server thread and must return quickly: hand the
    /// promise to whoever will answer (a worker, a long-poll waiter list). The connection is
    /// suspended meanwhile; no thread waits. When `timeout` passes first, `onTimeout`'s
    /// response is sent instead (a long poll answers e.g. 304) and the promise is cancelled.
    public static func deferred(
        timeout: Duration? = nil,
        onTimeout: @escaping @Sendable () -> HTTPResponse = {
            .problem(HTTPError(status: .gatewayTimeout, code: "timeout", detail: "No answer in time."))
        },
        _ start: @escaping @Sendable (ResponsePromise) -> Void
    ) -> HTTPResponse {
        HTTPResponse(
            special: .deferred(DeferredResponse(timeout: timeout, onTimeout: onTimeout, start: start)),
            status: 0, headers: HTTPHeaders())
    }

    public static func problem(_ error: HTTPError) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/problem+json")
        for key in error.headers.keys.sorted() { headers.add(key, error.headers[key]!) }
        return HTTPResponse(status: error.status, headers: headers, body: .problem(error))
    }

    public static func text(_ text: String, status: HTTPStatus = .ok, contentType: String = "text/plain; charset=utf-8")
        -> HTTPResponse
    {
        HTTPResponse(status: status, headers: ["Content-Type": contentType], body: .bytes(Array(text.utf8)))
    }

    /// `json` must already be serialized; this layer does not pick an encoder.
    public static func json(_ json: [UInt8], status: HTTPStatus = .ok) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: .bytes(json))
    }
}

struct DeferredResponse: Sendable {
    let timeout: Duration?
    let onTimeout: @Sendable () -> HTTPResponse
    let start: @Sendable (ResponsePromise) -> Void
}

/// An MHD_Response as its address: the object is libmicrohttpd's, which locks its reference
/// count, so queueing and destroying it from any thread is safe. Held as an address, the
/// handle is plainly `Sendable`.
struct MHDResponseHandle: Sendable {
    private let address: UInt

    init(_ response: OpaquePointer) { address = UInt(bitPattern: response) }

    var pointer: OpaquePointer { OpaquePointer(bitPattern: address)! }
}

/// A libmicrohttpd response built once and queued to any number of connections (its
/// reference count is locked inside MHD). Use it for bytes served over and over, e.g. the
/// latest picture of a session, to save building headers per request.
public final class ReusableResponse: Sendable {
    public let status: HTTPStatus
    public let headers: HTTPHeaders
    public let storage: any ByteStorage
    let handle: MHDResponseHandle

    public init(status: HTTPStatus = .ok, headers: HTTPHeaders, body storage: any ByteStorage) throws(HTTPError) {
        guard let pointer = makeZeroCopyResponse(storage) else {
            throw HTTPError.internalError("libmicrohttpd could not create a response")
        }
        guard applyHeaders(headers, to: pointer) else {
            MHD_destroy_response(pointer)
            throw HTTPError.internalError("libmicrohttpd refused a response header")
        }
        self.status = status
        self.headers = headers
        self.storage = storage
        self.handle = MHDResponseHandle(pointer)
    }

    deinit {
        // Drops this object's reference; connections still sending keep their own.
        MHD_destroy_response(handle.pointer)
    }
}

/// A zero-copy response over `storage`, which stays retained until MHD frees the response.
func makeZeroCopyResponse(_ storage: any ByteStorage) -> OpaquePointer? {
    let bytes = storage.bytes
    let retained = Unmanaged<AnyObject>.passRetained(storage as AnyObject).toOpaque()
    let response = MHD_create_response_from_buffer_with_free_callback_cls(
        bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), releaseRetainedObject, retained)
    if response == nil {
        Unmanaged<AnyObject>.fromOpaque(retained).release()
    }
    return response
}

/// Header names/values MHD would reject (control characters) make the whole response fail,
/// which is better than a half-built response.
func applyHeaders(_ headers: HTTPHeaders, to response: OpaquePointer) -> Bool {
    for field in headers where MHD_add_response_header(response, field.name, field.value) != MHD_Result.YES {
        return false
    }
    return true
}

/// A handle to answer a deferred response from any thread, once.
public final class ResponsePromise: Sendable {
    private struct State {
        var completed = false
        var cancelled = false
        var cancelHandlers: [@Sendable () -> Void] = []
        /// The timeout's answer, while the timeout is armed and nothing else answered.
        var onTimeout: (@Sendable () -> HTTPResponse)?
    }

    private let state = Mutex(State())
    private let deliver: @Sendable (HTTPResponse) -> Void

    init(deliver: @escaping @Sendable (HTTPResponse) -> Void) {
        self.deliver = deliver
    }

    /// Sends `response` unless the promise was already completed, timed out or cancelled.
    /// Returns whether this call delivered it.
    @discardableResult
    public func succeed(_ response: HTTPResponse) -> Bool {
        guard takeCompletion() else { return false }
        deliver(response)
        return true
    }

    @discardableResult
    public func fail(_ error: HTTPError) -> Bool {
        succeed(.problem(error))
    }

    /// True once an answer was delivered or the promise was cancelled.
    public var isCompleted: Bool { state.withLock { $0.completed } }

    /// Runs `handler` when the promise can no longer be answered by its holder: the timeout
    /// fired, the client went away or the server is stopping. Runs at once if that already
    /// happened; never runs after a successful `succeed`/`fail`. Keep it cheap (e.g. remove
    /// the promise from a waiter list).
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            if state.cancelled { return true }
            if !state.completed { state.cancelHandlers.append(handler) }
            return false
        }
        if runNow { handler() }
    }

    /// Server side: the promise is abandoned; optionally answer with `response`.
    func cancel(answering response: HTTPResponse?) {
        let handlers = state.withLock { state -> [@Sendable () -> Void]? in
            guard !state.completed else { return nil }
            state.completed = true
            state.cancelled = true
            state.onTimeout = nil
            defer { state.cancelHandlers = [] }
            return state.cancelHandlers
        }
        guard let handlers else { return }
        // Handlers first: whoever held the promise learns it is over before the client can.
        for handler in handlers { handler() }
        if let response { deliver(response) }
    }

    /// Answers `onTimeout()` when `timeout` passes on `clock` first. The timer keeps no more
    /// than a weak reference (the clock's timers cannot be cancelled): an answered promise drops
    /// `onTimeout` and whatever it holds at once, and its timer then finds nothing to do.
    func arm(timeout: Duration, clock: any ServiceClock, onTimeout: @escaping @Sendable () -> HTTPResponse) {
        let armed = state.withLock { state -> Bool in
            guard !state.completed else { return false }
            state.onTimeout = onTimeout
            return true
        }
        guard armed else { return }
        clock.schedule(at: clock.deadline(after: timeout)) { [weak self] in self?.timeOut() }
    }

    private func timeOut() {
        guard let onTimeout = state.withLock({ $0.onTimeout }) else { return }
        cancel(answering: onTimeout())
    }

    private func takeCompletion() -> Bool {
        state.withLock { state in
            guard !state.completed else { return false }
            state.completed = true
            state.onTimeout = nil
            state.cancelHandlers = []
            return true
        }
    }
}
