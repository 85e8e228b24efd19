/// What holds a session's stream against other clients' pushes beyond the push under way
/// (`PublisherHold`): a named publisher, or a client that took the session over naming none.
public enum StreamHold: Sendable, Equatable {
    case publisher(String)
    case takeover

    /// As status and `session_busy` name it (`heldBy`).
    public var kind: String {
        switch self {
        case .publisher: "publisher"
        case .takeover: "takeover"
        }
    }

    /// The publisher's name, when a named one holds the stream.
    public var publisher: String? {
        guard case .publisher(let name) = self else { return nil }
        return name
    }
}

/// Who publishes a session's stream, when its pushes name their publisher (`?publisher=`). A
/// stream has one byte order, and pushes one request per picture never overlap for `session_busy`
/// to catch a second client: so while a named publisher's push runs, and for `leaseSeconds` after
/// its last one ended, anyone else's push is refused (`session_busy`) unless it takes the
/// session over. A push that takes the session over without a name holds it the same way against
/// named publishers (the one it displaced among them), not against other pushes without a name.
/// Other pushes without a name hold nothing; a flush ends the hold.
struct PublisherHold: Sendable {
    static var leaseSeconds: UInt64 { 10 }

    private var holder: StreamHold?
    /// The holder's pushes begun and not ended.
    private var running: Set<ObjectIdentifier> = []
    /// When the last of them ended (the service clock's uptime).
    private var lastEnded: UInt64 = 0

    /// Whether a hold lasts at `now`, named or not.
    func holds(at now: UInt64) -> Bool { hold(at: now) != nil }

    /// What holds the stream at `now`, if anything does.
    func hold(at now: UInt64) -> StreamHold? {
        guard let holder, !running.isEmpty || now &- lastEnded < Self.leaseSeconds * 1_000_000_000 else { return nil }
        return holder
    }

    /// Why a push by `publisher` (nil: none named) may not begin at `now`, unless it takes the
    /// session over.
    func refusal(of publisher: String?, at now: UInt64) -> SessionError? {
        guard let holder = hold(at: now) else { return nil }
        let since = now &- lastEnded
        let when = !running.isEmpty ? "is pushing to it" : "pushed to it \(since / 1_000_000) ms ago"
        // Between its pushes, the hold ends by itself when the lease runs out (`hold` says it
        // has not yet).
        let left = !running.isEmpty ? nil : Int((Self.leaseSeconds * 1_000_000_000 - since + 999_999_999) / 1_000_000_000)
        let until = "holds its stream until \(Self.leaseSeconds) s after its last push or a flush; push to another session, "
            + "or take this one over with takeover=true"
        switch holder {
        case .publisher(let name) where publisher != name:
            return SessionError(
                .sessionBusy, "publisher '\(name)' \(when), and \(until)", retryAfterSeconds: left,
                facts: ["heldBy": .text(holder.kind), "publisher": .text(name)])
        case .takeover where publisher != nil:
            return SessionError(
                .sessionBusy, "a client that took this session over (takeover=true, naming no publisher) \(when), and \(until)",
                retryAfterSeconds: left, facts: ["heldBy": .text(holder.kind)])
        default:
            return nil
        }
    }

    /// A push by `publisher` (`takingOver`: with `takeover=true`) began as `job`.
    mutating func pushBegan(by publisher: String?, job: ObjectIdentifier, takingOver: Bool) {
        let next: StreamHold? =
            if let publisher {
                .publisher(publisher)
            } else if takingOver || holder == .takeover {
                .takeover
            } else {
                nil
            }
        if next != holder {
            holder = next
            running = []
        }
        if holder != nil { running.insert(job) }
    }

    /// The push `job` ended; `flushed`: it ended the stream.
    mutating func pushEnded(job: ObjectIdentifier, flushed: Bool, at now: UInt64) {
        guard running.remove(job) != nil else { return }
        lastEnded = now
        if flushed, running.isEmpty { holder = nil }
    }
}
