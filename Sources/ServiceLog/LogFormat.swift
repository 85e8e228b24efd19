/// How the process's log lines are written (`--log-format`).
public enum LogFormat: String, Sendable, CaseIterable {
    /// swift-log's standard lines: time, level, label, metadata as `key=value`, module, message.
    case text
    /// One JSON object a line, for log shippers (`JSONLogLine`).
    case json
}
