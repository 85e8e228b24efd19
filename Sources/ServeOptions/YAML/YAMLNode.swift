/// A node of a YAML document, with the place its text starts: what the configuration file is
/// read as. Aliases are already resolved (an alias is a copy of its anchor's node), so the tree
/// holds scalars, lists and mappings only.
struct YAMLNode {
    enum Content {
        case scalar(YAMLScalar)
        case sequence([YAMLNode])
        /// The pairs in the file's order (no key twice: the parser refuses that).
        case mapping([(key: YAMLNode, value: YAMLNode)])
    }

    var content: Content
    let mark: YAMLMark

    init(_ content: Content, at mark: YAMLMark) {
        self.content = content
        self.mark = mark
    }

    /// A scalar's text, nil for a list or a mapping.
    var text: String? {
        if case .scalar(let scalar) = content { return scalar.text }
        return nil
    }

    var isNull: Bool {
        if case .scalar(let scalar) = content { return scalar.kind == .null }
        return false
    }
}

/// Where a node starts; lines and columns count from 1 (columns in characters).
struct YAMLMark: Equatable {
    let line: Int
    let column: Int
}

/// Why a text is not a YAML document the file may be, and where.
struct YAMLError: Error {
    let message: String
    let mark: YAMLMark

    init(_ message: String, at mark: YAMLMark) {
        self.message = message
        self.mark = mark
    }
}

/// A scalar: its text as written (quotes and escapes read), how it was written, and what it is
/// under the YAML 1.2 core schema: a plain scalar is null, a boolean, a whole number or a float
/// when its text reads as one, any other is a string (quoted text always is).
struct YAMLScalar {
    enum Style {
        case plain, singleQuoted, doubleQuoted, literal, folded
    }

    /// The core schema's types.
    enum Kind {
        case null, bool, int, float, string
    }

    var text: String
    let style: Style
    /// The type an explicit tag (`!!int`, `!!str`, the non-specific `!`) gives it; nil when it has
    /// none and its text decides.
    let tag: Kind?

    init(_ text: String, style: Style, tag: Kind? = nil) {
        self.text = text
        self.style = style
        self.tag = tag
    }

    /// Worked out from the text each time, so a plain `${NAME}` is typed by the value it stands
    /// for once the configuration file has put that in.
    var kind: Kind { tag ?? (style == .plain ? Self.kind(ofPlain: text) : .string) }

    /// The core schema's resolution of a plain scalar (YAML 1.2.2, 10.3.2).
    static func kind(ofPlain text: String) -> Kind {
        switch text {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE", "false", "False", "FALSE": return .bool
        default: break
        }
        if text.wholeMatch(of: /[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+/) != nil { return .int }
        if text.wholeMatch(of: /[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?/) != nil
            || text.wholeMatch(of: /[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)/) != nil
        {
            return .float
        }
        return .string
    }

    var bool: Bool? {
        guard kind == .bool else { return nil }
        switch text {
        case "true", "True", "TRUE": return true
        case "false", "False", "FALSE": return false
        default: return nil
        }
    }

    /// A whole number that fits `Value`; nil for one that does not, or for another kind.
    func integer<Value: FixedWidthInteger>(_: Value.Type) -> Value? {
        guard kind == .int else { return nil }
        if text.hasPrefix("0x") { return Value(text.dropFirst(2), radix: 16) }
        if text.hasPrefix("0o") { return Value(text.dropFirst(2), radix: 8) }
        return Value(text, radix: 10)
    }

    /// A float, or a whole number as one.
    var double: Double? {
        switch kind {
        case .int:
            return integer(Int64.self).map(Double.init) ?? Double(text)
        case .float:
            switch text.trimmingPrefix(/[-+]/).lowercased() {
            case ".inf": return text.hasPrefix("-") ? -.infinity : .infinity
            case ".nan": return .nan
            default: return Double(text)
            }
        default:
            return nil
        }
    }
}
