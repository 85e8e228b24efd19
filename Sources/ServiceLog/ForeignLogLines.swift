import FoundationEssentials
import Logging

/// Lines another library writes on its own (libavcodec's and libavformat's at `--log-level
/// debug`): made printable and held to the same budget as the process's own, then written to
/// standard error as they are (without a time or level of FrameTap's), or as JSON lines of
/// logger `libav` with `--log-format json`.
public enum ForeignLogLines {
    public static func write(_ text: String, isError: Bool, budget: LogLineBudget, format: LogFormat = .text) {
        let level: Logger.Level = isError ? .error : .warning
        guard let leftOut = budget.admit(level) else { return }
        // By bytes: "\r\n" is one Character, which `hasSuffix("\n")` would not see.
        let endsLine = text.utf8.last == 0x0A
        let body = PrintableLogText.escaped(endsLine ? String(decoding: text.utf8.dropLast(), as: UTF8.self) : text)
        switch format {
        case .text:
            var out = leftOut > 0 ? "\(budget.leftOutMessage(leftOut))\n" : ""
            out += body
            if endsLine { out += "\n" }
            StandardError.write(out)
        case .json:
            var out = ""
            if leftOut > 0 {
                out += JSONLogLine.make(
                    at: Date(), level: .warning, logger: "libav", source: "libav", message: budget.leftOutMessage(leftOut),
                    metadata: [:])
            }
            out += JSONLogLine.make(at: Date(), level: level, logger: "libav", source: "libav", message: body, metadata: [:])
            StandardError.write(out)
        }
    }
}
