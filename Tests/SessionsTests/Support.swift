import Dispatch
import Foundation
import Logging
import Synchronization
import Testing
import TestSupport
import Timekeeping

@testable import Sessions

/// The committed fixtures these tests push most (made by scripts/make-fixtures.sh).
enum Fixture {
    static func bytes(_ name: String) throws -> [UInt8] { try Fixtures.bytes(name) }

    /// Constrained Baseline 176x144, 20 frames, I/P only (output order = decode order).
    static let baseline = "baseline_176x144.264"
    static let baselineFrames = 20
    /// 20 frames, an IDR with SPS/PPS every 8 frames (3 IDRs).
    static let repeatHeaders = "repeat_headers_176x144.264"
}

let quietLogger = Logger(label: "frametap.tests") { _ in SwiftLogNoOpLogHandler() }

func testConfiguration(
    maxSessions: Int = 8, maxBodyBytes: Int? = nil, idleTimeout: Duration = .seconds(300),
    uploadQueueBytes: Int = 1 << 20, repeatInterval: Duration = .seconds(1)
) -> ServerConfiguration {
    ServerConfiguration(
        backend: .software, maxSessions: maxSessions, maxBodyBytes: maxBodyBytes, idleTimeout: idleTimeout,
        uploadQueueBytes: uploadQueueBytes, mjpegRepeatInterval: repeatInterval)
}

func makeSession(
    _ name: String = "cam1", configuration: ServerConfiguration = testConfiguration(),
    options: SessionOptions = SessionOptions(), metrics: FrameTapMetrics = FrameTapMetrics(),
    clock: any ServiceClock = SystemClock()
) throws -> Session {
    try Session(
        id: SessionID(name), configuration: configuration, options: options, metrics: metrics, logger: quietLogger,
        clock: clock)
}

/// Takes a multipart answer's pictures until it ends, waiting whenever none is ready: `onPart`
/// sees each picture, `afterWait` runs after each wait. Returns the upload's summary.
@discardableResult
func readToEnd(
    _ spooled: SpooledUpload, onPart: (ServedPicture) -> Void = { _ in }, afterWait: () -> Void = {}
) async throws -> UploadSummary {
    while true {
        switch spooled.poll() {
        case .part(let served):
            onPart(served)
        case .wait:
            let ready = Signal()
            spooled.notifyWhenReady { ready.signal() }
            await ready.wait()
            afterWait()
        case .finished(let result):
            return try result.get()
        }
    }
}

/// Wakes one waiting task; a signal that comes before the wait is kept.
final class Signal: Sendable {
    private let state = Mutex<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                if state.pending {
                    state.pending = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }
}

/// The value a callback delivers once, for a test to await.
///
/// The value is read under the lock after the wait, not taken from the continuation: a
/// continuation's resumption is a handover ThreadSanitizer cannot see (the concurrency runtime is
/// not instrumented), so `make sanitize` would report what the callback's thread wrote before it
/// as racing with the test's reads. The lock is an edge it sees.
final class Outcome<Value: Sendable>: Sendable {
    private let state = Mutex<(value: Value?, waiter: CheckedContinuation<Void, Never>?)>((nil, nil))

    func set(_ value: Value) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.value == nil else { return nil }
            state.value = value
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    var current: Value? { state.withLock { $0.value } }

    func value() async -> Value {
        await withCheckedContinuation { continuation in
            let isSet = state.withLock { state -> Bool in
                if state.value != nil { return true }
                state.waiter = continuation
                return false
            }
            if isSet { continuation.resume() }
        }
        return state.withLock { $0.value! }
    }
}

/// Feeds `bytes` into an upload's queue in `chunk`-sized pieces, as the HTTP server does,
/// waiting for the producer wake-up whenever the queue is full. Returns how many pieces were
/// cut short by a full queue. `watch` runs after every piece.
@discardableResult
func send(_ bytes: [UInt8], to queue: UploadQueue, chunk: Int = 16 << 10, watch: (() -> Void)? = nil) async throws
    -> Int
{
    let room = Signal()
    queue.setProducerWake { room.signal() }
    var offset = 0
    var pauses = 0
    while offset < bytes.count {
        let end = min(offset + chunk, bytes.count)
        let offer = bytes[offset..<end].withUnsafeBytes { queue.offer($0) }
        watch?()
        switch offer {
        case .refused(let error): throw error
        case .accepted(let taken):
            offset += taken
            if offset < end {
                pauses += 1
                await room.wait()
            }
        }
    }
    return pauses
}

/// One whole JSON-answered upload: begin, send, finish, await the answer.
func push(_ bytes: [UInt8], to session: Session, flush: Bool, chunk: Int = 16 << 10) async throws -> UploadSummary {
    try await upload(bytes, to: session, flush: flush, chunk: chunk).get()
}

func upload(_ bytes: [UInt8], to session: Session, flush: Bool, chunk: Int = 16 << 10) async throws
    -> Result<UploadSummary, SessionError>
{
    let answer = Outcome<Result<UploadSummary, SessionError>>()
    let queue = try session.beginUpload(flush: flush) { answer.set($0) }
    try await send(bytes, to: queue, chunk: chunk)
    queue.finish()
    return await answer.value()
}

func picture(
    _ session: Session, _ request: PictureRequest = PictureRequest(), ifNoneMatch: String? = nil, after: UInt64? = nil,
    wait: Duration = .zero
) async -> Result<PictureAnswer, SessionError> {
    let answer = Outcome<Result<PictureAnswer, SessionError>>()
    let clientHas = PictureAnswerCondition(entityTags: ifNoneMatch.map { [$0] } ?? [], after: after)
    session.requestPicture(request, clientHas: clientHas, wait: wait) { answer.set($0) }
    return await answer.value()
}

extension PictureAnswer {
    var served: ServedPicture? {
        if case .picture(let served) = self { return served }
        return nil
    }
}

/// Polls until `condition` holds or `timeout` passes.
func eventually(timeout: Duration = .seconds(5), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

/// A one-shot flag set from a callback on any thread.
final class Flag: Sendable {
    private let value = Atomic<Int>(0)
    func set() { value.add(1, ordering: .relaxed) }
    var count: Int { value.load(ordering: .relaxed) }
}
