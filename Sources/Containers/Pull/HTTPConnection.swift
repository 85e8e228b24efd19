import CFFmpeg

/// One HTTP/1.1 exchange over libavformat's `tcp://` or `tls://` protocol (TLS verifies the
/// server's certificate and host name): the request as the caller wrote it, the response's head,
/// then its body as its framing says (Content-Length, chunked, or until the server closes).
/// Every blocking step gives up when `interrupt` says so: its deadline, or a stop from another
/// thread. Pulls from HTTP sources (`HTTPSourceInput`) and `frametap sync`'s requests to a
/// gateway both talk HTTP through it.
///
/// Used on one thread at a time.
public final class HTTPConnection {
    /// A response's status line and headers (names in lower case; a repeated header keeps its last value).
    public struct Head: Sendable, Equatable {
        public var status: Int
        public var reason: String
        public var headers: [String: String]
    }

    public static let maxHeaderBytes = 16 << 10

    private var connection: UnsafeMutablePointer<AVIOContext>?
    private let callback: InterruptCallback
    private let interrupt: DemuxInterrupt
    /// The endpoint as errors name it (never with credentials).
    private let name: String
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

    /// Connects to `host` (a name or an address; an IPv6 address without brackets) on `port`,
    /// over TLS when `secure`. `name`: the endpoint in error messages.
    public init(host: String, port: Int, secure: Bool, interrupt: DemuxInterrupt, name: String) throws(ContainerError) {
        self.interrupt = interrupt
        self.name = name
        callback = InterruptCallback(interrupt: interrupt)
        let bracketed = host.contains(":") ? "[\(host)]" : host
        let address = "\(secure ? "tls" : "tcp")://\(bracketed):\(port)"
        var options: OpaquePointer?
        // Nothing but the connection itself: libavformat's http:// would follow redirects.
        av_dict_set(&options, "protocol_whitelist", secure ? "tls,tcp" : "tcp", 0)
        if secure {
            av_dict_set(&options, "tls_verify", "1", 0)
            av_dict_set(&options, "verifyhost", host, 0)
        }
        var interruptCB = AVIOInterruptCB(
            callback: { opaque in
                guard let opaque else { return 0 }
                return Unmanaged<InterruptCallback>.fromOpaque(opaque).takeUnretainedValue().check() ? 1 : 0
            },
            opaque: Unmanaged.passUnretained(callback).toOpaque())
        let status = avio_open2(&connection, address, AVIO_FLAG_READ_WRITE, &interruptCB, &options)
        av_dict_free(&options)
        guard status >= 0, connection != nil else { throw failure(status, "connecting to \(name)") }
    }

    deinit { close() }

    public func close() {
        if connection != nil { avio_closep(&connection) }
    }

    /// Sends `request` (the request line, headers and any body, as the caller wrote them).
    public func send(_ request: [UInt8]) throws(ContainerError) {
        guard let connection else { throw ContainerError(.sourceFailed, "the connection is closed") }
        avio_write(connection, request, Int32(request.count))
        avio_flush(connection)
        if connection.pointee.error < 0 { throw failure(connection.pointee.error, "sending the request to \(name)") }
    }

    /// The response's status line and headers; the body that follows is read with `read(into:)`
    /// or `readBody(limit:)`.
    public func readHead() throws(ContainerError) -> Head {
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
        if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            body = .chunked(remaining: nil)
        } else if let length = headers["content-length"].flatMap({ Int($0) }), length >= 0 {
            body = .length(remaining: length)
        } else {
            body = .untilClose
        }
        finished = false
        return Head(status: status, reason: parts.count > 2 ? String(parts[2]) : "", headers: headers)
    }

    // MARK: - Body

    /// The next bytes of the body: `.end` after its last byte (or when the connection ends),
    /// `.interrupted` when the interrupt fired.
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
                            switch Result(catching: { () throws(ContainerError) in try readLine() }) {
                            case .success(let line) where line.isEmpty: body = .chunked(remaining: nil)
                            case .success: return malformedChunk("a chunk's data runs past its size")
                            case .failure: return .end
                            }
                        }
                    }
                    return result
                }
                guard let line = try? readLine() else { return interruptedOrEnd() }
                let sizeText = line.prefix { $0 != ";" }.filter { $0 != " " }
                guard let size = Int(sizeText, radix: 16), size >= 0 else {
                    return malformedChunk("a chunk size of '\(sizeText.prefix(20))' is no hexadecimal number that fits")
                }
                if size == 0 {
                    finished = true
                    continue
                }
                body = .chunked(remaining: size)
            }
        }
        return .end
    }

    /// A chunked body that breaks its framing: the connection fails now, saying why, rather
    /// than reading on as if the body had ended or waiting out the read timeout.
    private func malformedChunk(_ why: String) -> DemuxInputRead {
        interrupt.refuse(ContainerError(.sourceFailed, "\(name) sent a malformed chunked body: \(why)"))
        return .interrupted
    }

    /// The whole body, for answers known to be small: more than `limit` bytes is an error, and
    /// so is a body cut short of its framing (an interrupt, or the connection lost).
    public func readBody(limit: Int) throws(ContainerError) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let result = buffer.withUnsafeMutableBytes { read(into: $0) }
            switch result {
            case .bytes(let count):
                bytes += buffer[..<count]
                guard bytes.count <= limit else { throw ContainerError(.sourceFailed, "the response body exceeds \(limit) bytes") }
            case .end:
                if case .length(let remaining) = body, remaining > 0 {
                    throw ContainerError(.sourceFailed, "the response body ended \(remaining) bytes short")
                }
                if case .chunked = body, !finished { throw ContainerError(.sourceFailed, "the chunked response body ended early") }
                return bytes
            case .interrupted:
                throw failure(0, "reading the response body from \(name)")
            }
        }
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
        let got = avio_read_partial(connection, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(buffer.count))
        if got > 0 { return .bytes(Int(got)) }
        return interruptedOrEnd()
    }

    // MARK: - Lines

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

    /// What a failed libavformat call (`status`) during `what` means: the interrupt's reason
    /// first (a deadline, a stop, a refusal), then the socket's error.
    private func failure(_ status: Int32, _ what: String) -> ContainerError {
        switch interrupt.reason {
        case .refused(let error): return error
        case .timedOut: return ContainerError(.sourceTimeout, "\(what): no answer in time")
        case .stopped, .letGo: return ContainerError(.sourceEnded, "stopped")
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
