import Foundation
@testable import FrameTapAPI
@testable import HTTPServer
import JWTKit
import Testing
import TestSupport

/// Access control as the server applies it: each route's need, the 401 and 403 answers, and
/// tokens in the header or, for a browser's `<img>`, in `access_token`.
@Suite struct RouteAccessTests {
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
        let access = try AccessControl(adminToken: "the-admin-token", jwtSecret: AccessControlTests.secret, jwks: nil)
        try withService(http: { $0.authorizer = access }) { service in
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
            #expect(try request(port, "GET", "/sessions", headers: [("Authorization", "Basic eDp5")]).status == 401)

            // The admin token does everything.
            for target in ["/sessions", "/metrics", "/system", "/sessions/cam1/frame/latest.jpg"] {
                #expect(try request(port, "GET", target, headers: Self.bearer("the-admin-token")).status == 200, "\(target)")
            }
            #expect(try request(port, "DELETE", "/sessions/cam1", headers: Self.bearer("the-admin-token")).status == 204)
        }
    }

    @Test func routesNeedWhatTheirSessionSays() throws {
        func need(_ method: HTTPMethod, _ route: String, id: String? = nil, query: String = "") throws -> AccessControl.Need {
            var request = try HTTPRequest(method: method, target: route.replacingOccurrences(of: "{id}", with: id ?? "") + query)
            request.route = route
            if let id { request.pathParameters = ["id": id] }
            return AccessControl.need(of: request)
        }
        #expect(try need(.post, "/sessions/{id}/nalus", id: "a") == .push(session: "a"))
        #expect(try need(.get, "/sessions/{id}/frame/latest.jpg", id: "a") == .view(session: "a"))
        #expect(try need(.get, "/sessions/{id}/frames.mjpeg", id: "a") == .view(session: "a"))
        #expect(try need(.get, "/sessions/{id}", id: "a") == .view(session: "a"))
        #expect(try need(.put, "/sessions/{id}", id: "a") == .admin)
        #expect(try need(.delete, "/sessions/{id}", id: "a") == .admin)
        #expect(try need(.get, "/sessions") == .admin)
        #expect(try need(.get, "/events") == .admin)
        #expect(try need(.get, "/events", query: "?session=a") == .view(session: "a"))
    }
}
