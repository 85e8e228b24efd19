#if canImport(Glibc)
    import Glibc
#endif

/// Lines another library writes on its own (libavcodec's and libavformat's at `--log-level
/// debug`): made printable and held to the same budget as the process's own, then written to
/// standard error as they are, without a time or level of FrameTap's.
public enum ForeignLogLines {
    public static func write(_ text: String, isError: Bool, budget: LogLineBudget) {
        guard let leftOut = budget.admit(isError ? .error : .warning) else { return }
        var out = leftOut > 0 ? "\(budget.leftOutMessage(leftOut))\n" : ""
        // By bytes: "\r\n" is one Character, which `hasSuffix("\n")` would not see.
        let endsLine = text.utf8.last == 0x0A
        out += PrintableLogText.escaped(endsLine ? String(decoding: text.utf8.dropLast(), as: UTF8.self) : text)
        if endsLine { out += "\n" }
        let bytes = Array(out.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}
