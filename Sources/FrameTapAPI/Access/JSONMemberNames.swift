/// The member names of a JSON object's top level, read without decoding the values: a JWT
/// whose header or claims name a member twice is refused (RFC 7519 §4 lets a parser refuse it
/// or take the last; `JSONDecoder` takes one of them quietly, and a library elsewhere may take
/// the other, so two readers of one token would grant different things).
enum JSONMemberNames {
    /// The first name that stands twice at the top level of `json` (an object), after its
    /// escapes are read (`"a"` and `"\u0061"` are one name); nil when none does, or when `json`
    /// is not an object (the decoder refuses that on its own).
    static func firstRepeated(in json: some Collection<UInt8>) -> String? {
        // Names compare scalar by scalar, as JSON does (String's equality is canonical).
        var seen: Set<[Unicode.Scalar]> = []
        var depth = 0
        var expectsName = false
        var index = json.startIndex
        while index != json.endIndex {
            let byte = json[index]
            json.formIndex(after: &index)
            switch byte {
            case UInt8(ascii: "\""):
                guard let (text, end) = string(in: json, from: index) else { return nil }
                index = end
                if depth == 1, expectsName {
                    if !seen.insert(Array(text.unicodeScalars)).inserted { return text }
                    expectsName = false
                }
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

    /// The string whose opening quote ends just before `start`, with its escapes read, and the
    /// index after its closing quote; nil when it does not close or an escape is broken.
    private static func string<Bytes: Collection<UInt8>>(in json: Bytes, from start: Bytes.Index) -> (String, Bytes.Index)? {
        var scalars = String.UnicodeScalarView()
        var raw: [UInt8] = []
        var index = start
        var pendingHigh: UInt32?
        func flushRaw() {
            scalars.append(contentsOf: String(decoding: raw, as: UTF8.self).unicodeScalars)
            raw.removeAll(keepingCapacity: true)
        }
        while index != json.endIndex {
            let byte = json[index]
            json.formIndex(after: &index)
            // A high surrogate not followed by a low one stands as U+FFFD, as a decoder reads it.
            if pendingHigh != nil, byte != UInt8(ascii: "\\") || index == json.endIndex || json[index] != UInt8(ascii: "u") {
                scalars.append("\u{FFFD}")
                pendingHigh = nil
            }
            if byte == UInt8(ascii: "\"") {
                flushRaw()
                return (String(scalars), index)
            }
            guard byte == UInt8(ascii: "\\") else {
                raw.append(byte)
                continue
            }
            guard index != json.endIndex else { return nil }
            let escape = json[index]
            json.formIndex(after: &index)
            flushRaw()
            switch escape {
            case UInt8(ascii: "u"):
                var value: UInt32 = 0
                for _ in 0..<4 {
                    guard index != json.endIndex, let digit = hexDigit(json[index]) else { return nil }
                    value = value << 4 | digit
                    json.formIndex(after: &index)
                }
                if (0xD800..<0xDC00).contains(value) {
                    if pendingHigh != nil { scalars.append("\u{FFFD}") }
                    pendingHigh = value
                    continue
                }
                if (0xDC00..<0xE000).contains(value), let high = pendingHigh {
                    value = 0x10000 + ((high - 0xD800) << 10) + (value - 0xDC00)
                } else if pendingHigh != nil {
                    scalars.append("\u{FFFD}")
                }
                scalars.append(Unicode.Scalar(value) ?? "\u{FFFD}")
            case UInt8(ascii: "b"): scalars.append("\u{8}")
            case UInt8(ascii: "f"): scalars.append("\u{C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            default: scalars.append(Unicode.Scalar(escape))
            }
            pendingHigh = nil
        }
        return nil
    }

    private static func hexDigit(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }
}
