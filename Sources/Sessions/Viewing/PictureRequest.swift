import Decoding
import FoundationEssentials
import Imaging
import Timekeeping
import VideoCoding

/// What a reader asks for. `quality` nil means the session's default quality (settable with `PUT`).
public struct PictureRequest: Sendable, Equatable {
    public var format: PictureFormat
    public var width: Int?
    public var height: Int?
    public var quality: Int?

    public init(format: PictureFormat = .jpeg, width: Int? = nil, height: Int? = nil, quality: Int? = nil) {
        self.format = format
        self.width = width
        self.height = height
        self.quality = quality
    }

    /// Range checks that need no picture (the HTTP layer may call this early to answer 400).
    public func validated() throws(SessionError) -> PictureRequest {
        do {
            _ = try PictureOptions(format: format, width: width, height: height, quality: quality ?? 85).validated()
        } catch {
            throw SessionError(error)
        }
        return self
    }

    func effectiveQuality(sessionDefault: Int) -> Int { quality ?? sessionDefault }

    /// For a viewer that stays while the stream goes on (MJPEG): this size, made smaller where
    /// it would enlarge `frame` more than `PictureKey.maxUpscale` times (the stream's size fell
    /// after the viewer came), keeping the shape it asks for. A single request is refused
    /// instead (400): it can ask again.
    func fitting(_ frame: DecodedFrame) -> PictureRequest {
        let limits = [(width, frame.width), (height, frame.height)].compactMap { asked, source in
            asked.map { Double(source * PictureKey.maxUpscale) / Double($0) }
        }
        guard let factor = limits.min(), factor < 1 else { return self }
        var fitted = self
        fitted.width = width.map { max(1, Int((Double($0) * factor).rounded(.down))) }
        fitted.height = height.map { max(1, Int((Double($0) * factor).rounded(.down))) }
        return fitted
    }
}

/// Entity tags of served pictures: `"<seq>@<incarnation>"` for the source size at the standard
/// quality, `"<seq>-w160-h90-q50@<incarnation>"` otherwise (only the parts that differ), so every
/// distinct representation of one picture has a distinct tag, and a tag's sequence is readable
/// by clients that long-poll with `If-None-Match`. The incarnation is the session's own (random,
/// made with it): numbers start again at 1 in a session made again or after a restart, and a
/// tag of an earlier session of the same name matches nothing, so a cache never gets 304 for
/// another stream's picture, and a long poll holding such a tag gets the newest picture at once.
public enum PictureETag {
    public static func make(sequence: UInt64, request: PictureRequest, effectiveQuality: Int, incarnation: String) -> String {
        var tag = "\"\(sequence)"
        if let width = request.width { tag += "-w\(width)" }
        if let height = request.height { tag += "-h\(height)" }
        if request.format == .jpeg, effectiveQuality != PictureOptions.defaultQuality { tag += "-q\(effectiveQuality)" }
        return tag + "@" + incarnation + "\""
    }

    /// The picture sequence a tag of this incarnation names (`"17-w160@k3f9a"` → 17), or nil
    /// for any other tag.
    public static func sequence(of tag: String, incarnation: String) -> UInt64? {
        var body = Substring(tag)
        if body.hasPrefix("W/") { body = body.dropFirst(2) }
        guard body.hasPrefix("\""), body.hasSuffix("@" + incarnation + "\"") else { return nil }
        let digits = body.dropFirst().prefix { $0.isASCII && $0.isNumber }
        return UInt64(digits)
    }

    /// A new session's incarnation: 32 random bits in base 36.
    public static func newIncarnation() -> String {
        String(UInt32.random(in: .min ... .max), radix: 36)
    }
}

/// The options a picture is cached under: the request resolved against the picture's size
/// and the session default, so requests that produce the same bytes share one encode
/// (`?width=W` for a W-wide picture equals no width; quality does not affect raw formats).
struct PictureKey: Hashable, Sendable {
    static let maxUpscale = 2
    let sequence: UInt64
    let format: PictureFormat
    let width: Int
    let height: Int
    let quality: Int

    init(sequence: UInt64, format: PictureFormat, width: Int, height: Int, quality: Int) {
        self.sequence = sequence
        self.format = format
        self.width = width
        self.height = height
        self.quality = quality
    }

    /// The size `request` asks of a `sourceWidth`×`sourceHeight` picture, or why it may not have
    /// it: over `limit`, or enlarged too far.
    static func size(
        of request: PictureRequest, sourceWidth: Int, sourceHeight: Int, limit: PictureSizeLimit
    ) throws(SessionError) -> (width: Int, height: Int) {
        let size = outputSize(sourceWidth: sourceWidth, sourceHeight: sourceHeight, width: request.width, height: request.height)
        do {
            try limit.check(width: size.width, height: size.height)
        } catch {
            throw SessionError(.invalidParameter, error.message)
        }
        // Each distinct size is one more scale and encode of up to `limit` pixels: enlarging
        // adds no detail, so it is capped to keep one client from buying that cost repeatedly.
        guard size.width <= sourceWidth * maxUpscale, size.height <= sourceHeight * maxUpscale else {
            throw SessionError(
                .invalidParameter,
                "\(size.width)x\(size.height) enlarges the \(sourceWidth)x\(sourceHeight) picture more than \(maxUpscale)x")
        }
        return size
    }

    var encoderOptions: PictureOptions {
        PictureOptions(format: format, width: width, height: height, quality: format == .jpeg ? quality : 85)
    }

    /// `quality` is the request's effective quality (its own, or the session default).
    init(published: PublishedFrame, request: PictureRequest, quality: Int, limit: PictureSizeLimit) throws(SessionError) {
        let size = try Self.size(of: request, sourceWidth: published.frame.width, sourceHeight: published.frame.height, limit: limit)
        sequence = published.sequence
        format = request.format
        width = size.width
        height = size.height
        self.quality = request.format == .jpeg ? quality : 0
    }
}

/// A decoded picture as the session published it, with its session-wide number
/// (`PictureNumbering`: 1 + its GOP keyframe's access unit index + its output rank in the GOP;
/// never reused, also across flushes and back end changes, and the same whichever keyframe
/// decoding started at, so it is a valid ETag basis for live pictures and pictures from the past).
struct PublishedFrame: Sendable {
    let frame: DecodedFrame
    let sequence: UInt64
    let backend: DecoderBackend
    /// When the decoder handed the picture out, on the session's clock (for `Last-Modified`). A
    /// picture from the past is stamped with when its access unit arrived instead.
    let decodedAt: Date
    /// The monotonic time its age counts from: when its access unit arrived, when known (a
    /// picture decoded on demand from an access unit that came long before is that old), else
    /// when it was decoded.
    let agedFromUptime: UInt64
    /// When its access unit's bytes arrived, while the history knew it.
    let receivedAt: Date?

    init(
        frame: DecodedFrame, sequence: UInt64, backend: DecoderBackend, at clock: any ServiceClock,
        arrival: (date: Date, uptime: UInt64)? = nil
    ) {
        self.frame = frame
        self.sequence = sequence
        self.backend = backend
        decodedAt = clock.now
        agedFromUptime = arrival?.uptime ?? clock.uptime
        receivedAt = arrival?.date
    }

    /// A picture decoded from the history: its age is counted from when its bytes arrived.
    init(pastFrame frame: DecodedFrame, sequence: UInt64, receivedAt: Date, receivedUptime: UInt64) {
        self.frame = frame
        self.sequence = sequence
        backend = frame.decodedBy
        decodedAt = receivedAt
        agedFromUptime = receivedUptime
        self.receivedAt = receivedAt
    }

    func info(now: UInt64) -> LatestFrameInfo {
        LatestFrameInfo(
            seq: sequence, pts: frame.pts, keyframe: frame.isKeyframe, width: frame.width, height: frame.height,
            ageMs: Int((now &- agedFromUptime) / 1_000_000))
    }
}

/// A picture ready to send, with what the response headers need.
public struct ServedPicture: Sendable {
    /// Immutable bytes at a stable address, shared by every reader of this representation.
    public let picture: EncodedPicture
    public let sequence: UInt64
    /// Quoted entity tag (`"17"`, `"17-w160"`).
    public let etag: String
    public let pts: Int64?
    public let isKeyframe: Bool
    /// Wall-clock decode time (for `Last-Modified`).
    public let decodedAt: Date
    public let backend: DecoderBackend
    /// The monotonic time its age counts from (`PublishedFrame.agedFromUptime`).
    public let agedFromUptime: UInt64
    /// When the bytes of its access unit arrived, when known.
    public let receivedAt: Date?

    init(published: PublishedFrame, picture: EncodedPicture, etag: String) {
        self.picture = picture
        sequence = published.sequence
        self.etag = etag
        pts = published.frame.pts
        isKeyframe = published.frame.isKeyframe
        decodedAt = published.decodedAt
        backend = published.backend
        agedFromUptime = published.agedFromUptime
        receivedAt = published.receivedAt
    }

    /// Milliseconds between when its access unit arrived (or it was decoded) and `now` (a
    /// `ServiceClock.uptime` reading).
    public func ageMilliseconds(now: UInt64) -> Int { Int((now &- agedFromUptime) / 1_000_000) }
}

/// What a long-polling client already has: the entity tags of its `If-None-Match` (parsed by the
/// HTTP layer), or the sequence of its `?after=`.
public struct PictureAnswerCondition: Sendable {
    /// Tags of pictures the client holds, quoted; the current picture's tag answers 304.
    public var entityTags: [String]
    /// `If-None-Match: *`: whatever the current picture, the client has it (304).
    public var anyEntityTag: Bool
    /// `?after=`: the sequence the client has.
    public var after: UInt64?

    public init(entityTags: [String] = [], anyEntityTag: Bool = false, after: UInt64? = nil) {
        self.entityTags = entityTags
        self.anyEntityTag = anyEntityTag
        self.after = after
    }

    /// The newest sequence the client says it has: `after`, else the newest its tags of this
    /// session's `incarnation` name.
    func newerThan(incarnation: String) -> UInt64? {
        after ?? entityTags.compactMap { PictureETag.sequence(of: $0, incarnation: incarnation) }.max()
    }

    /// Whether the client holds the picture tagged `etag`.
    func holds(_ etag: String) -> Bool { anyEntityTag || entityTags.contains(etag) }
}

public enum PictureAnswer: Sendable {
    case picture(ServedPicture)
    /// 304: the client's picture is still the newest (or no newer one came before the wait
    /// ended). `etag` is the current picture's tag for these options, nil before the first picture.
    case notModified(etag: String?)
}
