import TestSupport
import Foundation
@testable import FrameTapAPI
import HTTPServer
import Testing
import Timekeeping

/// GET / and /console/{file}: the embedded web console.
@Suite(.serialized, .timeLimit(.minutes(10))) struct ConsoleRouteTests {
    @Test func thePageIsServedWithItsTypeAndSecurityHeaders() throws {
        try withService { service in
            let page = try request(service.port, "GET", "/")
            #expect(page.status == 200)
            #expect(page.headers["Content-Type"] == "text/html; charset=utf-8")
            #expect(page.text.hasPrefix("<!doctype html>"))
            #expect(page.headers["X-Content-Type-Options"] == "nosniff")
            #expect(page.headers["Cache-Control"] == "no-cache")
            let policy = try #require(page.headers["Content-Security-Policy"])
            #expect(policy.contains("default-src 'self'"))
            #expect(policy.contains("img-src 'self' blob: data:"))
            #expect(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"))
            let etag = try #require(page.headers["ETag"])
            #expect(etag.hasPrefix("\"") && etag.hasSuffix("\""), "a strong ETag")
            let head = try request(service.port, "HEAD", "/")
            #expect(head.status == 200)
            #expect(head.headers["ETag"] == etag)
        }
    }

    @Test func everyEmbeddedFileIsServedAsItIsWithItsType() throws {
        let expectedTypes = [
            "html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
            "svg": "image/svg+xml",
        ]
        #expect(ConsoleFiles.base64.count >= 5)
        try withService { service in
            for (name, base64) in ConsoleFiles.base64 {
                let answer = try request(service.port, "GET", "/console/\(name)")
                #expect(answer.status == 200, "\(name)")
                #expect(answer.body == Array(Data(base64Encoded: base64) ?? Data()), "\(name)")
                let ext = String(name.split(separator: ".").last ?? "")
                #expect(answer.headers["Content-Type"] == expectedTypes[ext], "\(name)")
                #expect(answer.headers["Content-Security-Policy"] == Console.contentSecurityPolicy, "\(name)")
                #expect(answer.headers["X-Content-Type-Options"] == "nosniff", "\(name)")
            }
        }
    }

    @Test func anUnchangedFileIsA304() throws {
        try withService { service in
            let first = try request(service.port, "GET", "/console/app.js")
            let etag = try #require(first.headers["ETag"])
            for header in [etag, "W/\(etag)", "\"other\", \(etag)", "*"] {
                let again = try request(service.port, "GET", "/console/app.js", headers: [("If-None-Match", header)])
                #expect(again.status == 304, "If-None-Match: \(header)")
                #expect(again.body.isEmpty)
                #expect(again.headers["ETag"] == etag)
                #expect(again.headers["Cache-Control"] == "no-cache")
            }
            let changed = try request(service.port, "GET", "/console/app.js", headers: [("If-None-Match", "\"stale\"")])
            #expect(changed.status == 200)
            // Each file has its own tag.
            let style = try request(service.port, "GET", "/console/style.css")
            #expect(style.headers["ETag"] != etag)
        }
    }

    @Test func anUnknownFileIsA404Problem() throws {
        try withService { service in
            for path in ["/console/nope.js", "/console/app.js/x", "/console/index.html.bak"] {
                let answer = try request(service.port, "GET", path)
                #expect(answer.status == 404, "\(path)")
                #expect(answer.headers["Content-Type"] == "application/problem+json", "\(path)")
            }
            // Odd targets never reach a file: a 404, or a 400 from a stricter request parser.
            for path in ["/console/", "/console/..%2Fopenapi.yaml", "/console/%2e%2e"] {
                let answer = try request(service.port, "GET", path)
                #expect([400, 404].contains(answer.status), "\(path)")
                #expect(answer.headers["Content-Type"] == "application/problem+json", "\(path)")
            }
        }
    }

    @Test func theConsoleNeedsNoTokenButTheAPIDoes() throws {
        try withService(access: try AccessControl(adminToken: "secret", jwtSecret: nil, jwks: nil, clock: SystemClock())) { service in
            let page = try request(service.port, "GET", "/")
            let script = try request(service.port, "GET", "/console/app.js")
            let sessions = try request(service.port, "GET", "/sessions")
            #expect(page.status == 200)
            #expect(script.status == 200)
            #expect(sessions.status == 401)
        }
    }

    /// What the page and its modules load must be embedded, and nothing may need 'unsafe-inline'.
    @Test func everythingThePageLoadsIsEmbeddedAndNothingIsInline() throws {
        let files = Dictionary(
            uniqueKeysWithValues: ConsoleFiles.base64.map { ($0.name, String(decoding: Data(base64Encoded: $0.base64) ?? Data(), as: UTF8.self)) })
        let page = try #require(files["index.html"])
        let referenced = matches(#"(?:src|href)="/console/([^"]+)""#, in: page)
        #expect(referenced.contains("app.js") && referenced.contains("style.css"))
        for name in referenced { #expect(files[name] != nil, "index.html loads /console/\(name)") }
        #expect(matches(#"<script(?![^>]*\bsrc=)[^>]*>"#, in: page).isEmpty, "no inline script")
        #expect(matches(#"\sstyle="#, in: page).isEmpty, "no style attribute")
        #expect(matches(#"\son[a-z]+="#, in: page).isEmpty, "no inline event handler")
        for (name, text) in files where name.hasSuffix(".js") {
            for imported in matches(#"from '\./([^']+)'"#, in: text) {
                #expect(files[imported] != nil, "\(name) imports ./\(imported)")
            }
            #expect(!text.contains(".innerHTML") && !text.contains("insertAdjacentHTML"), "\(name): text from the server never becomes markup")
            #expect(!text.contains("setAttribute('style'"), "\(name): inline styles are blocked by the CSP")
        }
    }

    private func matches(_ pattern: String, in text: String) -> [String] {
        guard let regex = try? NSRegularExpression(pattern: pattern) else { return [] }
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { match in
            let range = match.numberOfRanges > 1 ? match.range(at: 1) : match.range
            return Range(range, in: text).map { String(text[$0]) } ?? ""
        }
    }
}
