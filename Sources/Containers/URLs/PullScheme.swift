/// What libavformat may reach while it opens and reads one input: the protocols it may open
/// (`protocol_whitelist`, also for every nested open) and the demuxers it may use
/// (`format_whitelist`), with the demuxer named outright so nothing is probed. Every
/// `avformat_open_input` FrameTap makes goes through one.
public struct LibavFence: Sendable, Equatable {
    /// Protocols libavformat may open; empty: none at all (the bytes come through FrameTap's
    /// own I/O, and a demuxer that asks for another input, an MP4 `dref` say, is refused).
    public let protocols: [String]
    /// The demuxer, forced: the only one on the whitelist.
    public let demuxer: String

    public init(protocols: [String], demuxer: String) {
        self.protocols = protocols
        self.demuxer = demuxer
    }

    /// A pushed container or a pulled HTTP body: FrameTap's own I/O, its container's demuxer.
    public static func ownInput(_ container: ContainerFormat) -> LibavFence {
        LibavFence(protocols: [], demuxer: container.demuxerName)
    }

    /// The options that set it.
    var options: [String: String] {
        ["protocol_whitelist": protocols.joined(separator: ","), "format_whitelist": demuxer]
    }
}

/// One pull scheme: how its URLs are read and rebuilt, how they are opened, what their
/// redirects may reach and which of their parameters are secrets. `PullScheme.all` is the
/// registry: a new scheme is one more row there, and everything else (URL parsing,
/// `--allow-sources`, `PUT`'s transport check, `PulledStream`) reads the rows.
///
/// `--allow-sources` entries match a URL by its scheme's `name`, its host and its port, and
/// the same check judges every other address a source makes FrameTap reach: an HTTP or RTSP
/// redirect's target (only to `redirectSchemes`), and for RTSP the media addresses a camera
/// names (see `RTSPAnswerCheck`).
public struct PullScheme: Sendable, Hashable, CustomStringConvertible {
    /// How libavformat opens a source of this scheme.
    public struct LibavOpening: Sendable, Equatable {
        public let fence: LibavFence
        /// Its protocol and demuxer options.
        public let options: [String: String]
        /// The option the chosen transport sets (`rtsp_transport`), if the scheme has a choice.
        public let transportOption: String?
        /// The connection FrameTap carries itself (`SourceRelay`), libavformat connecting only
        /// to the relay; nil: libavformat connects to the source.
        public let relay: Relay?
    }

    /// What a `SourceRelay` checks of what a source says.
    public enum Relay: Sendable, Equatable {
        /// RTSP's control connection: every answer (`RTSPAnswerCheck`).
        case rtspControl
        /// RTMP's one connection: no more than 64 MiB without a whole picture (`RTMPByteBudget`).
        case rtmpConnection
    }

    /// How a source of this scheme is opened.
    public enum Opening: Sendable, Equatable {
        /// libavformat's own protocol and demuxer, fenced in.
        case libavformat(LibavOpening)
        /// FrameTap's own HTTP/1.1 GET over libavformat's `tcp` (or `tls`) protocol
        /// (`HTTPSourceInput`); the body is read like a push.
        case httpGet(tls: Bool)
    }

    /// The scheme as URLs and `--allow-sources` write it, lower case.
    public let name: String
    /// The port a URL that names none connects to; nil: the URL must name one.
    public let defaultPort: Int?
    /// The transports `PUT {"source": {"transport"}}` may choose, the first the default.
    public let transports: [SourceTransport]
    public let opening: Opening
    /// Schemes a redirect may lead to (each target is checked against the allow list first);
    /// empty: a redirect is not followed.
    public let redirectSchemes: Set<String>
    /// Parameter names besides `URLRedaction.secretWords` whose values are secrets.
    public let secretParameters: Set<String>
    /// Refuses URLs of this scheme that FrameTap must not open as given.
    let check: @Sendable (SourceURL) throws(ContainerError) -> Void

    public var description: String { name }

    public static func == (lhs: PullScheme, rhs: PullScheme) -> Bool { lhs.name == rhs.name }
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }

    /// The row named `name` (any case), or nil.
    public init?(named name: some StringProtocol) {
        guard let row = Self.all.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = row
    }

    private init(
        name: String, defaultPort: Int?, transports: [SourceTransport], opening: Opening, redirectSchemes: Set<String> = [],
        secretParameters: Set<String> = [], check: @escaping @Sendable (SourceURL) throws(ContainerError) -> Void = { _ in }
    ) {
        self.name = name
        self.defaultPort = defaultPort
        self.transports = transports
        self.opening = opening
        self.redirectSchemes = redirectSchemes
        self.secretParameters = secretParameters
        self.check = check
    }

    // MARK: - The registry

    public static let all: [PullScheme] = [.rtsp, .rtmp, .srt, .http, .https]

    /// RTSP (RTP over the RTSP connection, or over UDP): libavformat's RTSP demuxer, connected to
    /// FrameTap's relay of the control connection, which checks every answer before
    /// libavformat reads it (redirects, SETUP transports, SDP addresses).
    public static let rtsp = PullScheme(
        name: "rtsp", defaultPort: 554, transports: [.tcp, .udp],
        opening: .libavformat(
            LibavOpening(
                fence: LibavFence(protocols: ["rtsp", "rtp", "udp", "tcp"], demuxer: "rtsp"),
                // Only the video is set up: audio would be received only to be dropped.
                options: ["allowed_media_types": "video"], transportOption: "rtsp_transport", relay: .rtspControl)),
        redirectSchemes: ["rtsp"])

    /// RTMP (a play request to a server): libavformat's RTMP protocol, which hands out FLV,
    /// connected to FrameTap's relay, which connects to the address it checked and ends a
    /// connection that sends too much without a whole picture.
    public static let rtmp = PullScheme(
        name: "rtmp", defaultPort: 1935, transports: [.tcp],
        opening: .libavformat(
            LibavOpening(
                fence: LibavFence(protocols: ["rtmp", "tcp"], demuxer: "flv"), options: [:], transportOption: nil,
                relay: .rtmpConnection)))

    /// SRT as a caller: MPEG-TS, as SRT carries it.
    public static let srt = PullScheme(
        name: "srt", defaultPort: nil, transports: [.udp],
        opening: .libavformat(
            LibavOpening(
                fence: LibavFence(protocols: ["srt"], demuxer: "mpegts"), options: [:], transportOption: nil,
                relay: nil)),
        secretParameters: ["streamid"],
        check: { url throws(ContainerError) in
            // A listener or rendezvous would wait for whoever calls, on an address of this machine.
            for (name, value) in url.queryParameters where name.lowercased() == "mode" && value.lowercased() != "caller" {
                throw ContainerError(.invalidSource, "FrameTap pulls SRT as a caller; mode=\(value.prefix(16)) is not pulled")
            }
            // libsrt takes 10 to 79 characters and refuses the call otherwise, which would read as
            // a listener that turned the caller away.
            for (name, value) in url.queryParameters where name.lowercased() == "passphrase" {
                let characters = value.utf8.count - 2 * value.utf8.filter { $0 == UInt8(ascii: "%") }.count
                guard (10...79).contains(characters) else {
                    throw ContainerError(.invalidSource, "an SRT passphrase has 10 to 79 characters; this one has \(characters)")
                }
            }
        })

    public static let http = PullScheme(
        name: "http", defaultPort: 80, transports: [.tcp], opening: .httpGet(tls: false), redirectSchemes: ["http", "https"])

    public static let https = PullScheme(
        name: "https", defaultPort: 443, transports: [.tcp], opening: .httpGet(tls: true), redirectSchemes: ["http", "https"])

    /// "rtsp, rtmp, srt, http and https", for messages.
    static var names: String {
        let names = all.map(\.name)
        return names.dropLast().joined(separator: ", ") + " and " + names.last!
    }
}
