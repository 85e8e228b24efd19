import Foundation
@testable import FrameTapAPI
import Testing
import TestSupport

/// GET /events over HTTP: headers at once, events as they happen, a session filter, resumes.
@Suite(.timeLimit(.minutes(10))) struct EventStreamTests {
    private func open(_ port: UInt16, _ target: String = "/events", lastEventID: String? = nil) throws -> RawClient {
        let client = try RawClient(port: port)
        let resume = lastEventID.map { "Last-Event-ID: \($0)\r\n" } ?? ""
        try client.send("GET \(target) HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\(resume)\r\n")
        return client
    }

    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    /// The event-stream text of a chunked body read so far (headers, if any, left out), so that
    /// a line split between two chunks reads whole.
    private func events(_ raw: [UInt8]) -> String {
        var bytes = raw[...]
        if let end = find([13, 10, 13, 10], in: raw) { bytes = raw[(end + 4)...] }
        var body: [UInt8] = []
        while let lineEnd = find([13, 10], in: Array(bytes)), let size = Int(text(Array(bytes.prefix(lineEnd))), radix: 16) {
            let start = bytes.startIndex + lineEnd + 2
            guard size > 0, start + size <= bytes.endIndex else { break }
            body += bytes[start..<(start + size)]
            bytes = bytes[(start + size)...].dropFirst(2)
        }
        return text(body)
    }

    @Test func eventsArriveAsTheyHappenForTheSessionAskedFor() throws {
        let stream = try Fixtures.bytes("baseline_176x144.264")
        try withService(sessions: { $0.eventKeepaliveInterval = .milliseconds(500) }) { service in
            let port = service.port
            let all = try open(port)
            let one = try open(port, "/events?session=cam2")
            // The headers come at once, before any event.
            for client in [all, one] {
                let head = text(client.read(until: { find(Array(": frametap events\n\n".utf8), in: $0) != nil }, timeout: .seconds(5)))
                #expect(head.hasPrefix("HTTP/1.1 200"))
                #expect(head.lowercased().contains("content-type: text/event-stream"))
                #expect(head.contains("retry: 2000"))
            }
            #expect(try post(port, "/sessions/cam1/nalus?flush=true", stream).status == 200)
            #expect(try post(port, "/sessions/cam2/nalus?flush=true", stream).status == 200)
            #expect(try request(port, "DELETE", "/sessions/cam2").status == 204)

            let everything = text(all.read(until: { text($0).contains("session.removed") }))
            for kind in ["session.created", "upload.started", "format.changed", "picture.first", "upload.ended"] {
                #expect(everything.components(separatedBy: "event: \(kind)\n").count - 1 == 2, "\(kind) once per session")
            }
            let filtered = events(one.read(until: { text($0).contains("session.removed") }))
            #expect(!filtered.contains("\"session\":\"cam1\""))
            #expect(filtered.contains("\"session\":\"cam2\""))

            // Resuming after the first event of cam2 replays what came after it.
            let ids = filtered.split(separator: "\n").filter { $0.hasPrefix("id: ") }.map { String($0.dropFirst(4)) }
            try #require(ids.count >= 2, "\(filtered)")
            let resumed = try open(port, "/events?session=cam2", lastEventID: ids[0])
            let replay = text(resumed.read(until: { text($0).contains("session.removed") }))
            #expect(replay.contains("id: \(ids[1])\n"))
            #expect(!replay.contains("id: \(ids[0])\n"))
            // An id from before a restart is news to this process: resync.
            let stale = try open(port, lastEventID: "1")
            #expect(text(stale.read(until: { text($0).contains("event: resync") })).contains("\"reason\":\"history_lost\""))
            // A quiet stream gets keepalive comments.
            #expect(text(resumed.read(until: { text($0).contains(": keepalive\n") })).contains(": keepalive"))
            for client in [all, one, resumed, stale] { client.close() }
            // Readers that left are forgotten, at the latest when the next keepalive finds them gone.
            #expect(eventually(timeout: .seconds(10)) { service.registry.events.waitingReaders == 0 })
        }
    }

    @Test func badFiltersAndResumesAreProblems() throws {
        try withService { service in
            #expect(try request(service.port, "GET", "/events?session=no%20spaces").problem == Problem(400, "invalid_session_id"))
            let badID = try request(service.port, "GET", "/events", headers: [("Last-Event-ID", "yesterday")])
            #expect(badID.problem == Problem(400, "invalid_parameter"))
        }
    }

    @Test func statusCarriesInputRates() throws {
        try withService { service in
            _ = try post(service.port, "/sessions/r/nalus?flush=true", try Fixtures.bytes("baseline_176x144.264"))
            let status = try jsonObject(try request(service.port, "GET", "/sessions/r").body)
            let rates = try #require(status["rates"] as? [String: Any])
            #expect((rates["picturesPerSecond"] as? Double ?? 0) > 0)
            #expect((rates["bitsPerSecond"] as? Double ?? 0) > 0)
            #expect((rates["windowSeconds"] as? Double ?? 0) >= 1)
        }
    }
}
