/// Who publishes a session's stream, when its pushes name their publisher (`?publisher=`). A
/// stream has one byte order, and pushes one request per picture never overlap for `session_busy`
/// to catch a second client: so while a named publisher's push runs, and for `leaseSeconds` after its
/// last one ended, anyone else's push is refused (`session_busy`) unless it takes the session
/// over. Pushes that name no publisher hold nothing; a flush ends the hold.
struct PublisherHold: Sendable {
    static var leaseSeconds: UInt64 { 10 }

    /// The publisher holding the stream, while it does.
    private var name: String?
    /// Pushes of `name` begun and not ended.
    private var running = 0
    /// When the last of them ended (the service clock's uptime).
    private var lastEnded: UInt64 = 0

    /// The publisher that holds the stream at `now`, if one does.
    func holder(at now: UInt64) -> String? {
        guard let name, running > 0 || now &- lastEnded < Self.leaseSeconds * 1_000_000_000 else { return nil }
        return name
    }

    /// Why a push by `publisher` may not begin at `now` (unless it takes the session over).
    func refusal(of publisher: String?, at now: UInt64) -> SessionError? {
        guard let name = holder(at: now), publisher != name else { return nil }
        let since = now &- lastEnded
        let when = running > 0 ? "is pushing to it" : "pushed to it \(since / 1_000_000) ms ago"
        // Between its pushes, the hold ends by itself when the lease runs out.
        let left = running > 0 ? nil : Int((Self.leaseSeconds * 1_000_000_000 - since + 999_999_999) / 1_000_000_000)
        return SessionError(
            .sessionBusy,
            "publisher '\(name)' \(when), and holds its stream until \(Self.leaseSeconds) s after its last push "
                + "or a flush; push to another session, or take this one over with takeover=true",
            retryAfterSeconds: left, facts: ["heldBy": .text("publisher"), "publisher": .text(name)])
    }

    mutating func pushBegan(by publisher: String?) {
        if publisher != name {
            name = publisher
            running = 0
        }
        if publisher != nil { running += 1 }
    }

    mutating func pushEnded(by publisher: String?, flushed: Bool, at now: UInt64) {
        guard let name, publisher == name else { return }
        running -= 1
        lastEnded = now
        if flushed, running == 0 { self.name = nil }
    }
}
