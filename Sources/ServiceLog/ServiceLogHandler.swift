import Logging

/// The process's log handler: every line at the one level the process runs at (which a reload
/// may change), within the process's `LogLineBudget`, with outside text made printable
/// (`PrintableLogText`), written by `inner` (standard error's, in the server). The line that says
/// how many were left out is written by `notes`, a handler of its own (`frametap.log`), so that it
/// carries none of the next line's metadata.
public struct ServiceLogHandler: LogHandler {
    /// The label of the lines that say how many were left out.
    public static let notesLabel = "frametap.log"

    private var inner: any LogHandler
    private let notes: any LogHandler
    private let level: @Sendable () -> Logger.Level
    /// nil: every line goes (`frametap sync`, which no client reaches).
    private let budget: LogLineBudget?
    /// Lines of these sources (swift-log's `source`) have no budget: a pulled source's lines
    /// (lost, failed with the time of its next try, connected) come as often as its backoff lets
    /// them, which no client sets, and a client's flood must not hide a camera's outage.
    private let unbudgetedSources: Set<String>

    public init(
        wrapping inner: any LogHandler, notes: any LogHandler, level: @escaping @Sendable () -> Logger.Level,
        budget: LogLineBudget?, unbudgetedSources: Set<String> = []
    ) {
        self.inner = inner
        self.inner.logLevel = .trace
        self.notes = notes
        self.level = level
        self.budget = budget
        self.unbudgetedSources = unbudgetedSources
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
        let outside = unbudgetedSources.contains(event.source)
        guard let leftOut = budget.map({ $0.admit(event.level, outsideBudget: outside) }) ?? 0 else { return }
        if leftOut > 0, let budget {
            var note = event
            note.level = .warning
            note.message = "\(budget.leftOutMessage(leftOut))"
            note.metadata = ["left_out": "\(leftOut)"]
            note.source = "ServiceLog"
            notes.log(event: note)
        }
        var line = event
        line.message = "\(PrintableLogText.escaped(event.message.description))"
        line.metadata = event.metadata.map(PrintableLogText.escaped)
        inner.log(event: line)
    }
}
