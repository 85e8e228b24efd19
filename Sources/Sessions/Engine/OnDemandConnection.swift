import Containers
import Ingest
import Synchronization
import Timekeeping

/// Runs a session's `ConnectionDemand`: events come in from any thread (requests, viewers, the
/// pull's thread, the decode queue, the clock), are applied to the machine under one lock, and
/// the actions it returns run here. The pull is told to connect or let go under that lock, so
/// it follows the machine's decisions in their order (each only sets a flag and wakes the pull's
/// thread); the rest runs outside it: the decoder asked for, the requests waiting answered, the
/// deadlines and linger checks put on the clock.
///
/// Owns: the machine, the closures of the requests waiting for it, and which pull it drives
/// (the decode loop's pull job owns the pull itself).
final class OnDemandConnection: Sendable {
    typealias Action = ConnectionDemand.Action

    private struct State {
        var machine: ConnectionDemand
        /// The pull the machine's `connect` and `release` go to.
        var pull: PullSource<SessionError>?
        /// The requests waiting for the first picture, by the token the machine knows them by.
        var waiting: [UInt64: @Sendable (SessionError?) -> Void] = [:]
        var nextToken: UInt64 = 1
        /// When the pull tries again after its last failure (uptime): a request refused later
        /// is told the time left, not the whole wait.
        var retryAt: UInt64?
    }

    private let state: Mutex<State>
    private let clock: any ServiceClock
    private let decoding: OnDemandDecoding
    private let viewers: ViewerSet

    init(context: SessionContext, decoding: OnDemandDecoding, viewers: ViewerSet) {
        let configuration = context.configuration
        state = Mutex(
            State(
                machine: ConnectionDemand(
                    connect: .always, linger: configuration.onDemandLinger,
                    firstPictureWait: Self.firstPictureWait(configuration))))
        clock = context.clock
        self.decoding = decoding
        self.viewers = viewers
    }

    /// How long a request waits for the first picture of an on-demand connection: as long as
    /// a pull itself gives a source to connect and then to send (`--source-connect-timeout` +
    /// `--source-read-timeout`), past which the attempt has failed or has bytes but no picture.
    static func firstPictureWait(_ configuration: ServerConfiguration) -> Duration {
        configuration.sourceConnectTimeout + configuration.sourceReadTimeout
    }

    /// Whether requests wait for a connection's first picture (they keep the decoder, as viewers do).
    var awaitsPictures: Bool { state.withLock { !$0.machine.waiters.isEmpty } }

    // MARK: - Events

    /// Someone wants pictures now. An idle on-demand pull is connected and `whenReady` is called
    /// (with nil, or the error that ended the wait) once a picture of the connection came; a
    /// live one has its linger extended. Otherwise it is `.ready` at once. `waitLimit`: how long
    /// the caller waits at most, when less than a first picture may take.
    func demand(
        _ reason: DecodeDemand, waitLimit: Duration? = nil, whenReady: (@Sendable (SessionError?) -> Void)? = nil
    ) -> DemandOutcome {
        let now = clock.uptime
        let (token, actions, atOnce) = state.withLock { state -> (UInt64?, [Action], Bool) in
            var token: UInt64?
            if whenReady != nil {
                token = state.nextToken
                state.nextToken += 1
            }
            let actions = state.machine.demanded(
                reason, waiter: token, waitLimit: waitLimit?.nanoseconds, at: now)
            if let token, let whenReady, state.machine.waiters.contains(where: { $0.token == token }) {
                state.waiting[token] = whenReady
            }
            steerPull(&state, actions)
            return (token, actions, state.machine.answersAtOnce)
        }
        // A request answered by its own demand (the source is failing) is told by the outcome.
        if let refusal = run(actions, caller: token) {
            // Only the source's own failure waits for its next attempt (a decoder refusal has its own).
            guard refusal.code == .sourceNotReady, let retryAt = state.withLock({ $0.retryAt }) else { return .refused(refusal) }
            let left = Int((retryAt > now ? retryAt - now : 0) / 1_000_000_000) + 1
            return .refused(SessionError(refusal.code, refusal.message, retryAfterSeconds: left, facts: refusal.facts))
        }
        return atOnce ? .ready : .waiting
    }

    /// An MJPEG viewer left: its interest lingers like a request's.
    func viewerLeft() {
        let now = clock.uptime
        apply { $0.viewerLeft(at: now) }
    }

    /// The pull connected (its thread).
    func connected() {
        let now = clock.uptime
        apply { $0.connected(at: now) }
    }

    /// An attempt of the pull failed or its connection was lost (its thread); the next attempt
    /// is due in `retryIn`.
    func failed(_ error: ContainerError, retryIn: Duration) {
        let seconds = Int((Double(retryIn.nanoseconds) / 1e9).rounded(.up))
        let refusal = SessionError(
            .sourceNotReady, "the source could not be connected for this request: \(error.message)",
            retryAfterSeconds: max(1, seconds), facts: ["sourceError": .text(error.code.rawValue)])
        let retryAt = clock.uptime + UInt64(max(0, retryIn.nanoseconds))
        applyToState { state in
            state.retryAt = retryAt
            return state.machine.connectionFailed(refusal)
        }
    }

    /// A picture was published (decode queue); `receivedAt`: when its bytes were received, if
    /// known, asked only while a connection waits for its first picture.
    func picturePublished(receivedAt: () -> UInt64?) {
        guard state.withLock({ $0.machine.awaitsFirstPicture }), let uptime = receivedAt() else { return }
        let now = clock.uptime
        apply { $0.picturePublished(receivedAt: uptime, at: now) }
    }

    /// The session pulls `pull` from now on, or no longer pulls (nil).
    func pullChanged(to pull: PullSource<SessionError>?) {
        applyToState { state in
            state.pull = pull
            return state.machine.pullChanged(to: pull?.spec.connect)
        }
    }

    /// The session closes: the waiting requests are told.
    func close() {
        applyToState { state in
            state.pull = nil
            return state.machine.closed()
        }
    }

    private func waitExpired(token: UInt64) {
        let now = clock.uptime
        apply { $0.waitExpired(token: token, at: now) }
    }

    private func lingerCheckDue() {
        let watched = !viewers.isEmpty
        let now = clock.uptime
        apply { $0.lingerCheckDue(watched: watched, at: now) }
    }

    // MARK: - Actions

    private func apply(_ event: (inout ConnectionDemand) -> [Action]) {
        applyToState { state in event(&state.machine) }
    }

    private func applyToState(_ event: (inout State) -> [Action]) {
        run(
            state.withLock { state in
                let actions = event(&state)
                steerPull(&state, actions)
                return actions
            })
    }

    /// The pull's part of `actions`, under the lock: connecting or letting go in the order decided.
    private func steerPull(_ state: inout State, _ actions: [Action]) {
        for action in actions {
            switch action {
            case .connect: state.pull?.connectNow()
            case .release: state.pull?.release()
            default: break
            }
        }
    }

    /// Runs the rest of `actions` in order, outside the lock. Returns the error `caller`'s
    /// request was answered with, if it was (its closure was never kept).
    @discardableResult
    private func run(_ actions: [Action], caller: UInt64? = nil) -> SessionError? {
        var refusal: SessionError?
        for action in actions {
            switch action {
            case .connect, .release:
                break
            case .wakeDecoder(let reason):
                if case .refused(let error) = decoding.demand(reason) {
                    apply { $0.decoderRefused(error) }
                }
            case .answer(let tokens, let error):
                if let caller, tokens.contains(caller) { refusal = error }
                let waiting = state.withLock { state in tokens.compactMap { state.waiting.removeValue(forKey: $0) } }
                for waiter in waiting { waiter(error) }
            case .scheduleWaitDeadline(let token, let due):
                clock.schedule(at: due) { [weak self] in self?.waitExpired(token: token) }
            case .scheduleLingerCheck(let due):
                clock.schedule(at: due) { [weak self] in self?.lingerCheckDue() }
            }
        }
        return refusal
    }
}
