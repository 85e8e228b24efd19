import FoundationEssentials
import Logging
import Prometheus
import Sessions
import Synchronization
import Timekeeping

/// How the configuration file was read: at start, and again on `SIGHUP` or when it changed on
/// disk. Each reading is applied whole or refused whole; this is where it is told: the log, a
/// `config.applied` or `config.rejected` event, `frametap_config_reloads_total{result}` and
/// `frametap_config_last_reload_successful`, and `GET /system`'s `configuration`.
public final class ConfigurationStatus: Sendable {
    /// What made the server read the file.
    public enum Trigger: String, Sendable, CaseIterable {
        case start
        case signal
        case file
    }

    /// Why a reading was refused, and where in the file.
    public struct Rejection: Sendable, Equatable {
        public var message: String
        public var file: String?
        public var line: Int?
        public var column: Int?

        public init(message: String, file: String? = nil, line: Int? = nil, column: Int? = nil) {
            self.message = message
            self.file = file
            self.line = line
            self.column = column
        }
    }

    public struct Reading: Sendable {
        public var at: Date
        public var trigger: Trigger
        /// Nil: applied.
        public var rejection: Rejection?
        /// Session ids by what happened to them (`DeclarationOutcome.changes`).
        public var changes: [String: [String]]
        /// Options the file changed that take effect only at a restart.
        public var restartNeeded: [String]
    }

    public struct Snapshot: Sendable {
        /// The file (`--config`), or nil when the server has none.
        public var file: String?
        /// When the configuration running now was read.
        public var appliedAt: Date?
        /// The last reading, applied or refused.
        public var lastReading: Reading?
        public var applied: Int
        public var rejected: Int
    }

    public let file: String?
    private let events: SessionEventLog
    private let clock: any ServiceClock
    private let logger: Logger
    private let appliedCounter: Counter
    private let rejectedCounter: Counter
    private let lastSuccessful: Gauge
    private let state: Mutex<Snapshot>

    public init(file: String?, events: SessionEventLog, metrics: FrameTapMetrics, clock: any ServiceClock, logger: Logger) {
        self.file = file
        self.events = events
        self.clock = clock
        self.logger = logger
        let readings = MetricNameDescriptor(
            metricName: "frametap_config_reloads_total", unitName: "",
            helpText: "Readings of the configuration file (at start, on SIGHUP, after a change on disk), by result")
        appliedCounter = metrics.registry.makeCounter(descriptor: readings, labels: [("result", "applied")])
        rejectedCounter = metrics.registry.makeCounter(descriptor: readings, labels: [("result", "rejected")])
        lastSuccessful = metrics.registry.makeGauge(
            descriptor: MetricNameDescriptor(
                metricName: "frametap_config_last_reload_successful", unitName: "",
                helpText: "1 when the last reading of the configuration file was applied, 0 when it was refused"))
        lastSuccessful.set(to: 1)
        state = Mutex(Snapshot(file: file, appliedAt: nil, lastReading: nil, applied: 0, rejected: 0))
    }

    public var snapshot: Snapshot { state.withLock { $0 } }

    /// A reading was applied: `changes` by kind, options that need a restart.
    public func recordApplied(_ trigger: Trigger, changes: [String: [String]], restartNeeded: [String]) {
        let at = clock.now
        state.withLock { state in
            state.appliedAt = at
            state.lastReading = Reading(at: at, trigger: trigger, rejection: nil, changes: changes, restartNeeded: restartNeeded)
            state.applied += 1
        }
        appliedCounter.increment()
        lastSuccessful.set(to: 1)
        var metadata: Logger.Metadata = ["trigger": "\(trigger.rawValue)"]
        for (kind, ids) in changes.sorted(by: { $0.key < $1.key }) { metadata[kind] = "\(ids.joined(separator: ","))" }
        if let file { metadata["file"] = "\(file)" }
        logger.notice(trigger == .start ? "configuration applied" : "configuration reloaded", metadata: metadata)
        for option in restartNeeded {
            logger.warning(
                "configuration option changed; it takes effect when the server restarts",
                metadata: ["option": "\(option)"])
        }
        var details = SessionEventDetails()
        details.reason = trigger.rawValue
        details.file = file
        details.changes = changes
        details.restartNeeded = restartNeeded
        events.publish(.configApplied, session: nil, details: details)
    }

    /// A reading was refused: the running configuration stays.
    public func recordRejected(_ trigger: Trigger, _ rejection: Rejection) {
        var rejection = rejection
        // A reading that failed as a whole (the file cannot be read) is still that file's.
        if rejection.file == nil { rejection.file = file }
        let at = clock.now
        state.withLock { state in
            state.lastReading = Reading(at: at, trigger: trigger, rejection: rejection, changes: [:], restartNeeded: [])
            state.rejected += 1
        }
        rejectedCounter.increment()
        lastSuccessful.set(to: 0)
        logger.error(
            "configuration not reloaded; the running one stays",
            metadata: [
                "trigger": "\(trigger.rawValue)", "file": "\(rejection.file ?? "")",
                "line": "\(rejection.line.map(String.init) ?? "")", "reason": "\(rejection.message)",
            ])
        var details = SessionEventDetails()
        details.reason = trigger.rawValue
        details.message = rejection.message
        details.file = rejection.file
        details.line = rejection.line
        details.column = rejection.column
        events.publish(.configRejected, session: nil, details: details)
    }
}
