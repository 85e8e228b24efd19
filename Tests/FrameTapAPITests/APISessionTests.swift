import TestSupport
import Foundation
@testable import FrameTapAPI
import HTTPServer
import Sessions
import Testing
import Timekeeping

/// Session CRUD, health, metrics, auth, routing errors.
@Suite(.serialized, .timeLimit(.minutes(10))) struct APISessionTests {
    @Test func healthAndMetrics() throws {
        try withService { service in
            let health = try request(service.port, "GET", "/healthz")
            #expect(health.status == 200)
            #expect(health.headers["Content-Type"] == "application/json")
            #expect(try jsonObject(health.body)["status"] as? String == "ok")
            try pushFixture(service.port, session: "met", "baseline_176x144.264")
            _ = try request(service.port, "GET", "/sessions/met/frame/latest.jpg")
            _ = try request(service.port, "GET", "/sessions/nobody")
            #expect(try request(service.port, "DELETE", "/sessions").status == 405)
            #expect(try request(service.port, "GET", "/no/such/route").status == 404)
            let metrics = try request(service.port, "GET", "/metrics")
            #expect(metrics.status == 200)
            #expect(metrics.headers["Content-Type"]?.hasPrefix("text/plain") == true)
            let text = metrics.text
            #expect(metricValue(text, "frametap_sessions_active") == 1)
            #expect(metricValue(text, "frametap_frames_decoded_total") == 20)
            #expect(metricValue(text, "frametap_picture_encodes_total") == 1)
            #expect(
                metricValue(text, "frametap_http_requests_total", labels: [#"route="/sessions/{id}/nalus""#, #"status="200""#]) == 1)
            #expect(
                metricValue(
                    text, "frametap_http_requests_total", labels: [#"route="/sessions/{id}/frame/latest.jpg""#, #"status="200""#])
                    == 1)
            #expect(metricValue(text, "frametap_http_requests_total", labels: [#"route="/sessions/{id}""#, #"status="404""#]) == 1)
            // A known path with the wrong method is counted under its route; a path no route has, as unmatched.
            #expect(metricValue(text, "frametap_http_requests_total", labels: [#"route="/sessions""#, #"status="405""#]) == 1)
            #expect(metricValue(text, "frametap_http_requests_total", labels: [#"route="unmatched""#, #"status="404""#]) == 1)
        }
    }

    @Test func statusListAndDelete() throws {
        try withService { service in
            let seq = try pushFixture(service.port, session: "s1", "baseline_176x144.264")
            #expect(try request(service.port, "PUT", "/sessions/s0").status == 201)
            let status = try jsonObject(request(service.port, "GET", "/sessions/s1").body)
            #expect(status["id"] as? String == "s1")
            #expect(["software", "vaapi"].contains(status["backend"] as? String ?? ""))
            #expect(status["decode"] as? String == "all")
            #expect(status["createdAt"] is String && status["lastActivityAt"] is String)
            #expect((status["latestFrame"] as? [String: Any])?["seq"] as? Int == seq)
            #expect((status["latestFrame"] as? [String: Any])?["width"] as? Int == 176)
            #expect((status["format"] as? [String: Any])?["profile"] as? String == "Constrained Baseline")
            #expect(status["lastError"] is NSNull)
            #expect(status["subscribers"] as? Int == 0)

            let list = try jsonObject(request(service.port, "GET", "/sessions").body)
            let ids = (list["sessions"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
            #expect(ids == ["s0", "s1"])

            #expect(try request(service.port, "DELETE", "/sessions/s1").status == 204)
            for (method, path) in [
                ("GET", "/sessions/s1"), ("DELETE", "/sessions/s1"), ("GET", "/sessions/s1/frame/latest.jpg"),
                ("GET", "/sessions/s1/frames.mjpeg"),
            ] {
                let response = try request(service.port, method, path)
                #expect(response.problem == Problem(404, "session_not_found"), "\(method) \(path)")
            }
            #expect(service.registry.count == 1)
            #expect(try request(service.port, "GET", "/sessions/bad%21id").status == 400)
        }
    }

    @Test func putConfiguresAndValidates() throws {
        try withService { service in
            let created = try request(service.port, "PUT", "/sessions/cfg", body: Array(#"{"decode":"keyframes","quality":50}"#.utf8))
            #expect(created.status == 201)
            let json = try jsonObject(created.body)
            #expect(json["decode"] as? String == "keyframes")
            #expect(json["quality"] as? Int == 50)
            let changed = try request(service.port, "PUT", "/sessions/cfg", body: Array(#"{"decode":"all","backend":"software"}"#.utf8))
            #expect(changed.status == 200)
            #expect(try jsonObject(changed.body)["decode"] as? String == "all")
            #expect(try jsonObject(changed.body)["quality"] as? Int == 50)
            for body in [#"{"quality":0}"#, #"{"decode":"some"}"#, #"{"backend":"gpu"}"#, #"{"colour":1}"#, "[1]", "{not json"] {
                let response = try request(service.port, "PUT", "/sessions/cfg", body: Array(body.utf8))
                #expect(response.problem == Problem(400, "invalid_parameter"), "\(body)")
            }
            // The session quality applies to pictures without ?quality (ETag names it).
            try pushFixture(service.port, session: "cfg", "baseline_176x144.264")
            let picture = try request(service.port, "GET", "/sessions/cfg/frame/latest.jpg")
            #expect(picture.headers["ETag"]?.contains("-q50@") == true)
        }
    }

    @Test func keyframesOnlyDecodesOnlyKeyframes() throws {
        try withService { service in
            _ = try request(service.port, "PUT", "/sessions/kf", body: Array(#"{"decode":"keyframes"}"#.utf8))
            let json = try jsonObject(post(service.port, "/sessions/kf/nalus?flush=true", Fixtures.bytes("repeat_headers_176x144.264")).body)
            #expect(json["frames"] as? Int == 3)
        }
    }

    /// A keyframe has the number `decode: all` gives it (the skipped pictures keep their
    /// places), and the bytes; a skipped picture's number is a gap the 404 explains.
    @Test func keyframesKeepTheirNumbers() throws {
        try withService { service in
            let bytes = try Fixtures.bytes("repeat_headers_176x144.264")
            _ = try request(service.port, "PUT", "/sessions/kf", body: Array(#"{"decode":"keyframes"}"#.utf8))
            let answer = try post(service.port, "/sessions/kf/nalus?flush=true&format=yuv", bytes, headers: [("Accept", "multipart/mixed")])
            let parts = try parseMultipart(answer.body, boundary: boundary(of: answer.headers["Content-Type"])).parts
            #expect(parts.map { $0.headers["X-Frame-Seq"] } == ["1", "9", "17"])
            _ = try post(service.port, "/sessions/all/nalus?flush=true", bytes)
            for number in [1, 9, 17] {
                let keyframe = try request(service.port, "GET", "/sessions/kf/frame/at.yuv?seq=\(number)")
                let full = try request(service.port, "GET", "/sessions/all/frame/at.yuv?seq=\(number)")
                #expect(keyframe.status == 200 && keyframe.body == full.body, "picture \(number)")
            }
            let skipped = try request(service.port, "GET", "/sessions/kf/frame/at.jpg?seq=10")
            #expect(skipped.problem == Problem(404, "not_in_history"))
            #expect(skipped.text.contains("no picture has the number 10"), "\(skipped.text)")
        }
    }

    @Test func idleSessionsAreRemoved() throws {
        try withService(sessions: { $0.idleTimeout = .milliseconds(500) }) { (service: FrameTapService) throws in
            #expect(try request(service.port, "PUT", "/sessions/idle").status == 201)
            let removed = eventually(timeout: .seconds(5)) { service.registry.count == 0 }
            #expect(removed)
            #expect(try request(service.port, "GET", "/sessions/idle").status == 404)
        }
    }

    @Test func routingErrors() throws {
        try withService { service in
            let notAllowed = try request(service.port, "PATCH", "/sessions/x")
            #expect(notAllowed.problem == Problem(405, "method_not_allowed"))
            #expect(notAllowed.headers["Allow"] == "GET, HEAD, PUT, DELETE")
            let postOnly = try request(service.port, "GET", "/sessions/x/nalus")
            #expect(postOnly.status == 405)
            #expect(postOnly.headers["Allow"] == "POST")
            let unknown = try request(service.port, "GET", "/sessions/x/frame/latest.png")
            #expect(unknown.problem == Problem(404, "not_found"))
            #expect(unknown.headers["Content-Type"] == "application/problem+json")
        }
    }

    @Test func bearerTokenAuth() throws {
        try withService(access: try AccessControl(adminToken: "s3cret", jwtSecret: nil, jwks: nil, clock: SystemClock())) { service in
            #expect(try request(service.port, "GET", "/healthz").status == 200)
            let missing = try request(service.port, "GET", "/sessions")
            #expect(missing.problem == Problem(401, "unauthorized"))
            #expect(missing.headers["WWW-Authenticate"]?.hasPrefix("Bearer") == true)
            let wrong = try request(service.port, "GET", "/sessions", headers: [("Authorization", "Bearer nope")])
            #expect(wrong.status == 401)
            #expect(wrong.headers["WWW-Authenticate"]?.contains("invalid_token") == true)
            #expect(try request(service.port, "GET", "/sessions", headers: [("Authorization", "Bearer s3cret")]).status == 200)
            #expect(try request(service.port, "GET", "/metrics?access_token=s3cret").status == 200)
            // The query token is for GET only (an <img src>), never for writes.
            let bytes = try Fixtures.bytes("baseline_176x144.264")
            #expect(try post(service.port, "/sessions/a/nalus?access_token=s3cret", bytes).status == 401)
            #expect(service.registry.count == 0)
            let pushed = try post(
                service.port, "/sessions/a/nalus?flush=true", bytes, headers: [("Authorization", "Bearer s3cret")])
            #expect(pushed.status == 200)
            #expect(try request(service.port, "GET", "/sessions/a/frame/latest.jpg?access_token=s3cret").status == 200)
            #expect(try request(service.port, "DELETE", "/sessions/a").status == 401)
        }
    }

    /// Without a token nothing asks for one.
    @Test func noTokenNoChallenge() throws {
        try withService { service in
            let response = try request(service.port, "GET", "/sessions")
            #expect(response.status == 200)
            #expect(response.headers["WWW-Authenticate"] == nil)
        }
    }
}
