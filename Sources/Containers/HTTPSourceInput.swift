import CFFmpeg

/// An HTTP(S) source's body as a demuxer's input. FrameTap sends the GET itself over
/// libavformat's `tcp://` and `tls://` protocols instead of using its `http://` protocol,
/// which follows redirects on its own: here every redirect's target is checked against the
/// allow list before anything is sent to it (and HTTPS verifies the server's certificate).
///
/// Used on the pulling thread only; every blocking call gives up when `interrupt` says so.
public final class HTTPSourceInput: DemuxByteInput {
    /// The URL the body came from, after redirects.
    public private(set) var url: SourceURL
    /// The response's Content-Type, if it had one.
    public private(set) var contentType: String?

    static let maxRedirects = 5
    static let maxHeaderBytes = 16 << 10

    private var connection: UnsafeMutablePointer<AVIOContext>?
    private let callback: InterruptCallback
    private let interrupt: DemuxInterrupt
    private let readTimeout: Duration
    /// Bytes read past the headers, not yet handed out.
    private var pending: [UInt8] = []
    private var pendingOffset = 0
    private var body: BodyFraming = .untilClose
    private var finished = false

    private enum BodyFraming {
        case length(remaining: Int)
        /// Chunked: bytes left in the current chunk; nil between chunks.
        case chunked(remaining: Int?)
        case untilClose
    }

    /// Connects and reads the response's headers, following redirects (each checked with
    /// `check`). Throws `source_not_allowed` for a redirect `check` refuses, `source_failed` for
    /// an HTTP error status, and what the connection did wrong otherwise.
    public init(
        url: SourceURL, check: (SourceURL) -> ContainerError?, interrupt: DemuxInterrupt, connectTimeout: Duration,
        readTimeout: Duration
    ) throws(ContainerError) {
        self.url = url
        self.interrupt = interrupt
        self.readTimeout = readTimeout
        callback = InterruptCallback(interrupt: interrupt)
        var current = url
        for _ in 0...Self.maxRedirects {
            interrupt.setTimeout(connectTimeout)
            try connect(to: current)
            let head = try readHead()
            if [301, 302, 303, 307, 308].contains(head.status), let location = head.headers["location"] {
                close()
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
                close()
                throw ContainerError(.sourceFailed, "HTTP \(head.status) \(head.reason) from \(current.redacted)")
            }
            self.url = current
            contentType = head.headers["content-type"]
            if head.headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
                body = .chunked(remaining: nil)
            } else if let length = head.headers["content-length"].flatMap({ Int($0) }), length >= 0 {
                body = .length(remaining: length)
            }
            interrupt.setTimeout(readTimeout)
            return
        }
        throw ContainerError(.sourceFailed, "more than \(Self.maxRedirects) redirects from \(url.redacted)")
    }

    deinit { close() }

    public func close() {
        if connection != nil { avio_closep(&connection) }
    }

    // MARK: - Body

    public func read(into buffer: UnsafeMutableRawBufferPointer) -> DemuxInputRead {
        while !finished {
            switch body {
            case .length(let remaining):
                guard remaining > 0 else {
                    finished = true
                    continue
                }
                let result = readRaw(into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<min(buffer.count, remaining)]))
                if case .bytes(let count) = result { body = .length(remaining: remaining - count) }
                return result
            case .untilClose:
                return readRaw(into: buffer)
            case .chunked(let remaining):
                if let remaining, remaining > 0 {
                    let result = readRaw(into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<min(buffer.count, remaining)]))
                    if case .bytes(let count) = result {
                        body = .chunked(remaining: remaining - count)
                        if remaining - count == 0 {
                            // The CRLF after the chunk's data.
                            guard case .some = try? readLine() else { return .end }
                            body = .chunked(remaining: nil)
                        }
                    }
                    return result
                }
                guard let line = try? readLine() else { return interruptedOrEnd() }
                let sizeText = line.prefix { $0 != ";" }.filter { $0 != " " }
                guard let size = Int(sizeText, radix: 16), size >= 0 else { return .end }
                if size == 0 {
                    finished = true
                    continue
                }
                body = .chunked(remaining: size)
            }
        }
        return .end
    }

    private func interruptedOrEnd() -> DemuxInputRead {
        interrupt.reason == nil ? .end : .interrupted
    }

    /// Body bytes as they come off the connection (after any read ahead with the headers).
    private func readRaw(into buffer: UnsafeMutableRawBufferPointer) -> DemuxInputRead {
        if pendingOffset < pending.count {
            let count = min(buffer.count, pending.count - pendingOffset)
            pending.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[pendingOffset..<(pendingOffset + count)]))
            }
            pendingOffset += count
            return .bytes(count)
        }
        guard let connection else { return .end }
        interrupt.setTimeout(readTimeout)
        let got = avio_read_partial(connection, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(buffer.count))
        if got > 0 { return .bytes(Int(got)) }
        return interruptedOrEnd()
    }

    // MARK: - Connection and headers

    private func connect(to url: SourceURL) throws(ContainerError) {
        let host = url.hostInURL
        let tls = url.scheme.opening == .httpGet(tls: true)
        let address = "\(tls ? "tls" : "tcp")://\(host):\(url.port)"
        var options: OpaquePointer?
        // Nothing but the connection itself: libavformat's http:// would follow redirects.
        av_dict_set(&options, "protocol_whitelist", tls ? "tls,tcp" : "tcp", 0)
        if tls {
            av_dict_set(&options, "tls_verify", "1", 0)
            av_dict_set(&options, "verifyhost", url.host, 0)
        }
        var interruptCB = AVIOInterruptCB(
            callback: { opaque in
                guard let opaque else { return 0 }
                return Unmanaged<InterruptCallback>.fromOpaque(opaque).takeUnretainedValue().check() ? 1 : 0
            },
            opaque: Unmanaged.passUnretained(callback).toOpaque())
        let status = avio_open2(&connection, address, AVIO_FLAG_READ_WRITE, &interruptCB, &options)
        av_dict_free(&options)
        guard status >= 0, let connection else { throw failure(status, "connecting to \(url.redacted)") }
        var request = "GET \(url.pathAndQuery) HTTP/1.1\r\nHost: \(host)\(url.port == url.scheme.defaultPort ? "" : ":\(url.port)")\r\n"
        request += "User-Agent: FrameTap\r\nAccept: */*\r\nConnection: close\r\n"
        if let userInfo = url.userInfo {
            request += "Authorization: Basic \(Base64.encode(Self.percentDecoded(userInfo)))\r\n"
        }
        request += "\r\n"
        let bytes = Array(request.utf8)
        avio_write(connection, bytes, Int32(bytes.count))
        avio_flush(connection)
        if connection.pointee.error < 0 { throw failure(connection.pointee.error, "sending the request to \(url.redacted)") }
        pending = []
        pendingOffset = 0
        finished = false
        body = .untilClose
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

    private struct Head {
        var status: Int
        var reason: String
        var headers: [String: String]
    }

    private func readHead() throws(ContainerError) -> Head {
        let statusLine = try readLine()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw ContainerError(.sourceFailed, "the server's answer is not HTTP/1.x")
        }
        var headers: [String: String] = [:]
        var total = statusLine.utf8.count
        while true {
            let line = try readLine()
            total += line.utf8.count
            guard total <= Self.maxHeaderBytes else { throw ContainerError(.sourceFailed, "the response headers exceed 16 KiB") }
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
            headers[name] = String(value)
        }
        return Head(status: status, reason: parts.count > 2 ? String(parts[2]) : "", headers: headers)
    }

    /// One line without its CRLF, read byte by byte from what is buffered and the connection.
    private func readLine() throws(ContainerError) -> String {
        var line: [UInt8] = []
        while true {
            if pendingOffset >= pending.count {
                guard let connection else { throw ContainerError(.sourceFailed, "the connection is closed") }
                var chunk = [UInt8](repeating: 0, count: 4096)
                let got = chunk.withUnsafeMutableBytes {
                    avio_read_partial(connection, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32($0.count))
                }
                guard got > 0 else { throw failure(got, "reading the response") }
                pending = Array(chunk.prefix(Int(got)))
                pendingOffset = 0
            }
            let byte = pending[pendingOffset]
            pendingOffset += 1
            if byte == 0x0A {
                if line.last == 0x0D { line.removeLast() }
                return String(decoding: line, as: UTF8.self)
            }
            line.append(byte)
            guard line.count <= Self.maxHeaderBytes else { throw ContainerError(.sourceFailed, "a response line exceeds 16 KiB") }
        }
    }

    private func failure(_ status: Int32, _ what: String) -> ContainerError {
        switch interrupt.reason {
        case .refused(let error): return error
        case .timedOut: return ContainerError(.sourceTimeout, "\(what): no answer in time")
        case .stopped: return ContainerError(.sourceEnded, "stopped")
        case nil: break
        }
        let why = libavErrorString(status)
        switch status {
        case ft_averror(ECONNREFUSED), ft_averror(EHOSTUNREACH), ft_averror(ENETUNREACH), ft_averror(EADDRNOTAVAIL):
            return ContainerError(.sourceUnreachable, "\(what): \(why)")
        case ft_averror(ETIMEDOUT): return ContainerError(.sourceTimeout, "\(what): \(why)")
        case ft_averror_eof(): return ContainerError(.sourceFailed, "\(what): the server closed the connection")
        default: return ContainerError(.sourceFailed, "\(what): \(why)")
        }
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
