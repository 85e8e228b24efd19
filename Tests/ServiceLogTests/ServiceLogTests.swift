import Foundation
import Logging
import ServiceLog
import Synchronization
import Testing
import TestSupport
import Timekeeping

@Suite("The process's log: printable lines, within a budget", .timeLimit(.minutes(10)))
struct ServiceLogTests {
    @Test("control characters from outside are written out, never written raw; long values are cut")
    func outsideTextIsPrintable() {
        #expect(PrintableLogText.escaped("HTTP 404 Not\u{1B}[31mFound\rX\u{07}\u{00}Y") == #"HTTP 404 Not\u{1B}[31mFound\u{D}X\u{7}\u{0}Y"#)
        #expect(PrintableLogText.escaped("a\nforged line\u{85}\u{7F}") == #"a\u{A}forged line\u{85}\u{7F}"#)
        #expect(PrintableLogText.escaped("plain, with é and 漢字") == "plain, with é and 漢字")
        let long = String(repeating: "A", count: 15_000)
        #expect(PrintableLogText.escaped(long) == String(repeating: "A", count: 4096) + "… (10904 more characters)")
    }

    @Test("a handler writes messages and metadata printable, and past its budget says how many it left out")
    func handlerEscapesAndBudgets() {
        let clock = ManualClock()
        let lines = Lines()
        let budget = LogLineBudget(clock: clock, burst: 3, perSecond: 1)
        let counted = Mutex(0)
        budget.countLeftOut { count in counted.withLock { $0 += count } }
        let logger = Logger(label: "test") { _ in
            var session = Recorder(lines: lines)
            session.metadata["session"] = "cam-1"
            return ServiceLogHandler(
                wrapping: session, notes: Recorder(lines: lines), level: { .info }, budget: budget,
                unbudgetedSources: ["PulledSource"])
        }
        logger.warning("source failed\nforged", metadata: ["message": "Not\u{1B}[31m", "list": .array(["\r"])])
        logger.debug("below the level")
        for index in 0..<5 { logger.info("flood \(index)") }
        logger.warning("a camera is lost", source: "PulledSource")
        logger.info("flood 5")
        logger.error("an error always goes")
        logger.notice("so does the process's own life")
        logger.info("flood 6")
        clock.advance(by: .seconds(2))
        logger.info("after the flood")
        let note = { (count: Int) in
            "warning \(count) log lines left out: the log takes 3 lines at once and 1 a second after that left_out=\(count)"
        }
        #expect(
            lines.all == [
                #"warning source failed\u{A}forged list=["\\u{D}"] message=Not\u{1B}[31m session=cam-1"#,
                "info flood 0 session=cam-1", "info flood 1 session=cam-1",
                // Lines outside the budget say how many were left out before them; the note is
                // the log's own, without the next line's session.
                note(3), "warning a camera is lost session=cam-1",
                note(1), "error an error always goes session=cam-1",
                "notice so does the process's own life session=cam-1",
                note(1), "info after the flood session=cam-1",
            ])
        #expect(counted.withLock { $0 } == 5)
    }
}

extension ServiceLogTests {
    @Test("a JSON line: one object, strings escaped, metadata an object only when there is some")
    func jsonLines() {
        let at = Date(timeIntervalSince1970: 1_800_000_000.125)
        #expect(
            JSONLogLine.make(
                at: at, level: .warning, logger: "frametap.sessions", source: "Sessions", message: "say \"hi\"\\ \u{1B}\n",
                metadata: ["session": "cam-1", "list": .array(["a", "b"]), "nested": .dictionary(["k": "v\t"])])
                == #"{"time":"2027-01-15T08:00:00.125Z","level":"warning","logger":"frametap.sessions","source":"Sessions","#
                + #""message":"say \"hi\"\\ \u001b\n","metadata":{"list":["a","b"],"nested":{"k":"v\t"},"session":"cam-1"}}"#
                + "\n")
        #expect(
            JSONLogLine.make(at: at, level: .notice, logger: "frametap", source: "frametap", message: "stopped", metadata: [:])
                == #"{"time":"2027-01-15T08:00:00.125Z","level":"notice","logger":"frametap","source":"frametap","message":"stopped"}"#
                + "\n")
    }

    @Test("the format asked for is read from the arguments or the environment before the other options")
    func requestedFormat() {
        #expect(LogFormat.requested(arguments: ["--port", "1", "--log-format", "json"], environment: [:]) == .json)
        #expect(LogFormat.requested(arguments: ["--log-format=JSON"], environment: [:]) == .json)
        #expect(LogFormat.requested(arguments: [], environment: ["FRAMETAP_LOG_FORMAT": "json"]) == .json)
        #expect(LogFormat.requested(arguments: ["--log-format", "text"], environment: ["FRAMETAP_LOG_FORMAT": "json"]) == .text)
        #expect(LogFormat.requested(arguments: ["--log-format"], environment: [:]) == nil)
        #expect(LogFormat.requested(arguments: ["--log-format", "xml"], environment: [:]) == nil)
    }

    @Test("without a budget (`frametap sync`) every line goes")
    func noBudget() {
        let lines = Lines()
        let logger = Logger(label: "test") { _ in
            ServiceLogHandler(wrapping: Recorder(lines: lines), notes: Recorder(lines: lines), level: { .info }, budget: nil)
        }
        for index in 0..<500 { logger.info("placed \(index)") }
        #expect(lines.all.count == 500)
    }
}

/// Every line a handler wrote, as "level message key=value...".
private final class Lines: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    func append(_ line: String) { lines.withLock { $0.append(line) } }
}

private struct Recorder: LogHandler {
    let lines: Lines
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }.sorted { $0.key < $1.key }.map { " \($0)=\($1)" }.joined()
        lines.append("\(event.level) \(event.message)\(all)")
    }
}
