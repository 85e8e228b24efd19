import Decoding
import FoundationEssentials
import Imaging
import Ingest
import VideoCoding

/// Which pictures a session decodes.
public enum DecodeMode: String, Sendable, CaseIterable {
    case all
    /// Only random-access pictures (IDR / recovery point); the rest are skipped before the
    /// decoder, which makes a high-rate thumbnail session far cheaper. An intra-refresh stream,
    /// which has no picture that decodes alone, is decoded whole.
    case keyframes
    /// Every picture, but only while someone looks: ingest keeps the access units as compressed
    /// history, and a decoder runs only from a request for a picture (catching up from the last
    /// keyframe) until `--on-demand-linger` after the last one.
    case onDemand = "on-demand"
}

/// What an on-demand session's decoder is doing (a session of another mode is always `live`).
public enum DecoderActivity: String, Sendable, CaseIterable {
    /// No decoder: nothing is decoded and no decoder memory is held.
    case idle
    /// A request woke the decoder; it waits for a catch-up slot.
    case queued
    /// Decoding from the last keyframe to the newest access unit.
    case catchingUp = "catching_up"
    /// Decoding each access unit as it arrives.
    case live
}

/// How a session decodes and encodes (`PUT /sessions/{id}`); nil members leave a setting as it is.
public struct SessionOptions: Sendable, Equatable {
    public var backend: DecoderBackendChoice?
    /// Pull this source (a pull session); `.some(nil)` stops a pull, nil leaves it as it is.
    public var source: PullSourceSpec??
    /// The stream's codec; a push whose parameter sets are of another is refused.
    public var codec: VideoCodec?
    public var decode: DecodeMode?
    public var quality: Int?
    /// Who keeps the session (`SessionOwner`); `.some(nil)` clears it, nil leaves it as it is.
    public var owner: SessionOwner??

    public init(
        backend: DecoderBackendChoice? = nil, codec: VideoCodec? = nil, decode: DecodeMode? = nil, quality: Int? = nil,
        source: PullSourceSpec?? = nil, owner: SessionOwner?? = nil
    ) {
        self.source = source
        self.backend = backend
        self.codec = codec
        self.decode = decode
        self.quality = quality
        self.owner = owner
    }
}

/// Stream counters since the session was created (they survive flushes and backend changes):
/// the decoders' own counts, read through as if they were this struct's members, plus what only
/// a session knows.
@dynamicMemberLookup
public struct SessionCounters: Sendable, Equatable {
    /// What the session's decoders counted, summed over any it replaced.
    public var stream = StreamDecoder.Counters()
    /// Uploads whose client went away before the body ended.
    public var uploadsAborted = 0
    /// Pushes ended by a newer push that took the session over (`?takeover=true`, or the same
    /// publisher's next push).
    public var uploadsTakenOver = 0

    public init() {}

    public subscript<Value>(dynamicMember path: WritableKeyPath<StreamDecoder.Counters, Value>) -> Value {
        get { stream[keyPath: path] }
        set { stream[keyPath: path] = newValue }
    }
}

public struct LatestFrameInfo: Sendable, Equatable {
    public var seq: UInt64
    public var pts: Int64?
    public var keyframe: Bool
    public var width: Int
    public var height: Int
    public var ageMs: Int
}

/// What a session is and does now (`GET /sessions/{id}`).
public struct SessionStatus: Sendable {
    public var id: SessionID
    /// The stream's codec: stated (`PUT`, a push's `?codec=` or Content-Type) or detected from its
    /// first parameter set; nil until known.
    public var codec: VideoCodec?
    /// `codec` was stated for the running stream, not detected.
    public var codecStated: Bool
    /// The codec stated for the session (`PUT`); while a stream of the other codec is under way,
    /// it takes over at the next stream start, and `codec` is still the running stream's.
    public var statedCodec: VideoCodec? = nil
    public var backend: DecoderBackend
    public var backendReason: String
    /// The picture encoder and why it serves: as it said after its last encode, or before the
    /// first, the one chosen at start-up.
    public var encoder: PictureEncoderIdentity
    /// The hardware device decoding now (`cuda:0`, `/dev/dri/renderD128`); nil in software.
    public var device: HardwareDeviceID?
    /// The latest switches to another back end, oldest first.
    public var fallbacks: [BackendFallback]
    public var decode: DecodeMode
    /// Whether a decoder runs now (always, except for an idle on-demand session), and what it does.
    public var decoding: Bool { decoder != .idle }
    public var decoder: DecoderActivity
    public var quality: Int
    public var createdAt: Date
    public var lastActivityAt: Date
    public var format: StreamFormat?
    public var counters: SessionCounters
    public var latestFrame: LatestFrameInfo?
    public var lastError: ErrorRecord?
    public var subscribers: Int
    public var uploading: Bool
    /// What holds the stream against other clients' pushes (`?publisher=`, `?takeover=true`),
    /// while its hold lasts.
    public var hold: StreamHold? = nil
    /// The named publisher whose pushes hold the stream, while its hold lasts.
    public var publisher: String? { hold?.publisher }
    /// Pictures and bits per second coming in, over the last few seconds.
    public var rates: SessionRates
    /// What a pull session pulls and where that stands; nil for a push session.
    public var source: SourceStatus?
    /// Who keeps the session, as its creator said (`SessionOptions.owner`); nil when nobody said.
    public var owner: SessionOwner?
    /// Packets of container tracks other than the video (audio, data, ...), by kind, left out.
    public var ignoredPackets: [String: Int] = [:]
    /// Declared by the configuration file or made by a client, and kept in `--state-dir` or not.
    public var standing = SessionStanding()
}

/// What one upload request carried and produced (the answer to `POST .../nalus`).
public struct UploadSummary: Sendable {
    public var session: SessionID
    public var bytes: Int
    public var nalUnits: [String: Int]
    /// Pictures output while handling this request.
    public var frames: Int
    public var latestSeq: UInt64?
    public var format: StreamFormat?
    /// Decode errors during this request; the first one is in `error`.
    public var decodeErrors: Int
    public var error: ErrorRecord?
    public var flushed: Bool
}

/// `GET /sessions`.
public struct SessionList: Sendable {
    public var sessions: [SessionStatus]
}
