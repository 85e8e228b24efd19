import CFFmpeg

/// An HTTP(S) source's body as a demuxer's input. FrameTap sends the GET itself over
/// libavformat's `tcp://` and `tls://` protocols (`HTTPConnection`) instead of using its
/// `http://` protocol, which follows redirects on its own: here every redirect's target is
/// checked against the allow list before anything is sent to it (and HTTPS verifies the
/// server's certificate).
///
/// Used on the pulling thread only; every blocking call gives up when `interrupt` says so.
public final class HTTPSourceInput: DemuxByteInput {
    /// The URL the body came from, after redirects.
    public private(set) var url: SourceURL
    /// The response's Content-Type, if it had one.
    public private(set) var contentType: String?

    static let maxRedirects = 5

    private var connection: HTTPConnection?

    /// Connects and reads the response's headers, following redirects (each checked with
    /// `check`). The body's reads share the interrupt's deadline as its reader sets it (a whole
    /// packet's, not a read's: a source that trickles bytes runs into it). Throws
    /// `source_not_allowed` for a redirect `check` refuses, for an HTTP error status
    /// `source_unauthorized` (401, 403: saying when the URL has no credentials or the source asks
    /// for Digest), `source_not_found` (404) or `source_failed`, and what the connection did
    /// wrong otherwise.
    public init(
        url: SourceURL, check: (SourceURL) -> ContainerError?, interrupt: DemuxInterrupt, connectTimeout: Duration
    ) throws(ContainerError) {
        self.url = url
        var current = url
        for _ in 0...Self.maxRedirects {
            interrupt.setTimeout(connectTimeout)
            let connection = try HTTPConnection(
                host: current.host, port: current.port, secure: current.scheme == .https, interrupt: interrupt,
                name: current.redacted)
            try connection.send(Self.request(for: current))
            let head = try connection.readHead()
            if [301, 302, 303, 307, 308].contains(head.status), let location = head.headers["location"] {
                connection.close()
                let next = try current.resolving(location)
                guard current.scheme.redirectSchemes.contains(next.scheme.name) else {
                    throw ContainerError(.sourceNotAllowed, "a redirect to \(next.redacted) leaves HTTP")
                }
                if let refusal = check(next) {
                    throw ContainerError(.sourceNotAllowed, "redirected to \(next.redacted), which is not allowed: \(refusal.message)")
                }
                current = next
                continue
            }
            guard (200..<300).contains(head.status) else {
                connection.close()
                let code: ContainerErrorCode =
                    switch head.status {
                    case 401, 403: .sourceUnauthorized
                    case 404: .sourceNotFound
                    default: .sourceFailed
                    }
                var why = ""
                if head.status == 401 {
                    let challenge = head.headers["www-authenticate"]?.lowercased() ?? ""
                    if !current.hasCredentials {
                        why = ": it asks for credentials; put them in the URL (https://user:password@host/...)"
                    } else if challenge.hasPrefix("digest") {
                        why = ": it asks for Digest authentication, and HTTP pulls send Basic only (an RTSP URL of the camera does Digest)"
                    }
                }
                throw ContainerError(code, "HTTP \(head.status) \(head.reason) from \(current.redacted)\(why)")
            }
            self.url = current
            contentType = head.headers["content-type"]
            self.connection = connection
            return
        }
        throw ContainerError(.sourceFailed, "more than \(Self.maxRedirects) redirects from \(url.redacted)")
    }

    public func close() {
        connection?.close()
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer) -> DemuxInputRead {
        connection?.read(into: buffer) ?? .end
    }

    /// The GET of `url`, with its credentials as HTTP Basic authentication.
    private static func request(for url: SourceURL) -> [UInt8] {
        var request = "GET \(url.pathAndQuery) HTTP/1.1\r\nHost: \(url.hostInURL)\(url.port == url.scheme.defaultPort ? "" : ":\(url.port)")\r\n"
        request += "User-Agent: FrameTap\r\nAccept: */*\r\nConnection: close\r\n"
        if let userInfo = url.userInfo {
            request += "Authorization: Basic \(Base64.encode(Self.percentDecoded(userInfo)))\r\n"
        }
        request += "\r\n"
        return Array(request.utf8)
    }

    /// A URL's `user:password` as the bytes Basic authentication sends (percent escapes undone).
    static func percentDecoded(_ text: String) -> [UInt8] {
        var output: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let byte = bytes.popFirst() {
            if byte == UInt8(ascii: "%"), bytes.count >= 2, let value = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16) {
                output.append(value)
                bytes = bytes.dropFirst(2)
            } else {
                output.append(byte)
            }
        }
        return output
    }
}

/// RFC 4648 base64, for HTTP Basic credentials.
enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            let value = chunk.enumerated().reduce(0) { $0 | Int($1.element) << (16 - 8 * $1.offset) }
            for position in 0..<4 {
                output.append(position <= chunk.count ? alphabet[(value >> (18 - 6 * position)) & 63] : UInt8(ascii: "="))
            }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }
}
