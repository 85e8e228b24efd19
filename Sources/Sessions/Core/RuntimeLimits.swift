import Containers
import Synchronization

/// The limits a running server may change (a reload of its configuration file). They are read
/// at each use, so a new value holds from the next session, pull or idle check on; everything
/// else of `ServerConfiguration` is fixed at start.
public final class RuntimeLimits: Sendable {
    public struct Values: Sendable, Equatable {
        /// `--max-sessions`: a lower value removes no session, it refuses new ones.
        public var maxSessions: Int
        /// `--max-pull-sessions`: likewise for pulls.
        public var maxPullSessions: Int
        /// `--session-idle-timeout`.
        public var idleTimeout: Duration
        /// `--allow-sources`: checked when a pull starts, which keeps it (with its redirects) until
        /// it is replaced or stopped.
        public var sourcePolicy: SourcePolicy
    }

    private let values: Mutex<Values>

    public init(_ configuration: ServerConfiguration) {
        values = Mutex(
            Values(
                maxSessions: configuration.maxSessions, maxPullSessions: configuration.maxPullSessions,
                idleTimeout: configuration.idleTimeout, sourcePolicy: configuration.sourcePolicy))
    }

    public var current: Values { values.withLock { $0 } }

    public func update(_ change: (inout Values) -> Void) {
        values.withLock { change(&$0) }
    }
}
