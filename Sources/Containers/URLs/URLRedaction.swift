/// The one way a source URL is made fit to be shown or logged: its user name and password
/// become `***`, and so does the value of every `name=value` pair whose name names a secret,
/// wherever the pair stands: in the query (`?token=...`), in `;` parameters (`;password=...`)
/// and in the path, as cameras put them (Xiongmai/XMEye
/// `/user=admin&password=...&channel=1&stream=0.sdp`, or joined by `_`:
/// `/user=admin_password=..._channel=1_stream=0.sdp`).
///
/// A name names a secret when, percent-decoded and in lower case, it contains one of
/// `secretWords` (so `pwd`, `loginpas`, `api_key`, `X-Auth-Token`, `jsessionid` and `p%61ss`
/// all do), is one of `secretNames` (too short to look for inside other names: `pw`, `code`),
/// or is one of the scheme's own secret parameters. A value ends at the next `&`, `;` or `#` (in the path also at `/`
/// and `?`), or, where another `_name=` follows before any of those, at its `_`.
public enum URLRedaction {
    /// Parts of parameter names whose values are credentials.
    public static let secretWords = [
        "pass", "pwd", "passphrase", "token", "secret", "key", "auth", "sig", "session", "credential", "loginpas",
    ]

    /// Whole parameter names whose values are credentials.
    public static let secretNames: Set<String> = ["pw", "pin", "code", "access_code", "accesscode", "otp"]

    static let mask = "***"

    /// `url` with its credentials masked. Text without `scheme://` is taken as a path and query.
    public static func redact(_ url: String, secretParameters: Set<String> = []) -> String {
        var bytes = Array(url.utf8)
        var start = 0
        if let scheme = firstRange(of: Array("://".utf8), in: bytes) {
            let authorityStart = scheme.upperBound
            let authorityEnd = bytes[authorityStart...].firstIndex { $0 == slash || $0 == question || $0 == hash } ?? bytes.count
            if let at = bytes[authorityStart..<authorityEnd].lastIndex(of: UInt8(ascii: "@")) {
                bytes.replaceSubrange(authorityStart..<at, with: Array(mask.utf8))
                start = authorityStart + mask.utf8.count + 1
            } else {
                start = authorityEnd
            }
        }
        var output = Array(bytes[..<start])
        var index = start
        var inQuery = false
        while index < bytes.count {
            let byte = bytes[index]
            output.append(byte)
            index += 1
            if byte == question { inQuery = true }
            guard byte == equals else { continue }
            let name = parameterName(endingBefore: output.count - 1, in: output)
            guard isSecret(name, secretParameters) else { continue }
            let end = valueEnd(from: index, in: bytes, inQuery: inQuery)
            if end > index { output += Array(mask.utf8) }
            index = end
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// `text` with every URL in it (`scheme://` up to a space or a quote) redacted: for lines
    /// other code wrote (libavformat's log).
    public static func redactURLs(in text: String) -> String {
        guard text.contains("://") else { return text }
        let boundaries: Set<Character> = [" ", "\t", "\n", "\r", "'", "\"", "<", ">"]
        var output = ""
        var rest = Substring(text)
        while let mark = rest.firstRange(of: "://") {
            let start = rest[..<mark.lowerBound].lastIndex { boundaries.contains($0) }.map { rest.index(after: $0) } ?? rest.startIndex
            let end = rest[mark.upperBound...].firstIndex { boundaries.contains($0) } ?? rest.endIndex
            output += rest[..<start]
            output += redact(String(rest[start..<end]))
            rest = rest[end...]
        }
        return output + rest
    }

    /// Whether a parameter of this name carries a credential.
    public static func isSecret(_ name: some StringProtocol, _ secretParameters: Set<String> = []) -> Bool {
        let lowered = percentDecoded(name).lowercased()
        guard !lowered.isEmpty else { return false }
        // A name after a `_`-joined value (`admin_pw`, as `parameterName` reads it) counts whole too.
        let lastPart = lowered.split(separator: "_").last.map(String.init) ?? lowered
        return secretParameters.contains(lowered) || secretNames.contains(lowered) || secretNames.contains(lastPart)
            || secretWords.contains { lowered.contains($0) }
    }

    /// `name` with its `%XX` escapes decoded (a malformed one is kept as it stands).
    private static func percentDecoded(_ name: some StringProtocol) -> String {
        let bytes = Array(name.utf8)
        guard bytes.contains(UInt8(ascii: "%")) else { return String(name) }
        func hex(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var decoded: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hex(bytes[index + 1]),
                let low = hex(bytes[index + 2])
            {
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    private static let slash = UInt8(ascii: "/")
    private static let question = UInt8(ascii: "?")
    private static let hash = UInt8(ascii: "#")
    private static let equals = UInt8(ascii: "=")
    private static let separators: Set<UInt8> = [UInt8(ascii: "&"), UInt8(ascii: ";"), slash, question, hash]
    private static let querySeparators: Set<UInt8> = [UInt8(ascii: "&"), UInt8(ascii: ";"), hash]

    /// The name before the `=` at `equals`: back to the previous separator or `=` (with a
    /// `_`-joined value before it: `admin_password`, which holds the name).
    private static func parameterName(endingBefore equals: Int, in bytes: [UInt8]) -> String {
        var begin = equals
        while begin > 0, !separators.contains(bytes[begin - 1]), bytes[begin - 1] != Self.equals { begin -= 1 }
        return String(decoding: bytes[begin..<equals], as: UTF8.self)
    }

    /// Where the value starting at `start` ends.
    private static func valueEnd(from start: Int, in bytes: [UInt8], inQuery: Bool) -> Int {
        let separators = inQuery ? querySeparators : separators
        var end = start
        while end < bytes.count, !separators.contains(bytes[end]) {
            // Another `name=value` within the same piece (`_channel=1`) ends the value at its
            // '_'. Padding (`==` or a trailing `=`, as in base64) does not.
            if bytes[end] == equals, end + 1 < bytes.count, bytes[end + 1] != equals, !separators.contains(bytes[end + 1]),
                let underscore = bytes[start..<end].lastIndex(of: UInt8(ascii: "_")), underscore + 1 < end,
                bytes[(underscore + 1)..<end].allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
            {
                return underscore
            }
            end += 1
        }
        return end
    }

    private static func firstRange(of needle: [UInt8], in haystack: [UInt8]) -> Range<Int>? {
        guard haystack.count >= needle.count else { return nil }
        for offset in 0...(haystack.count - needle.count) where haystack[offset..<(offset + needle.count)].elementsEqual(needle) {
            return offset..<(offset + needle.count)
        }
        return nil
    }
}
