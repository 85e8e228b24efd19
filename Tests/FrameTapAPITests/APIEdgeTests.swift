import Foundation
import HTTPServer
import Sessions
import TestSupport
import Testing

@testable import FrameTapAPI

/// D4 and D7 through the real API: the path is routed as sent, and `.`/`..` are no session ids.
@Suite(.serialized, .timeLimit(.minutes(10))) struct APIEdgeTests {
    @Test func anEncodedNULOrSlashNeverReachesAnotherRoute() throws {
        try withService { service in
            _ = try pushFixture(service.port, session: "victim")
            // The last: the session's own name with a letter encoded, which a proxy hashing the raw
            // path would send to another instance.
            for target in ["/sessions/victim%00/frames.mjpeg", "/sessions/victim%2Fframe%2Flatest.jpg", "/sessions/vict%69m"] {
                let response = try request(service.port, "DELETE", target)
                #expect(response.problem == Problem(400, "invalid_request_target"), "\(target)")
            }
            let picture = try request(service.port, "GET", "/sessions/base%2Fframe%2Flatest.jpg")
            #expect(picture.status == 400)
            #expect(service.registry.find(try SessionID("victim")) != nil, "the session survived")
        }
    }

    @Test(arguments: [
        ("PUT", "/sessions/."), ("DELETE", "/sessions/.."), ("GET", "/sessions/%2e%2e/frame/latest.jpg"),
        ("POST", "/sessions/./nalus"),
    ])
    func dotIDsAreInvalidSessionIDs(method: String, target: String) throws {
        try withService { service in
            let response = try request(service.port, method, target, body: method == "GET" || method == "DELETE" ? nil : [])
            #expect(response.problem == Problem(400, "invalid_session_id"), "\(method) \(target)")
            #expect(service.registry.count == 0)
        }
    }
}
