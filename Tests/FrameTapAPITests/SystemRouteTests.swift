import TestSupport
import Decoding
import Foundation
@testable import FrameTapAPI
import HTTPServer
import Sessions
import Testing
import Timekeeping

/// GET /system and the hardware gauges in /metrics.
@Suite(.serialized, .timeLimit(.minutes(10))) struct SystemRouteTests {
    @Test func systemDescribesTheInstance() throws {
        try withService(sessions: {
            $0.maxSessions = 7
            $0.maxBodyBytes = 123_456
            $0.decoderThreads = 2
            $0.backend = .software
        }) { service in
            try pushFixture(service.port, session: "sys", "baseline_176x144.264")
            let answer = try request(service.port, "GET", "/system")
            #expect(answer.status == 200)
            #expect(answer.headers["Content-Type"] == "application/json")
            let json = try jsonObject(answer.body)
            #expect(
                Set(json.keys) == [
                    "version", "libavcodec", "backendDefault", "decoderThreads", "encoder", "vaapiAvailable",
                    "cudaAvailable", "hardware", "devices", "limits", "activeSessions", "decoderMemory", "configuration",
                ])
            let encoder = try #require(json["encoder"] as? [String: Any])
            #expect(Set(encoder.keys) == ["name", "reason"])
            #expect(["turbojpeg", "nvjpeg"].contains(encoder["name"] as? String ?? ""))
            #expect((encoder["reason"] as? String ?? "").hasPrefix("--encoder auto: "))
            #expect(json["version"] as? String == SystemInfo.version)
            #expect(json["backendDefault"] as? String == "software")
            #expect(json["decoderThreads"] as? Int == 2)
            #expect(json["activeSessions"] as? Int == 1)
            // The pushed session's decoder holds its estimate of the budget.
            let memory = try #require(json["decoderMemory"] as? [String: Any])
            #expect(memory["decoders"] as? Int == 1 && (memory["usedBytes"] as? Int ?? 0) > 0)
            #expect((memory["limitBytes"] as? Int ?? 0) >= memory["usedBytes"] as? Int ?? 0)
            let limits = try #require(json["limits"] as? [String: Any])
            #expect(limits["maxSessions"] as? Int == 7)
            #expect(limits["maxBodyBytes"] as? Int == 123_456)
            #expect(limits["maxSpoolBytes"] as? Int == 2 << 30)
            #expect(limits["maxWaitMilliseconds"] as? Int == 30_000)
            #expect(limits["sessionIdleTimeoutSeconds"] as? Double == 300)
            let hardware = try #require(json["hardware"] as? [String: Any])
            #expect(
                Set(hardware.keys) == ["libavcodecVersion", "libavcodecVAAPI", "vaapiHeaderVersion", "renderNodes", "cuda"])
            #expect(json["devices"] is [Any])
            let nodes = try #require(hardware["renderNodes"] as? [[String: Any]])
            // Whatever this machine has: each node is either usable or says why not.
            #expect(nodes.count == SystemInfo.hardware.renderNodes.count)
            for node in nodes {
                #expect((node["usable"] as? Bool == true) != (node["error"] is String))
            }
            #expect((json["vaapiAvailable"] as? Bool) == SystemInfo.hardware.renderNodes.contains { $0.usable })
        }
    }

    @Test func unlimitedBodyIsNull() throws {
        try withService { service in
            let limits = try jsonObject(request(service.port, "GET", "/system").body)["limits"] as? [String: Any]
            #expect(limits?["maxBodyBytes"] is NSNull)
        }
    }

    @Test func systemNeedsTheToken() throws {
        try withService(access: try AccessControl(adminToken: "secret", jwtSecret: nil, jwks: nil, clock: SystemClock())) { service in
            let anonymous = try request(service.port, "GET", "/system")
            #expect(anonymous.status == 401)
            let authorized = try request(service.port, "GET", "/system", headers: [("Authorization", "Bearer secret")])
            #expect(authorized.status == 200)
        }
    }

    @Test func hardwareGaugesInMetrics() throws {
        try withService { service in
            let text = try request(service.port, "GET", "/metrics").text
            #expect(text.contains("# TYPE frametap_vaapi_render_nodes gauge"))
            #expect(metricValue(text, "frametap_vaapi_render_nodes") == Double(SystemInfo.hardware.renderNodes.count))
        }
    }
}
