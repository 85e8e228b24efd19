/// A `Decoder` over a node, so that a `Decodable` type written for JSON reads the same object
/// in YAML: a mapping is a keyed container (its keys in the file's order), a list an unkeyed one,
/// a scalar a single value. A string is any scalar's text; a number or a boolean is a scalar the
/// core schema types so; a null scalar is nil. A refusal's coding path names the members from
/// the node the decoding started at.
struct YAMLNodeDecoder: Decoder {
    let node: YAMLNode
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(_ node: YAMLNode, codingPath: [any CodingKey] = []) {
        self.node = node
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .mapping(let pairs) = node.content else { throw mismatch([String: Any].self, wanted: "a mapping") }
        return KeyedDecodingContainer(MappingContainer(pairs: pairs, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .sequence(let items) = node.content else { throw mismatch([Any].self, wanted: "a list") }
        return SequenceContainer(items: items, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func mismatch(_ type: Any.Type, wanted: String) -> DecodingError {
        let found =
            switch node.content {
            case .scalar(let scalar): "'\(scalar.text)'"
            case .sequence: "a list"
            case .mapping: "a mapping"
            }
        return .typeMismatch(type, DecodingError.Context(codingPath: codingPath, debugDescription: "expected \(wanted), found \(found)"))
    }
}

extension YAMLNodeDecoder: SingleValueDecodingContainer {
    func decodeNil() -> Bool { node.isNull }

    func decode(_ type: String.Type) throws -> String { try scalar(type, wanted: "a single value") { $0.text } }
    func decode(_ type: Bool.Type) throws -> Bool { try scalar(type, wanted: "true or false") { $0.bool } }
    func decode(_ type: Double.Type) throws -> Double { try scalar(type, wanted: "a number") { $0.double } }
    func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }
    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: self) }

    private func integer<Value: FixedWidthInteger>(_ type: Value.Type) throws -> Value {
        try scalar(type, wanted: "a whole number within \(Value.min)...\(Value.max)") { $0.integer(type) }
    }

    /// The scalar's value as `read` gives it; a null scalar is no value at all.
    private func scalar<Value>(_ type: Value.Type, wanted: String, _ read: (YAMLScalar) -> Value?) throws -> Value {
        guard case .scalar(let scalar) = node.content else { throw mismatch(type, wanted: wanted) }
        guard scalar.kind != .null else {
            throw DecodingError.valueNotFound(type, DecodingError.Context(codingPath: codingPath, debugDescription: "no value"))
        }
        guard let value = read(scalar) else { throw mismatch(type, wanted: wanted) }
        return value
    }
}

/// A member's name, or a list item's index, in a coding path.
private struct YAMLKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(stringValue: String) {
        self.stringValue = stringValue
        self.intValue = nil
    }

    init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }
}

private struct MappingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let pairs: [(key: YAMLNode, value: YAMLNode)]
    let codingPath: [any CodingKey]

    var allKeys: [Key] { pairs.compactMap { $0.key.text.flatMap(Key.init(stringValue:)) } }

    func contains(_ key: Key) -> Bool { pairs.contains { $0.key.text == key.stringValue } }

    func decodeNil(forKey key: Key) throws -> Bool { try member(key).decodeNil() }

    /// Every type's `decode(_:forKey:)`: the member's own decoder reads it.
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try T(from: member(key)) }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try member(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try member(key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { try member(YAMLKey(stringValue: "super")) }

    func superDecoder(forKey key: Key) throws -> any Decoder { try member(key) }

    private func member(_ key: some CodingKey) throws -> YAMLNodeDecoder {
        guard let pair = pairs.first(where: { $0.key.text == key.stringValue }) else {
            throw DecodingError.keyNotFound(
                key, DecodingError.Context(codingPath: codingPath, debugDescription: "no member '\(key.stringValue)'"))
        }
        return YAMLNodeDecoder(pair.value, codingPath: codingPath + [key])
    }
}

private struct SequenceContainer: UnkeyedDecodingContainer {
    let items: [YAMLNode]
    let codingPath: [any CodingKey]
    private(set) var currentIndex = 0

    init(items: [YAMLNode], codingPath: [any CodingKey]) {
        self.items = items
        self.codingPath = codingPath
    }

    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    mutating func decodeNil() throws -> Bool {
        guard try item().decodeNil() else { return false }
        currentIndex += 1
        return true
    }

    /// Every type's `decode(_:)`: the item's own decoder reads it; a refusal leaves the index.
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let value = try T(from: item())
        currentIndex += 1
        return value
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let container = try item().container(keyedBy: type)
        currentIndex += 1
        return container
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let container = try item().unkeyedContainer()
        currentIndex += 1
        return container
    }

    mutating func superDecoder() throws -> any Decoder {
        let decoder = try item()
        currentIndex += 1
        return decoder
    }

    private func item() throws -> YAMLNodeDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any.self, DecodingError.Context(codingPath: codingPath, debugDescription: "the list has \(items.count) items"))
        }
        return YAMLNodeDecoder(items[currentIndex], codingPath: codingPath + [YAMLKey(intValue: currentIndex)])
    }
}
