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
                    "cudaAvailable", "hardware", "devices", "engines", "limits", "activeSessions", "decoderMemory", "historyMemory",
                    "configuration",
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

    /// The engines `auto` places sessions on: here the CPU alone (a pool of its own, so no
    /// other test's sessions count), with its configured capacity and the pushed session's load.
    @Test func enginesShowCapacityAndLoad() throws {
        let pool = HardwareDevicePool(clock: SystemClock())
        try withService(
            sessions: {
                $0.backend = .software
                $0.engineCapacities = EngineCapacityOverrides([.cpu: [.h264: 500]])
            }, devicePool: pool
        ) { service in
            try pushFixture(service.port, session: "eng", "baseline_176x144.264")
            let json = try jsonObject(request(service.port, "GET", "/system").body)
            let engines = try #require(json["engines"] as? [[String: Any]])
            let cpu = try #require(engines.first)
            #expect(
                Set(cpu.keys) == ["engine", "kind", "capacityFps", "capacitySource", "loadFps", "utilization", "sessions", "movedAway"])
            #expect(cpu["engine"] as? String == "cpu" && cpu["kind"] as? String == "cpu")
            let capacity = try #require(cpu["capacityFps"] as? [String: Any])
            #expect(capacity["h264"] as? Double == 500)
            #expect(capacity["h265"] is Double)
            #expect(cpu["capacitySource"] as? String == "configured")
            #expect(cpu["sessions"] as? Int == 1)
            // 176x144 at its SPS's 25 fps (or as measured): about 0.3 of a 1080p stream.
            let load = try #require(cpu["loadFps"] as? Double)
            #expect(load > 0.05 && load < 2)
            #expect(abs((cpu["utilization"] as? Double ?? 0) - load / 500) < 1e-9)

            let text = try request(service.port, "GET", "/metrics").text
            #expect(metricValue(text, "frametap_engine_capacity_fps", labels: ["engine=\"cpu\"", "codec=\"h264\""]) == 500)
            #expect(metricValue(text, "frametap_engine_sessions", labels: ["engine=\"cpu\""]) == 1)
            #expect(abs(metricValue(text, "frametap_engine_load_fps", labels: ["engine=\"cpu\""]) - load) < 1e-6)

            #expect(try request(service.port, "DELETE", "/sessions/eng").status == 204)
            // The session's decoder closes on its own queue after the answer.
            #expect(
                eventually {
                    let after = try? jsonObject(request(service.port, "GET", "/system").body)["engines"] as? [[String: Any]]
                    return after?.first?["sessions"] as? Int == 0
                }, "a closed session's load leaves its engine")
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
