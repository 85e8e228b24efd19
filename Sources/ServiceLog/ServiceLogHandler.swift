import Logging

/// The process's log handler: every line at the one level the process runs at (which a reload
/// may change), within the process's `LogLineBudget`, with outside text made printable
/// (`PrintableLogText`), written by `inner` (standard error's, in the server).
public struct ServiceLogHandler: LogHandler {
    private var inner: any LogHandler
    private let level: @Sendable () -> Logger.Level
    /// nil: every line goes (`frametap sync`, which no client reaches).
    private let budget: LogLineBudget?

    public init(wrapping inner: any LogHandler, level: @escaping @Sendable () -> Logger.Level, budget: LogLineBudget?) {
        self.inner = inner
        self.inner.logLevel = .trace
        self.level = level
        self.budget = budget
    }

    public var logLevel: Logger.Level {
        get { level() }
        // One level for the whole process: a logger's own setting would not survive a reload.
        set {}
    }

    public var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    public func log(event: LogEvent) {
        guard let leftOut = budget.map({ $0.admit(event.level) }) ?? 0 else { return }
        if leftOut > 0, let budget {
            var note = event
            note.level = .warning
            note.message = "\(budget.leftOutMessage(leftOut))"
            note.metadata = nil
            inner.log(event: note)
        }
        var line = event
        line.message = "\(PrintableLogText.escaped(event.message.description))"
        line.metadata = event.metadata.map(PrintableLogText.escaped)
        inner.log(event: line)
    }
}
