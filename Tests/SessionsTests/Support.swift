import Dispatch
import Foundation
import Logging
import Synchronization
import Testing

@testable import Sessions

/// The committed fixtures (made by scripts/make-fixtures.sh with ffmpeg + libx264).
enum Fixture {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures")

    static func bytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.appendingPathComponent(name)))
    }

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
    options: SessionOptions = SessionOptions(), metrics: FrameTapMetrics = FrameTapMetrics()
) throws -> Session {
    try Session(
        id: SessionID(name), configuration: configuration, options: options, metrics: metrics, logger: quietLogger)
}

/// Sends `bytes` in `chunk`-sized appends, waiting for room whenever the queue is full.
/// Returns how many appends were cut short by a full queue.
@discardableResult
func send(_ bytes: [UInt8], to upload: Upload, chunk: Int = 16 << 10, watch: (() -> Void)? = nil) async throws
    -> Int
{
    var offset = 0
    var pauses = 0
    while offset < bytes.count {
        let end = min(offset + chunk, bytes.count)
        let taken = try bytes[offset..<end].withUnsafeBytes { buffer in
            try Result { () throws(SessionError) -> Int in try upload.append(buffer) }.get()
        }
        watch?()
        offset += taken
        if offset < end {
            pauses += 1
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                upload.notifyWhenRoom { continuation.resume() }
            }
        }
    }
    return pauses
}

func finish(_ upload: Upload, flush: Bool) async -> Result<UploadSummary, SessionError> {
    await withCheckedContinuation { continuation in
        upload.finish(flush: flush) { continuation.resume(returning: $0) }
    }
}

/// One whole request: begin, send, finish.
func push(_ bytes: [UInt8], to session: Session, flush: Bool, chunk: Int = 16 << 10) async throws -> UploadSummary {
    let upload = try session.beginUpload()
    try await send(bytes, to: upload, chunk: chunk)
    return try await finish(upload, flush: flush).get()
}

func picture(
    _ session: Session, _ request: PictureRequest = PictureRequest(), ifNoneMatch: String? = nil, after: UInt64? = nil,
    wait: Duration = .zero
) async -> Result<PictureAnswer, SessionError> {
    await withCheckedContinuation { continuation in
        session.requestPicture(request, ifNoneMatch: ifNoneMatch, after: after, wait: wait) {
            continuation.resume(returning: $0)
        }
    }
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
