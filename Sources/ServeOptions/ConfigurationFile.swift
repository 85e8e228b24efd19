import FoundationEssentials
import Sessions

/// The configuration file of `frametap serve --config FILE`, read and checked: YAML with two
/// sections, `serve:` (the options of the table under their long names) and `sessions:` (each
/// session id with the object `PUT /sessions/{id}` takes). Anything it cannot take (an unknown
/// key, a wrong type, an invalid value) is an error naming the file, the line and the key.
///
/// Secrets need not sit in the file: `${NAME}` in a value is the environment variable NAME
/// (`$${` writes a literal `${`), and a secret option `NAME` may be `NAME-file: PATH` instead,
/// the contents of that file (a Kubernetes or Docker secret; its trailing line break dropped).
public struct ConfigurationFile: Sendable {
    /// An option of `serve:`, its text (variables and files read), and its line.
    public struct Entry: Sendable {
        public let option: ServeOption
        public let text: String
        public let origin: OptionOrigin
    }

    public let path: String
    public let options: [Entry]
    public let sessions: [DeclaredSession]

    /// Reads and checks the file at `path`. Without `includingSessions`, its `sessions:` are
    /// neither read nor checked (for a reader that wants only where the server listens).
    public init(path: String, environment: [String: String], includingSessions: Bool = true) throws(ServeConfigurationError) {
        guard let bytes = FileManager.default.contents(atPath: path) else {
            throw ServeConfigurationError("cannot read the configuration file \(path)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ServeConfigurationError("the configuration file \(path) is not UTF-8 text")
        }
        try self.init(path: path, text: text, environment: environment, includingSessions: includingSessions)
    }

    /// Checks `text`, the contents of the file at `path` (which errors name).
    public init(
        path: String, text: String, environment: [String: String], includingSessions: Bool = true
    ) throws(ServeConfigurationError) {
        self.path = path
        let reader = ConfigurationReader(path: path, environment: environment)
        let root: YAMLNode?
        do {
            root = try YAMLNode.document(text)
        } catch {
            throw ServeConfigurationError(error.message, origin: reader.origin(error.mark))
        }
        var options: [Entry] = []
        var sessions: [DeclaredSession] = []
        if let root, !root.isNull {
            guard case .mapping(let top) = root.content else {
                throw reader.error("the file must be a mapping with serve: and sessions:", at: root, key: nil)
            }
            for (keyNode, value) in top {
                let key = try reader.key(keyNode, in: nil)
                switch key {
                case "serve": options = try reader.serveOptions(value)
                case "sessions": if includingSessions { sessions = try reader.sessions(value) }
                default:
                    throw reader.error(
                        "unknown section", at: keyNode, key: key,
                        suggestion: nearestName(to: key, among: ["serve", "sessions"]))
                }
            }
        }
        self.options = options
        self.sessions = sessions
    }
}

/// The file's nodes, read with the file's path and the environment its `${NAME}` reads.
struct ConfigurationReader {
    let path: String
    let environment: [String: String]

    func origin(_ mark: YAMLMark) -> OptionOrigin {
        .file(path: path, line: mark.line, column: mark.column)
    }

    func origin(_ node: YAMLNode) -> OptionOrigin { origin(node.mark) }

    func error(_ message: String, at node: YAMLNode, key: String?, suggestion: String? = nil) -> ServeConfigurationError {
        ServeConfigurationError(message, origin: origin(node), key: key, suggestion: suggestion)
    }

    /// A mapping's key: a name (a number is read as its text).
    func key(_ node: YAMLNode, in parent: String?) throws(ServeConfigurationError) -> String {
        guard let text = node.text else {
            throw error("a key must be a name, not a \(kind(of: node))", at: node, key: parent)
        }
        return text
    }

    func kind(of node: YAMLNode) -> String {
        switch node.content {
        case .scalar: "value"
        case .mapping: "mapping"
        case .sequence: "list"
        }
    }

    // MARK: - Values

    /// `${NAME}` replaced by the environment variable NAME; `$${` is a literal `${`.
    func expand(_ text: String, at node: YAMLNode, key: String) throws(ServeConfigurationError) -> String {
        guard text.contains("${") else { return text }
        var result = ""
        var rest = Substring(text)
        while let start = rest.firstRange(of: "${") {
            if start.lowerBound > rest.startIndex, rest[rest.index(before: start.lowerBound)] == "$" {
                result += rest[..<rest.index(before: start.lowerBound)] + "${"
                rest = rest[start.upperBound...]
                continue
            }
            result += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else {
                throw error("'${' without its '}' (write '$${' for a literal '${')", at: node, key: key)
            }
            let name = String(rest[start.upperBound..<end])
            guard Self.isVariableName(name) else {
                throw error("'${\(name)}' is not an environment variable's name", at: node, key: key)
            }
            guard let value = environment[name] else {
                throw error("the environment variable \(name) is not set", at: node, key: key)
            }
            result += value
            rest = rest[rest.index(after: end)...]
        }
        return result + rest
    }

    static func isVariableName(_ name: String) -> Bool {
        guard let first = name.utf8.first, first == UInt8(ascii: "_") || (first | 0x20) >= UInt8(ascii: "a") && (first | 0x20) <= UInt8(ascii: "z")
        else { return false }
        return name.utf8.allSatisfy { byte in
            byte == UInt8(ascii: "_") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
        }
    }

    /// A single value's text, its variables read.
    func scalarText(_ node: YAMLNode, key: String) throws(ServeConfigurationError) -> String {
        guard !node.isNull else { throw error("has no value", at: node, key: key) }
        guard let text = node.text else {
            throw error("must be a single value, not a \(kind(of: node))", at: node, key: key)
        }
        return try expand(text, at: node, key: key)
    }

    /// The contents of the file at `path`, without its trailing line breaks (the one `echo` or
    /// an editor leaves).
    func secret(fromFile node: YAMLNode, key: String) throws(ServeConfigurationError) -> String {
        let path = try scalarText(node, key: key)
        guard let bytes = FileManager.default.contents(atPath: path) else {
            throw error("cannot read the file \(path)", at: node, key: key)
        }
        var text = String(decoding: bytes, as: UTF8.self)
        while let last = text.last, last.isNewline { text.removeLast() }
        return text
    }

    // MARK: - serve:

    func serveOptions(_ section: YAMLNode) throws(ServeConfigurationError) -> [ConfigurationFile.Entry] {
        guard !section.isNull else { return [] }
        guard case .mapping(let mapping) = section.content else {
            throw error("must be a mapping of options (port: 8080)", at: section, key: "serve")
        }
        let secrets = ServeOption.all.filter { $0.isInFile && $0.isSecret }
        let known = ServeOption.all.filter(\.isInFile).map(\.name) + secrets.map { $0.name + "-file" }
        var entries: [ConfigurationFile.Entry] = []
        for (keyNode, value) in mapping {
            let name = try key(keyNode, in: "serve")
            let key = "serve." + name
            let text: String
            let option: ServeOption
            if let direct = ServeOption.named(name), direct.isInFile {
                option = direct
                text = try optionText(value, option: option, key: key)
            } else if name.hasSuffix("-file"), let secret = secrets.first(where: { $0.name + "-file" == name }) {
                option = secret
                text = try self.secret(fromFile: value, key: key)
            } else if let elsewhere = ServeOption.named(name) {
                throw error("\(elsewhere.commandLineName) is given on the command line or in the environment", at: keyNode, key: key)
            } else {
                throw error("unknown option", at: keyNode, key: key, suggestion: nearestName(to: name, among: known))
            }
            if let earlier = entries.first(where: { $0.option.name == option.name }) {
                throw error(
                    "\(option.name) is given twice (also at line \(earlier.originLine)): give \(option.name) or \(option.name)-file",
                    at: keyNode, key: key)
            }
            entries.append(ConfigurationFile.Entry(option: option, text: text, origin: origin(keyNode)))
        }
        return entries
    }

    /// A value, or for a list option a YAML list of values (joined with commas as on the command line).
    func optionText(_ node: YAMLNode, option: ServeOption, key: String) throws(ServeConfigurationError) -> String {
        if option.isList, case .sequence(let items) = node.content {
            var texts: [String] = []
            for item in items { texts.append(try scalarText(item, key: key)) }
            return texts.joined(separator: ",")
        }
        return try scalarText(node, key: key)
    }
}

extension ConfigurationFile.Entry {
    var originLine: Int {
        if case .file(_, let line, _) = origin { return line }
        return 0
    }
}
