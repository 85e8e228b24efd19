import Containers
import Decoding
import Imaging
import Ingest
import VideoCoding

/// An error of the session layer: its own failures (no such session, busy, limits) and the
/// input, decoding and imaging failures it passes on, each with a stable `code` string.
/// It is also what a session's inputs are refused with (`IngestFailure`).
///
/// What a failure means over HTTP (status, headers) is the API's business, not this layer's.
public struct SessionError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable, Hashable {
        case invalidSessionID
        case sessionNotFound
        case tooManySessions
        case noFrameYet
        /// A second upload while one is in progress on the same session.
        case sessionBusy
        /// A newer push to the session took it over (`?takeover=true`) while this one's body was
        /// arriving.
        case pushTakenOver
        /// The client went away before its upload ended.
        case uploadAborted
        /// The server stopped listening to an upload because it is shutting down.
        case shuttingDown
        /// A request option (size, quality, fps, session option) is out of range.
        case invalidParameter
        /// A picture from the past that the session's history no longer (or never) held.
        case notInHistory
        /// Every catch-up decoder is busy and the queue for them is full.
        case catchUpQueueFull
        /// `--max-pull-sessions` sessions pull already.
        case tooManyPullSessions
        /// A request about the session's source, on a session that pulls none.
        case notPulling
        /// The configuration file declares the session: only a change of the file changes it.
        case declaredSession
        /// A change could not be written to `--state-dir`: it holds now, but not across a restart.
        case stateNotSaved
        /// A pull that connects on demand could not be connected, or sent no picture in time, for
        /// a request that waited for it.
        case sourceNotReady
        /// An upload's limits and its spool (`IngestError`).
        case ingest(IngestError.Code)
        case decoding(DecodeError.Code)
        /// A container or a pulled source (`ContainerError`).
        case container(ContainerError.Code)
        case imaging(ImagingError.Code)

        /// The stable string clients match on. Never change an existing one.
        public var rawValue: String {
            switch self {
            case .invalidSessionID: "invalid_session_id"
            case .sessionNotFound: "session_not_found"
            case .tooManySessions: "too_many_sessions"
            case .noFrameYet: "no_frame_yet"
            case .sessionBusy: "session_busy"
            case .pushTakenOver: "push_taken_over"
            case .uploadAborted: "upload_aborted"
            case .shuttingDown: "shutting_down"
            case .invalidParameter: "invalid_parameter"
            case .notInHistory: "not_in_history"
            case .catchUpQueueFull: "catchup_queue_full"
            case .tooManyPullSessions: "too_many_pull_sessions"
            case .notPulling: "not_pulling"
            case .declaredSession: "declared_session"
            case .stateNotSaved: "state_not_saved"
            case .sourceNotReady: "source_not_ready"
            case .ingest(let code): code.rawValue
            case .decoding(let code): code.rawValue
            case .container(let code): code.rawValue
            case .imaging(let code): code.rawValue
            }
        }
    }

    public let code: Code
    public let message: String
    /// For `.tooManySessions`: when a slot is likely to free (the next idle eviction).
    public let retryAfterSeconds: Int?
    /// Facts a client may act on, by name (for `.notInHistory`: the range held).
    public let facts: [String: Fact]

    /// One fact: text, or a number (a picture number), which a problem writes as a JSON number.
    public enum Fact: Sendable, Equatable {
        case text(String)
        case number(UInt64)
    }

    public init(_ code: Code, _ message: String, retryAfterSeconds: Int? = nil, facts: [String: Fact] = [:]) {
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
        self.facts = facts
    }

    /// Keeps the decoder's code; an out-of-range decoder option is an invalid parameter.
    public init(_ error: DecodeError) {
        self.init(error.code == .invalidOptions ? .invalidParameter : .decoding(error.code), error.message)
    }

    /// Keeps the container's or source's code.
    public init(_ error: ContainerError) {
        self.init(.container(error.code), error.message)
    }

    /// Keeps the input's code; bytes offered after an upload's end are an invalid parameter.
    public init(_ error: IngestError) {
        self.init(error.code == .uploadEnded ? .invalidParameter : .ingest(error.code), error.message)
    }

    /// Keeps the encoder's code; an out-of-range size or quality is an invalid parameter.
    public init(_ error: ImagingError) {
        self.init(error.code == .invalidOptions ? .invalidParameter : .imaging(error.code), error.message)
    }

    public var description: String { "\(code.rawValue): \(message)" }

    static func notFound(_ id: SessionID) -> SessionError {
        SessionError(.sessionNotFound, "no session '\(id)'")
    }
}

extension SessionError: IngestFailure {}
