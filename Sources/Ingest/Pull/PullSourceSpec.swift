import Containers
import FoundationEssentials

/// What a pull session pulls (`PUT /sessions/{id}` with a `source`).
public struct PullSourceSpec: Sendable, Equatable {
    public var url: SourceURL
    /// RTSP only: RTP over the RTSP connection (`tcp`, the default) or over UDP.
    public var transport: SourceTransport?
    /// When the pull is connected: always, or only while its pictures are asked for.
    public var connect: ConnectMode

    public init(url: SourceURL, transport: SourceTransport? = nil, connect: ConnectMode = .always) {
        self.url = url
        self.transport = transport
        self.connect = connect
    }
}

/// When a pull is connected to its source (`source.connect`).
public enum ConnectMode: String, Sendable, CaseIterable {
    /// From its start until it is stopped, connecting again after every failure.
    case always
    /// Only while someone asks for its pictures (and a linger after): told by `connectNow()` and
    /// `release()`, the pull waits idle in between.
    case onDemand = "on-demand"
}

/// Where a pull stands, for the session's status.
public struct SourceStatus: Sendable, Equatable {
    public enum State: String, Sendable, CaseIterable {
        /// Connecting (the first time, or again after a back-off).
        case connecting
        /// Connected and reading the stream.
        case live
        /// The connection failed or was lost; the next attempt follows its back-off.
        case retrying
        /// Stopped for good (the pull was replaced or removed).
        case stopped
        /// Not connected because nobody asks for its pictures (`connect: on-demand`); the next
        /// request connects it.
        case idle
    }

    /// The URL with its credentials left out (`SourceURL.redacted`).
    public var url: String
    /// The transport in use: the one asked for, or the scheme's default.
    public var transport: SourceTransport?
    /// When the pull is connected.
    public var connect: ConnectMode = .always
    public var state: State
    /// Why the last connection failed or ended.
    public var lastError: ErrorRecord?
    /// Connection attempts after a failed or lost one (an on-demand connection made after its
    /// idle time is none).
    public var reconnects: Int
    /// Attempts that failed in a row since the source was last live (a lost connection counts
    /// as one); 0 while live.
    public var failures: Int = 0
    /// When the current connection was made (nil unless live).
    public var connectedAt: Date?
    /// What the stream is read as (`rtsp`, `flv`, `mpegts`, `mov,mp4,...`, `annexb`), once connected.
    public var format: String?
    /// When the next attempt is due, while retrying.
    public var nextAttemptAt: Date?
}

/// How pulls connect, wait and retry (the server's `--source-*` options and its allow list).
public struct PullSettings: Sendable {
    /// The first wait after a failure; it doubles up to `retryMax`.
    public static let firstRetryDelay: Duration = .milliseconds(500)
    /// How long a connection hands on some of the stream before the back-off after it starts
    /// again from `firstRetryDelay`.
    public static let provenAfter: Duration = .seconds(5)
    /// The least wait after the source refused the credentials (`source_unauthorized`):
    /// cameras lock an account after a few failed logins (often 5 to 7 within 30 minutes), and
    /// a locked account shuts out every other client of the camera too. Fixing the URL (a `PUT`,
    /// the configuration file) or `POST .../source/retry` tries again at once.
    public static let unauthorizedRetry: Duration = .seconds(300)

    /// Whether a connection proved itself (`PullSource.read`): it handed on some of the stream
    /// `delivering` (from its opening to its last delivery) for `provenAfter`, or, when it
    /// `mayBeFile` (an HTTP body), ended as a whole file of samples.
    static func proved(delivering: Duration?, sampled: Bool, end: ContainerErrorCode, mayBeFile: Bool) -> Bool {
        if let delivering, delivering >= provenAfter { return true }
        return mayBeFile && sampled && end == .sourceEnded
    }
    /// A TCP connection that is refused at once costs a camera nothing; once a second finds it
    /// within about a second of its return.
    public static let defaultProbeInterval: Duration = .seconds(1)

    /// Which sources may be pulled; checked again before every attempt (a host name's
    /// addresses may have moved out of it).
    public var policy: SourcePolicy
    /// A connection and its header must come within this.
    public var connectTimeout: Duration
    /// A live pull that sends nothing for this long is lost (and retried).
    public var readTimeout: Duration
    /// The most bytes kept for a demuxer to seek back in (`SeekWindow`).
    public var seekWindow: Int
    /// The longest wait between attempts.
    public var retryMax: Duration
    /// How often a source that refuses connections is probed while its back-off runs
    /// (`ReconnectPlan`): once it accepts again, it is connected at once.
    public var probeInterval: Duration
    /// What the pull's samples may hold while they wait for the decode loop.
    public var queueBytes: Int

    public init(
        policy: SourcePolicy, connectTimeout: Duration, readTimeout: Duration, seekWindow: Int, retryMax: Duration,
        queueBytes: Int, probeInterval: Duration = PullSettings.defaultProbeInterval
    ) {
        self.policy = policy
        self.connectTimeout = connectTimeout
        self.readTimeout = readTimeout
        self.seekWindow = seekWindow
        self.retryMax = retryMax
        self.queueBytes = queueBytes
        self.probeInterval = probeInterval
    }
}

/// What a pull tells whoever runs it (a session turns it into its events and metrics), on the
/// pull's thread. The pull logs these itself.
public protocol PullObserver: Sendable {
    /// Connected (`reconnects`: the attempts after the first so far); `format`: what the stream
    /// is read as.
    func pullConnected(format: String, reconnects: Int)
    /// An attempt after the first begins.
    func pullReconnecting()
    /// The connection failed or was lost; the next attempt follows its back-off, `retryIn` from
    /// now (unless the pull is let go first).
    func pullLost(_ error: ContainerError, reconnects: Int, retryIn: Duration)
    /// An on-demand pull let its connection go (or gave up waiting to retry): nobody asks for
    /// its pictures.
    func pullReleased()
}
