import Dispatch
import Foundation
import Ingest
import Logging
import SessionsTestSupport
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

/// The history's age bound is an hour: a test's fixture arrives over however long the machine
/// takes (seconds under a sanitizer, with every suite running), and only the tests of that bound
/// set a shorter one.
func testConfiguration(
    maxSessions: Int = 8, maxBodyBytes: Int? = nil, idleTimeout: Duration = .seconds(300),
    uploadQueueBytes: Int = 1 << 20, repeatInterval: Duration = .seconds(1)
) -> ServerConfiguration {
    ServerConfiguration(
        backend: .software, maxSessions: maxSessions, maxBodyBytes: maxBodyBytes, idleTimeout: idleTimeout,
        uploadQueueBytes: uploadQueueBytes, mjpegRepeatInterval: repeatInterval, historySeconds: .seconds(3600))
}

/// A session of its own: with `services` shared with other sessions of the test, or (nil) with
/// services of its own on `clock`.
func makeSession(
    _ name: String = "cam1", configuration: ServerConfiguration = testConfiguration(), services: SessionServices? = nil,
    options: SessionOptions = SessionOptions(), metrics: FrameTapMetrics = FrameTapMetrics(),
    clock: any ServiceClock = SystemClock()
) throws -> Session {
    try Session(
        id: SessionID(name), configuration: configuration,
        services: services ?? SessionServices.forTests(configuration, clock: clock), options: options, metrics: metrics,
        logger: quietLogger)
}

/// A registry of sessions of `configuration`, sharing services of their own on `clock`.
func makeRegistry(
    _ configuration: ServerConfiguration = testConfiguration(), services: SessionServices? = nil,
    metrics: FrameTapMetrics = FrameTapMetrics(), clock: any ServiceClock = SystemClock(), events: SessionEventLog? = nil
) -> SessionRegistry {
    SessionRegistry(
        configuration: configuration, services: services ?? SessionServices.forTests(configuration, clock: clock),
        metrics: metrics, logger: quietLogger, events: events)
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
            try await ready.wait(for: "the multipart answer's next part or its end")
            afterWait()
        case .finished(let result):
            return try result.get()
        }
    }
}

/// Feeds `bytes` into an upload's queue in `chunk`-sized pieces, as the HTTP server does,
/// waiting for the producer wake-up whenever the queue is full. Returns how many pieces were
/// cut short by a full queue. `watch` runs after every piece.
@discardableResult
func send(_ bytes: [UInt8], to queue: UploadQueue<SessionError>, chunk: Int = 16 << 10, watch: (() -> Void)? = nil) async throws
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
                try await room.wait(for: "room in the upload queue (\(offset) of \(bytes.count) bytes taken)")
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
    return try await answer.value(waitingFor: "the upload's answer")
}

func picture(
    _ session: Session, _ request: PictureRequest = PictureRequest(), ifNoneMatch: String? = nil, after: UInt64? = nil,
    wait: Duration = .zero
) async throws -> Result<PictureAnswer, SessionError> {
    let answer = Outcome<Result<PictureAnswer, SessionError>>()
    let clientHas = PictureAnswerCondition(entityTags: ifNoneMatch.map { [$0] } ?? [], after: after)
    session.requestPicture(request, clientHas: clientHas, wait: wait) { answer.set($0) }
    return try await answer.value(waitingFor: "the picture request's answer", timeout: wait + defaultWaitLimit)
}

extension PictureAnswer {
    var served: ServedPicture? {
        if case .picture(let served) = self { return served }
        return nil
    }
}
