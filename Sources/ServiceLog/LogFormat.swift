/// How the process's log lines are written (`--log-format`).
public enum LogFormat: String, Sendable, CaseIterable {
    /// swift-log's standard lines: time, level, label, metadata as `key=value`, module, message.
    case text
    /// One JSON object a line, for log shippers (`JSONLogLine`).
    case json
}

extension LogFormat {
    /// The format a command line or the environment asks for, read before (or without) the
    /// rest of the options: a start that fails on its options still writes as asked. nil when
    /// neither says or a value is none of the formats.
    public static func requested(arguments: [String], environment: [String: String]) -> LogFormat? {
        var value: String?
        var arguments = arguments.makeIterator()
        while let argument = arguments.next() {
            if argument == "--log-format" {
                value = arguments.next()
            } else if argument.hasPrefix("--log-format=") {
                value = String(argument.dropFirst("--log-format=".count))
            }
        }
        return LogFormat(rawValue: (value ?? environment["FRAMETAP_LOG_FORMAT"] ?? "").lowercased())
    }
}
