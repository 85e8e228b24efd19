import Decoding
import Dispatch
import FoundationEssentials
import Ingest
import Logging
import Synchronization
import Timekeeping
import VideoCoding

/// What a session's decoding reports: the facts the status shows (codec, back end and why,
/// fallbacks, format, counters, the last error, input rates), and, as they change, the events
/// (`format.changed`, `backend.selected`, `error`), the metrics and the log.
///
/// Owns the facts; they change after each decoder step (`stepped`), when the decoder changes
/// without one (`refresh`), with an error outside the decoder (`record`), and with `PUT`.
final class DecodeReporter: Sendable {
    /// What the status page shows of the decoder; replaced after every decoder step.
    struct Facts: Sendable {
        var backendChoice: DecoderBackendChoice
        /// The codec stated for the stream (`PUT`); nil: detected.
        var statedCodec: VideoCodec?
        /// The stream's codec, stated or detected; nil until known.
        var codec: VideoCodec?
        /// The running stream's codec was stated (its decoder was made with `statedCodec`, which
        /// a `PUT` may have changed since, for the next stream).
        var codecIsStated: Bool
        var backend: DecoderBackend
        var backendReason: String
        /// The hardware device decoding now; nil in software.
        var device: HardwareDeviceID?
        /// The stream's latest switches to another back end, oldest first.
        var fallbacks = FallbackRecord()
        var decodeMode: DecodeMode
        var format: StreamFormat?
        var counters = SessionCounters()
        var lastError: ErrorRecord?

        /// Takes what the decoder says now.
        fileprivate mutating func update(_ snapshot: DecoderSnapshot) {
            counters.merge(decoder: snapshot.counters)
            if let codec = snapshot.codec {
                self.codec = codec
                codecIsStated = snapshot.codecIsStated
            }
            backend = snapshot.backend
            backendReason = snapshot.backendReason
            device = snapshot.device
            if let format = snapshot.format { self.format = format }
            fallbacks = snapshot.fallbacks
        }
    }

    private struct State {
        var facts: Facts
        var rates: InputRateMeter
        /// How many of the stream's fallbacks were reported (`FallbackRecord.total`).
        var fallbacksReported: Int
        /// A stream that fails on every picture makes one `error` event per code and second (the
        /// codes are a fixed set), not one per picture.
        var errorEvents = RepeatGate<String>(interval: .seconds(1))
        /// ... and one log line per code and minute, however many pushes carry it.
        var errorLines = RepeatGate<String>(interval: DecodeReporter.errorLineInterval)

        /// Whether an error with `code` is news worth an event now (and remembers it if so).
        mutating func admitErrorEvent(code: String, at uptime: UInt64) -> Bool {
            errorEvents.admit(code, at: uptime) != nil
        }

        /// The lines to write for `errors`: the first of each code a minute, with how many of
        /// that code were left out since its last line.
        mutating func admitErrorLines(_ errors: [ErrorRecord], at uptime: UInt64) -> [(ErrorRecord, leftOut: Int)] {
            errors.compactMap { error in errorLines.admit(error.code, at: uptime).map { (error, $0) } }
        }

        /// Takes a snapshot; returns the facts before and the fallbacks not reported yet.
        mutating func update(_ snapshot: DecoderSnapshot) -> (before: Facts, fallbacks: [BackendFallback]) {
            let before = facts
            facts.update(snapshot)
            defer { fallbacksReported = facts.fallbacks.total }
            return (before, Array(facts.fallbacks.since(fallbacksReported)))
        }
    }

    private let state: Mutex<State>
    private let context: SessionContext
    /// The session's NAL-unit counters by type, for `/metrics` (touched on the decode queue).
    private let nalUnitCounters: QueueBound<NALUnitCounters>

    init(facts: Facts, context: SessionContext, decodeQueue: DispatchQueue) {
        state = Mutex(
            State(facts: facts, rates: InputRateMeter(startedAt: context.clock.uptime), fallbacksReported: facts.fallbacks.total))
        self.context = context
        nalUnitCounters = QueueBound(NALUnitCounters(), queue: decodeQueue)
    }

    var facts: Facts { state.withLock { $0.facts } }

    var rates: SessionRates {
        let now = context.clock.uptime
        return state.withLock { $0.rates.rates(at: now) }
    }

    /// `PUT`: what the session was told; returns the decode mode it had.
    func configure(mode: DecodeMode?, backend choice: DecoderBackendChoice?, codec: VideoCodec?) -> DecodeMode {
        state.withLock { state in
            let previous = state.facts.decodeMode
            if let mode { state.facts.decodeMode = mode }
            if let choice { state.facts.backendChoice = choice }
            if let codec { state.facts.statedCodec = codec }
            return previous
        }
    }

    // MARK: - Reporting

    /// A decoder step ended (decode queue): what the decoder says now, the step's errors, and
    /// how many pictures it decoded. Counters, format, back end, errors and rates are taken;
    /// what changed is announced, counted and logged.
    func stepped(_ snapshot: DecoderSnapshot, errors: [DecodeError], pictures: Int, receivedAt: UInt64?) {
        let now = context.clock.now
        let uptime = context.clock.uptime
        let records = errors.map { ErrorRecord(code: $0.code.rawValue, message: $0.message, at: now) }
        let (before, after, fallbacks, newError, lines) = state.withLock { state in
            let (before, fallbacks) = state.update(snapshot)
            if let last = records.last { state.facts.lastError = last }
            state.rates.record(
                bytes: state.facts.counters.bytes - before.counters.bytes, pictures: pictures, at: uptime)
            let newError = state.facts.lastError.flatMap { error in
                errors.isEmpty || !state.admitErrorEvent(code: error.code, at: uptime) ? nil : error
            }
            return (before, state.facts, fallbacks, newError, state.admitErrorLines(records, at: uptime))
        }
        report(fallbacks)
        announce(from: before, to: after, fallbacks: fallbacks)
        if let newError { announce(newError) }
        for (error, leftOut) in lines { log("decode error", error, leftOut: leftOut) }
        if pictures > 0 { context.activity.touch() }
        recordMetrics(before: before.counters, after: after.counters, errors: errors, pictures: pictures)
        if let receivedAt, pictures > 0 {
            context.metrics.decodeLatency.recordNanoseconds(Int64(clamping: context.clock.uptime &- receivedAt))
        }
    }

    /// Back end facts can change on the decode queue without a step (a new back end took over,
    /// a decoder opened or released on demand).
    func refresh(_ snapshot: DecoderSnapshot) {
        let (before, after, fallbacks) = state.withLock { state in
            let (before, fallbacks) = state.update(snapshot)
            return (before, state.facts, fallbacks)
        }
        report(fallbacks)
        announce(from: before, to: after, fallbacks: fallbacks)
    }

    /// An error outside the decoder (encode failure, aborted upload, limit): remembered and counted.
    func record(_ error: SessionError) {
        let now = context.clock.now
        let uptime = context.clock.uptime
        let record = ErrorRecord(code: error.code.rawValue, message: error.message, at: now)
        let (isNews, line) = state.withLock { state in
            state.facts.lastError = record
            if error.code == .uploadAborted { state.facts.counters.uploadsAborted += 1 }
            return (state.admitErrorEvent(code: record.code, at: uptime), state.admitErrorLines([record], at: uptime).first)
        }
        if isNews { announce(record) }
        context.metrics.recordError(code: error.code.rawValue)
        if let (record, leftOut) = line { log("session error", record, leftOut: leftOut) }
    }

    /// A push was taken over: counted, not an error of the stream.
    func countTakeover() {
        state.withLock { $0.facts.counters.uploadsTakenOver += 1 }
    }

    /// Errors are counted in `/metrics` every time; a session's log has one line per code and
    /// minute, which says how many of that code it left out.
    static let errorLineInterval = Duration.seconds(60)

    private func log(_ message: String, _ error: ErrorRecord, leftOut: Int) {
        var metadata: Logger.Metadata = ["code": "\(error.code)", "message": "\(error.message)"]
        if leftOut > 0 { metadata["left_out"] = "\(leftOut) more of this code since its last line" }
        context.logger.warning("\(message)", metadata: metadata)
    }

    /// `format.changed` and `backend.selected` when a decoder step changed them.
    private func announce(from before: Facts, to after: Facts, fallbacks: [BackendFallback]) {
        if let format = after.format, format != before.format {
            context.events.emit(.formatChanged) { $0.format = format }
        }
        if after.backend != before.backend || after.device != before.device || !fallbacks.isEmpty {
            context.events.emit(.backendSelected) { details in
                details.backend = after.backend.rawValue
                details.device = after.device?.description
                details.reason = after.backendReason
                details.fallback = !fallbacks.isEmpty
            }
        }
    }

    private func announce(_ error: ErrorRecord) {
        context.events.emit(.error) { details in
            details.code = error.code
            details.message = error.message
        }
    }

    /// A decoder gave up its back end (hardware refused the stream, or failed mid-stream):
    /// counted by why, and logged with what it said.
    private func report(_ fallbacks: [BackendFallback]) {
        for fallback in fallbacks {
            context.metrics.recordFallback(fallback)
            context.logger.info(
                "decoder fell back",
                metadata: [
                    "from": "\(fallback.from.rawValue)", "to": "\(fallback.to.rawValue)",
                    "reason": "\(fallback.reason.rawValue)", "codec": "\(fallback.codec?.rawValue ?? "unknown")",
                    "message": "\(fallback.message)",
                ])
        }
    }

    private func recordMetrics(before: SessionCounters, after: SessionCounters, errors: [DecodeError], pictures: Int) {
        let metrics = context.metrics
        let newBytes = after.bytes - before.bytes
        if newBytes > 0 { metrics.bytesIn.increment(by: newBytes) }
        nalUnitCounters.withValue { counters in
            for (type, count) in after.nalUnits {
                let delta = count - (before.nalUnits[type] ?? 0)
                if delta > 0 { counters.record(type: type, count: delta, in: metrics) }
            }
        }
        if pictures > 0 { metrics.framesDecoded.increment(by: pictures) }
        for error in errors { metrics.recordError(code: error.code.rawValue) }
    }
}

extension SessionCounters {
    /// Takes the decoder's counters, keeping the session's own (`uploadsAborted`,
    /// `uploadsTakenOver`).
    fileprivate mutating func merge(decoder: SessionCounters) {
        let (aborted, takenOver) = (uploadsAborted, uploadsTakenOver)
        self = decoder
        (uploadsAborted, uploadsTakenOver) = (aborted, takenOver)
    }
}
