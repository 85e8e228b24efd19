import Decoding
import Foundation
import Ingest
import Logging
import SessionCatalog
import Sessions
import SessionsTestSupport
import TestSupport
import Timekeeping

let quietLogger = Logger(label: "frametap.tests") { _ in SwiftLogNoOpLogHandler() }

func testConfiguration(maxSessions: Int = 8, idleTimeout: Duration = .seconds(300)) -> ServerConfiguration {
    ServerConfiguration(backend: .software, maxSessions: maxSessions, idleTimeout: idleTimeout)
}

func makeCatalog(
    _ configuration: ServerConfiguration = testConfiguration(), clock: any ServiceClock = SystemClock(),
    store: SessionStateStore? = nil, saved: [SessionID: SessionOptions] = [:]
) -> SessionCatalog {
    let registry = SessionRegistry(
        configuration: configuration, services: SessionServices.forTests(configuration, clock: clock),
        metrics: FrameTapMetrics(), logger: quietLogger)
    return SessionCatalog(registry: registry, store: store, saved: saved, logger: quietLogger)
}

/// One whole push, flushed: the session decodes every picture of `bytes`.
func push(_ bytes: [UInt8], to session: Session) async throws -> UploadSummary {
    let answer = Outcome<Result<UploadSummary, SessionError>>()
    let queue = try session.beginUpload(flush: true) { answer.set($0) }
    let offer = bytes.withUnsafeBytes { queue.offer($0) }
    guard case .accepted(let taken) = offer, taken == bytes.count else {
        throw SessionError(.invalidParameter, "the upload queue took less than the whole fixture")
    }
    queue.finish()
    return try await answer.value(waitingFor: "the push's answer").get()
}

/// A fresh directory under the temporary one, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("frametap-catalog-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

extension SessionError {
    var codeName: String { code.rawValue }
}
