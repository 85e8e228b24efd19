import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// What a relay lets through of what the source says (`SourceRelay`).
protocol SourceRelayCheck {
    /// The source's bytes as the demuxer may read them, or why the connection ends here.
    mutating func take(_ bytes: some Collection<UInt8>) throws(ContainerError) -> [UInt8]
    /// Where the source sent the demuxer (an allowed redirect): the demuxer's next connection
    /// goes there. Read once the demuxer has closed.
    var redirect: SourceURL? { get }
}

/// A pull's TCP connection, carried by FrameTap, for protocols whose connection libavformat
/// makes inside itself, with state no caller can see: RTSP's control connection (it makes the
/// SETUP and follows redirects) and RTMP's one connection. The demuxer is never given the
/// source's address: it connects to this relay on loopback, the relay connects to the source at
/// an address it checked against `--allow-sources` (resolved once: the address checked is the
/// address connected to), and everything the source says passes the scheme's check before the
/// demuxer reads it: `RTSPAnswerCheck` (answers, redirects, transports), or `RTMPByteBudget`
/// (no more than 64 MiB without a whole picture, which libavformat would hold in its own
/// buffers). A redirect is checked before anything connects there; the demuxer then connects to
/// the relay again, and the relay to the target. What the demuxer sends passes unchanged.
///
/// What the source receives names the relay's address (`rtsp://127.0.0.1:PORT/path`), as through
/// any port forward; RTSP and RTMP servers route by path (RTMP's tcUrl is given the source's own
/// address, `RTMPConnectURL`).
final class SourceRelay<Check: SourceRelayCheck>: Sendable {
    /// The URL the demuxer opens: the source's credentials, path and query at the relay's address.
    let localURL: String

    private let listener: Int32
    private let relayHost: String
    private let relayPort: Int
    private let source: SourceURL
    private let policy: SourcePolicy
    private let interrupt: DemuxInterrupt
    private let makeCheck: @Sendable (_ target: SourceURL, _ connected: IPAddress, _ relayHost: String, _ relayPort: Int) -> Check
    private let stopped = Atomic<Bool>(false)

    /// Redirects followed at most, as HTTP sources do.
    static var maxRedirects: Int { 5 }
    /// Bytes held for the slower side before the relay stops reading the other.
    static var bufferLimit: Int { 1 << 20 }

    /// Resolves and checks the source's host, then listens on loopback (of the address's family,
    /// so that the demuxer's UDP sockets are of the camera's family too).
    init(
        source: SourceURL, policy: SourcePolicy, interrupt: DemuxInterrupt,
        check makeCheck: @escaping @Sendable (_ target: SourceURL, _ connected: IPAddress, _ relayHost: String, _ relayPort: Int) -> Check
    ) throws(ContainerError) {
        let addresses = try Self.checkedAddresses(of: source, policy: policy)
        let loopback = addresses[0].bytes.count == 4 ? "127.0.0.1" : "::1"
        let (listener, port) = try Self.listen(on: IPAddress(loopback)!)
        self.listener = listener
        relayHost = loopback
        relayPort = port
        self.source = source
        self.policy = policy
        self.interrupt = interrupt
        self.makeCheck = makeCheck
        localURL = source.openedText(host: loopback, port: port)
        BlockingThread.start(name: "\(source.scheme.name)-relay") { [self] in run(firstAddresses: addresses) }
    }

    /// Ends the relay: its connections close within 100 ms.
    func stop() {
        stopped.store(true, ordering: .releasing)
    }

    private var isStopped: Bool { stopped.load(ordering: .acquiring) || interrupt.isStopped }

    // MARK: - The relay's thread

    private enum Outcome {
        case ended
        case redirected(SourceURL)
    }

    private func run(firstAddresses: [IPAddress]) {
        defer { close(listener) }
        var target = source
        var addresses = firstAddresses
        for _ in 0...Self.maxRedirects {
            guard let client = accept() else { return }
            defer { close(client) }
            let upstream: (socket: Int32, address: IPAddress)
            do throws(ContainerError) {
                upstream = try connect(to: addresses, port: target.port)
            } catch {
                interrupt.refuse(error)
                return
            }
            defer { close(upstream.socket) }
            var check = makeCheck(target, upstream.address, relayHost, relayPort)
            guard case .redirected(let next) = relay(client: client, upstream: upstream.socket, check: &check) else { return }
            do throws(ContainerError) {
                addresses = try Self.checkedAddresses(of: next, policy: policy)
            } catch {
                interrupt.refuse(error)
                return
            }
            target = next
        }
        interrupt.refuse(ContainerError(.sourceFailed, "more than \(Self.maxRedirects) redirects from \(source.redacted)"))
    }

    /// The demuxer's connection, once it comes (nil: stopped).
    private func accept() -> Int32? {
        while !isStopped {
            var pending = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&pending, 1, 100) > 0 else { continue }
            let client = Glibc.accept(listener, nil, nil)
            if client >= 0 {
                Self.makeNonBlocking(client)
                return client
            }
        }
        return nil
    }

    /// Carries bytes both ways until a side closes; the camera's through `check`.
    private func relay(client: Int32, upstream: Int32, check: inout Check) -> Outcome {
        var toUpstream: [UInt8] = []
        var toClient: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while !isStopped {
            var sockets = [
                pollfd(
                    fd: client,
                    events: Int16((toUpstream.count < Self.bufferLimit ? POLLIN : 0) | (toClient.isEmpty ? 0 : POLLOUT)),
                    revents: 0),
                pollfd(
                    fd: upstream,
                    events: Int16((toClient.count < Self.bufferLimit ? POLLIN : 0) | (toUpstream.isEmpty ? 0 : POLLOUT)),
                    revents: 0),
            ]
            guard poll(&sockets, 2, 100) > 0 else { continue }
            if sockets[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                let got = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
                if got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR) {
                    // The demuxer closed: after an allowed redirect, it connects again.
                    if let next = check.redirect { return .redirected(next) }
                    return .ended
                }
                if got > 0 { toUpstream += buffer.prefix(got) }
            }
            if sockets[1].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                let got = buffer.withUnsafeMutableBytes { recv(upstream, $0.baseAddress, $0.count, 0) }
                if got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR) {
                    Self.flush(toClient, to: client)
                    return .ended
                }
                if got > 0 {
                    do throws(ContainerError) {
                        toClient += try check.take(buffer.prefix(got))
                    } catch {
                        // Refused before the demuxer reads it: the demuxer gives up with this error.
                        interrupt.refuse(error)
                        return .ended
                    }
                }
            }
            guard Self.send(&toUpstream, to: upstream), Self.send(&toClient, to: client) else { return .ended }
        }
        return .ended
    }

    // MARK: - Addresses and sockets

    /// The addresses of `url`'s host, each allowed by `policy` for `url`.
    private static func checkedAddresses(of url: SourceURL, policy: SourcePolicy) throws(ContainerError) -> [IPAddress] {
        let addresses = IPAddress(url.host).map { [$0] } ?? SourcePolicy.resolve(url.host)
        guard !addresses.isEmpty else { throw ContainerError(.sourceUnreachable, "\(url.host) has no address") }
        if let refusal = policy.check(url, resolve: { _ in addresses }) { throw refusal }
        return addresses
    }

    /// Connects to the first of `addresses` that answers, within the interrupt's deadline.
    private func connect(to addresses: [IPAddress], port: Int) throws(ContainerError) -> (socket: Int32, address: IPAddress) {
        var lastError: Int32 = ECONNREFUSED
        for address in addresses {
            let (storage, length) = Self.socketAddress(address, port: port)
            let socket = Glibc.socket(Int32(storage.ss_family), Int32(SOCK_STREAM.rawValue), 0)
            guard socket >= 0 else { continue }
            Self.makeNonBlocking(socket)
            var target = storage
            let started = withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, length) }
            }
            if started == 0 || errno == EINPROGRESS {
                var waiting = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
                while !isStopped && !interrupt.shouldInterrupt() {
                    guard poll(&waiting, 1, 100) > 0 else { continue }
                    var error: Int32 = 0
                    var size = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(socket, SOL_SOCKET, SO_ERROR, &error, &size)
                    if error == 0 { return (socket, address) }
                    lastError = error
                    break
                }
            } else {
                lastError = errno
            }
            close(socket)
            if isStopped || interrupt.reason != nil { break }
        }
        switch interrupt.reason {
        case .timedOut: throw ContainerError(.sourceTimeout, "the source did not answer in time")
        case .refused(let error): throw error
        case .stopped, .letGo: throw ContainerError(.sourceEnded, "stopped")
        case nil: break
        }
        if isStopped { throw ContainerError(.sourceEnded, "stopped") }
        throw ContainerError(.sourceUnreachable, "the source: \(String(cString: strerror(lastError)))")
    }

    private static func listen(on address: IPAddress) throws(ContainerError) -> (Int32, Int) {
        let (storage, length) = socketAddress(address, port: 0)
        let listener = socket(Int32(storage.ss_family), Int32(SOCK_STREAM.rawValue), 0)
        var bound = storage
        guard listener >= 0,
            withUnsafePointer(to: &bound, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) } }) == 0,
            Glibc.listen(listener, 4) == 0
        else {
            let why = String(cString: strerror(errno))
            if listener >= 0 { close(listener) }
            throw ContainerError(.sourceFailed, "cannot listen on \(address.text) for the relay: \(why)")
        }
        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &actualLength) }
        }
        let port = withUnsafeBytes(of: &actual) { raw -> Int in
            // sin_port and sin6_port both follow the 2-byte family.
            Int(raw[2]) << 8 | Int(raw[3])
        }
        return (listener, port)
    }

    /// A sockaddr_in or sockaddr_in6: both hold the family, then the port in network order,
    /// then (after sin6_flowinfo for IPv6) the address bytes.
    private static func socketAddress(_ address: IPAddress, port: Int) -> (sockaddr_storage, socklen_t) {
        let isIPv4 = address.bytes.count == 4
        let (family, addressOffset, length) =
            isIPv4
            ? (AF_INET, 4, MemoryLayout<sockaddr_in>.size)
            : (AF_INET6, 8, MemoryLayout<sockaddr_in6>.size)
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { raw in
            raw.storeBytes(of: sa_family_t(family), toByteOffset: 0, as: sa_family_t.self)
            raw[2] = UInt8(port >> 8)
            raw[3] = UInt8(port & 0xFF)
            for (index, byte) in address.bytes.enumerated() { raw[addressOffset + index] = byte }
        }
        return (storage, socklen_t(length))
    }

    private static func makeNonBlocking(_ socket: Int32) {
        _ = fcntl(socket, F_SETFL, fcntl(socket, F_GETFL) | O_NONBLOCK)
    }

    /// Sends what it can of `pending` now; false when the socket failed.
    private static func send(_ pending: inout [UInt8], to socket: Int32) -> Bool {
        guard !pending.isEmpty else { return true }
        let sent = pending.withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        if sent > 0 {
            pending.removeFirst(sent)
            return true
        }
        return sent < 0 && (errno == EAGAIN || errno == EINTR)
    }

    /// Hands the demuxer what is left for it (a last answer), for at most a second.
    private static func flush(_ pending: [UInt8], to socket: Int32) {
        var pending = pending
        var waited = 0
        while !pending.isEmpty, waited < 10 {
            var writable = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
            if poll(&writable, 1, 100) <= 0 {
                waited += 1
                continue
            }
            guard send(&pending, to: socket) else { return }
        }
    }
}
