import TestSupport
import Foundation
import HTTPServer
import Testing

@Suite(.serialized, .timeLimit(.minutes(10))) struct RoutingAndProblemTests {
    @Test func unknownPathIsNotFoundProblem() throws {
        try withServer(
            configure: { $0.problemTypePrefix = "urn:example:problem:" },
            routes: { $0.get("/healthz", access: .open) { _ in .text("ok") } }
        ) { (server: HTTPServer) throws in
            let response = try request(server.port, "GET", "/nope")
            #expect(response.status == 404)
            #expect(response.headers["Content-Type"] == "application/problem+json")
            let problem = try jsonObject(response.body)
            #expect(problem["code"] as? String == "not_found")
            #expect(problem["status"] as? Int == 404)
            #expect(problem["title"] as? String == "Not Found")
            #expect(problem["type"] as? String == "urn:example:problem:not_found")
            #expect(problem["detail"] is String)
        }
    }

    /// `::` is every address, IPv4 clients' too; `::1` is this machine's IPv6 loopback only.
    @Test func everyIPv6AddressTakesIPv4Clients() throws {
        try withServer(
            configure: { $0.host = "::" },
            routes: { $0.get("/healthz", access: .open) { _ in .text("ok") } }
        ) { (server: HTTPServer) throws in
            #expect(try request(server.port, "GET", "/healthz").status == 200)
        }
        try withServer(
            configure: { $0.host = "::1" },
            routes: { $0.get("/healthz", access: .open) { _ in .text("ok") } }
        ) { (server: HTTPServer) throws in
            #expect(throws: (any Error).self) { _ = try request(server.port, "GET", "/healthz") }
        }
    }

    /// The server names no problem types of its own: without a prefix, `type` is left out.
    @Test func aProblemWithoutATypePrefixHasNoType() throws {
        try withServer(routes: { $0.get("/healthz", access: .open) { _ in .text("ok") } }) { (server: HTTPServer) throws in
            let problem = try jsonObject(try request(server.port, "GET", "/nope").body)
            #expect(problem["code"] as? String == "not_found")
            #expect(problem["type"] == nil)
        }
    }

    @Test func wrongMethodIsMethodNotAllowedWithAllow() throws {
        try withServer(routes: { router in
            router.get("/sessions/{id}", access: .open) { _ in .text("one") }
            router.delete("/sessions/{id}", access: .open) { _ in HTTPResponse(status: .noContent) }
        }) { (server: HTTPServer) throws in
            let response = try request(server.port, "PUT", "/sessions/abc", body: [])
            #expect(response.problem == Problem(405, "method_not_allowed"))
            #expect(response.headers["Allow"] == "GET, HEAD, DELETE")
        }
    }

    @Test func pathParametersQueryAndCaseInsensitiveHeaders() throws {
        try withServer(routes: { router in
            router.get("/sessions/{id}/frames/{n}", access: .open) { request in
                let text = [
                    request.pathParameters["id"] ?? "-", request.pathParameters["n"] ?? "-",
                    request.query["w"] ?? "-", request.query["label"] ?? "-", request.headers["x-custom"] ?? "-",
                    request.route ?? "-",
                ].joined(separator: "|")
                return .text(text)
            }
        }) { (server: HTTPServer) throws in
            let response = try request(
                server.port, "GET", "/sessions/s1/frames/7?w=640&label=a%20b+c", headers: [("X-CUSTOM", "v")])
            #expect(response.status == 200)
            #expect(response.text == "s1|7|640|a b c|v|/sessions/{id}/frames/{n}")
        }
    }

    @Test func thrownHTTPErrorBecomesProblemWithExtraHeaders() throws {
        try withServer(routes: { router in
            router.get("/busy", access: .open) { (_: HTTPRequest) throws(HTTPError) -> HTTPResponse in
                throw HTTPError(
                    status: .tooManyRequests, code: "too_many_sessions", detail: "Limit \"4\" reached.",
                    headers: ["Retry-After": "3"], extensions: ["limit": "4"])
            }
        }) { (server: HTTPServer) throws in
            let response = try request(server.port, "GET", "/busy")
            #expect(response.status == 429)
            #expect(response.headers["Retry-After"] == "3")
            let problem = try jsonObject(response.body)
            #expect(problem["code"] as? String == "too_many_sessions")
            #expect(problem["detail"] as? String == "Limit \"4\" reached.")
            #expect(problem["limit"] as? String == "4")
        }
    }

    @Test func bufferedBodyReachesHandlerAndKeepAliveWorks() throws {
        try withServer(routes: { router in
            router.post("/echo", access: .open, maxBodyBytes: 1024) { request in
                HTTPResponse(status: .ok, headers: ["Content-Type": "application/octet-stream"], body: .bytes(request.body))
            }
            router.get("/healthz", access: .open) { _ in .text("ok") }
        }) { (server: HTTPServer) throws in
            // Two requests on one connection: answers queued at the final call keep it open.
            let client = try RawClient(port: server.port)
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
            let first = try parseResponse(client.read(until: { find(Array("hello".utf8), in: $0) != nil }))
            #expect(first.status == 200)
            #expect(first.text == "hello")
            try client.send("GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let second = try parseResponse(client.readToEnd())
            #expect(second.status == 404)
        }
    }

    @Test func requestObserverSeesRoutePatternAndStatus() throws {
        let records = Recorder<RequestRecord>()
        try withServer(
            configure: { $0.requestObserver = { records.record($0) } },
            routes: { $0.get("/items/{id}", access: .open) { _ in .text("x") } }
        ) { (server: HTTPServer) throws in
            _ = try request(server.port, "GET", "/items/1")
            _ = try request(server.port, "GET", "/missing")
            #expect(eventually { records.all.count == 2 })
            let byRoute = records.all.map { "\($0.route ?? "nil") \($0.status?.code ?? 0) \($0.outcome)" }.sorted()
            #expect(byRoute == ["/items/{id} 200 completed", "nil 404 completed"])
        }
    }

    /// A request libmicrohttpd refuses before its head reaches the access handler (a
    /// Content-Length it cannot parse) is recorded without a method: none was read.
    @Test func aRequestRefusedBeforeItsHeadWasReadHasNoMethod() throws {
        let records = Recorder<RequestRecord>()
        try withServer(
            configure: { $0.requestObserver = { records.record($0) } },
            routes: { $0.get("/items/{id}", access: .open) { _ in .text("x") } }
        ) { (server: HTTPServer) throws in
            let client = try RawClient(port: server.port)
            try client.send("POST /items/1 HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n")
            _ = client.read(timeout: .seconds(3))
            _ = try request(server.port, "GET", "/items/1")
            #expect(eventually { records.all.count == 2 })
            let methods = records.all.map { "\($0.method.map { "\($0)" } ?? "nil") \($0.status?.code ?? 0)" }.sorted()
            #expect(methods == ["GET 200", "nil 400"])
        }
    }

    @Test func multipartFramingIsStrict() {
        let header = Multipart.partHeader(
            boundary: "b0", contentType: "image/jpeg", contentLength: 3, headers: [("X-Part", "9")])
        #expect(String(decoding: header, as: UTF8.self) == "--b0\r\nContent-Type: image/jpeg\r\nContent-Length: 3\r\nX-Part: 9\r\n\r\n")
        #expect(String(decoding: Multipart.closingDelimiter(boundary: "b0"), as: UTF8.self) == "--b0--\r\n")
        #expect(Multipart.mixedReplaceContentType(boundary: "b0") == "multipart/x-mixed-replace;boundary=b0")
        let boundary = Multipart.makeBoundary(prefix: "b0")
        #expect(boundary.hasPrefix("b0") && boundary.count == 18)
        #expect(boundary.allSatisfy { $0.isLetter || $0.isNumber })
        let part = Multipart.part(boundary: "b0", contentType: "image/jpeg", payload: SharedBytes([1, 2, 3]))
        #expect(part.byteCount == header.count - "X-Part: 9\r\n".utf8.count + 3 + 2)
    }

    @Test func serverSentEventBlocks() {
        func text(_ fields: [ServerSentEvents.Field]) -> String { String(decoding: ServerSentEvents.block(fields), as: UTF8.self) }
        #expect(text([.id(7), .event("upload.ended"), .data(Array(#"{"a":1}"#.utf8))]) == "id: 7\nevent: upload.ended\ndata: {\"a\":1}\n\n")
        #expect(text([.retry(milliseconds: 2000), .comment("hello")]) == "retry: 2000\n: hello\n\n")
        // A line break in the data would end the field: each line gets its own data: line.
        #expect(text([.data(Array("one\ntwo".utf8))]) == "data: one\ndata: two\n\n")
        #expect(text([]) == "\n")
    }
}

/// One shared token for `.token` routes, in the header or (GET, HEAD) the query: what an
/// application's authorizer does with the access value each route was registered with.
struct SharedTokenAuthorizer: RequestAuthorizer {
    let token: String

    func authorize(_ request: HTTPRequest, access: TestAccess) -> HTTPError? {
        guard access == .token else { return nil }
        switch PresentedToken(request) {
        case .none, .otherScheme: return .unauthorized(invalidToken: false, realm: "test-realm")
        case .malformed: return .unauthorized(invalidToken: true, realm: "test-realm")
        case .ambiguous: return .ambiguousToken(realm: "test-realm")
        case .bearer(let presented): return presented == token ? nil : .unauthorized(invalidToken: true, realm: "test-realm")
        }
    }
}

/// Lets everything through and records what it was asked about.
struct RecordingAuthorizer: RequestAuthorizer {
    let asked = Recorder<String>()

    func authorize(_ request: HTTPRequest, access: TestAccess) -> HTTPError? {
        asked.record("\(request.method) \(request.route ?? "-") \(access)")
        return nil
    }
}

@Suite(.serialized, .timeLimit(.minutes(10))) struct AuthTests {
    static func routes(_ router: inout Router<TestAccess>) {
        router.get("/healthz", access: .open) { _ in .text("ok") }
        router.get("/secret", access: .token) { _ in .text("secret") }
        router.post("/secret", access: .token) { _ in .text("posted") }
    }

    static let authorizer = SharedTokenAuthorizer(token: "s3cret")

    /// Each routed request, HEAD on a GET route included, is put to the authorizer with its
    /// route's access value; an unrouted one never is.
    @Test func theAuthorizerGetsEachRoutesAccessValue() throws {
        let recording = RecordingAuthorizer()
        try withServer(authorizer: recording, routes: Self.routes) { (server: HTTPServer) throws in
            #expect(try request(server.port, "GET", "/healthz").status == 200)
            #expect(try request(server.port, "HEAD", "/secret").status == 200)
            #expect(try request(server.port, "POST", "/secret", body: []).status == 200)
            #expect(try request(server.port, "GET", "/nowhere").status == 404)
        }
        #expect(recording.asked.all == ["GET /healthz open", "HEAD /secret token", "POST /secret token"])
    }

    @Test func missingTokenIs401WithChallenge() throws {
        try withServer(authorizer: Self.authorizer, routes: Self.routes) { (server: HTTPServer) throws in
            let response = try request(server.port, "GET", "/secret")
            #expect(response.problem == Problem(401, "unauthorized"))
            #expect(response.headers["WWW-Authenticate"] == #"Bearer realm="test-realm""#)
        }
    }

    @Test func wrongTokenIs401InvalidToken() throws {
        try withServer(authorizer: Self.authorizer, routes: Self.routes) { (server: HTTPServer) throws in
            let response = try request(server.port, "GET", "/secret", headers: [("Authorization", "Bearer s3creT")])
            #expect(response.status == 401)
            #expect(response.headers["WWW-Authenticate"]?.contains(#"error="invalid_token""#) == true)
        }
    }

    @Test func rightTokenHeaderOrQueryPasses() throws {
        try withServer(authorizer: Self.authorizer, routes: Self.routes) { (server: HTTPServer) throws in
            #expect(try request(server.port, "GET", "/secret", headers: [("Authorization", "bearer s3cret")]).text == "secret")
            #expect(try request(server.port, "GET", "/secret?access_token=s3cret").text == "secret")
            // The query form is for <img src>; it is not accepted for state-changing methods.
            #expect(try request(server.port, "POST", "/secret?access_token=s3cret", body: []).status == 401)
            #expect(
                try request(server.port, "POST", "/secret", headers: [("Authorization", "Bearer s3cret")], body: []).text
                    == "posted")
        }
    }

    @Test func exemptRouteNeedsNoToken() throws {
        try withServer(authorizer: Self.authorizer, routes: Self.routes) { (server: HTTPServer) throws in
            #expect(try request(server.port, "GET", "/healthz").status == 200)
        }
    }

    @Test func uploadWithoutTokenIsRefusedBeforeTheBody() throws {
        try withServer(authorizer: Self.authorizer, routes: Self.routes) { (server: HTTPServer) throws in
            let response = try request(server.port, "POST", "/secret", body: Array(repeating: 7, count: 100_000))
            #expect(response.status == 401)
            #expect(response.headers["Connection"]?.lowercased() == "close")
        }
    }
}
