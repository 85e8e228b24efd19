import Containers

#if canImport(Glibc)
    import Glibc
#endif

/// Whether a source accepts TCP connections at its host and port: a connection opened and
/// closed at once, with nothing sent, so a camera that is away is asked as cheaply as it can be.
/// RTSP (also with RTP over UDP: its requests go over TCP), RTMP and HTTP(S) are probed this way;
/// SRT runs over UDP and has no such probe.
public enum ReachabilityProbe {
    /// Whether `url`'s scheme can be probed.
    public static func canProbe(_ url: SourceURL) -> Bool {
        url.scheme != .srt
    }

    /// True when one of the host's addresses accepted a connection within `timeout` (the
    /// whole probe, name lookup aside). Blocks the calling thread (a pull's own).
    public static func accepts(_ url: SourceURL, timeout: Duration) -> Bool {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(url.host, String(url.port), &hints, &result) == 0 else { return false }
        defer { freeaddrinfo(result) }
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let end = Int64(deadline.tv_sec) * 1_000_000_000 + Int64(deadline.tv_nsec) + Int64(clamping: timeout.nanoseconds)
        var cursor = result
        while let info = cursor {
            cursor = info.pointee.ai_next
            guard let address = info.pointee.ai_addr else { continue }
            if connects(family: info.pointee.ai_family, address: address, length: info.pointee.ai_addrlen, until: end) {
                return true
            }
        }
        return false
    }

    /// A non-blocking connect, waited for with poll until `end` (CLOCK_MONOTONIC nanoseconds).
    private static func connects(
        family: Int32, address: UnsafePointer<sockaddr>, length: socklen_t, until end: Int64
    ) -> Bool {
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let socket = Glibc.socket(family, type, 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        if connect(socket, address, length) == 0 { return true }
        guard errno == EINPROGRESS else { return false }
        while true {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let left = end - (Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec))
            guard left > 0 else { return false }
            var descriptor = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
            let ready = poll(&descriptor, 1, Int32(clamping: (left + 999_999) / 1_000_000))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return false }
            var error: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(socket, SOL_SOCKET, SO_ERROR, &error, &size) == 0 else { return false }
            return error == 0
        }
    }
}
