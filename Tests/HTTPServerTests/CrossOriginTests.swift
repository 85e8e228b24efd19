@testable import HTTPServer
import Testing
import TestSupport

/// CORS: the origins a server lets read its answers, its preflights, and what others get.
@Suite(.serialized, .timeLimit(.minutes(10))) struct CrossOriginTests {
    static let dashboard = "https://dash.example.com"

    @Test func originsAreParsedAsBrowsersSerializeThem() throws {
        let policy = try CrossOriginPolicy(parsing: " https://Dash.Example.com:443/ , http://localhost:3000")
        #expect(policy.origins == ["https://dash.example.com", "http://localhost:3000"] && !policy.allowsEveryOrigin)
        #expect(try CrossOriginPolicy(parsing: "*").allowsEveryOrigin)
        let subdomains = try CrossOriginPolicy(parsing: "https://*.example.com, http://*.lan:8080")
        for (origin, allowed) in [
            ("https://a.example.com", true), ("https://b.c.example.com", true), ("https://example.com", false),
            ("http://a.example.com", false), ("https://a.example.com:8443", false), ("https://evilexample.com", false),
            ("http://cam.lan:8080", true), ("http://cam.lan", false),
            ("https://evil.com/.example.com", false), ("https://evil.com?.example.com", false),
            ("https://u@a.example.com", false), ("https://evil.com#.example.com", false), ("https://my_app.example.com", true),
        ] {
            let request = HTTPRequest(method: .get, segments: [], headers: ["Origin": origin], version: "HTTP/1.1")
            #expect((subdomains.allowedOrigin(of: request) != nil) == allowed, "\(origin)")
        }
        for bad in ["", "dash.example.com", "ftp://x", "https://x/path", "https://user@x", "https://", "https://*", "https://a.*.com"] {
            #expect(throws: CrossOriginPolicyError.self, "\(bad)") { try CrossOriginPolicy(parsing: bad) }
        }
    }

    @Test func anAllowedOriginReadsAnswersOthersDoNot() throws {
        try withServer(
            configure: { $0.crossOrigin = try? CrossOriginPolicy(parsing: Self.dashboard) },
            authorizer: AuthTests.authorizer, routes: AuthTests.routes
        ) { (server: HTTPServer) throws in
            let allowed = try request(
                server.port, "GET", "/secret", headers: [("Origin", Self.dashboard), ("Authorization", "Bearer s3cret")])
            #expect(allowed.status == 200)
            #expect(allowed.headers["Access-Control-Allow-Origin"] == Self.dashboard)
            #expect(allowed.headers["Access-Control-Expose-Headers"] == "*" && allowed.headers["Vary"] == "Origin")
            // A problem answer too: the page can read why.
            let refused = try request(server.port, "GET", "/secret", headers: [("Origin", Self.dashboard)])
            #expect(refused.status == 401 && refused.headers["Access-Control-Allow-Origin"] == Self.dashboard)
            let other = try request(server.port, "GET", "/healthz", headers: [("Origin", "https://elsewhere.example")])
            #expect(other.status == 200 && other.headers["Access-Control-Allow-Origin"] == nil)
            #expect(try request(server.port, "GET", "/healthz").headers["Access-Control-Allow-Origin"] == nil)
        }
    }

    /// A preflight carries no token: it is answered before access control, for the route's methods.
    @Test func aPreflightIsAnsweredBeforeAccessControl() throws {
        try withServer(
            configure: { $0.crossOrigin = try? CrossOriginPolicy(parsing: Self.dashboard) },
            authorizer: AuthTests.authorizer, routes: AuthTests.routes
        ) { (server: HTTPServer) throws in
            let preflight = try request(
                server.port, "OPTIONS", "/secret",
                headers: [
                    ("Origin", Self.dashboard), ("Access-Control-Request-Method", "POST"),
                    ("Access-Control-Request-Headers", "authorization, content-type"),
                ])
            #expect(preflight.status == 204)
            #expect(preflight.headers["Access-Control-Allow-Origin"] == Self.dashboard)
            #expect(preflight.headers["Access-Control-Allow-Methods"] == "GET, HEAD, POST")
            #expect(preflight.headers["Access-Control-Allow-Headers"] == "authorization, content-type")
            #expect(preflight.headers["Access-Control-Max-Age"] == "600")
            // Only a list of header names is echoed back.
            let odd = try request(
                server.port, "OPTIONS", "/secret",
                headers: [
                    ("Origin", Self.dashboard), ("Access-Control-Request-Method", "GET"),
                    ("Access-Control-Request-Headers", "authorization; <script>"),
                ])
            #expect(odd.status == 204 && odd.headers["Access-Control-Allow-Headers"] == nil)
            // Another origin, a method the route lacks, or no CORS at all: as before, 405.
            let stranger = try request(
                server.port, "OPTIONS", "/secret",
                headers: [("Origin", "https://elsewhere.example"), ("Access-Control-Request-Method", "GET")])
            #expect(stranger.problem == Problem(405, "method_not_allowed"))
            let unknownMethod = try request(
                server.port, "OPTIONS", "/secret", headers: [("Origin", Self.dashboard), ("Access-Control-Request-Method", "PATCH")])
            #expect(unknownMethod.status == 405)
            #expect(try request(server.port, "OPTIONS", "/nowhere", headers: [("Origin", Self.dashboard)]).status == 404)
        }
        try withServer(authorizer: AuthTests.authorizer, routes: AuthTests.routes) { (server: HTTPServer) throws in
            let preflight = try request(
                server.port, "OPTIONS", "/secret", headers: [("Origin", Self.dashboard), ("Access-Control-Request-Method", "GET")])
            #expect(preflight.status == 405 && preflight.headers["Access-Control-Allow-Origin"] == nil)
        }
    }

    @Test func everyOriginIsAStar() throws {
        try withServer(
            configure: { $0.crossOrigin = try? CrossOriginPolicy(parsing: "*") }, routes: AuthTests.routes
        ) { (server: HTTPServer) throws in
            // A sandboxed frame's origin is `null`: any origin's, so it may preflight too.
            let sandboxed = try request(
                server.port, "OPTIONS", "/secret", headers: [("Origin", "null"), ("Access-Control-Request-Method", "GET")])
            #expect(sandboxed.status == 204 && sandboxed.headers["Access-Control-Allow-Origin"] == "*")
            let answer = try request(server.port, "GET", "/healthz", headers: [("Origin", "https://any.example")])
            #expect(answer.headers["Access-Control-Allow-Origin"] == "*" && answer.headers["Vary"] == nil)
            // A plain request too: a cache that keeps its answer serves a page from it.
            #expect(try request(server.port, "GET", "/healthz").headers["Access-Control-Allow-Origin"] == "*")
        }
    }
}
