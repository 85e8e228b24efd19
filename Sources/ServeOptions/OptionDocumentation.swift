import HTTPServer
import Sessions

/// What the table says to people: `frametap serve --help`, README's table, and `--print-config`.
public enum OptionDocumentation {
    /// The paragraph above the options in `--help`.
    public static let precedence = """
        Each option may also come from its environment variable, or from the serve: section of \
        the --config file (which also declares sessions): the command line wins, then the \
        environment, then the file, then the default. SIGINT or SIGTERM stops the server \
        gracefully (exit 0).
        """

    /// `--help`'s option list, in ArgumentParser's layout within `width` columns: each option
    /// with its value's name and its help, then its environment variable, what it accepts and
    /// its default. 79, since ArgumentParser wraps the text it is given again at 80 columns, and
    /// a line of exactly 80 would be broken once more.
    public static func helpList(_ options: [ServeOption] = ServeOption.all, width: Int = 79) -> String {
        let defaults = ServeSettings.defaults
        var rows = options.map { option -> (String, String) in
            let label = option.commandLineName + (option.valueName.map { " <\($0)>" } ?? "")
            var facts: [String] = []
            if let variable = option.environmentVariable { facts.append(variable) }
            if let accepts = option.accepts { facts.append(accepts) }
            if option.changesWithoutRestart { facts.append("a reload applies it") }
            facts.append("default: " + option.defaultValue(defaults).text)
            return (label, plain(option.help) + " [" + plain(facts.joined(separator: "; ")) + "]")
        }
        rows.append(("-h, --help", "Show help information."))
        return rows.map { label, text in item(label, text, width: width) }.joined(separator: "\n")
    }

    /// One option as ArgumentParser lays it out: the label in a 26-column gutter (on a line of
    /// its own when longer), the text wrapped beside it.
    static func item(_ label: String, _ text: String, width: Int) -> String {
        let gutter = 26
        let lines = wrapped(text, width: width - gutter)
        let indent = String(repeating: " ", count: gutter)
        let head = "  " + label
        var result: [String]
        if head.count + 2 <= gutter {
            result = [head + String(repeating: " ", count: gutter - head.count) + (lines.first ?? "")]
            result += lines.dropFirst().map { indent + $0 }
        } else {
            result = [head] + lines.map { indent + $0 }
        }
        return result.joined(separator: "\n")
    }

    /// Words filled into lines of at most `width` characters (a longer word gets a line of its own).
    static func wrapped(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if line.isEmpty {
                line = String(word)
            } else if line.count + 1 + word.count <= width {
                line += " " + word
            } else {
                lines.append(line)
                line = String(word)
            }
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }

    /// Markdown's code marks taken out, for the terminal.
    static func plain(_ text: String) -> String { text.replacing("`", with: "") }

    // MARK: - README

    /// README's Configuration table, in Markdown.
    public static func markdownTable(_ options: [ServeOption] = ServeOption.all) -> String {
        let defaults = ServeSettings.defaults
        var lines = [
            "| option | environment | default | accepts | meaning |",
            "|---|---|---|---|---|",
        ]
        for option in options {
            let label = "`\(option.commandLineName)`" + (option.valueName.map { " *\($0)*" } ?? "")
            let variable = option.environmentVariable.map { "`\($0)`" } ?? "(command line only)"
            let shownDefault: String
            switch option.defaultValue(defaults) {
            case .literal(let text): shownDefault = "`\(text)`"
            case .described(let text): shownDefault = text
            }
            var meaning = option.help
            if let details = option.details { meaning += " " + details.prefix(1).uppercased() + details.dropFirst() + "." }
            if option.changesWithoutRestart { meaning += " A reload of the file applies it without a restart." }
            if option.isSecret { meaning += " In the file, `\(option.name)-file:` reads it from a file." }
            let cells = [label, variable, shownDefault, option.accepts ?? "", meaning].map { $0.replacing("|", with: "\\|") }
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n")
    }

    /// The lines README holds its generated table between.
    public static let readmeStart = "<!-- serve options: generated from Sources/ServeOptions/ServeOptionTable.swift; see OptionDocumentation -->"
    public static let readmeEnd = "<!-- end of serve options -->"
}

extension ServeConfiguration {
    /// The configuration as a configuration file: each option given and where it came from,
    /// each default as a comment, and the declared sessions. A secret is its option's variable
    /// (`${FRAMETAP_AUTH_TOKEN}`), a source URL with credentials `${SOURCE_URL_<ID>}`.
    public var printed: String {
        let defaults = ServeSettings.defaults
        var lines = ["# frametap serve: each option as resolved (command line, environment, file, default)"]
        lines += unknownVariableMessages.map { "# \($0)" }
        lines.append("serve:")
        for entry in resolved where entry.option.isInFile {
            let name = entry.option.name
            if let text = entry.text {
                // A secret is not shown: its option's own variable stands in for it, so the output
                // reads back with the secret from there, or is refused, naming the variable. A
                // stand-in text would read back as a token anyone knows, and leaving the line out as
                // a server without the secret.
                if entry.option.isSecret, let variable = entry.option.environmentVariable {
                    lines.append("  \(name): ${\(variable)}  # \(entry.origin), not shown")
                } else {
                    lines.append("  \(name): \(yamlScalar(text))  # \(entry.origin)")
                }
            } else {
                lines.append("  # \(name): \(entry.option.defaultValue(defaults).text)  (default)")
            }
        }
        lines.append(declaredSessions.isEmpty ? "sessions: {}" : "sessions:")
        var urlVariables = Set<String>()
        for session in declaredSessions {
            let options = session.options
            var members: [String] = []
            if case .some(.some(let source)) = options.source {
                members.append("source:")
                let url = source.url
                if url.redacted == url.openedText() {
                    members.append("  url: \(yamlScalar(url.openedText()))")
                } else {
                    // As a secret option: a variable stands in for the whole URL, so the output
                    // reads back with the URL from there, or is refused naming it; the `***` of the
                    // redacted URL would read back as a user name.
                    // Ids that differ in case or punctuation (cam-1, cam.1) would share a name.
                    let base = Self.urlVariable(of: session.id)
                    var variable = base
                    var count = 1
                    while !urlVariables.insert(variable).inserted {
                        count += 1
                        variable = "\(base)_\(count)"
                    }
                    members.append("  url: ${\(variable)}  # \(url.redacted), credentials not shown")
                }
                if let transport = source.transport { members.append("  transport: \(transport.rawValue)") }
                if source.connect != .always { members.append("  connect: \(source.connect.rawValue)") }
            }
            if let codec = options.codec { members.append("codec: \(codec.rawValue)") }
            if let decode = options.decode { members.append("decode: \(decode.rawValue)") }
            if let backend = options.backend { members.append("backend: \(backend.rawValue)") }
            if let quality = options.quality { members.append("quality: \(quality)") }
            if case .some(.some(let owner)) = options.owner { members.append("owner: \(yamlScalar(owner.rawValue))") }
            lines.append("  \(session.id):" + (members.isEmpty ? " {}" : "") + "  # \(session.origin)")
            lines += members.map { "    " + $0 }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

extension ServeConfiguration {
    /// The options someone gave, for the log's start-up line: `name=value (where)`, in the
    /// table's order, a secret as `<not shown>`; empty when every option is its default.
    public var givenOptions: String {
        resolved.compactMap { entry in
            guard let text = entry.text else { return nil }
            return "\(entry.option.name)=\(entry.option.isSecret ? "<not shown>" : text) (\(entry.origin))"
        }.joined(separator: ", ")
    }
}

extension ServeConfiguration {
    /// The variable `printed` writes for a declared source URL with credentials:
    /// `SOURCE_URL_` and the session's id in capitals, `_` for what a variable's name cannot hold.
    static func urlVariable(of id: SessionID) -> String {
        "SOURCE_URL_" + String(id.rawValue.uppercased().map { $0.isASCII && ($0.isLetter || $0.isNumber) ? $0 : "_" })
    }
}

/// `text` as a YAML scalar: plain when it reads back as the same text, else double-quoted.
func yamlScalar(_ text: String) -> String {
    let plainSafe =
        !text.isEmpty && text.first.map { $0.isLetter || $0.isNumber || $0 == "/" || $0 == "." } == true
        && text.allSatisfy { $0.isLetter || $0.isNumber || "._-/:,=+".contains($0) }
        && !text.contains(": ") && !["null", "~", "true", "false", "yes", "no", "on", "off"].contains(text.lowercased())
    return plainSafe ? text : JSONString.quoted(text)
}
