import Timekeeping

/// What a pull does between a failed attempt and the next one, as a value: asked at a time, it
/// says the next step (wait, probe the source, connect), and it is told how each probe went.
///
/// The attempt itself is costly for a camera (an RTSP handshake, a TLS session, a stream set up
/// for us), so attempts follow the capped exponential back-off. A camera that is switched off or
/// rebooting refuses even a TCP connection, which costs it nothing. So the source's port is
/// probed as the wait begins and, while it refuses, every `probeInterval`; the first probe that
/// finds it accepting again ends the wait (`sourceReturned`): a camera back after a long outage
/// is connected within about a probe interval of its return instead of at the end of a back-off
/// that grew during the outage. A source that accepts connections while its stream fails (a
/// wrong path, refused credentials) is not probed again: it waits out its back-off. Sources that
/// cannot be probed (SRT runs over UDP) just wait.
public struct ReconnectPlan: Sendable, Equatable {
    public enum Step: Sendable, Equatable {
        /// Nothing to do until this uptime (nanoseconds), unless told otherwise first.
        case wait(until: UInt64)
        /// Probe the source now, then report with `probed(reachable:at:)`.
        case probe
        /// Connect now.
        case connect
    }

    /// When the back-off ends (uptime, nanoseconds).
    public let attemptAt: UInt64
    /// Nil when the source is not probed during this wait.
    private let probeInterval: UInt64?
    private var nextProbeAt: UInt64?
    /// A probe found the source refusing connections during this wait.
    private var sourceWasAway = false
    /// The wait is over before its back-off: the source came back, or a retry was asked for.
    private var cutShort = false
    /// A probe found the source accepting again after it had refused: what failed before was
    /// the camera being away, so the back-off after this wait may start again from its first step.
    public private(set) var sourceReturned = false

    /// A wait of `backOff` from `now`; `probeInterval`: how often to probe a source that is away
    /// (nil: the source cannot be probed). A back-off no longer than one interval is not probed.
    public init(failedAt now: UInt64, backOff: Duration, probeInterval: Duration?) {
        attemptAt = Self.adding(backOff, to: now)
        if let probeInterval, probeInterval > .zero, probeInterval < backOff {
            self.probeInterval = probeInterval.nanoseconds
            nextProbeAt = now
        } else {
            self.probeInterval = nil
            nextProbeAt = nil
        }
    }

    /// The step due at `now`.
    public func next(at now: UInt64) -> Step {
        if cutShort || now >= attemptAt { return .connect }
        guard let nextProbeAt else { return .wait(until: attemptAt) }
        return now >= nextProbeAt ? .probe : .wait(until: min(nextProbeAt, attemptAt))
    }

    /// How the probe started at `startedAt` went: accepting after refusing ends the wait;
    /// accepting from the first probe on stops the probing (the stream failed, not the camera).
    public mutating func probed(reachable: Bool, at startedAt: UInt64) {
        guard let probeInterval else { return }
        if reachable {
            if sourceWasAway {
                cutShort = true
                sourceReturned = true
            } else {
                nextProbeAt = nil
            }
        } else {
            sourceWasAway = true
            nextProbeAt = startedAt &+ probeInterval
        }
    }

    /// Ends the wait now (`POST /sessions/{id}/source/retry`).
    public mutating func retryNow() {
        cutShort = true
    }

    private static func adding(_ duration: Duration, to uptime: UInt64) -> UInt64 {
        let (sum, overflow) = uptime.addingReportingOverflow(duration.nanoseconds)
        return overflow ? .max : sum
    }
}
