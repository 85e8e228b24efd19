import Foundation
@testable import FrameTapAPI
import HTTPServer
import JWTKit
import Logging
import Sessions
import SessionsTestSupport
import Testing
import TestSupport
import Timekeeping

/// Access control as the server applies it: each route's need, the 401 and 403 answers, and
/// tokens in the header or, for a browser's `<img>`, in `access_token`.
@Suite(.timeLimit(.minutes(10))) struct RouteAccessTests {
    /// Claims valid from now for an hour (AccessControlTests' fixtures use a fixed clock).
    static func token(scope: String, sessions: [String]? = nil, expiresIn: TimeInterval = 3600) async throws -> String {
        var claims = AccessControlTests.Claims(scope: scope, sessions: sessions)
        claims.exp = ExpirationClaim(value: Date() + expiresIn)
        return try await AccessControlTests.hs256(claims)
    }

    static func bearer(_ token: String) -> [(String, String)] { [("Authorization", "Bearer \(token)")] }

    static func code(_ response: TestResponse) -> String? { (try? jsonObject(response.body))?["code"] as? String }

    @Test func eachTokenDoesWhatItsScopeAndSessionsSay() async throws {
        let pusher = try await Self.token(scope: "push", sessions: ["cam*"])
        let viewer = try await Self.token(scope: "view", sessions: ["cam1"])
        let expired = try await Self.token(scope: "admin", expiresIn: -3600)
        let stream = try Fixtures.bytes("baseline_176x144.264")
        let access = try AccessControl(adminToken: "the-admin-token", jwtSecret: AccessControlTests.secret, jwks: nil, clock: SystemClock())
        try withService(access: access) { service in
            let port = service.port
            // Open without a token: health and the console.
            #expect(try request(port, "GET", "/healthz").status == 200)
            #expect(try request(port, "GET", "/").status == 200)

            // A push token pushes to its sessions only, and cannot read them.
            #expect(try post(port, "/sessions/cam1/nalus?flush=true", stream, headers: Self.bearer(pusher)).status == 200)
            let elsewhere = try post(port, "/sessions/lobby/nalus", stream, headers: Self.bearer(pusher))
            #expect(elsewhere.status == 403)
            #expect(Self.code(elsewhere) == "forbidden")
            #expect(elsewhere.headers["WWW-Authenticate"]?.contains("insufficient_scope") == true)
            #expect(try request(port, "GET", "/sessions/cam1/frame/latest.jpg", headers: Self.bearer(pusher)).status == 403)

            // A view token reads its session, also from a query (an <img> cannot send a header).
            let picture = try request(port, "GET", "/sessions/cam1/frame/latest.jpg?access_token=\(viewer)")
            #expect(picture.status == 200)
            #expect(jpegSize(picture.body) != nil)
            #expect(try request(port, "GET", "/sessions/cam1", headers: Self.bearer(viewer)).status == 200)
            #expect(try request(port, "GET", "/sessions/cam2/frame/latest.jpg", headers: Self.bearer(viewer)).status == 403)
            #expect(try post(port, "/sessions/cam1/nalus", stream, headers: Self.bearer(viewer)).status == 403)
            // Configuring or deleting a session, the list, /metrics and /system are admin's.
            for (method, target) in [("GET", "/sessions"), ("GET", "/metrics"), ("GET", "/system"), ("DELETE", "/sessions/cam1")] {
                #expect(try request(port, method, target, headers: Self.bearer(viewer)).status == 403, "\(method) \(target)")
            }
            // A query token is not taken on a push: it would land in access logs of a write.
            #expect(try post(port, "/sessions/cam1/nalus?access_token=\(pusher)", stream).status == 401)

            // No token, a wrong one, an expired one: 401 with the RFC 6750 challenge.
            let missing = try request(port, "GET", "/sessions")
            #expect(missing.status == 401)
            #expect(missing.headers["WWW-Authenticate"] == #"Bearer realm="frametap""#)
            for token in ["nope", expired] {
                let refused = try request(port, "GET", "/sessions", headers: Self.bearer(token))
                #expect(refused.status == 401)
                #expect(Self.code(refused) == "unauthorized")
                #expect(refused.headers["WWW-Authenticate"]?.contains("invalid_token") == true)
            }
            // Basic credentials are no bearer token: alone, a 401 that names them and claims no
            // bad token; beside ?access_token= (a tool that always sends its user and password),
            // ignored.
            let basic = try request(port, "GET", "/sessions", headers: [("Authorization", "Basic eDp5")])
            #expect(basic.status == 401 && basic.text.contains("'Basic' credentials"), "\(basic.text)")
            #expect(basic.headers["WWW-Authenticate"]?.contains("error=") == false)
            let basicAndQuery = try request(
                port, "GET", "/sessions?access_token=the-admin-token", headers: [("Authorization", "Basic eDp5")])
            #expect(basicAndQuery.status == 200)
            // A tab between scheme and token is a bearer credential too: with a query token it is
            // two, and it is never shown back.
            let tabbed = try request(
                port, "GET", "/sessions?access_token=the-admin-token", headers: [("Authorization", "Bearer\tthe-admin-token")])
            #expect(tabbed.status == 400 && !tabbed.text.contains("the-admin-token"), "\(tabbed.text)")
            #expect(try request(port, "GET", "/sessions", headers: [("Authorization", "Bearer\tthe-admin-token")]).status == 200)
            let glued = try request(port, "GET", "/sessions", headers: [("Authorization", "Bearer:the-admin-token")])
            #expect(glued.status == 401 && !glued.text.contains("the-admin-token"), "\(glued.text)")
            let emptyBearer = try request(port, "GET", "/sessions", headers: [("Authorization", "Bearer")])
            #expect(emptyBearer.status == 401 && emptyBearer.headers["WWW-Authenticate"]?.contains("invalid_token") == true)

            // Two tokens are refused whatever their order: which one counted would depend on it.
            for (target, headers) in [
                ("/sessions/cam1?access_token=garbage&access_token=\(viewer)", [(String, String)]()),
                ("/sessions/cam1?access_token=\(viewer)&access_token=garbage", []),
                ("/sessions", Self.bearer(viewer) + Self.bearer("the-admin-token")),
                ("/sessions/cam1?access_token=\(viewer)", Self.bearer("garbage")),
            ] {
                let twice = try request(port, "GET", target, headers: headers)
                #expect(twice.status == 400 && Self.code(twice) == "invalid_parameter", "\(target)")
                #expect(twice.headers["WWW-Authenticate"]?.contains("invalid_request") == true)
            }

            // The admin token does everything.
            for target in ["/sessions", "/metrics", "/system", "/sessions/cam1/frame/latest.jpg"] {
                #expect(try request(port, "GET", target, headers: Self.bearer("the-admin-token")).status == 200, "\(target)")
            }
            #expect(try request(port, "DELETE", "/sessions/cam1", headers: Self.bearer("the-admin-token")).status == 204)
        }
    }

    static func api() -> FrameTapAPI {
        let metrics = FrameTapMetrics()
        let logger = Logger(label: "route-access-tests")
        return FrameTapAPI(
            registry: SessionRegistry(
                configuration: ServerConfiguration(), services: SessionServices.forTests(), metrics: metrics, logger: logger),
            metrics: metrics, hardware: WireFormatTests.hardware, logger: logger)
    }

    /// One tenant's pushes cannot take every session from the others: the sessions a scoped
    /// token's pushes make (shared by tokens for the same sessions) stop at
    /// `--max-sessions-per-token`; another tenant, and the admin, still make theirs.
    @Test func oneTokensPushesMakeAtMostItsShareOfSessions() async throws {
        let first = try await Self.token(scope: "push", sessions: ["t1-*"])
        let sameSessions = try await Self.token(scope: "push", sessions: ["t1-*"], expiresIn: 7200)
        let other = try await Self.token(scope: "push", sessions: ["t2-*"])
        let stream = try Fixtures.bytes("baseline_176x144.264")
        let access = try AccessControl(adminToken: "the-admin-token", jwtSecret: AccessControlTests.secret, jwks: nil, clock: SystemClock())
        try withService(sessions: { $0.maxSessions = 6; $0.maxSessionsPerToken = 2 }, access: access) { service in
            let port = service.port
            #expect(try post(port, "/sessions/t1-a/nalus", [], headers: Self.bearer(first)).status == 200)
            #expect(try post(port, "/sessions/t1-b/nalus", [], headers: Self.bearer(sameSessions)).status == 200)
            let third = try post(port, "/sessions/t1-c/nalus", [], headers: Self.bearer(first))
            #expect(third.problem == Problem(503, "too_many_sessions"))
            #expect((try jsonObject(third.body))["limit"] as? String == "token")
            #expect(third.headers["Retry-After"] != nil)
            // Its own sessions still take its pushes; the others still make theirs.
            #expect(try post(port, "/sessions/t1-a/nalus?flush=true", stream, headers: Self.bearer(first)).status == 200)
            #expect(try post(port, "/sessions/t2-a/nalus", [], headers: Self.bearer(other)).status == 200)
            #expect(try post(port, "/sessions/t1-c/nalus", [], headers: Self.bearer("the-admin-token")).status == 200)
            // One gone, one more.
            #expect(try request(port, "DELETE", "/sessions/t1-b", headers: Self.bearer("the-admin-token")).status == 204)
            #expect(try post(port, "/sessions/t1-d/nalus", [], headers: Self.bearer(sameSessions)).status == 200)
        }
    }

    /// Every route the API registers, with the permission it was registered with. A new route
    /// fails this until its permission is written here too, where a reviewer sees it.
    @Test func everyRouteDeclaresItsPermission() throws {
        let declared = Self.api().router().routes.map { ("\($0.method) \($0.pattern)", $0.access) }
        let expected: [String: RoutePermission] = [
            "GET /healthz": .public,
            "GET /": .public,
            "GET /console/{file}": .public,
            "GET /metrics": .admin,
            "GET /system": .admin,
            "GET /sessions": .admin,
            "PUT /sessions/{id}": .admin,
            "DELETE /sessions/{id}": .admin,
            "POST /sessions/{id}/source/retry": .admin,
            "GET /sessions/{id}": .view(.path("id")),
            "GET /sessions/{id}/frame/latest.jpg": .view(.path("id")),
            "GET /sessions/{id}/frame/latest.yuv": .view(.path("id")),
            "GET /sessions/{id}/frame/latest.rgb": .view(.path("id")),
            "GET /sessions/{id}/frame/at.jpg": .view(.path("id")),
            "GET /sessions/{id}/frame/at.yuv": .view(.path("id")),
            "GET /sessions/{id}/frame/at.rgb": .view(.path("id")),
            "GET /sessions/{id}/history": .view(.path("id")),
            "GET /sessions/{id}/frames.mjpeg": .view(.path("id")),
            "POST /sessions/{id}/nalus": .push(.path("id")),
            "GET /events": .adminUnlessNarrowed(to: .query("session")),
        ]
        #expect(declared.count == expected.count, "\(declared.map(\.0))")
        for (route, permission) in declared {
            #expect(expected[route] == permission, "\(route)")
            // A session named in the path is a parameter of the route's pattern.
            if case .view(.path(let name)) = permission { #expect(route.contains("{\(name)}"), "\(route)") }
            if case .push(.path(let name)) = permission { #expect(route.contains("{\(name)}"), "\(route)") }
        }
    }

    /// Each registered route, asked by no token, a view, push and admin token of session cam1 (and
    /// view and push tokens of another session): public routes let everyone in, the others answer
    /// 401 without a token and 403 to a token whose scope or sessions do not cover the route.
    @Test func eachPermissionAnswersViewPushAndAdminTokens() async throws {
        let tokens = [
            "none": nil,
            "view": try await Self.token(scope: "view", sessions: ["cam1"]),
            "view other": try await Self.token(scope: "view", sessions: ["cam2"]),
            "push": try await Self.token(scope: "push", sessions: ["cam*"]),
            "push other": try await Self.token(scope: "push", sessions: ["lobby"]),
            "admin": try await Self.token(scope: "admin"),
            "admin token": "the-admin-token",
        ]
        let access = try AccessControl(adminToken: "the-admin-token", jwtSecret: AccessControlTests.secret, jwks: nil, clock: SystemClock())
        // 200 stands for "let through".
        func expected(_ permission: RoutePermission, narrowed: Bool) -> [String: Int] {
            switch permission {
            case .public:
                return tokens.mapValues { _ in 200 }
            case .view:
                return ["none": 401, "view": 200, "view other": 403, "push": 403, "push other": 403, "admin": 200, "admin token": 200]
            case .push:
                return ["none": 401, "view": 403, "view other": 403, "push": 200, "push other": 403, "admin": 200, "admin token": 200]
            case .admin:
                return ["none": 401, "view": 403, "view other": 403, "push": 403, "push other": 403, "admin": 200, "admin token": 200]
            case .adminUnlessNarrowed:
                return narrowed ? expected(.view(.path("id")), narrowed: false) : expected(.admin, narrowed: false)
            }
        }
        let router = Self.api().router()
        for route in router.routes {
            let narrowings = route.access == .adminUnlessNarrowed(to: .query("session")) ? ["", "?session=cam1"] : [""]
            for query in narrowings {
                var answers: [String: Int] = [:]
                for (name, token) in tokens {
                    let headers = HTTPHeaders(token.map { [("Authorization", "Bearer \($0)")] } ?? [])
                    let target = route.pattern.replacingOccurrences(of: "{id}", with: "cam1")
                        .replacingOccurrences(of: "{file}", with: "app.js") + query
                    let routed = try #require(router.routed(try HTTPRequest(method: route.method, target: target, headers: headers)))
                    #expect(routed.route.pattern == route.pattern, "\(target) is routed to its own route")
                    answers[name] = access.authorize(routed.request, access: route.access)?.status.code ?? 200
                }
                #expect(answers == expected(route.access, narrowed: !query.isEmpty), "\(route.method) \(route.pattern)\(query)")
            }
        }
    }
}
