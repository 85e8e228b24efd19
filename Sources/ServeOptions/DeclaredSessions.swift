import FrameTapAPI
import Sessions

/// A session the configuration file declares: its id and what `PUT /sessions/{id}` with the
/// same object would ask for.
public struct DeclaredSession: Sendable, Equatable {
    public let id: SessionID
    public let options: SessionOptions
    /// The file and the line of its id.
    public let origin: OptionOrigin
}

/// The members a session's `source:` may have in the file besides those of the `PUT` body: the
/// URL from a file, and the credentials apart from the URL (from the environment or a file,
/// percent-encoded into the URL's user information by FrameTap).
enum FileSourceMember: String, CaseIterable {
    case urlFile = "url-file"
    case username, password
    case usernameFile = "username-file"
    case passwordFile = "password-file"
}

extension ConfigurationReader {
    /// `sessions:`: each id with its options, in the file's order.
    func sessions(_ section: YAMLNode) throws(ServeConfigurationError) -> [DeclaredSession] {
        guard !section.isNull else { return [] }
        guard case .mapping(let mapping) = section.content else {
            throw error("must be a mapping of session ids to their options", at: section, key: "sessions")
        }
        var sessions: [DeclaredSession] = []
        for (keyNode, value) in mapping {
            let name = try key(keyNode, in: "sessions")
            let key = "sessions." + name
            let id: SessionID
            do {
                id = try SessionID(name)
            } catch {
                throw self.error(error.message, at: keyNode, key: key)
            }
            sessions.append(DeclaredSession(id: id, options: try options(value, key: key), origin: origin(keyNode)))
        }
        return sessions
    }

    /// The session's object, read by the `PUT` body's own decoder once its variables, files and
    /// credentials are in place.
    private func options(_ node: YAMLNode, key: String) throws(ServeConfigurationError) -> SessionOptions {
        guard !node.isNull else { return SessionOptions() }
        guard case .mapping = node.content else {
            throw error("must be a mapping of the session's options (source, codec, decode, ...)", at: node, key: key)
        }
        let body = try prepared(node, key: key)
        do {
            return try SessionOptionsJSON(from: YAMLNodeDecoder(body)).options
        } catch let refusal as SessionOptionsJSON.Refusal {
            let (at, member) = locate(refusal.path, in: body)
            var known = refusal.knownMembers
            if refusal.path.count == 2, refusal.path.first == "source" { known += FileSourceMember.allCases.map(\.rawValue) }
            throw self.error(
                refusal.knownMembers.isEmpty ? refusal.detail : "unknown option", at: at,
                key: ([key] + refusal.path.prefix(member)).joined(separator: "."),
                suggestion: refusal.knownMembers.isEmpty ? nil : refusal.path.last.flatMap { nearestName(to: $0, among: known) })
        } catch DecodingError.typeMismatch(let type, let context) {
            let wanted = type == Int.self ? "a whole number" : type == String.self ? "a single value" : "a mapping"
            throw self.error("must be \(wanted)", at: context.codingPath, in: body, key: key)
        } catch DecodingError.valueNotFound(_, let context) {
            throw self.error("has no value", at: context.codingPath, in: body, key: key)
        } catch {
            throw self.error("cannot be read: \(error)", at: node, key: key)
        }
    }

    /// An error at the member the decoder was reading, `path` from the session's `body`.
    private func error(_ message: String, at path: [any CodingKey], in body: YAMLNode, key: String) -> ServeConfigurationError {
        let members = path.map(\.stringValue)
        let (at, found) = locate(members, in: body)
        return error(message, at: at, key: ([key] + members.prefix(found)).joined(separator: "."))
    }

    /// The key node at `path` from `node` (the deepest that exists), and how many of the path's
    /// members it covers.
    private func locate(_ path: [String], in node: YAMLNode) -> (YAMLNode, Int) {
        var current = node
        var keyNode = node
        for (depth, member) in path.enumerated() {
            guard case .mapping(let mapping) = current.content,
                let pair = mapping.first(where: { $0.key.text == member })
            else { return (keyNode, depth) }
            keyNode = pair.key
            current = pair.value
        }
        return (keyNode, path.count)
    }

    /// The node with every value's `${NAME}` read, and `source:`'s file-only members turned
    /// into its `url`.
    private func prepared(_ node: YAMLNode, key: String) throws(ServeConfigurationError) -> YAMLNode {
        switch node.content {
        case .scalar(var scalar):
            scalar.text = try expand(scalar.text, at: node, key: key)
            return YAMLNode(.scalar(scalar), at: node.mark)
        case .sequence(let sequence):
            var items: [YAMLNode] = []
            for item in sequence { items.append(try prepared(item, key: key)) }
            return YAMLNode(.sequence(items), at: node.mark)
        case .mapping(let mapping):
            var pairs: [(key: YAMLNode, value: YAMLNode)] = []
            for (memberNode, value) in mapping {
                let member = memberNode.text ?? ""
                let memberKey = key + "." + member
                if member == "source", case .mapping(let source) = value.content {
                    pairs.append((memberNode, try preparedSource(source, at: value.mark, key: memberKey)))
                } else {
                    pairs.append((memberNode, try prepared(value, key: memberKey)))
                }
            }
            return YAMLNode(.mapping(pairs), at: node.mark)
        }
    }

    /// `url` (or `url-file`), with `username` and `password` (or their `-file`) put into it.
    private func preparedSource(
        _ source: [(key: YAMLNode, value: YAMLNode)], at mark: YAMLMark, key: String
    ) throws(ServeConfigurationError) -> YAMLNode {
        var pairs: [(key: YAMLNode, value: YAMLNode)] = []
        var url: (key: YAMLNode, text: String)?
        var credentials: [FileSourceMember: (key: YAMLNode, text: String)] = [:]
        for (memberNode, value) in source {
            let member = memberNode.text ?? ""
            let memberKey = key + "." + member
            switch FileSourceMember(rawValue: member) {
            case .urlFile:
                guard url == nil else { throw error("give url or url-file, not both", at: memberNode, key: memberKey) }
                url = (memberNode, try secret(fromFile: value, key: memberKey))
            case let credential?:
                let plain: FileSourceMember = credential == .usernameFile ? .username : credential == .passwordFile ? .password : credential
                guard credentials[plain] == nil else {
                    throw error("give \(plain.rawValue) or \(plain.rawValue)-file, not both", at: memberNode, key: memberKey)
                }
                let text = credential == plain ? try scalarText(value, key: memberKey) : try secret(fromFile: value, key: memberKey)
                credentials[plain] = (memberNode, text)
            case nil where member == "url":
                guard url == nil else { throw error("give url or url-file, not both", at: memberNode, key: memberKey) }
                url = (memberNode, try scalarText(value, key: memberKey))
            case nil:
                pairs.append((memberNode, try prepared(value, key: memberKey)))
            }
        }
        if let (urlKey, urlText) = url {
            var text = urlText
            if let user = credentials[.username] {
                text = try withCredentials(text, user: user.text, password: credentials[.password]?.text, at: urlKey, key: key + ".url")
            } else if let password = credentials[.password] {
                throw error("a password needs its username", at: password.key, key: key + ".password")
            }
            // Quoted, so that the URL is read as the string it is, whatever its text.
            let quoted = { (text: String) in YAMLNode(.scalar(YAMLScalar(text, style: .doubleQuoted)), at: urlKey.mark) }
            pairs.insert((quoted("url"), quoted(text)), at: 0)
        } else if let credential = credentials.values.first {
            throw error("credentials need the source's url", at: credential.key, key: key)
        }
        return YAMLNode(.mapping(pairs), at: mark)
    }

    /// `scheme://user:password@rest`, each part percent-encoded.
    private func withCredentials(
        _ url: String, user: String, password: String?, at node: YAMLNode, key: String
    ) throws(ServeConfigurationError) -> String {
        guard let separator = url.firstRange(of: "://") else { return url }  // the PUT decoder names what is wrong
        let rest = url[separator.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.contains("@") else {
            throw error("the url already has credentials; give them in the url or as username and password", at: node, key: key)
        }
        let userInfo = Self.percentEncoded(user) + (password.map { ":" + Self.percentEncoded($0) } ?? "")
        return url[..<separator.upperBound] + userInfo + "@" + rest
    }

    /// Every byte but RFC 3986's unreserved characters as `%XX`.
    static func percentEncoded(_ text: String) -> String {
        var result = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let digits = Array("0123456789ABCDEF")
                result += "%" + String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 15)])
            }
        }
        return result
    }
}
