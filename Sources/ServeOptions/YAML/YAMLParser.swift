import CYAML

extension YAMLNode {
    /// The one document of `text`, read by libyaml's parser and composed into nodes; nil when
    /// the text holds none (it is empty, or comments only). A second document, a key twice in a
    /// mapping, an alias to no anchor, a tag outside the core schema and a syntax error are
    /// refused with their place.
    static func document(_ text: String) throws(YAMLError) -> YAMLNode? {
        let bytes = Array(text.utf8)
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        defer { parser.deallocate() }
        guard yaml_parser_initialize(parser) != 0 else {
            throw YAMLError("not enough memory to read YAML", at: YAMLMark(line: 1, column: 1))
        }
        defer { yaml_parser_delete(parser) }
        return try bytes.withUnsafeBufferPointer { buffer throws(YAMLError) in
            // libyaml keeps the pointer (and one to the parser itself): both stay put until the
            // parser is deleted.
            yaml_parser_set_input_string(parser, buffer.baseAddress, buffer.count)
            yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)
            var composer = YAMLComposer(parser: parser, bytes: buffer)
            return try composer.document()
        }
    }
}

/// Turns libyaml's events into nodes, resolving aliases as copies of their anchor's node.
private struct YAMLComposer {
    /// Deeper nesting is refused, also where aliases put a copy inside a copy: composing, and
    /// every reader of the tree after it, recurses per level.
    static let depthLimit = 64
    /// Nodes in the document, each alias counted as the nodes it copies: a few aliases of
    /// aliases of lists would otherwise stand for billions.
    static let nodeLimit = 100_000

    let parser: UnsafeMutablePointer<yaml_parser_t>
    let bytes: UnsafeBufferPointer<UInt8>
    var anchors: [String: Composed] = [:]
    var nodes = 0

    /// A node, the nodes it counts (itself included) and the levels below it.
    struct Composed {
        let node: YAMLNode
        let count: Int
        let height: Int
    }

    mutating func document() throws(YAMLError) -> YAMLNode? {
        guard case .streamStart = try next().event else { throw unexpected() }
        let (event, _) = try next()
        guard case .documentStart = event else { return nil }  // the stream's end: no document
        let (first, mark) = try next()
        let root = try node(first, at: mark, depth: 0).node
        guard case .documentEnd = try next().event else { throw unexpected() }
        let (after, afterMark) = try next()
        if case .documentStart = after {
            throw YAMLError("a second YAML document (the file holds one: serve: and sessions:)", at: afterMark)
        }
        return root
    }

    private mutating func node(_ event: Event, at mark: YAMLMark, depth: Int) throws(YAMLError) -> Composed {
        let before = nodes
        try count(1, at: mark)
        let node: YAMLNode
        var height = 0
        let anchor: String?
        switch event {
        case .scalar(let scalar, let name):
            node = YAMLNode(.scalar(scalar), at: mark)
            anchor = name
        case .alias(let name):
            guard let anchored = anchors[name] else {
                throw YAMLError("the alias *\(name) has no anchor &\(name) before it", at: mark)
            }
            try count(anchored.count - 1, at: mark)
            try checkDepth(depth + anchored.height, at: mark)
            // Its own place, for what is said about the whole value; the nodes inside keep theirs.
            return Composed(node: YAMLNode(anchored.node.content, at: mark), count: anchored.count, height: anchored.height)
        case .sequenceStart(let name):
            try checkDepth(depth + 1, at: mark)
            var items: [YAMLNode] = []
            while true {
                let (itemEvent, itemMark) = try next()
                if case .sequenceEnd = itemEvent { break }
                let item = try self.node(itemEvent, at: itemMark, depth: depth + 1)
                items.append(item.node)
                height = max(height, item.height + 1)
            }
            node = YAMLNode(.sequence(items), at: mark)
            anchor = name
        case .mappingStart(let name):
            try checkDepth(depth + 1, at: mark)
            var pairs: [(key: YAMLNode, value: YAMLNode)] = []
            var keys: Set<String> = []
            while true {
                let (keyEvent, keyMark) = try next()
                if case .mappingEnd = keyEvent { break }
                let key = try self.node(keyEvent, at: keyMark, depth: depth + 1)
                if let text = key.node.text, !keys.insert(text).inserted {
                    throw YAMLError("a key appears twice: \(text)", at: keyMark)
                }
                let (valueEvent, valueMark) = try next()
                let value = try self.node(valueEvent, at: valueMark, depth: depth + 1)
                pairs.append((key.node, value.node))
                height = max(height, key.height + 1, value.height + 1)
            }
            node = YAMLNode(.mapping(pairs), at: mark)
            anchor = name
        default:
            throw unexpected()
        }
        let composed = Composed(node: node, count: nodes - before, height: height)
        if let anchor { anchors[anchor] = composed }
        return composed
    }

    /// `depth`: the level of a node's deepest member (the root's members are at 1).
    private func checkDepth(_ depth: Int, at mark: YAMLMark) throws(YAMLError) {
        guard depth <= Self.depthLimit else {
            throw YAMLError("nested more than \(Self.depthLimit) levels deep", at: mark)
        }
    }

    private mutating func count(_ added: Int, at mark: YAMLMark) throws(YAMLError) {
        nodes += added
        guard nodes <= Self.nodeLimit else {
            throw YAMLError("more than \(Self.nodeLimit) values (aliases counted as what they copy)", at: mark)
        }
    }

    // MARK: - libyaml's events

    /// An event, copied out of libyaml's (which is freed at once).
    enum Event {
        case streamStart, streamEnd, documentStart, documentEnd
        case alias(String)
        case scalar(YAMLScalar, anchor: String?)
        case sequenceStart(anchor: String?), sequenceEnd
        case mappingStart(anchor: String?), mappingEnd
    }

    private func next() throws(YAMLError) -> (event: Event, mark: YAMLMark) {
        var event = yaml_event_t()
        guard yaml_parser_parse(parser, &event) != 0 else { throw syntaxError() }
        defer { yaml_event_delete(&event) }
        let mark = YAMLMark(event.start_mark)
        switch event.type {
        case YAML_STREAM_START_EVENT: return (.streamStart, mark)
        case YAML_STREAM_END_EVENT: return (.streamEnd, mark)
        case YAML_DOCUMENT_START_EVENT: return (.documentStart, mark)
        case YAML_DOCUMENT_END_EVENT: return (.documentEnd, mark)
        case YAML_ALIAS_EVENT: return (.alias(Self.string(event.data.alias.anchor) ?? ""), mark)
        case YAML_SCALAR_EVENT:
            let data = event.data.scalar
            let text = data.value.map { String(decoding: UnsafeBufferPointer(start: $0, count: data.length), as: UTF8.self) } ?? ""
            let style: YAMLScalar.Style =
                switch data.style {
                case YAML_SINGLE_QUOTED_SCALAR_STYLE: .singleQuoted
                case YAML_DOUBLE_QUOTED_SCALAR_STYLE: .doubleQuoted
                case YAML_LITERAL_SCALAR_STYLE: .literal
                case YAML_FOLDED_SCALAR_STYLE: .folded
                default: .plain
                }
            let tag = try Self.scalarKind(tagged: Self.string(data.tag), at: mark)
            return (.scalar(YAMLScalar(text, style: style, tag: tag), anchor: Self.string(data.anchor)), mark)
        case YAML_SEQUENCE_START_EVENT:
            let data = event.data.sequence_start
            try Self.checkCollection(tagged: Self.string(data.tag), as: "seq", at: mark)
            return (.sequenceStart(anchor: Self.string(data.anchor)), mark)
        case YAML_SEQUENCE_END_EVENT: return (.sequenceEnd, mark)
        case YAML_MAPPING_START_EVENT:
            let data = event.data.mapping_start
            try Self.checkCollection(tagged: Self.string(data.tag), as: "map", at: mark)
            return (.mappingStart(anchor: Self.string(data.anchor)), mark)
        case YAML_MAPPING_END_EVENT: return (.mappingEnd, mark)
        default: throw unexpected()
        }
    }

    private static let coreTagPrefix = "tag:yaml.org,2002:"

    /// A scalar's explicit tag as a core schema type; nil for none (its text decides).
    private static func scalarKind(tagged tag: String?, at mark: YAMLMark) throws(YAMLError) -> YAMLScalar.Kind? {
        switch tag {
        case nil: return nil
        case "!", coreTagPrefix + "str": return .string
        case coreTagPrefix + "null": return .null
        case coreTagPrefix + "bool": return .bool
        case coreTagPrefix + "int": return .int
        case coreTagPrefix + "float": return .float
        case let tag?: throw YAMLError("the tag \(shown(tag)) is not one of !!str, !!int, !!float, !!bool and !!null", at: mark)
        }
    }

    private static func checkCollection(tagged tag: String?, as name: String, at mark: YAMLMark) throws(YAMLError) {
        guard let tag, tag != "!", tag != coreTagPrefix + name else { return }
        throw YAMLError("the tag \(shown(tag)) is not !!\(name)", at: mark)
    }

    private static func shown(_ tag: String) -> String {
        tag.hasPrefix(coreTagPrefix) ? "!!" + tag.dropFirst(coreTagPrefix.count) : tag
    }

    private static func string(_ text: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        text.map { String(cString: $0) }
    }

    /// libyaml's words for what is wrong, with its place; a reader error (a character YAML does
    /// not allow) has only the byte's offset, whose line and column are counted here.
    private func syntaxError() -> YAMLError {
        let state = parser.pointee
        var message = "not valid YAML: " + (state.problem.map { String(cString: $0) } ?? "libyaml stopped")
        if let context = state.context {
            message += " (\(String(cString: context)) at line \(state.context_mark.line + 1))"
        }
        guard state.error == YAML_READER_ERROR else { return YAMLError(message, at: YAMLMark(state.problem_mark)) }
        let before = bytes.prefix(min(state.problem_offset, bytes.count))
        let line = before.count { $0 == UInt8(ascii: "\n") } + 1
        let lineStart = before.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? 0
        let column = String(decoding: before[lineStart...], as: UTF8.self).unicodeScalars.count + 1
        return YAMLError(message, at: YAMLMark(line: line, column: column))
    }

    private func unexpected() -> YAMLError {
        YAMLError("not valid YAML: libyaml's events out of order", at: YAMLMark(parser.pointee.mark))
    }
}

extension YAMLMark {
    /// libyaml counts from 0.
    fileprivate init(_ mark: yaml_mark_t) {
        self.init(line: mark.line + 1, column: mark.column + 1)
    }
}
