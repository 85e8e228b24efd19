import Logging

/// What a log line may show of text that came from outside (a source's HTTP status line, a
/// container's metadata, libav's words about either): control characters written out as
/// `\u{1B}`, so that no line can end early, forge another or drive a terminal, and each
/// value cut at `limit` characters, saying how many more there were.
public enum PrintableLogText {
    /// Characters of one message or metadata value past which the rest is left out: room for
    /// FrameTap's own longest values (a reload's list of the sessions it changed), not for pages
    /// of a stranger's text.
    public static let limit = 4096

    public static func escaped(_ text: String, limit: Int = PrintableLogText.limit) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) || text.utf8.count > limit else { return text }
        var result = ""
        var kept = 0
        var cut = 0
        for scalar in text.unicodeScalars {
            guard kept < limit else {
                cut += 1
                continue
            }
            kept += 1
            if needsEscape(scalar) {
                result += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        if cut > 0 { result += "… (\(cut) more characters)" }
        return result
    }

    /// Each value of `metadata` escaped and cut (nested lists and dictionaries too).
    public static func escaped(_ metadata: Logger.Metadata) -> Logger.Metadata {
        metadata.mapValues(escaped)
    }

    static func escaped(_ value: Logger.MetadataValue) -> Logger.MetadataValue {
        switch value {
        case .string(let text): .string(escaped(text))
        case .stringConvertible(let convertible): .string(escaped(convertible.description))
        case .array(let values): .array(values.map(escaped))
        case .dictionary(let values): .dictionary(values.mapValues(escaped))
        @unknown default: .string(escaped(value.description))
        }
    }

    /// C0 controls (line feeds and tabs too), DEL and the C1 controls (which some terminals
    /// take as escape sequences).
    static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }
}
