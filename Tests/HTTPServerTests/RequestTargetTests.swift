import Testing

@testable import HTTPServer

/// One target that must be refused, with the rule and the byte it must name.
struct Rejection: Sendable, CustomTestStringConvertible {
    let target: [UInt8]
    let reason: RequestTargetError.Reason
    let offset: Int

    init(_ target: String, _ reason: RequestTargetError.Reason, at offset: Int) {
        self.init(bytes: Array(target.utf8), reason, at: offset)
    }

    init(bytes: [UInt8], _ reason: RequestTargetError.Reason, at offset: Int) {
        self.target = bytes
        self.reason = reason
        self.offset = offset
    }

    var testDescription: String {
        let text = String(decoding: target.prefix(60), as: UTF8.self).debugDescription
        return "\(text) -> \(reason.rawValue)@\(offset)"
    }
}

@Suite(.timeLimit(.minutes(10))) struct RequestTargetTests {
    static func pairs(_ query: QueryParameters) -> [[String]] { query.pairs.map { [$0.name, $0.value] } }

    @Test func segmentsAndQueryOfAPictureRequest() throws {
        let target = try RequestTarget.parse("/sessions/cam%201/frame/latest.jpg?width=160&wait=5000")
        #expect(target.segments == ["sessions", "cam 1", "frame", "latest.jpg"])
        #expect(Self.pairs(target.query) == [["width", "160"], ["wait", "5000"]])
        #expect(target.query["width"] == "160")
        #expect(target.query["height"] == nil)
        #expect(target.path == "/sessions/cam 1/frame/latest.jpg")
    }

    @Test func rootHasNoSegments() throws {
        #expect(try RequestTarget.parse("/").segments == [])
        #expect(try RequestTarget.parse("/").query.isEmpty)
        let rootWithQuery = try RequestTarget.parse("/?a=1")
        #expect(rootWithQuery.segments == [])
        #expect(Self.pairs(rootWithQuery.query) == [["a", "1"]])
        #expect(try RequestTarget.parse("/healthz").segments == ["healthz"])
    }

    @Test(arguments: [
        ("/sessions/caf%C3%A9", "café"),
        ("/sessions/caf%c3%a9", "café"),
        ("/sessions/café", "café"),
        ("/sessions/%E6%9D%B1%E4%BA%AC", "東京"),
        ("/sessions/%F0%9F%93%B7cam", "📷cam"),
        ("/sessions/a+b", "a+b"),
        ("/sessions/a%2Bb", "a+b"),
        ("/sessions/a%20b", "a b"),
        ("/sessions/a:b@c!$&'()*,;=", "a:b@c!$&'()*,;="),
        ("/sessions/...", "..."),
        ("/sessions/.hidden", ".hidden"),
        ("/sessions/a.", "a."),
        ("/sessions/%3F%23", "?#"),
        ("/sessions/%25", "%"),
    ])
    func segmentsAreDecodedOneByOne(_ target: String, _ id: String) throws {
        #expect(try RequestTarget.parse(target).segments == ["sessions", id])
    }

    @Test func queryDecoding() throws {
        let query = try RequestTarget.parse(
            "/x?label=a+b&plus=%2B&w=1&w=2&flush&&t=a=b&next=%2Fsessions%2Fx&q=a?b&amp=%26%3D&name%20x=%C3%A9&"
        ).query
        #expect(
            Self.pairs(query) == [
                ["label", "a b"], ["plus", "+"], ["w", "1"], ["w", "2"], ["flush", ""], ["t", "a=b"],
                ["next", "/sessions/x"], ["q", "a?b"], ["amp", "&="], ["name x", "é"],
            ])
        // First wins, as with libmicrohttpd's arguments.
        #expect(query["w"] == "1")
        #expect(query.values("w") == ["1", "2"])
        #expect(try RequestTarget.parse("/x?").query.isEmpty)
        #expect(Self.pairs(try RequestTarget.parse("/x?=v&+=%20").query) == [["", "v"], [" ", " "]])
    }

    @Test func bytesAndStringGiveTheSameResult() throws {
        let text = "/sessions/caf%C3%A9/frame/latest.jpg?width=160&label=a+b"
        let fromString = try RequestTarget.parse(text)
        let fromBytes = try RequestTarget.parse(Array(text.utf8))
        // A collection without contiguous storage takes the copying path.
        let fromLazyBytes = try RequestTarget.parse(text.utf8.lazy.map { $0 })
        for other in [fromBytes, fromLazyBytes] {
            #expect(other.segments == fromString.segments)
            #expect(Self.pairs(other.query) == Self.pairs(fromString.query))
        }
    }

    @Test func longestAcceptedTarget() throws {
        let longest = "/" + String(repeating: "a", count: RequestTarget.maxLength - 1)
        #expect(try RequestTarget.parse(longest).segments.first?.utf8.count == RequestTarget.maxLength - 1)
    }

    static let rejections: [Rejection] = [
        // The two bugs this parser exists for.
        Rejection("/sessions/base%2Fframe%2Flatest.jpg", .encodedSlash, at: 14),
        Rejection("/sessions/victim%00/frames.mjpeg", .controlCharacter, at: 16),
        Rejection("/sessions/a%2fb", .encodedSlash, at: 11),
        Rejection(bytes: Array("/sessions/a".utf8) + [0] + Array("b".utf8), .controlCharacter, at: 11),
        Rejection("/sessions/a\tb", .controlCharacter, at: 11),
        Rejection("/sessions/a\u{7F}", .controlCharacter, at: 11),
        Rejection("/sessions/a%7f", .controlCharacter, at: 11),
        Rejection("/sessions/a%1F", .controlCharacter, at: 11),
        Rejection("/x?a=%00", .controlCharacter, at: 5),
        Rejection("/x?a%0A=1", .controlCharacter, at: 4),
        Rejection("/x?a=b\r", .controlCharacter, at: 6),
        Rejection("/sessions/%zz", .invalidPercentEncoding, at: 10),
        Rejection("/sessions/%4", .invalidPercentEncoding, at: 10),
        Rejection("/sessions/%4/x", .invalidPercentEncoding, at: 10),
        Rejection("/sessions/%", .invalidPercentEncoding, at: 10),
        Rejection("/sessions/%g0", .invalidPercentEncoding, at: 10),
        Rejection("/x?a=%2", .invalidPercentEncoding, at: 5),
        Rejection("/x?a%=1", .invalidPercentEncoding, at: 4),
        Rejection("/sessions/%C3", .invalidUTF8, at: 10),
        Rejection("/sessions/a%FFb", .invalidUTF8, at: 10),
        // Overlong "/" and a UTF-16 surrogate: both classic ways around a "/" or UTF-8 check.
        Rejection("/sessions/%C0%AF", .invalidUTF8, at: 10),
        Rejection("/sessions/%ED%A0%80", .invalidUTF8, at: 10),
        Rejection(bytes: Array("/sessions/a".utf8) + [0xFF], .invalidUTF8, at: 10),
        Rejection("/x?n=%C3&m=1", .invalidUTF8, at: 5),
        Rejection("", .notOriginForm, at: 0),
        Rejection("*", .notOriginForm, at: 0),
        Rejection("sessions/x", .notOriginForm, at: 0),
        Rejection("http://localhost:8080/sessions", .notOriginForm, at: 0),
        Rejection("localhost:8080", .notOriginForm, at: 0),
        Rejection("?a=1", .notOriginForm, at: 0),
        Rejection("/a#b", .fragment, at: 2),
        Rejection("/#", .fragment, at: 1),
        Rejection("/a?b=1#c", .fragment, at: 6),
        Rejection("//", .emptySegment, at: 1),
        Rejection("/sessions//frames.mjpeg", .emptySegment, at: 10),
        Rejection("/sessions/", .emptySegment, at: 10),
        Rejection("/sessions/x/?a=1", .emptySegment, at: 12),
        Rejection("/sessions/./x", .dotSegment, at: 10),
        Rejection("/sessions/../x", .dotSegment, at: 10),
        Rejection("/..", .dotSegment, at: 1),
        Rejection("/.", .dotSegment, at: 1),
        Rejection("/%2E%2E/x", .dotSegment, at: 1),
        Rejection("/x/%2e", .dotSegment, at: 3),
        Rejection("/x/.%2E", .dotSegment, at: 3),
        // One session under two raw names: a proxy hashing the raw path would split them.
        Rejection("/sessions/cam%41", .encodedUnreserved, at: 13),
        Rejection("/sessions/cam%61/frame/latest.jpg", .encodedUnreserved, at: 13),
        Rejection("/sessions/a%7Eb", .encodedUnreserved, at: 11),
        Rejection("/sessions/x%2D1%5F2", .encodedUnreserved, at: 11),
        Rejection("/sessions/a%2Eb", .encodedUnreserved, at: 11),
        Rejection("/sessions/%30/frames.mjpeg", .encodedUnreserved, at: 10),
        Rejection("/" + String(repeating: "a", count: RequestTarget.maxLength), .tooLong, at: RequestTarget.maxLength),
    ]

    @Test(arguments: rejections)
    func rejected(_ rejection: Rejection) {
        #expect(throws: RequestTargetError(rejection.reason, at: rejection.offset)) {
            try RequestTarget.parse(rejection.target)
        }
    }

    @Test func everyReasonIsCoveredAndExplained() {
        #expect(Set(Self.rejections.map(\.reason)) == Set(RequestTargetError.Reason.allCases))
        for rejection in Self.rejections {
            do throws(RequestTargetError) {
                _ = try RequestTarget.parse(rejection.target)
                Issue.record("\(rejection) was accepted")
            } catch {
                #expect(error.code == "invalid_request_target")
                #expect(error.description.hasPrefix("invalid_request_target (\(rejection.reason.rawValue)): "))
                if rejection.reason != .notOriginForm {
                    #expect(error.message.contains(String(rejection.offset)), "\(error.message)")
                }
            }
        }
    }
}
