import Foundation
import FrameTapAPI
import Ingest
import SessionCatalog
import Sessions
import Testing
import TestSupport

/// Declared sessions and the configuration's readings over HTTP: their status, the 409 of their
/// DELETE and PUT, the events, `/system`.
@Suite(.serialized, .timeLimit(.minutes(10)))
struct DeclaredSessionRouteTests {
    @Test func aDeclaredSessionIsShownAsSuchAndItsDeleteIs409() throws {
        try withService { service in
            _ = service.catalog.declare([
                SessionDeclaration(id: try SessionID("yard"), options: SessionOptions(codec: .h265), place: "frametap.yaml:12:3")
            ])
            let status = try jsonObject(request(service.port, "GET", "/sessions/yard").body)
            #expect(status["origin"] as? String == "declared")
            #expect(status["persisted"] as? Bool == false)
            #expect(try request(service.port, "PUT", "/sessions/made").status == 201)
            let list = try jsonObject(request(service.port, "GET", "/sessions").body)
            let origins = (list["sessions"] as? [[String: Any]] ?? []).map { "\($0["id"] ?? "")=\($0["origin"] ?? "")" }
            #expect(origins == ["made=api", "yard=declared"])

            let delete = try request(service.port, "DELETE", "/sessions/yard")
            #expect(delete.problem == Problem(409, "declared_session"))
            #expect(delete.headers["Content-Type"] == "application/problem+json")
            #expect(delete.problemDetail.contains("frametap.yaml:12:3"))
            #expect(try request(service.port, "GET", "/sessions/yard").status == 200)

            #expect(try request(service.port, "PUT", "/sessions/yard", body: Array(#"{"codec":"h265"}"#.utf8)).status == 200)
            let change = try request(service.port, "PUT", "/sessions/yard", body: Array(#"{"codec":"h264"}"#.utf8))
            #expect(change.problem == Problem(409, "declared_session"))
            #expect(try request(service.port, "DELETE", "/sessions/made").status == 204)
        }
    }

    /// A declaration that could not be made (the session limit) is still the file's: a push to
    /// its id makes the declared session, with its codec, kept from the idle timeout.
    @Test func aPushMakesADeclaredSessionThatCouldNotBeMadeAsTheFileSays() throws {
        try withService(sessions: { $0.maxSessions = 1 }) { service in
            #expect(try request(service.port, "PUT", "/sessions/client").status == 201)
            let outcome = service.catalog.declare([
                SessionDeclaration(id: try SessionID("yard"), options: SessionOptions(codec: .h264), place: "f.yaml:3:3")
            ])
            #expect(outcome.failed.map(\.error.code) == [.tooManySessions])
            #expect(try request(service.port, "DELETE", "/sessions/client").status == 204)

            let refused = try post(service.port, "/sessions/yard/nalus?flush=true", Fixtures.bytes("main_bframes_176x144.265"))
            #expect(refused.problem == Problem(415, "codec_mismatch"), "\(refused.text)")
            let status = try jsonObject(request(service.port, "GET", "/sessions/yard").body)
            #expect(status["origin"] as? String == "declared" && status["statedCodec"] as? String == "h264", "\(status)")
            #expect(try post(service.port, "/sessions/yard/nalus?flush=true", Fixtures.bytes("baseline_176x144.264")).status == 200)
        }
    }

    @Test func readingsAreEventsAndShowInSystem() throws {
        try withService { service in
            let events = try EventReader(port: service.port)
            service.configuration.recordApplied(.signal, changes: ["created": ["gate"], "removed": ["yard"]], restartNeeded: ["port"])
            service.configuration.recordRejected(
                .file, ConfigurationStatus.Rejection(message: "f.yaml:7:5: bad", file: "f.yaml", line: 7, column: 5))
            let applied = try events.next(named: "config.applied")
            #expect(applied["session"] == nil)
            #expect(applied["reason"] as? String == "signal")
            #expect((applied["changes"] as? [String: [String]]) == ["created": ["gate"], "removed": ["yard"]])
            #expect(applied["restartNeeded"] as? [String] == ["port"])
            let rejected = try events.next(named: "config.rejected")
            #expect(rejected["line"] as? Int == 7 && rejected["column"] as? Int == 5)
            #expect(rejected["message"] as? String == "f.yaml:7:5: bad" && rejected["file"] as? String == "f.yaml")

            let system = try jsonObject(request(service.port, "GET", "/system").body)
            let configuration = try #require(system["configuration"] as? [String: Any])
            let last = try #require(configuration["lastReading"] as? [String: Any])
            #expect(last["result"] as? String == "rejected" && last["trigger"] as? String == "file")
            #expect((last["error"] as? [String: Any])?["line"] as? Int == 7)
            #expect((configuration["readings"] as? [String: Int]) == ["applied": 1, "rejected": 1])
            #expect(configuration["stateDirectory"] is NSNull)
            let metrics = String(decoding: try request(service.port, "GET", "/metrics").body, as: UTF8.self)
            #expect(metrics.contains(#"frametap_config_reloads_total{result="rejected"} 1"#))
            #expect(metrics.contains("frametap_config_last_reload_successful 0"))
        }
    }
}

/// `GET /events` read line by line on a raw connection: each event's data as JSON.
private final class EventReader {
    private let client: RawClient
    private var buffer: [UInt8] = []

    init(port: UInt16) throws {
        client = try RawClient(port: port)
        try client.send(Array("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        // Reading from here on: the stream's opening comment has come.
        let opening = Array(": frametap events".utf8)
        buffer = client.read(until: { find(opening, in: $0) != nil })
        guard let start = find(opening, in: buffer) else { throw EventStreamEnded() }
        buffer.removeFirst(start + opening.count)
    }

    /// The data of the next event of `kind`.
    func next(named kind: String) throws -> [String: Any] {
        while true {
            if let end = find(Array("\n\n".utf8), in: buffer) {
                let block = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 2)
                let lines = block.split(separator: "\n")
                guard lines.contains("event: \(kind)"), let data = lines.first(where: { $0.hasPrefix("data: ") }) else { continue }
                return try jsonObject(Array(data.dropFirst(6).utf8))
            }
            guard let more = client.read(timeout: .seconds(10)), !more.isEmpty else { throw EventStreamEnded() }
            buffer += more
        }
    }

    /// No event within 10 s, or the stream closed.
    struct EventStreamEnded: Error {}
}
