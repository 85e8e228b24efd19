import Crypto
import CryptoExtras
import Foundation
@testable import FrameTapAPI
import JWTKit
import Testing
import TestSupport
import Timekeeping

/// AccessControl with real tokens: minted here with jwt-kit (HS256 with a secret, RS256 and
/// ES256 with keys generated here and published as a JWKS), so the verifier is checked against
/// an implementation other than its own.
/// jwt-kit has its own `Insecure` namespace on Linux, beside swift-crypto's.
typealias RSAPrivateKey = JWTKit.Insecure.RSA.PrivateKey

@Suite(.timeLimit(.minutes(10))) struct AccessControlTests {
    // MARK: Fixtures

    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let secret = "a-test-secret-that-is-32-bytes-long!"
    static let hour: TimeInterval = 3600

    // Generating RSA keys takes a while: one of each, shared by the tests.
    static let rsaKey = try! RSAPrivateKey(backing: _RSA.Signing.PrivateKey(keySize: .bits2048))
    static let otherRSAKey = try! RSAPrivateKey(backing: _RSA.Signing.PrivateKey(keySize: .bits2048))
    static let ecKey = ES256PrivateKey()
    static let otherECKey = ES256PrivateKey()

    /// The claims as an issuer writes them; every one optional so that tests can leave any out.
    struct Claims: JWTPayload {
        var exp: ExpirationClaim?
        var nbf: NotBeforeClaim?
        var scope: String?
        var sessions: [String]?

        enum CodingKeys: String, CodingKey {
            case exp, nbf
            case scope = "frametap:scope"
            case sessions = "frametap:sessions"
        }

        init(
            scope: String?, sessions: [String]? = nil, expiresIn: TimeInterval? = AccessControlTests.hour,
            notBeforeIn: TimeInterval? = nil
        ) {
            self.scope = scope
            self.sessions = sessions
            exp = expiresIn.map { ExpirationClaim(value: AccessControlTests.now + $0) }
            nbf = notBeforeIn.map { NotBeforeClaim(value: AccessControlTests.now + $0) }
        }

        func verify(using _: some JWTAlgorithm) {}
    }

    static func hs256(_ claims: Claims, secret: String = secret, header: JWTHeader = JWTHeader()) async throws -> String {
        let keys = await JWTKeyCollection().add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        return try await keys.sign(claims, header: header)
    }

    static func rs256(_ claims: Claims, key: RSAPrivateKey = rsaKey, kid: String? = "rsa-1") async throws -> String {
        let keys = await JWTKeyCollection().add(rsa: key, digestAlgorithm: .sha256, kid: kid.map { JWKIdentifier(string: $0) })
        return try await keys.sign(claims, kid: kid.map { JWKIdentifier(string: $0) })
    }

    static func es256(_ claims: Claims, key: ES256PrivateKey = ecKey, kid: String? = "ec-1") async throws -> String {
        let keys = await JWTKeyCollection().add(ecdsa: key, kid: kid.map { JWKIdentifier(string: $0) })
        return try await keys.sign(claims, kid: kid.map { JWKIdentifier(string: $0) })
    }

    static func base64URL(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func rsaJWK(_ key: RSAPrivateKey, kid: String?, alg: JWK.Algorithm? = .rs256) throws -> JWK {
        let (modulus, exponent) = try key.publicKey.getKeyPrimitives()
        return JWK.rsa(
            alg, identifier: kid.map { JWKIdentifier(string: $0) }, modulus: base64URL(modulus), exponent: base64URL(exponent))
    }

    static func ecJWK(_ key: ES256PrivateKey, kid: String?) throws -> JWK {
        let parameters = try #require(key.parameters)
        return JWK.ecdsa(
            .es256, identifier: kid.map { JWKIdentifier(string: $0) }, x: parameters.x, y: parameters.y, curve: .p256)
    }

    static func jwks(_ keys: [JWK]) throws -> String {
        String(decoding: try JSONEncoder().encode(JWKS(keys: keys)), as: UTF8.self)
    }

    /// A JWKS with the RSA and the EC key of the fixtures.
    static func standardJWKS() throws -> String {
        try jwks([rsaJWK(rsaKey, kid: "rsa-1"), ecJWK(ecKey, kid: "ec-1")])
    }

    static func isInvalid(_ decision: AccessControl.Decision) -> Bool {
        if case .invalidToken = decision { true } else { false }
    }

    static func isForbidden(_ decision: AccessControl.Decision) -> Bool {
        if case .forbidden = decision { true } else { false }
    }

    // MARK: Off, and the admin token

    @Test func withNothingConfiguredEveryRequestIsAllowed() throws {
        let access = try AccessControl(adminToken: nil, jwtSecret: nil, jwks: nil, clock: SystemClock())
        #expect(!access.isEnabled)
        #expect(access.decide(token: nil, need: .admin) == .allowed)
        #expect(access.decide(token: "anything", need: .push(session: "cam1")) == .allowed)
        // Empty values also mean "none" here (serve's options refuse them before, see ServeOption.text).
        #expect(!(try AccessControl(adminToken: "", jwtSecret: "", jwks: nil, clock: SystemClock())).isEnabled)
    }

    @Test func theAdminTokenMayDoEverything() throws {
        let access = try AccessControl(adminToken: "admin-token", jwtSecret: nil, jwks: nil, clock: SystemClock())
        #expect(access.isEnabled)
        for need in [AccessControl.Need.admin, .view(session: "cam1"), .push(session: "cam1")] {
            #expect(access.decide(token: "admin-token", need: need) == .allowed)
            #expect(access.decide(token: nil, need: need) == .missingToken)
            #expect(Self.isInvalid(access.decide(token: "admin-toke", need: need)))
            #expect(Self.isInvalid(access.decide(token: "admin-token2", need: need)))
            #expect(Self.isInvalid(access.decide(token: "", need: need)))
        }
    }

    @Test func theAdminTokenAndJWTsWorkSideBySide() async throws {
        let access = try AccessControl(
            adminToken: "admin-token", jwtSecret: Self.secret, jwks: try Self.standardJWKS(), clock: ManualClock(now: Self.now))
        #expect(access.decide(token: "admin-token", need: .admin) == .allowed)
        let viewer = try await Self.es256(Claims(scope: "view", sessions: ["cam1"]))
        #expect(access.decide(token: viewer, need: .view(session: "cam1")) == .allowed)
        #expect(Self.isInvalid(access.decide(token: "admin-token ", need: .admin)))
    }

    // MARK: Scopes

    static let needs: [AccessControl.Need] = [.admin, .view(session: "cam1"), .push(session: "cam1")]

    /// Which need each scope covers: view views, push pushes, admin does everything.
    @Test(arguments: ["push", "view", "admin"], needs)
    func eachScopeAgainstEachNeed(scope: String, need: AccessControl.Need) async throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: nil, clock: ManualClock(now: Self.now))
        let token = try await Self.hs256(Claims(scope: scope, sessions: ["cam1"]))
        let allowed =
            switch (scope, need) {
            case ("admin", _), ("view", .view), ("push", .push): true
            default: false
            }
        let decision = access.decide(token: token, need: need)
        if allowed {
            #expect(decision == .allowed)
        } else {
            #expect(Self.isForbidden(decision), "\(decision)")
        }
    }

    @Test func adminScopeCoversEverySessionWithOrWithoutGlobs() async throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: nil, clock: ManualClock(now: Self.now))
        let bare = try await Self.hs256(Claims(scope: "admin"))
        let narrow = try await Self.hs256(Claims(scope: "admin", sessions: ["cam1"]))
        for token in [bare, narrow] {
            #expect(access.decide(token: token, need: .view(session: "other")) == .allowed)
            #expect(access.decide(token: token, need: .push(session: "other")) == .allowed)
            #expect(access.decide(token: token, need: .admin) == .allowed)
        }
    }

    @Test func forbiddenReasonsSayWhy() async throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: nil, clock: ManualClock(now: Self.now))
        let viewer = try await Self.hs256(Claims(scope: "view", sessions: ["cam1"]))
        #expect(access.decide(token: viewer, need: .push(session: "cam1")) == .forbidden("a view token cannot push"))
        #expect(
            access.decide(token: viewer, need: .view(session: "cam2"))
                == .forbidden("session cam2 is not among the token's sessions"))
        #expect(
            access.decide(token: viewer, need: .admin)
                == .forbidden("this needs an admin token, the token's scope is view"))
        let pusher = try await Self.hs256(Claims(scope: "push", sessions: ["cam1"]))
        #expect(access.decide(token: pusher, need: .view(session: "cam1")) == .forbidden("a push token cannot view"))
    }

    // MARK: Session globs

    @Test(arguments: [
        (["cam1"], "cam1", true),
        (["cam1"], "cam10", false),
        (["cam1"], "Cam1", false),
        (["cam*"], "cam", true),
        (["cam*"], "cam-lobby.2", true),
        (["cam*"], "xcam1", false),
        (["*"], "anything_~.-", true),
        (["*-hall"], "east-hall", true),
        (["*-hall"], "east-hall2", false),
        (["cam?"], "cam7", true),
        (["cam?"], "cam", false),
        (["cam?"], "cam12", false),
        (["a*b?c*"], "a-b-c", true),
        (["a*b?c*"], "axxbyyc", false),
        (["a*b?c*"], "abbxc", true),
        (["lobby", "door-*"], "door-3", true),
        (["lobby", "door-*"], "lobby", true),
        (["lobby", "door-*"], "garage", false),
        ([], "cam1", false),
    ] as [([String], String, Bool)])
    func globs(globs: [String], session: String, allowed: Bool) async throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: nil, clock: ManualClock(now: Self.now))
        for scope in ["view", "push"] {
            let token = try await Self.hs256(Claims(scope: scope, sessions: globs))
            let need: AccessControl.Need = scope == "view" ? .view(session: session) : .push(session: session)
            let decision = access.decide(token: token, need: need)
            if allowed {
                #expect(decision == .allowed)
            } else {
                #expect(decision == .forbidden("session \(session) is not among the token's sessions"))
            }
        }
    }

    @Test func manyStarsStayCheap() throws {
        // A naive recursive matcher takes exponential time on this; the greedy one does not.
        let glob = try #require(SessionGlob(String(repeating: "*a", count: 60) + "b"))
        #expect(!glob.matches(String(repeating: "a", count: 128)))
        #expect(glob.matches(String(repeating: "a", count: 127) + "b"))
    }

    @Test(arguments: ["", "cam/1", "cam 1", "cam[12]", "cäm", "cam1\n", String(repeating: "a", count: 257)])
    func aBadGlobMakesTheTokenInvalid(glob: String) async throws {
        #expect(SessionGlob(glob) == nil)
        let access = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: nil, clock: ManualClock(now: Self.now))
        let token = try await Self.hs256(Claims(scope: "view", sessions: ["cam1", glob]))
        #expect(
            access.decide(token: token, need: .view(session: "cam1"))
                == .invalidToken("the token's frametap:sessions has an invalid glob"))
    }

    // MARK: Time

    @Test func expiryAndNotBeforeWithTheLeeway() async throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: nil, clock: ManualClock(now: Self.now))
        let need = AccessControl.Need.view(session: "cam1")
        let leeway = AccessControl.clockLeeway
        #expect(leeway == 30)
        func decide(expiresIn: TimeInterval? = Self.hour, notBeforeIn: TimeInterval? = nil) async throws -> AccessControl.Decision {
            let token = try await Self.hs256(Claims(scope: "view", sessions: ["cam1"], expiresIn: expiresIn, notBeforeIn: notBeforeIn))
            return access.decide(token: token, need: need)
        }
        #expect(try await decide(expiresIn: -Self.hour) == .invalidToken("the token has expired"))
        #expect(try await decide(expiresIn: -leeway) == .invalidToken("the token has expired"))
        #expect(try await decide(expiresIn: -leeway + 1) == .allowed)
        #expect(try await decide(expiresIn: 1) == .allowed)
        #expect(try await decide(notBeforeIn: Self.hour) == .invalidToken("the token is not valid yet"))
        #expect(try await decide(notBeforeIn: leeway + 1) == .invalidToken("the token is not valid yet"))
        #expect(try await decide(notBeforeIn: leeway) == .allowed)
        #expect(try await decide(notBeforeIn: -Self.hour) == .allowed)
        #expect(try await decide(expiresIn: nil) == .invalidToken("the token has no exp claim"))
    }

    @Test func aRememberedTokenStillExpires() async throws {
        let clock = ManualClock(now: Self.now - 31)
        let access = try AccessControl(adminToken: nil, jwtSecret: nil, jwks: try Self.standardJWKS(), clock: clock)
        let token = try await Self.rs256(Claims(scope: "view", sessions: ["cam1"], expiresIn: 60, notBeforeIn: 0))
        let need = AccessControl.Need.view(session: "cam1")
        #expect(access.decide(token: token, need: need) == .invalidToken("the token is not valid yet"))
        clock.advance(by: .seconds(31))
        #expect(access.decide(token: token, need: need) == .allowed)
        #expect(Self.isForbidden(access.decide(token: token, need: .push(session: "cam1"))))
        clock.advance(by: .seconds(80))
        #expect(access.decide(token: token, need: need) == .allowed)
        clock.advance(by: .seconds(10))
        #expect(access.decide(token: token, need: need) == .invalidToken("the token has expired"))
    }

    @Test func theCacheIsBounded() {
        let cache = VerifiedTokenCache(capacity: 3)
        let live = Grant(scope: .admin, sessions: [], notBefore: nil, expires: Self.now + Self.hour)
        let expired = Grant(scope: .admin, sessions: [], notBefore: nil, expires: Self.now - Self.hour)
        cache.remember(live, for: "a", now: Self.now)
        cache.remember(expired, for: "b", now: Self.now)
        cache.remember(live, for: "c", now: Self.now)
        // Full: the expired grant makes room.
        cache.remember(live, for: "d", now: Self.now)
        #expect(cache.count == 3)
        #expect(cache.grant(for: "b") == nil)
        #expect(cache.grant(for: "d") != nil)
        // Full of live grants: all go, the new one stays.
        cache.remember(live, for: "e", now: Self.now)
        #expect(cache.count == 1)
        #expect(cache.grant(for: "e") != nil)
    }

    // MARK: Signatures, keys and algorithms

    @Test func rs256AndES256FromTheJWKS() async throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: nil, jwks: try Self.standardJWKS(), clock: ManualClock(now: Self.now))
        #expect(access.skippedKeys.isEmpty)
        let rsa = try await Self.rs256(Claims(scope: "push", sessions: ["cam*"]))
        let ec = try await Self.es256(Claims(scope: "push", sessions: ["cam*"]))
        for token in [rsa, ec] {
            #expect(access.decide(token: token, need: .push(session: "cam1")) == .allowed)
            #expect(Self.isForbidden(access.decide(token: token, need: .view(session: "cam1"))))
        }
    }

    @Test func aTamperedOrForeignSignatureIsInvalid() async throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: try Self.standardJWKS(), clock: ManualClock(now: Self.now))
        let need = AccessControl.Need.view(session: "cam1")
        let claims = Claims(scope: "view", sessions: ["cam1"])
        let badSignature = AccessControl.Decision.invalidToken("the token's signature is not valid")
        for token in [try await Self.hs256(claims), try await Self.rs256(claims), try await Self.es256(claims)] {
            #expect(access.decide(token: token, need: need) == .allowed)
            // One character in the middle of the signature (the last one may only carry padding bits).
            var bytes = Array(token.utf8)
            let index = bytes.count - 10
            bytes[index] = bytes[index] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            #expect(access.decide(token: String(decoding: bytes, as: UTF8.self), need: need) == badSignature)
            // The claims of another token under this token's signature.
            let parts = token.split(separator: ".", omittingEmptySubsequences: false)
            let wider = try await Self.hs256(Claims(scope: "admin"))
            let spliced = [parts[0], wider.split(separator: ".")[1], parts[2]].joined(separator: ".")
            #expect(access.decide(token: spliced, need: .admin) == badSignature)
        }
        // Signed with other keys under the same kid, or with another secret.
        #expect(access.decide(token: try await Self.hs256(claims, secret: Self.secret + "x"), need: need) == badSignature)
        #expect(access.decide(token: try await Self.rs256(claims, key: Self.otherRSAKey), need: need) == badSignature)
        #expect(access.decide(token: try await Self.es256(claims, key: Self.otherECKey), need: need) == badSignature)
    }

    @Test func algNoneIsInvalid() async throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: try Self.standardJWKS(), clock: ManualClock(now: Self.now))
        let payload = try await Self.hs256(Claims(scope: "admin")).split(separator: ".")[1]
        for alg in ["none", "None", "NONE"] {
            let header = Self.base64URL(Data(#"{"alg":"\#(alg)","typ":"JWT"}"#.utf8))
            for signature in ["", "AAAA"] {
                let token = "\(header).\(payload).\(signature)"
                #expect(access.decide(token: token, need: .admin) == .invalidToken("the token's algorithm is not accepted"))
            }
        }
    }

    @Test func hs256IsNotAcceptedWhereOnlyAJWKSIs() async throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: nil, jwks: try Self.standardJWKS(), clock: ManualClock(now: Self.now))
        let notAccepted = AccessControl.Decision.invalidToken("the token's algorithm is not accepted")
        // The classic confusion: the RSA public key, which anyone may have, used as an HMAC secret.
        for publicKey in [Self.rsaKey.publicKey.pemRepresentation, Self.ecKey.publicKey.pemRepresentation] {
            let forged = try await Self.hs256(Claims(scope: "admin"), secret: publicKey, header: ["kid": .string("rsa-1")])
            #expect(access.decide(token: forged, need: .admin) == notAccepted)
        }
        // An HMAC-signed token that claims RS256 is tried against the RSA key, and fails.
        let relabelled = try await Self.hs256(
            Claims(scope: "admin"), secret: Self.rsaKey.publicKey.pemRepresentation,
            header: ["alg": .string("RS256"), "kid": .string("rsa-1")])
        #expect(access.decide(token: relabelled, need: .admin) == .invalidToken("the token's signature is not valid"))
        // And the other way round: only a secret configured, an RS256 token is not accepted.
        let secretOnly = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: nil, clock: ManualClock(now: Self.now))
        #expect(secretOnly.decide(token: try await Self.rs256(Claims(scope: "admin")), need: .admin) == notAccepted)
    }

    @Test func theKidSelectsTheKey() async throws {
        let jwks = try Self.jwks([
            Self.rsaJWK(Self.rsaKey, kid: "a"), Self.rsaJWK(Self.otherRSAKey, kid: "b"), Self.ecJWK(Self.ecKey, kid: "c"),
        ])
        let access = try AccessControl(adminToken: nil, jwtSecret: nil, jwks: jwks, clock: ManualClock(now: Self.now))
        let claims = Claims(scope: "admin")
        let decide = { (token: String) -> AccessControl.Decision in access.decide(token: token, need: .admin) }
        #expect(decide(try await Self.rs256(claims, key: Self.rsaKey, kid: "a")) == .allowed)
        #expect(decide(try await Self.rs256(claims, key: Self.otherRSAKey, kid: "b")) == .allowed)
        // The right kid with the wrong key, and a kid whose key is for another algorithm.
        #expect(decide(try await Self.rs256(claims, key: Self.otherRSAKey, kid: "a")) == .invalidToken("the token's signature is not valid"))
        #expect(decide(try await Self.rs256(claims, key: Self.rsaKey, kid: "c")) == .invalidToken("the token's algorithm is not accepted"))
        #expect(decide(try await Self.rs256(claims, key: Self.rsaKey, kid: "zzz")) == .invalidToken("the token's key id is unknown"))
        // Without a kid, every key of the token's algorithm is tried.
        #expect(decide(try await Self.rs256(claims, key: Self.otherRSAKey, kid: nil)) == .allowed)
        #expect(decide(try await Self.es256(claims, kid: nil)) == .allowed)
        #expect(decide(try await Self.es256(claims, key: Self.otherECKey, kid: nil)) == .invalidToken("the token's signature is not valid"))
    }

    @Test func aJWKSKeyWithoutKidOrAlg() async throws {
        var rsa = try Self.rsaJWK(Self.rsaKey, kid: nil, alg: nil)
        rsa.keyIdentifier = nil
        var ec = try Self.ecJWK(Self.ecKey, kid: nil)
        ec.algorithm = nil
        let access = try AccessControl(
            adminToken: nil, jwtSecret: nil, jwks: try Self.jwks([rsa, ec]), clock: ManualClock(now: Self.now))
        #expect(access.decide(token: try await Self.rs256(Claims(scope: "admin"), kid: nil), need: .admin) == .allowed)
        #expect(access.decide(token: try await Self.es256(Claims(scope: "admin"), kid: nil), need: .admin) == .allowed)
        // A kid that names no key is refused even though a key without kid would verify it.
        #expect(
            access.decide(token: try await Self.rs256(Claims(scope: "admin"), kid: "x"), need: .admin)
                == .invalidToken("the token's key id is unknown"))
    }

    // MARK: Malformed tokens and claims

    @Test func malformedTokensAreInvalid() async throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: try Self.standardJWKS(), clock: ManualClock(now: Self.now))
        let valid = try await Self.hs256(Claims(scope: "admin"))
        let parts = valid.split(separator: ".").map(String.init)
        let malformed = [
            "", "abc", "a.b", "a.b.c", "a.b.c.d", "...", "\(parts[0]).\(parts[1])", "\(valid).\(parts[2])",
            "\(parts[0])..\(parts[2])", "\(parts[0]).!!!.\(parts[2])", "\(parts[0]).\(parts[1]).***",
            "\(Self.base64URL(Data("not json".utf8))).\(parts[1]).\(parts[2])",
            "\(Self.base64URL(Data("[1,2]".utf8))).\(parts[1]).\(parts[2])",
            "\(Self.base64URL(Data(#"{"typ":"JWT"}"#.utf8))).\(parts[1]).\(parts[2])",
            "\(parts[0]).\(Self.base64URL(Data(#"{"exp":"tomorrow"}"#.utf8))).\(parts[2])",
            "Bearer \(valid)",
        ]
        for token in malformed {
            let decision = access.decide(token: token, need: .admin)
            #expect(Self.isInvalid(decision), "\(token): \(decision)")
        }
        let long = "\(parts[0]).\(String(repeating: "A", count: AccessControl.maxTokenBytes)).\(parts[2])"
        #expect(access.decide(token: long, need: .admin) == .invalidToken("the token is too long"))
    }

    @Test func claimsThatAreMissingOrWrong() async throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: nil, clock: ManualClock(now: Self.now))
        let need = AccessControl.Need.view(session: "cam1")
        func decide(_ claims: Claims) async throws -> AccessControl.Decision {
            access.decide(token: try await Self.hs256(claims), need: need)
        }
        let badScope = AccessControl.Decision.invalidToken("the token's frametap:scope is not push, view or admin")
        #expect(try await decide(Claims(scope: nil, sessions: ["cam1"])) == badScope)
        #expect(try await decide(Claims(scope: "read", sessions: ["cam1"])) == badScope)
        #expect(try await decide(Claims(scope: "VIEW", sessions: ["cam1"])) == badScope)
        #expect(try await decide(Claims(scope: "view")) == .invalidToken("the token has no frametap:sessions claim"))

        // Claims of the wrong JSON type, validly signed.
        struct OddClaims: JWTPayload {
            var exp = ExpirationClaim(value: AccessControlTests.now + AccessControlTests.hour)
            var scope = "view"
            var sessions = "cam1"
            enum CodingKeys: String, CodingKey {
                case exp
                case scope = "frametap:scope"
                case sessions = "frametap:sessions"
            }
            func verify(using _: some JWTAlgorithm) {}
        }
        let keys = await JWTKeyCollection().add(hmac: HMACKey(from: Self.secret), digestAlgorithm: .sha256)
        let odd = try await keys.sign(OddClaims())
        #expect(access.decide(token: odd, need: need) == .invalidToken("the token is malformed"))
    }

    @Test func criticalHeaderExtensionsAreRefused() async throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: nil, clock: ManualClock(now: Self.now))
        let token = try await Self.hs256(
            Claims(scope: "admin"), header: ["crit": .array([.string("exp2")]), "exp2": .int(1)])
        #expect(access.decide(token: token, need: .admin) == .invalidToken("the token has critical header extensions"))
    }

    /// A member named twice: FrameTap's decoder would take one, another library the other.
    @Test func claimsOrHeaderMembersNamedTwiceAreRefused() throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: nil, clock: ManualClock(now: Self.now))
        func signed(header: String, claims: String) -> String {
            let input = Self.base64URL(Data(header.utf8)) + "." + Self.base64URL(Data(claims.utf8))
            let mac = HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: SymmetricKey(data: Data(Self.secret.utf8)))
            return input + "." + Self.base64URL(Data(mac))
        }
        let exp = Int(Self.now.timeIntervalSince1970) + 3600
        let header = #"{"alg":"HS256","typ":"JWT"}"#
        let single = #"{"frametap:scope":"admin","frametap:sessions":[],"exp":\#(exp)}"#
        #expect(access.decide(token: signed(header: header, claims: single), need: .admin) == .allowed)
        for claims in [
            #"{"frametap:scope":"view","frametap:sessions":["a"],"exp":\#(exp),"frametap:scope":"admin"}"#,
            #"{"frametap:scope":"view","frametap:sessions":["a"],"exp":\#(exp),"frametap:scope":"admin"}"#,
        ] {
            #expect(
                access.decide(token: signed(header: header, claims: claims), need: .view(session: "a"))
                    == .invalidToken("the token's claims name frametap:scope twice"))
        }
        // Names inside values are not members of the top level.
        let nested = #"{"frametap:scope":"admin","frametap:sessions":[],"exp":\#(exp),"x":{"exp":1,"y":[{"exp":2}]}}"#
        #expect(access.decide(token: signed(header: header, claims: nested), need: .admin) == .allowed)
        let twiceAlg = #"{"alg":"HS256","typ":"JWT","alg":"none"}"#
        #expect(
            access.decide(token: signed(header: twiceAlg, claims: single), need: .admin)
                == .invalidToken("the token's header name alg twice"))
    }

    /// A token has one spelling: padding, or other unused low bits in the signature's last
    /// character, make another string, which is refused rather than taken for the same token.
    @Test func aSignatureHasOneSpelling() async throws {
        let access = try AccessControl(
            adminToken: nil, jwtSecret: Self.secret, jwks: nil, clock: ManualClock(now: Self.now))
        let token = try await Self.hs256(Claims(scope: "admin"))
        #expect(access.decide(token: token, need: .admin) == .allowed)
        // 32 bytes of HMAC are 43 characters: the last carries 2 bits that must be zero.
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let last = try #require(token.last)
        let index = try #require(alphabet.firstIndex(of: last))
        let lowBitsSet = String(token.dropLast()) + String(alphabet[index | 1])
        for variant in [token + "=", lowBitsSet] where variant != token {
            #expect(
                access.decide(token: variant, need: .admin)
                    == .invalidToken("the token's signature is not in base64url as RFC 7515 writes it"), "\(variant.suffix(4))")
        }
    }

    @Test func memberNamesCompareScalarByScalar() {
        func repeated(_ json: String) -> String? { JSONMemberNames.firstRepeated(in: Array(json.utf8)) }
        #expect(repeated(#"{"a":1,"b":{"a":2},"c":[{"a":3}],"d":"\",\"a\":"}"#) == nil)
        #expect(repeated(#"{"a":1,"\u0061":2}"#) == "a")
        #expect(repeated(#"{"\u00e9":1,"e\u0301":2}"#) == nil, "canonically equal, different scalars")
        #expect(repeated(#"{"\ud800x":1,"x":2}"#) == nil, "a lone surrogate is not nothing")
        #expect(repeated(#"{"\ud83d\ude00":1,"\u{1F600}":2}"#.replacingOccurrences(of: "\\u{1F600}", with: "\u{1F600}")) == "\u{1F600}")
    }

    // MARK: Configuration

    @Test func aShortSecretIsAStartUpError() {
        #expect(throws: AccessControlError(message: "the JWT secret must be at least 32 bytes for HS256, it has 31")) {
            try AccessControl(adminToken: nil, jwtSecret: String(repeating: "s", count: 31), jwks: nil, clock: SystemClock())
        }
    }

    @Test func unsupportedJWKSKeysAreSkippedAndListed() async throws {
        let unsupported = [
            #"{"kty":"oct","kid":"shared","k":"c2VjcmV0"}"#,
            #"{"kty":"OKP","kid":"ed","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#,
            #"{"kty":"EC","kid":"p384","crv":"P-384","x":"AAAA","y":"AAAA"}"#,
            #"{"kty":"RSA","kid":"rs512","alg":"RS512","n":"AAAA","e":"AQAB"}"#,
            #"{"kty":"RSA","kid":"enc","use":"enc","n":"AAAA","e":"AQAB"}"#,
            #"{"kty":"XYZ"}"#,
        ]
        let usable = String(decoding: try JSONEncoder().encode(try Self.ecJWK(Self.ecKey, kid: "ec-1")), as: UTF8.self)
        let jwks = #"{"keys":["# + (unsupported + [usable]).joined(separator: ",") + "]}"
        let access = try AccessControl(adminToken: nil, jwtSecret: nil, jwks: jwks, clock: ManualClock(now: Self.now))
        #expect(
            access.skippedKeys == [
                #"key "shared": key type oct is not supported, skipped"#,
                #"key "ed": key type OKP Ed25519 is not supported, skipped"#,
                #"key "p384": key type EC P-384 is not supported, skipped"#,
                #"key "rs512": algorithm RS512 is not supported (RS256 and ES256 are), skipped"#,
                #"key "enc": an encryption key (use "enc"), skipped"#,
                "key #5: key type XYZ is not supported, skipped",
            ])
        #expect(access.decide(token: try await Self.es256(Claims(scope: "admin")), need: .admin) == .allowed)

        // Nothing usable at all is an error, which lists what was skipped.
        let error = #expect(throws: AccessControlError.self) {
            try AccessControl(adminToken: nil, jwtSecret: nil, jwks: #"{"keys":["# + unsupported[0] + "]}", clock: SystemClock())
        }
        #expect(error?.message == #"the JWKS has no RS256 or ES256 public key (key "shared": key type oct is not supported, skipped)"#)
    }

    @Test(arguments: [
        ("", "the JWKS is not a JSON object"),
        ("not json", "the JWKS is not a JSON object"),
        (#"{"kty":"RSA"}"#, "the JWKS is not a JSON object"),
        (#"{"keys":{}}"#, "the JWKS is not a JSON object"),
        (#"{"keys":[]}"#, "the JWKS has no RS256 or ES256 public key"),
        (#"{"keys":[{"kty":"RSA","kid":"k","alg":"RS256","e":"AQAB"}]}"#, #"the JWKS's key "k" is not usable"#),
        (#"{"keys":[{"kty":"RSA","kid":"k","n":"!!!","e":"AQAB"}]}"#, #"the JWKS's key "k" is not usable"#),
        (#"{"keys":[{"kty":"EC","alg":"RS256","crv":"P-256","x":"AAAA","y":"AAAA"}]}"#, "the JWKS's key #0 is not usable"),
        (#"{"keys":[{"kty":"EC","kid":"e","crv":"P-256","x":"AQ","y":"AQ"}]}"#, #"the JWKS's key "e" is not usable"#),
    ])
    func aBrokenJWKSIsAStartUpError(jwks: String, message: String) {
        let error = #expect(throws: AccessControlError.self) {
            try AccessControl(adminToken: nil, jwtSecret: nil, jwks: jwks, clock: ManualClock(now: Self.now))
        }
        #expect(error?.message.hasPrefix(message) == true, "\(error?.message ?? "no error")")
    }

    @Test func brokenKeysOfSupportedKindsAreStartUpErrors() throws {
        // Not on the curve.
        let offCurve = JWK.ecdsa(
            .es256, identifier: "e", x: Self.base64URL(Data(repeating: 1, count: 32)),
            y: Self.base64URL(Data(repeating: 1, count: 32)), curve: .p256)
        // Too short: 1024 bits.
        let short = try _RSA.Signing.PrivateKey(unsafeKeySize: .init(bitCount: 1024)).publicKey.getKeyPrimitives()
        let shortJWK = JWK.rsa(
            .rs256, identifier: "short", modulus: Self.base64URL(short.modulus), exponent: Self.base64URL(short.publicExponent))
        // A private key where only public ones belong.
        var withPrivatePart = try Self.rsaJWK(Self.rsaKey, kid: "private")
        withPrivatePart.privateExponent = "AQAB"
        // Two usable keys under one kid.
        let duplicate = [try Self.rsaJWK(Self.rsaKey, kid: "same"), try Self.ecJWK(Self.ecKey, kid: "same")]

        for (keys, message) in [
            ([offCurve], #"the JWKS's key "e" is not usable"#),
            ([shortJWK], #"the JWKS's key "short" is not usable"#),
            ([withPrivatePart], #"the JWKS's key "private" is not usable: it contains a private key ("d"); publish only the public key"#),
            (duplicate, #"the JWKS has two usable keys with the kid "same""#),
        ] {
            let error = #expect(throws: AccessControlError.self) {
                try AccessControl(adminToken: nil, jwtSecret: nil, jwks: try Self.jwks(keys), clock: SystemClock())
            }
            #expect(error?.message.hasPrefix(message) == true, "\(error?.message ?? "no error")")
        }
    }

    // MARK: The admin token

    @Test func theAdminTokenIsComparedWhole() {
        let token = Array("abcdef".utf8)
        #expect(AccessControl.constantTimeEquals(token, token))
        #expect(!AccessControl.constantTimeEquals(Array("abcdeg".utf8), token))
        #expect(!AccessControl.constantTimeEquals(Array("abc".utf8), token))
        #expect(!AccessControl.constantTimeEquals(Array("abcdefg".utf8), token))
        #expect(!AccessControl.constantTimeEquals([], token))
        // 256 extra bytes must not wrap the length difference to zero.
        #expect(!AccessControl.constantTimeEquals(token + Array(repeating: 0, count: 256), token))
    }
}
