import Synchronization

/// One piece of a streamed response: segments copied in order into libmicrohttpd's send
/// buffer, so a picture is never copied into an intermediate buffer first.
public struct StreamChunk: Sendable {
    public enum Segment: Sendable {
        case bytes([UInt8])
        case storage(any ByteStorage)

        var count: Int {
            switch self {
            case .bytes(let bytes): bytes.count
            case .storage(let storage): storage.bytes.count
            }
        }
    }

    public var segments: [Segment]
    public init(_ segments: [Segment]) { self.segments = segments }
    public init(bytes: [UInt8]) { self.segments = [.bytes(bytes)] }

    public var byteCount: Int { segments.reduce(0) { $0 + $1.count } }
}

/// What a stream source answers when the server pulls.
public enum StreamPoll: Sendable {
    case chunk(StreamChunk)
    /// Nothing to send now. The source keeps the waker and calls `wake()` once it has
    /// something (or has ended); the connection stays suspended until then, no thread waits.
    case pending
    /// Normal end of the stream (chunked terminator, or connection close on HTTP/1.0).
    case end
    /// The stream broke; the connection is closed without a clean end.
    case failure
}

/// Why the server stopped pulling from a source.
public enum StreamCloseReason: Sendable, Equatable {
    /// The source ended the stream and every byte was handed over.
    case finished
    /// The client disconnected or the connection failed.
    case clientGone
    /// The server is shutting down.
    case serverShutdown
}

/// Wakes one suspended streaming connection. Safe to call from any thread, any number of
/// times; waking a connection that is not waiting costs one extra pull.
public final class StreamWaker: Sendable {
    private let action: @Sendable () -> Void
    init(_ action: @escaping @Sendable () -> Void) { self.action = action }
    public func wake() { action() }
}

/// The producer side of a streamed response, one instance per response (per viewer). The
/// server pulls from it on a libmicrohttpd thread whenever the client can take more, so
/// `next` must be cheap and never block. A slow client therefore never slows the producer:
/// the source decides what is next (e.g. the newest frame), there is no per-client queue.
public protocol StreamSource: AnyObject, Sendable {
    /// `idle` is true when nothing was sent for the server's heartbeat interval: a source may
    /// return its last chunk again so a vanished client is noticed (suspended connections do
    /// not see disconnects), or `.pending` to keep waiting.
    func next(waker: StreamWaker, idle: Bool) -> StreamPoll

    /// The server is shutting down: the last chunk to send before the stream ends (a closing
    /// delimiter, a final error part), or nil to end it at once.
    func lastChunkBeforeShutdown() -> StreamChunk?

    /// Called exactly once when the server stops pulling: drop the waker and any resources.
    func close(_ reason: StreamCloseReason)

    /// True for a source whose next chunk is always the newest (a live view): it is not pulled
    /// while the socket still holds more than its last chunk unsent, so a slow client gets the
    /// picture of when it is ready rather than a backlog in the kernel's send buffer (which
    /// grows to megabytes: minutes of pictures for a slow client). False: every chunk counts.
    var newestWins: Bool { get }
}

extension StreamSource {
    public func lastChunkBeforeShutdown() -> StreamChunk? { nil }
    public var newestWins: Bool { false }
}

/// Multipart framing strict enough for GStreamer's multipartdemux and FFmpeg's mpjpeg
/// demuxer: every part starts with `--boundary` CRLF, carries Content-Type and
/// Content-Length, a blank line, the bytes, then CRLF.
public enum Multipart {
    /// `prefix` and 16 random characters. `prefix` must be of token characters too (letters and
    /// digits will do), so that the boundary never needs quoting in Content-Type.
    public static func makeBoundary(prefix: String) -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyz")
        return prefix + String((0..<16).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }

    /// Content-Type for an MJPEG live view.
    public static func mixedReplaceContentType(boundary: String) -> String {
        "multipart/x-mixed-replace;boundary=\(boundary)"
    }

    /// Content-Type for a finite multipart/mixed stream.
    public static func mixedContentType(boundary: String) -> String {
        "multipart/mixed;boundary=\(boundary)"
    }

    /// `--boundary CRLF` + Content-Type, Content-Length, `headers` + blank line.
    public static func partHeader(
        boundary: String, contentType: String, contentLength: Int, headers: [(String, String)] = []
    ) -> [UInt8] {
        var text = "--\(boundary)\r\nContent-Type: \(contentType)\r\nContent-Length: \(contentLength)\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// One complete part: header, the payload without copying, CRLF.
    public static func part(
        boundary: String, contentType: String, payload: any ByteStorage, headers: [(String, String)] = []
    ) -> StreamChunk {
        StreamChunk([
            .bytes(
                partHeader(
                    boundary: boundary, contentType: contentType, contentLength: payload.bytes.count, headers: headers)),
            .storage(payload),
            .bytes([13, 10]),
        ])
    }

    /// One complete part from bytes (e.g. a small JSON document).
    public static func part(boundary: String, contentType: String, bytes: [UInt8], headers: [(String, String)] = [])
        -> StreamChunk
    {
        StreamChunk([
            .bytes(partHeader(boundary: boundary, contentType: contentType, contentLength: bytes.count, headers: headers)),
            .bytes(bytes),
            .bytes([13, 10]),
        ])
    }

    /// `--boundary--` CRLF, which ends a multipart/mixed body.
    public static func closingDelimiter(boundary: String) -> [UInt8] {
        Array("--\(boundary)--\r\n".utf8)
    }
}
