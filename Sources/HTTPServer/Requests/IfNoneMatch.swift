/// An `If-None-Match` header (RFC 9110 §13.1.2), parsed once for every route that answers 304.
public struct IfNoneMatch: Sendable, Equatable {
    /// The entity tags listed, quoted as sent. `W/` is dropped: If-None-Match compares weakly.
    public let entityTags: [String]
    /// `*`: any current representation matches.
    public let matchesAny: Bool

    public init(_ header: String) {
        var tags: [String] = []
        var matchesAny = false
        for item in header.split(separator: ",") {
            var tag = item.trimmingSpaces()
            if tag == "*" {
                matchesAny = true
                continue
            }
            if tag.hasPrefix("W/") { tag.removeFirst(2) }
            if !tag.isEmpty { tags.append(tag) }
        }
        entityTags = tags
        self.matchesAny = matchesAny
    }

    /// Whether the client has the representation tagged `etag` (quoted), by the weak comparison.
    public func matches(_ etag: String) -> Bool {
        matchesAny || entityTags.contains(etag)
    }
}

extension HTTPRequest {
    /// The request's If-None-Match, nil without one.
    public var ifNoneMatch: IfNoneMatch? { headers["If-None-Match"].map(IfNoneMatch.init) }
}
