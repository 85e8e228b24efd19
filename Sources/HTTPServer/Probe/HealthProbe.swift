import CMicroHTTPD

#if canImport(Glibc)
    import Glibc
#endif

/// One `GET /healthz` to a server, over plain HTTP or TLS, on a blocking socket with send and
/// receive timeouts: what `frametap healthcheck` (the container image's HEALTHCHECK) asks. Its
/// runtime image has no curl or wget, and a `bash` `/dev/tcp` check can neither time out its
/// read nor speak TLS.
public enum HealthProbe {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The status code of the answer's status line. `address` is numeric, IPv4 or IPv6 (with
    /// or without brackets).
    public static func status(address: String, port: UInt16, tls: Bool, timeout: Double) throws(Failure) -> Int {
        let bare = address.hasPrefix("[") && address.hasSuffix("]") ? String(address.dropFirst().dropLast()) : address
        guard let (family, socketAddress) = NumericAddress.socketAddress(bare, port: port) else {
            throw Failure(description: "'\(address)' is not a numeric IPv4 or IPv6 address")
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let connected = socketAddress.withUnsafeBytes {
            connect(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count))
        }
        let hostField = family == AF_INET6 ? "[\(bare)]" : bare
        guard connected == 0 else {
            throw Failure(description: "\(hostField):\(port): \(String(cString: strerror(errno)))")
        }
        let request = Array("GET /healthz HTTP/1.0\r\nHost: \(hostField)\r\nConnection: close\r\n\r\n".utf8)
        let answer = tls ? try exchangeOverTLS(fd, request, timeout: timeout) : try exchange(fd, request)
        // "HTTP/1.1 200 OK"
        let line = String(decoding: answer.prefix { $0 != 0x0D && $0 != 0x0A }, as: UTF8.self)
        let fields = line.split(separator: " ")
        guard fields.count >= 2, fields[0].hasPrefix("HTTP/"), let status = Int(fields[1]) else {
            let hint = !tls && line.isEmpty ? " (a server that serves HTTPS closes a plain request: probe with TLS)" : ""
            throw Failure(description: "not an HTTP answer: '\(line.prefix(80))'\(hint)")
        }
        return status
    }

    private static let answerCapacity = 4096

    private static func exchange(_ fd: Int32, _ request: [UInt8]) throws(Failure) -> [UInt8] {
        guard send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else {
            throw Failure(description: "send: \(String(cString: strerror(errno)))")
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while !answer.contains(0x0A), answer.count < answerCapacity {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else {
                if count == 0 { break }
                throw Failure(description: "no answer: \(String(cString: strerror(errno)))")
            }
            answer += buffer[0..<count]
        }
        return answer
    }

    private static func exchangeOverTLS(_ fd: Int32, _ request: [UInt8], timeout: Double) throws(Failure) -> [UInt8] {
        var answer = [UInt8](repeating: 0, count: answerCapacity)
        var error = [CChar](repeating: 0, count: 256)
        let received = ft_tls_client_exchange(
            fd, UInt32(min(timeout * 1000, Double(UInt32.max)).rounded(.up)), request, request.count, &answer,
            answer.count, &error, error.count)
        guard received >= 0 else {
            throw Failure(description: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return Array(answer[0..<received])
    }
}
