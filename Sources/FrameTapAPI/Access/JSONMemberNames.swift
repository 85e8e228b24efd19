import FoundationEssentials

/// The member names of a JSON object's top level, read without decoding the values: a JWT
/// whose header or claims name a member twice is refused (RFC 7519 §4 lets a parser refuse it
/// or take the last; `JSONDecoder` takes one of them quietly, and a library elsewhere may take
/// the other, so two readers of one token would grant different things).
enum JSONMemberNames {
    /// The first name that stands twice at the top level of `json` (an object), after its
    /// escapes are read (`"a"` and `"\u0061"` are one name; names compare scalar by scalar, as
    /// JSON does, not canonically as `String` does); nil when none does, or when `json` is not an
    /// object (the decoder refuses that on its own).
    static func firstRepeated(in json: some Collection<UInt8>) -> String? {
        let bytes = Array(json)
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        var seen: Set<[Unicode.Scalar]> = []
        var depth = 0
        var expectsName = false
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case quote:
                let start = index - 1
                while index < bytes.count, bytes[index] != quote { index += bytes[index] == backslash ? 2 : 1 }
                guard index < bytes.count else { return nil }
                index += 1
                guard depth == 1, expectsName else { continue }
                expectsName = false
                // A name the decoder cannot read (a lone surrogate) stands as it is written.
                let token = bytes[start..<index]
                let name = (try? JSONDecoder().decode(String.self, from: Data(token))) ?? String(decoding: token, as: UTF8.self)
                if !seen.insert(Array(name.unicodeScalars)).inserted { return name }
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                expectsName = depth == 1 && byte == UInt8(ascii: "{")
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
            case UInt8(ascii: ","):
                if depth == 1 { expectsName = true }
            default:
                break
            }
        }
        return nil
    }
}
