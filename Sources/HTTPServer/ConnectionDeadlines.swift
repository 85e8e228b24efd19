import CMicroHTTPD
import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Deadlines libmicrohttpd's idle timeout cannot give, because every byte a client sends
/// resets it:
/// - a connection gets `headerTimeout` to send a request's head, from when it opens and again
///   from when its previous request ended, so a client trickling its headers a byte at a time
///   cannot hold connection slots for ever;
/// - a connection whose answer went out before its body ended is cut off after a while
///   (`cutOff(_:after:)`), even when its client goes quiet.
/// A connection past its deadline has its socket shut down, which libmicrohttpd sees as the
/// client leaving; it then closes it as usual.
///
/// Safe against fd reuse: libmicrohttpd reports a connection closed (removing it here, under
/// the lock the shutdown also takes) before it closes the socket.
final class ConnectionDeadlines: Sendable {
    private struct Entry {
        let fd: Int32
        var deadline: UInt64?
    }

    let headerTimeout: Duration
    private let entries = Mutex<[UInt: Entry]>([:])
    private let timer = Mutex<TimerHandle?>(nil)
    private let expired = Atomic<Int>(0)

    init(headerTimeout: Duration) {
        self.headerTimeout = headerTimeout
    }

    /// Connections cut off at a deadline so far.
    var expiredCount: Int { expired.load(ordering: .relaxed) }

    func opened(_ connection: OpaquePointer) {
        let fd = ft_mhd_connection_fd(connection)
        guard fd >= 0 else { return }
        let deadline = Self.now() + headerTimeout.nanosecondsClamped
        entries.withLock { $0[Self.key(connection)] = Entry(fd: fd, deadline: deadline) }
    }

    /// The head is in: what follows (body, answer, a long poll) is not bounded by this.
    func headersArrived(_ connection: OpaquePointer) {
        entries.withLock { $0[Self.key(connection)]?.deadline = nil }
    }

    /// A request ended; the connection may carry another one, whose head the clock now waits for.
    func requestEnded(_ connection: OpaquePointer) {
        let deadline = Self.now() + headerTimeout.nanosecondsClamped
        entries.withLock { $0[Self.key(connection)]?.deadline = deadline }
    }

    /// The connection is cut off `delay` from now, whatever it sends meanwhile.
    func cutOff(_ connection: OpaquePointer, after delay: Duration) {
        let deadline = Self.now() + delay.nanosecondsClamped
        entries.withLock { $0[Self.key(connection)]?.deadline = deadline }
    }

    func closed(_ connection: OpaquePointer) {
        _ = entries.withLock { $0.removeValue(forKey: Self.key(connection)) }
    }

    /// Checks every 100 ms from now until `stop()`.
    func start() {
        let interval = Duration.milliseconds(100).dispatchInterval
        let source = TimerHandle(DispatchSource.makeTimerSource(queue: timerQueue))
        source.source.schedule(deadline: .now() + interval, repeating: interval)
        source.source.setEventHandler { [weak self] in self?.cutOffLateConnections() }
        timer.withLock { $0 = source }
        source.source.resume()
    }

    func stop() {
        timer.withLock { timer in
            timer?.source.cancel()
            timer = nil
        }
    }

    private func cutOffLateConnections() {
        let now = Self.now()
        let count = entries.withLock { entries -> Int in
            var count = 0
            for (key, entry) in entries {
                guard let deadline = entry.deadline, deadline <= now else { continue }
                // Under the lock: the socket cannot have been closed (and its number reused) yet.
                _ = shutdown(entry.fd, Int32(SHUT_RDWR))
                entries[key]?.deadline = nil
                count += 1
            }
            return count
        }
        if count > 0 { expired.add(count, ordering: .relaxed) }
    }

    private static func key(_ connection: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: connection)) }

    private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
}

extension Duration {
    var nanosecondsClamped: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}
