import FoundationEssentials
import HTTPServer
import Timekeeping

/// Who may do what. Two kinds of bearer token are accepted:
///
/// - the admin token (`--auth-token`): one shared secret that may do everything;
/// - JWTs: HS256 signed with `--jwt-secret`, or RS256/ES256 signed by a key of the JWKS in
///   `--jwks-file`. Their claims say what they may do:
///   - `frametap:scope`: `push` (push to its sessions, which may create them), `view` (pictures,
///     MJPEG and status of its sessions) or `admin` (everything);
///   - `frametap:sessions`: session-id globs, `*` for any run of characters and `?` for one.
///     Required for `push` and `view`; `admin` ignores it, because admin routes (the session
///     list, /metrics, /system, the event stream) are not about one session;
///   - `exp` is required: a token that never expires cannot be taken back short of changing
///     the key. `exp` and `nbf` are honoured with ``clockLeeway`` of clock difference.
///
/// A route states what it needs (``Need``) and ``decide(token:need:)`` answers from the token
/// alone, without I/O, on the request's thread. With no admin token, secret or JWKS, access
/// control is off and every request is allowed.
public struct AccessControl: Sendable {
    /// Clock difference tolerated between the token's issuer and this server, both for `exp`
    /// (a token is still accepted this long after it expired) and for `nbf` (this long before).
    public static let clockLeeway: TimeInterval = 30

    /// The realm of every challenge (`WWW-Authenticate: Bearer realm="frametap"`).
    public static let realm = "frametap"

    /// Longer tokens are rejected before they are parsed. FrameTap's tokens are a few hundred
    /// bytes; the bound keeps a hostile header from costing a large JSON decode.
    public static let maxTokenBytes = 8 * 1024

    /// What a request needs, decided by its route.
    public enum Need: Sendable, Equatable {
        /// The session list, PUT and DELETE of a session, /metrics, /system, the event stream.
        case admin
        /// A session's pictures, MJPEG and status.
        case view(session: String)
        /// Pushing to a session (POST .../nalus), which creates it when it does not exist.
        case push(session: String)
    }

    /// What `decide` answers; the route's authorizer (RouteAccess.swift) turns a refusal into
    /// its 401 or 403, whose `WWW-Authenticate` challenge HTTPServer builds (RFC 6750 §3).
    public enum Decision: Sendable, Equatable {
        case allowed
        /// No token was presented: 401 with a plain challenge.
        case missingToken
        /// A token was presented but is not one this server accepts (unknown, malformed, bad
        /// signature, expired, not valid yet): 401 with `error="invalid_token"`. The reason is
        /// short, names nothing from the token, and may be shown to the client.
        case invalidToken(String)
        /// A valid token whose scope or sessions do not cover the need: 403. The reason may be
        /// shown to the client.
        case forbidden(String)
    }

    /// The secrets and keys tokens are checked with, read and checked once at start (a value:
    /// `ServeConfiguration` holds it, and the executable pairs it with the process's clock).
    public struct Credentials: Sendable {
        let adminToken: [UInt8]?
        let keys: TokenVerifier.Keys?

        /// The keys of the JWKS that were left out and why (for example an `oct` or RS512 key),
        /// for the start-up log. Unsupported keys are skipped rather than refused, so that one
        /// JWKS can serve several services; a supported key that is broken is a start-up error.
        public var skippedKeys: [String] { keys?.skipped ?? [] }

        /// False when no admin token, secret or JWKS is configured: every request is allowed.
        public var isEnabled: Bool { adminToken != nil || keys != nil }

        /// - Parameters:
        ///   - adminToken: the token that may do everything; nil or empty for none.
        ///   - jwtSecret: the HS256 secret, at least 32 bytes (RFC 7518 §3.2); nil or empty for none.
        ///   - jwks: the contents of a JWKS file (`{"keys": [...]}`) with RS256 and ES256 public keys.
        /// - Throws: a message fit for the start-up log when the secret or the JWKS is unusable.
        /// Refuses an HS256 secret too short to sign with, before any token is checked.
        public static func checkSecret(_ secret: String) throws(AccessControlError) {
            _ = try TokenVerifier.Keys(secret: secret, jwks: nil)
        }

        public init(adminToken: String?, jwtSecret: String?, jwks: String?) throws(AccessControlError) {
            self.adminToken = adminToken.flatMap { $0.isEmpty ? nil : Array($0.utf8) }
            let secret = jwtSecret.flatMap { $0.isEmpty ? nil : $0 }
            keys = secret == nil && jwks == nil ? nil : try TokenVerifier.Keys(secret: secret, jwks: jwks)
        }
    }

    private let credentials: Credentials
    private let verifier: TokenVerifier?
    /// The wall clock `exp` and `nbf` are checked against.
    private let clock: any ServiceClock

    /// - Parameter clock: the wall clock for `exp` and `nbf`.
    public init(_ credentials: Credentials, clock: any ServiceClock) {
        self.credentials = credentials
        verifier = credentials.keys.map(TokenVerifier.init(keys:))
        self.clock = clock
    }

    /// `Credentials(adminToken:jwtSecret:jwks:)` checked against `clock`.
    public init(
        adminToken: String?, jwtSecret: String?, jwks: String?, clock: any ServiceClock
    ) throws(AccessControlError) {
        self.init(try Credentials(adminToken: adminToken, jwtSecret: jwtSecret, jwks: jwks), clock: clock)
    }

    /// See `Credentials.isEnabled`.
    public var isEnabled: Bool { credentials.isEnabled }

    /// See `Credentials.skippedKeys`.
    public var skippedKeys: [String] { credentials.skippedKeys }

    /// Whether a request that presented `token` (nil when it presented none) may do `need`.
    /// Cheap enough for every request: the admin token is a byte comparison, and a JWT's
    /// signature is checked once and then remembered until it expires (see `VerifiedTokenCache`).
    public func decide(token: String?, need: Need) -> Decision {
        guard isEnabled else { return .allowed }
        guard let token else { return .missingToken }
        switch identify(token) {
        case .admin: return .allowed
        case .granted(let grant): return grant.decision(for: need)
        case .invalid(let reason): return .invalidToken(reason)
        }
    }

    /// Who a presented token is: the admin token, a JWT's grant, or no token this server takes.
    private enum Identity {
        case admin
        case granted(Grant)
        case invalid(String)
    }

    private func identify(_ token: String) -> Identity {
        if let adminToken = credentials.adminToken, Self.constantTimeEquals(Array(token.utf8), adminToken) {
            return .admin
        }
        guard let verifier else { return .invalid("the token is not valid") }
        do {
            return .granted(try verifier.grant(for: token, now: clock.now))
        } catch {
            return .invalid(error.reason)
        }
    }

    /// Whose sessions a push with `token` makes, for `--max-sessions-per-token`: the sessions
    /// a scoped (push or view) token covers, its globs as written, once each, sorted; nil for the admin
    /// token, an admin-scoped JWT, no token, or a server without access control. Tokens issued
    /// for the same sessions share one count, however many there are.
    public func tenant(presenting token: String?) -> String? {
        guard isEnabled, let token, case .granted(let grant) = identify(token), grant.scope != .admin else { return nil }
        return Set(grant.sessions.map(\.text)).sorted().joined(separator: ",")
    }

    /// Compares without an early exit, so the time taken does not reveal how many leading
    /// bytes matched. The length difference is folded into the result, and the loop always
    /// runs over the expected token's length.
    static func constantTimeEquals(_ presented: [UInt8], _ expected: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: presented.count ^ expected.count)
        if presented.count != expected.count { difference |= 1 }
        for index in 0..<expected.count {
            let other = index < presented.count ? presented[index] : 0
            difference |= other ^ expected[index]
        }
        return difference == 0
    }
}

/// A secret or JWKS that cannot be used; `message` says which and why.
public struct AccessControlError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

/// What a verified JWT may do, and for how long.
struct Grant: Sendable {
    enum Scope: String, Sendable {
        case push, view, admin
    }

    let scope: Scope
    /// Empty for admin, which covers every session.
    let sessions: [SessionGlob]
    let notBefore: Date?
    let expires: Date

    func hasExpired(at now: Date) -> Bool {
        now.timeIntervalSince(expires) >= AccessControl.clockLeeway
    }

    func isNotValidYet(at now: Date) -> Bool {
        guard let notBefore else { return false }
        return notBefore.timeIntervalSince(now) > AccessControl.clockLeeway
    }

    func decision(for need: AccessControl.Need) -> AccessControl.Decision {
        switch (need, scope) {
        case (_, .admin):
            .allowed
        case (.admin, _):
            .forbidden("this needs an admin token, the token's scope is \(scope.rawValue)")
        case (.view(let session), .view), (.push(let session), .push):
            sessions.contains { $0.matches(session) }
                ? .allowed : .forbidden("session \(session) is not among the token's sessions")
        case (.view, .push):
            .forbidden("a push token cannot view")
        case (.push, .view):
            .forbidden("a view token cannot push")
        }
    }
}

/// One entry of `frametap:sessions`: session-id characters (`A-Z a-z 0-9 . _ ~ -`) and the
/// wildcards `*` (any run of characters, also none) and `?` (exactly one character).
struct SessionGlob: Sendable, Equatable {
    /// A session id has at most 128 characters; a longer glob would be all stars.
    static let maxLength = 256

    private let pattern: [UInt8]

    /// The glob as written.
    var text: String { String(decoding: pattern, as: UTF8.self) }

    /// Nil for an empty or overlong glob or one with other characters: such a token is refused
    /// as a whole, because a glob that silently matched nothing would hide an issuer's mistake.
    init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= Self.maxLength, bytes.allSatisfy(Self.isAllowed) else { return nil }
        pattern = bytes
    }

    /// Greedy matching that returns to the last `*` on a mismatch: at most
    /// pattern × id steps, with no recursion however many stars the pattern has.
    func matches(_ sessionID: String) -> Bool {
        let star = UInt8(ascii: "*")
        let one = UInt8(ascii: "?")
        let id = Array(sessionID.utf8)
        var patternIndex = 0
        var idIndex = 0
        var lastStar: (patternIndex: Int, idIndex: Int)?
        while idIndex < id.count {
            if patternIndex < pattern.count, pattern[patternIndex] == one || pattern[patternIndex] == id[idIndex] {
                patternIndex += 1
                idIndex += 1
            } else if patternIndex < pattern.count, pattern[patternIndex] == star {
                lastStar = (patternIndex, idIndex)
                patternIndex += 1
            } else if let star = lastStar {
                // Let the last star take one more character and try again from there.
                lastStar = (star.patternIndex, star.idIndex + 1)
                patternIndex = star.patternIndex + 1
                idIndex = star.idIndex + 1
            } else {
                return false
            }
        }
        while patternIndex < pattern.count, pattern[patternIndex] == star { patternIndex += 1 }
        return patternIndex == pattern.count
    }

    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
            UInt8(ascii: "-"), UInt8(ascii: "*"), UInt8(ascii: "?"):
            true
        default:
            false
        }
    }
}
