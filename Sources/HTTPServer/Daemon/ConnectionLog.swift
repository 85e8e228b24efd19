import Logging
import Timekeeping

/// Log lines a client can cause by the thousand (connections refused at a limit, closed at a
/// deadline or evicted, and libmicrohttpd's words about them), at most one per kind every
/// `interval`: someone opening thousands of connections a second must not write thousands of
/// lines. The first of a kind is written at once; the next one after a quiet spell says how
/// many were left out (`RateLimitedLog`). `/metrics` counts every one
/// (`HTTPServerConfiguration.connectionObserver`).
final class ConnectionLog: Sendable {
    private let lines: RateLimitedLog

    init(logger: Logger, clock: any ServiceClock) {
        lines = RateLimitedLog(logger: logger, clock: clock)
    }

    /// A connection the server refused or closed on its own.
    func note(_ event: ConnectionEvent) {
        let (kind, message): (String, String)
        switch event {
        case .refusedAtConnectionLimit: (kind, message) = ("refused", "connection refused: the server holds its maximum of connections")
        case .refusedAtAddressLimit: (kind, message) = ("refused-address", "connection refused: its address holds its maximum of connections")
        case .headerTimeout: (kind, message) = ("header-timeout", "connection closed: its request head did not arrive in time")
        case .idle: (kind, message) = ("idle", "connection closed: no request came on it within the header timeout")
        case .bodyTimeout: (kind, message) = ("body-timeout", "upload answered 408 and closed: its body went too slowly")
        case .evicted: (kind, message) = ("evicted", "connection closed to make room: it had made no progress for longest")
        }
        let level: Logger.Level = switch event {
        case .refusedAtConnectionLimit: .warning
        case .idle: .debug
        default: .info
        }
        write(kind, message, level: level)
    }

    /// Any other line, limited per kind (`kind`: what stays the same from one to the next).
    func write(_ kind: String, _ message: String, level: Logger.Level) {
        lines.write(kind, message, level: level)
    }
}
