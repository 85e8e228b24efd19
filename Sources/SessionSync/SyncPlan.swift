import Sessions

/// A FrameTap instance `frametap sync` lists and deletes on directly (found by `InstanceDiscovery`),
/// or the gateway itself when no instances are given.
public struct SyncInstance: Hashable, Sendable, CustomStringConvertible {
    public let endpoint: HTTPEndpoint
    /// True for an instance asked directly; false for the gateway, which answers `GET /sessions`
    /// from whichever instance it picks and routes a `DELETE` by the session's id.
    public let direct: Bool

    public init(_ endpoint: HTTPEndpoint, direct: Bool) {
        self.endpoint = endpoint
        self.direct = direct
    }

    public var description: String { endpoint.description }
}

/// A session as `GET /sessions` lists it, with what `frametap sync` reads of it.
public struct ListedSession: Equatable, Sendable {
    public let id: SessionID
    public let owner: SessionOwner?
    /// `createdAt` as the instance wrote it: two copies of one id on two instances differ in it.
    public let createdAt: String

    public init(id: SessionID, owner: SessionOwner?, createdAt: String) {
        self.id = id
        self.owner = owner
        self.createdAt = createdAt
    }
}

/// What one pass removes, worked out from what it declared, what its `PUT`s answered and what
/// each instance listed; a value with no I/O, so every case is tested without a network.
///
/// - A session this owner keeps that the file no longer declares is deleted wherever it is.
/// - A declared session found on more than one instance (a gateway that lost its routing table
///   sent the `PUT` to another instance than the one that pulled the camera) is deleted on every
///   instance but the one the gateway routes to now: the one whose `createdAt` the `PUT`
///   answered with. Only instances asked directly can tell; through the gateway, a `DELETE`
///   would reach the very copy the gateway keeps.
/// - Nothing else is touched: sessions of other owners or of none, a declared session whose `PUT`
///   failed this pass (its placement is unknown), a copy whose `createdAt` is the gateway's.
public struct SyncPlan: Equatable, Sendable {
    public enum Reason: String, Sendable {
        /// The file no longer declares it.
        case undeclared
        /// A second copy of a declared session, on an instance the gateway does not route it to.
        case duplicate
    }

    public struct Deletion: Equatable, Sendable {
        public let id: SessionID
        public let instance: SyncInstance
        public let reason: Reason
    }

    public let deletions: [Deletion]

    /// `placed`: each declared session whose `PUT` succeeded, with the `createdAt` of the copy
    /// that answered it. `listings`: each instance that answered `GET /sessions`, with its list.
    public init(
        owner: SessionOwner, declared: Set<SessionID>, placed: [SessionID: String],
        listings: [(instance: SyncInstance, sessions: [ListedSession])]
    ) {
        var deletions: [Deletion] = []
        var seen: Set<Pair> = []
        for (instance, sessions) in listings {
            for session in sessions where session.owner == owner {
                let reason: Reason
                if !declared.contains(session.id) {
                    reason = .undeclared
                } else if instance.direct, let routed = placed[session.id], routed != session.createdAt,
                    Self.isListed(session.id, createdAt: routed, in: listings)
                {
                    reason = .duplicate
                } else {
                    continue
                }
                // The gateway is listed once per pass; the same copy is deleted once.
                guard seen.insert(Pair(id: session.id, instance: instance)).inserted else { continue }
                deletions.append(Deletion(id: session.id, instance: instance, reason: reason))
            }
        }
        self.deletions = deletions
    }

    /// Whether the copy the gateway answered with was seen on an instance asked directly: only
    /// then is another copy surely a stray. When the instance holding it did not answer this
    /// pass's listing, nothing is deleted on its account.
    private static func isListed(
        _ id: SessionID, createdAt: String, in listings: [(instance: SyncInstance, sessions: [ListedSession])]
    ) -> Bool {
        listings.contains { listing in
            listing.instance.direct && listing.sessions.contains { $0.id == id && $0.createdAt == createdAt }
        }
    }

    private struct Pair: Hashable {
        let id: SessionID
        let instance: SyncInstance
    }
}
