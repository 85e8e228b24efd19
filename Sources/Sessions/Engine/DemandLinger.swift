/// How long an on-demand resource (a session's decoder, a pull's connection) stays after the
/// last demand for it, and the one linger check pending: the timing `DecoderDemand` and
/// `ConnectionDemand` share. A value on given times, like the machines that hold it; the uptime
/// it returns is where the holder schedules its next linger check.
struct DemandLinger: Sendable, Equatable {
    /// A resource still wanted is looked at again no sooner than this, even with a zero linger.
    static let shortestCheck: UInt64 = 100_000_000

    /// How long the resource stays after the last demand.
    let linger: UInt64
    /// Uptime of the last demand (a request, a viewer or an answer coming or leaving).
    private(set) var lastDemand: UInt64 = 0
    /// The pending linger check, if one is scheduled.
    private(set) var checkDue: UInt64?

    init(_ linger: UInt64) { self.linger = linger }

    mutating func demanded(at now: UInt64) { lastDemand = now }

    /// Whether the linger after the last demand has run out at `now`.
    func hasElapsed(at now: UInt64) -> Bool { now &- lastDemand >= linger }

    /// A check at the end of the linger, unless one is pending: when to schedule it.
    mutating func checkAtLingerEnd() -> UInt64? { schedule(at: lastDemand.addingSaturated(linger)) }

    /// The pending check fell due.
    mutating func checkFell() { checkDue = nil }

    /// Still wanted at `now`: the demand counts from now, and it is looked at again a linger
    /// later (at least `shortestCheck`). When to schedule that check, unless one is pending.
    mutating func stillWanted(at now: UInt64) -> UInt64? {
        lastDemand = max(lastDemand, now)
        return schedule(at: now.addingSaturated(max(linger, Self.shortestCheck)))
    }

    private mutating func schedule(at due: UInt64) -> UInt64? {
        guard checkDue == nil else { return nil }
        checkDue = due
        return due
    }
}
