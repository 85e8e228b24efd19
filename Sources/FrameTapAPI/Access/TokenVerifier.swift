import Crypto
import CryptoExtras
import FoundationEssentials
import JWTKit
import Synchronization

/// Checks FrameTap JWTs and turns them into ``Grant``s.
///
/// jwt-kit reads the token (compact serialisation, base64url, the header and claims as JSON)
/// and the JWKS (its keys, checked: RSA of at least 2048 bits, EC points on P-256). The
/// signature is then checked here with swift-crypto, the library jwt-kit signs and verifies
/// with, because jwt-kit's own verifying API is an actor (`JWTKeyCollection`) that can only be
/// awaited, and requests are decided synchronously on libmicrohttpd's threads.
struct TokenVerifier: Sendable {
    let keys: Keys
    private let parser = DefaultJWTParser()
    private let cache = VerifiedTokenCache(capacity: 1024)

    init(keys: Keys) { self.keys = keys }

    /// The grant of a token that is signed by a configured key, well formed, and within `exp`
    /// and `nbf` at `now`.
    func grant(for token: String, now: Date) throws(TokenRejection) -> Grant {
        let grant: Grant
        if let remembered = cache.grant(for: token) {
            grant = remembered
        } else {
            grant = try verify(token)
            if !grant.hasExpired(at: now) { cache.remember(grant, for: token, now: now) }
        }
        if grant.hasExpired(at: now) { throw TokenRejection("the token has expired") }
        if grant.isNotValidYet(at: now) { throw TokenRejection("the token is not valid yet") }
        return grant
    }

    /// Signature and claims; the time is checked by the caller, so that a remembered grant
    /// is checked the same way.
    private func verify(_ token: String) throws(TokenRejection) -> Grant {
        let bytes = Array(token.utf8)
        guard bytes.count <= AccessControl.maxTokenBytes else { throw TokenRejection("the token is too long") }
        let header: JWTHeader
        let claims: FrameTapClaims
        let signature: Data
        do {
            (header, claims, signature) = try parser.parse(bytes, as: FrameTapClaims.self)
        } catch {
            throw TokenRejection("the token is malformed")
        }
        // RFC 7515 §4.1.11: extensions the recipient does not understand must not be ignored.
        guard header.fields["crit"] == nil else { throw TokenRejection("the token has critical header extensions") }
        guard let algorithm = header.alg else { throw TokenRejection("the token names no algorithm") }
        // The parser has checked there are exactly three parts; the signature covers the first two.
        guard let signatureDot = bytes.lastIndex(of: UInt8(ascii: ".")) else {
            throw TokenRejection("the token is malformed")
        }
        // One spelling per signature: a decoder that ignores padding or the unused low bits of
        // the last character takes several strings for one token, each remembered on its own.
        guard bytes[(signatureDot + 1)...].elementsEqual(Self.base64URLEncoded(signature).utf8) else {
            throw TokenRejection("the token's signature is not in base64url as RFC 7515 writes it")
        }
        let candidates = try keys.candidates(algorithm: algorithm, keyID: header.kid)
        guard candidates.contains(where: { $0.isValidSignature(signature, for: bytes[..<signatureDot]) }) else {
            throw TokenRejection("the token's signature is not valid")
        }
        for (part, segment) in zip(["header", "claims"], bytes[..<signatureDot].split(separator: UInt8(ascii: "."))) {
            if let json = Self.base64URLDecoded(segment), let name = JSONMemberNames.firstRepeated(in: json) {
                throw TokenRejection("the token's \(part) name \(name.prefix(40)) twice")
            }
        }
        return try claims.grant()
    }

    /// `bytes` in base64url without padding (RFC 7515 §2).
    static func base64URLEncoded(_ bytes: Data) -> String {
        var text = bytes.base64EncodedString().replacing("+", with: "-").replacing("/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    /// A JWT segment's bytes (base64url without padding, RFC 7515 §2).
    static func base64URLDecoded(_ segment: ArraySlice<UInt8>) -> Data? {
        var text = String(decoding: segment, as: UTF8.self).replacing("-", with: "+").replacing("_", with: "/")
        text += String(repeating: "=", count: (4 - text.utf8.count % 4) % 4)
        return Data(base64Encoded: text)
    }

    /// The verification keys, each bound to the one algorithm it verifies.
    struct Keys: Sendable {
        private(set) var secret: VerificationKey?
        private(set) var keysByID: [String: VerificationKey] = [:]
        private(set) var keysWithoutID: [VerificationKey] = []
        private(set) var skipped: [String] = []

        /// A token's `alg` must be one a configured key verifies: `none`, or HS256 where only a
        /// JWKS is configured, finds no key at all, so a JWKS's public key is never used as an
        /// HMAC secret (algorithm confusion). A `kid` selects among the JWKS's keys (a `kid`
        /// that names none is refused, even where a key without `kid` would verify); without
        /// one, each JWKS key of that algorithm is tried. The secret has no `kid`: any `kid` of
        /// an HS256 token is ignored.
        func candidates(algorithm: String, keyID: String?) throws(TokenRejection) -> [VerificationKey] {
            if algorithm == "HS256" {
                guard let secret else { throw TokenRejection("the token's algorithm is not accepted") }
                return [secret]
            }
            guard let keyID else {
                let matching = (Array(keysByID.values) + keysWithoutID).filter { $0.algorithm == algorithm }
                guard !matching.isEmpty else { throw TokenRejection("the token's algorithm is not accepted") }
                return matching
            }
            guard let key = keysByID[keyID] else {
                let isAccepted = (Array(keysByID.values) + keysWithoutID).contains { $0.algorithm == algorithm }
                throw TokenRejection(isAccepted ? "the token's key id is unknown" : "the token's algorithm is not accepted")
            }
            guard key.algorithm == algorithm else { throw TokenRejection("the token's algorithm is not accepted") }
            return [key]
        }

        init(secret: String?, jwks: String?) throws(AccessControlError) {
            if let secret {
                // RFC 7518 §3.2: an HS256 key must be at least as long as the hash, 256 bits.
                guard secret.utf8.count >= 32 else {
                    throw AccessControlError(
                        message: "the JWT secret must be at least 32 bytes for HS256, it has \(secret.utf8.count)")
                }
                self.secret = .hs256(SymmetricKey(data: Array(secret.utf8)))
            }
            if let jwks { try load(jwks: jwks) }
        }

        private mutating func load(jwks: String) throws(AccessControlError) {
            let document: JWKSDocument
            do {
                document = try JSONDecoder().decode(JWKSDocument.self, from: Data(jwks.utf8))
            } catch {
                throw AccessControlError(message: "the JWKS is not a JSON object with a \"keys\" array: \(error)")
            }
            for (index, entry) in document.keys.enumerated() {
                let name = entry.kid.map { "key \"\($0)\"" } ?? "key #\(index)"
                let key: VerificationKey?
                do {
                    key = try entry.verificationKey()
                } catch {
                    throw AccessControlError(message: "the JWKS's \(name) is not usable: \(error.message)")
                }
                guard let key else {
                    skipped.append("\(name): \(entry.unsupportedReason)")
                    continue
                }
                if let kid = entry.kid {
                    // Two keys under one kid would make the kid select nothing in particular.
                    guard keysByID[kid] == nil else {
                        throw AccessControlError(message: "the JWKS has two usable keys with the kid \"\(kid)\"")
                    }
                    keysByID[kid] = key
                } else {
                    keysWithoutID.append(key)
                }
            }
            guard !keysByID.isEmpty || !keysWithoutID.isEmpty else {
                throw AccessControlError(
                    message: "the JWKS has no RS256 or ES256 public key"
                        + (skipped.isEmpty ? "" : " (\(skipped.joined(separator: "; ")))"))
            }
        }
    }

    /// A key and the one algorithm it verifies.
    enum VerificationKey: Sendable {
        case hs256(SymmetricKey)
        case rs256(_RSA.Signing.PublicKey)
        case es256(P256.Signing.PublicKey)

        var algorithm: String {
            switch self {
            case .hs256: "HS256"
            case .rs256: "RS256"
            case .es256: "ES256"
            }
        }

        func isValidSignature(_ signature: Data, for signingInput: ArraySlice<UInt8>) -> Bool {
            switch self {
            case .hs256(let key):
                // Constant time in swift-crypto.
                return HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signingInput, using: key)
            case .rs256(let key):
                // The padding must be named: swift-crypto's default is PSS, RS256 is PKCS #1 v1.5.
                return key.isValidSignature(
                    _RSA.Signing.RSASignature(rawRepresentation: signature), for: SHA256.hash(data: signingInput),
                    padding: .insecurePKCS1v1_5)
            case .es256(let key):
                // JWS carries r and s as 64 raw bytes (RFC 7518 §3.4), not DER.
                guard let ecdsaSignature = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else {
                    return false
                }
                return key.isValidSignature(ecdsaSignature, for: SHA256.hash(data: signingInput))
            }
        }
    }
}

/// Why a presented JWT is refused; the reason names nothing from the token.
struct TokenRejection: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
}

/// The claims FrameTap reads. Only names and types are checked while decoding; `grant()`
/// checks the values after the signature.
struct FrameTapClaims: JWTPayload {
    var exp: ExpirationClaim?
    var nbf: NotBeforeClaim?
    var scope: String?
    var sessions: [String]?

    enum CodingKeys: String, CodingKey {
        case exp, nbf
        case scope = "frametap:scope"
        case sessions = "frametap:sessions"
    }

    /// jwt-kit calls this from its own (async) verification, which is not used here: `Grant`
    /// checks `exp` and `nbf` with the leeway on every request, also for remembered tokens.
    func verify(using _: some JWTAlgorithm) {}

    func grant() throws(TokenRejection) -> Grant {
        guard let expires = exp?.value else { throw TokenRejection("the token has no exp claim") }
        guard let scopeName = scope, let scope = Grant.Scope(rawValue: scopeName) else {
            throw TokenRejection("the token's frametap:scope is not push, view or admin")
        }
        var globs: [SessionGlob] = []
        if scope != .admin {
            guard let sessions else { throw TokenRejection("the token has no frametap:sessions claim") }
            for text in sessions {
                guard let glob = SessionGlob(text) else {
                    throw TokenRejection("the token's frametap:sessions has an invalid glob")
                }
                globs.append(glob)
            }
        }
        return Grant(scope: scope, sessions: globs, notBefore: nbf?.value, expires: expires)
    }
}

/// Grants of tokens whose signature has been checked, so a client that sends the same token
/// with every request (long polls, thumbnails, pushes in chunks) pays for an RS256 or ES256
/// verification once. Only valid tokens get here, so a client cannot fill it with garbage;
/// when it is full, the expired grants go, and if that is not enough, all of them (the next
/// request of each client verifies again). `exp` and `nbf` are checked on every use.
final class VerifiedTokenCache: Sendable {
    private let capacity: Int
    private let grants = Mutex<[String: Grant]>([:])

    init(capacity: Int) { self.capacity = capacity }

    func grant(for token: String) -> Grant? {
        grants.withLock { $0[token] }
    }

    func remember(_ grant: Grant, for token: String, now: Date) {
        grants.withLock { grants in
            if grants.count >= capacity {
                grants = grants.filter { !$0.value.hasExpired(at: now) }
                if grants.count >= capacity { grants.removeAll(keepingCapacity: true) }
            }
            grants[token] = grant
        }
    }

    var count: Int { grants.withLock { $0.count } }
}

/// A JWKS as read from the file: each key's own description, and jwt-kit's reading of it
/// (which fails for key types jwt-kit does not know, such as `oct`, and must not fail the
/// whole set).
private struct JWKSDocument: Decodable {
    let keys: [Entry]

    struct Entry: Decodable {
        let kty: String?
        let alg: String?
        let kid: String?
        let crv: String?
        let use: String?
        let hasPrivatePart: Bool
        let jwk: Result<JWK, any Error>

        private enum CodingKeys: String, CodingKey { case kty, alg, kid, crv, use, d }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            kty = try container.decodeIfPresent(String.self, forKey: .kty)
            alg = try container.decodeIfPresent(String.self, forKey: .alg)
            kid = try container.decodeIfPresent(String.self, forKey: .kid)
            crv = try container.decodeIfPresent(String.self, forKey: .crv)
            use = try container.decodeIfPresent(String.self, forKey: .use)
            hasPrivatePart = container.contains(.d)
            jwk = Result { try JWK(from: decoder) }
        }

        /// The algorithm the key is for: its `alg`, or, without one, the one FrameTap
        /// supports for its type.
        var algorithm: String? {
            if let alg { return alg }
            switch (kty, crv) {
            case ("RSA", _): return "RS256"
            case ("EC", "P-256"): return "ES256"
            default: return nil
            }
        }

        var unsupportedReason: String {
            if use == "enc" { return "an encryption key (use \"enc\"), skipped" }
            if let alg { return "algorithm \(alg) is not supported (RS256 and ES256 are), skipped" }
            return "key type \(kty ?? "(none)")\(crv.map { " \($0)" } ?? "") is not supported, skipped"
        }

        /// The key, nil for one of a kind FrameTap does not verify with (skipped); throws for
        /// a key of a supported kind that is broken.
        func verificationKey() throws(AccessControlError) -> TokenVerifier.VerificationKey? {
            guard use != "enc", let algorithm, algorithm == "RS256" || algorithm == "ES256" else { return nil }
            // A private key has no business in a file every instance reads; refusing it makes
            // the mistake visible instead of spreading the key further.
            guard !hasPrivatePart else {
                throw AccessControlError(message: "it contains a private key (\"d\"); publish only the public key")
            }
            let jwk: JWK
            switch self.jwk {
            case .success(let decoded): jwk = decoded
            case .failure(let error): throw AccessControlError(message: "\(error)")
            }
            do {
                if algorithm == "RS256" {
                    guard kty == "RSA", let modulus = jwk.modulus, let exponent = jwk.exponent else {
                        throw AccessControlError(message: "RS256 needs kty RSA with n and e")
                    }
                    // jwt-kit checks the key (base64url, at least 2048 bits) but keeps the
                    // swift-crypto key private; DER carries it over.
                    let key = try JWTKit.Insecure.RSA.PublicKey(modulus: modulus, exponent: exponent)
                    return .rs256(try _RSA.Signing.PublicKey(derRepresentation: key.derRepresentation))
                } else {
                    guard kty == "EC", crv == "P-256", let x = jwk.x, let y = jwk.y else {
                        throw AccessControlError(message: "ES256 needs kty EC, crv P-256, x and y")
                    }
                    let key = try ES256PublicKey(parameters: (x, y))
                    return .es256(try P256.Signing.PublicKey(pemRepresentation: key.pemRepresentation))
                }
            } catch let error as AccessControlError {
                throw error
            } catch {
                throw AccessControlError(message: "\(error)")
            }
        }
    }
}
