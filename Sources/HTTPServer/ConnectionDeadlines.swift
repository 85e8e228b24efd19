import CMicroHTTPD
import Synchronization
import Timekeeping

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
/// client leaving; it then closes it as usual. The check runs every `checkInterval` on the
/// server's clock, so a test that moves a manual clock sees late connections cut off.
///
/// Safe against fd reuse: libmicrohttpd reports a connection closed (removing it here, under
/// the lock the shutdown also takes) before it closes the socket.
final class ConnectionDeadlines: Sendable {
    private struct Entry {
        let fd: Int32
        var deadline: UInt64?
    }

    /// How often deadlines are checked: how late past its deadline a connection may be cut off.
    static let checkInterval = Duration.milliseconds(100)

    let headerTimeout: Duration
    private let clock: any ServiceClock
    private let entries = Mutex<[UInt: Entry]>([:])
    /// Bumped by `start()` and `stop()`: a scheduled check of an earlier run does nothing.
    private let run = Atomic<UInt64>(0)
    private let expired = Atomic<Int>(0)

    init(headerTimeout: Duration, clock: any ServiceClock) {
        self.headerTimeout = headerTimeout
        self.clock = clock
    }

    /// Connections cut off at a deadline so far.
    var expiredCount: Int { expired.load(ordering: .relaxed) }

    func opened(_ connection: OpaquePointer) {
        let fd = ft_mhd_connection_fd(connection)
        guard fd >= 0 else { return }
        let deadline = clock.deadline(after: headerTimeout)
        entries.withLock { $0[Self.key(connection)] = Entry(fd: fd, deadline: deadline) }
    }

    /// The head is in: what follows (body, answer, a long poll) is not bounded by this.
    func headersArrived(_ connection: OpaquePointer) {
        entries.withLock { $0[Self.key(connection)]?.deadline = nil }
    }

    /// A request ended; the connection may carry another one, whose head the clock now waits for.
    func requestEnded(_ connection: OpaquePointer) {
        let deadline = clock.deadline(after: headerTimeout)
        entries.withLock { $0[Self.key(connection)]?.deadline = deadline }
    }

    /// The connection is cut off `delay` from now, whatever it sends meanwhile.
    func cutOff(_ connection: OpaquePointer, after delay: Duration) {
        let deadline = clock.deadline(after: delay)
        entries.withLock { $0[Self.key(connection)]?.deadline = deadline }
    }

    func closed(_ connection: OpaquePointer) {
        _ = entries.withLock { $0.removeValue(forKey: Self.key(connection)) }
    }

    /// Checks every `checkInterval` from now until `stop()`.
    func start() {
        scheduleCheck(run: run.add(1, ordering: .relaxed).newValue)
    }

    func stop() {
        run.add(1, ordering: .relaxed)
    }

    private func scheduleCheck(run current: UInt64) {
        clock.schedule(at: clock.deadline(after: Self.checkInterval)) { [weak self] in
            guard let self, self.run.load(ordering: .relaxed) == current else { return }
            self.cutOffLateConnections()
            self.scheduleCheck(run: current)
        }
    }

    private func cutOffLateConnections() {
        let now = clock.uptime
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
}
