import FoundationEssentials
import HTTPServer
import Logging
import Timekeeping

#if canImport(Glibc)
    import Glibc
#endif

/// `--log-format json`: one JSON object a line, `{"time", "level", "logger", "source", "message",
/// "metadata"}` (metadata only when there is some, as an object of strings, lists and objects),
/// which log shippers read without a pattern: a value with spaces or `=` in it stays one value.
public enum JSONLogLine {
    public static func make(
        at date: Date, level: Logger.Level, logger: String, source: String, message: String, metadata: Logger.Metadata
    ) -> String {
        var line = #"{"time":""# + UTCTime(date).iso8601 + #"","level":""# + level.rawValue + #"","logger":"#
        line += JSONString.quoted(logger) + #","source":"# + JSONString.quoted(source) + #","message":"# + JSONString.quoted(message)
        if !metadata.isEmpty { line += #","metadata":"# + object(metadata) }
        return line + "}\n"
    }

    static func object(_ metadata: Logger.Metadata) -> String {
        "{" + metadata.sorted { $0.key < $1.key }.map { JSONString.quoted($0.key) + ":" + value($0.value) }.joined(separator: ",") + "}"
    }

    static func value(_ value: Logger.MetadataValue) -> String {
        switch value {
        case .string(let text): JSONString.quoted(text)
        case .stringConvertible(let convertible): JSONString.quoted(convertible.description)
        case .array(let values): "[" + values.map(Self.value).joined(separator: ",") + "]"
        case .dictionary(let values): object(values)
        @unknown default: JSONString.quoted(value.description)
        }
    }
}

/// Writes each line as a JSON object (`JSONLogLine`) to standard error, in one `write`.
public struct JSONLineLogHandler: LogHandler {
    public var logLevel: Logger.Level = .trace
    public var metadata: Logger.Metadata = [:]
    private let label: String

    public init(label: String) {
        self.label = label
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let line = JSONLogLine.make(
            at: Date(), level: event.level, logger: label, source: event.source, message: event.message.description,
            metadata: metadata.merging(event.metadata ?? [:]) { $1 })
        let bytes = Array(line.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}
