import Containers
import Decoding
import FoundationEssentials
import Ingest
import VideoCoding

/// What one upload produced so far: pictures, errors, and the counters when it began (its
/// summary reports the difference). Lives on the session's decode queue.
struct UploadProgress {
    private(set) var frames = 0
    private(set) var errors = 0
    private(set) var firstError: DecodeError?
    /// A live push's bytes that made no access unit: garbage is refused after this many, not
    /// read for as long as its client sends it.
    static let maxBytesWithoutAccessUnit = ProgressBudget.standardLimit
    private var withoutAccessUnit = ProgressBudget(limit: maxBytesWithoutAccessUnit, progress: 0)

    /// Why the rest of the push was refused (another codec's stream in it): the push failed,
    /// whatever it decoded before.
    private(set) var refusal: DecodeError?
    private var firstErrorRecord: ErrorRecord?
    private var countersAtBegin: SessionCounters?

    var hasBegun: Bool { countersAtBegin != nil }

    /// `count` more bytes read, the stream's access units assembled so far (also those dropped
    /// before a keyframe) being `accessUnitsAssembled`; false once `maxBytesWithoutAccessUnit`
    /// came without one.
    mutating func spend(_ count: Int, accessUnitsAssembled: Int) -> Bool {
        withoutAccessUnit.spend(count, progress: accessUnitsAssembled)
    }

    mutating func refuse(_ error: DecodeError) {
        if refusal == nil { refusal = error }
    }

    mutating func begin(counters: SessionCounters) {
        if countersAtBegin == nil { countersAtBegin = counters }
    }

    /// The session's reporter logs them (`DecodeReporter`).
    mutating func record(frames: Int, errors: [DecodeError], at date: Date) {
        self.frames += frames
        self.errors += errors.count
        for error in errors {
            if firstError == nil {
                firstError = error
                firstErrorRecord = ErrorRecord(code: error.code.rawValue, message: error.message, at: date)
            }
        }
    }

    func summary(
        counters: SessionCounters, bytes: Int, latestSeq: UInt64?, format: StreamFormat?, flushed: Bool,
        session: SessionID
    ) -> UploadSummary {
        let start = countersAtBegin ?? counters
        var nalUnits: [String: Int] = [:]
        for (name, count) in counters.nalUnits {
            let delta = count - (start.nalUnits[name] ?? 0)
            if delta > 0 { nalUnits[name] = delta }
        }
        return UploadSummary(
            session: session, bytes: bytes, nalUnits: nalUnits, frames: frames, latestSeq: latestSeq, format: format,
            decodeErrors: errors, error: firstErrorRecord, flushed: flushed)
    }

    /// A push refused from some point on failed; so did a flushed upload that produced no
    /// picture but errors, and one that carried not a single NAL unit but errors (garbage into a
    /// running stream): the client must be able to tell "your stream is broken" from "no
    /// pictures yet". Anything else succeeded.
    func outcome(summary: UploadSummary, flushed: Bool) -> Result<UploadSummary, SessionError> {
        if let refusal { return .failure(SessionError(refusal)) }
        if frames == 0, let firstError, flushed || summary.nalUnits.isEmpty { return .failure(SessionError(firstError)) }
        return .success(summary)
    }
}
