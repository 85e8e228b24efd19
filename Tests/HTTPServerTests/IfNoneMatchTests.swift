import HTTPServer
import Testing

/// If-None-Match as every 304-answering route reads it: a list of tags, weak prefixes dropped,
/// or `*`.
@Suite(.timeLimit(.minutes(10))) struct IfNoneMatchTests {
    @Test func listsTheTagsQuotedWithoutWeakPrefixes() {
        let header = IfNoneMatch(#" "17-w160" ,W/"18",,\#t"abc" "#)
        #expect(header.entityTags == [#""17-w160""#, #""18""#, #""abc""#])
        #expect(!header.matchesAny)
        #expect(header.matches(#""18""#))
        #expect(!header.matches(#""19""#))
        #expect(!header.matches("18"), "an unquoted tag is another tag")
    }

    @Test func aStarMatchesAnything() {
        let header = IfNoneMatch(#"*"#)
        #expect(header.matchesAny && header.entityTags.isEmpty)
        #expect(header.matches(#""anything""#))
        #expect(IfNoneMatch(#""1", *"#).matches(#""2""#))
    }

    @Test func blankOrEmptyListsMatchNothing() {
        for value in ["", " ", ",", "\t, ,"] {
            let header = IfNoneMatch(value)
            #expect(header.entityTags.isEmpty && !header.matchesAny, "\(value)")
            #expect(!header.matches(#""1""#))
        }
    }

    @Test func aRequestWithoutTheHeaderHasNone() throws {
        #expect(try HTTPRequest(method: .get, target: "/").ifNoneMatch == nil)
        let request = try HTTPRequest(method: .get, target: "/", headers: HTTPHeaders([("If-None-Match", #"W/"7""#)]))
        #expect(request.ifNoneMatch == IfNoneMatch(#""7""#))
    }
}
