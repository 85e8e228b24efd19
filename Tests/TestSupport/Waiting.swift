import Dispatch
import Foundation
import Synchronization
import Timekeeping

// Every wait in the tests has a deadline and names what it waits for, so a test whose awaited
// event never comes fails with that name instead of holding the whole run. There is no
// unlimited variant of any wait here; `scripts/check-test-waits.sh` keeps the Dispatch and
// Foundation ones (a semaphore or group waited on with no timeout, `waitUntilExit`, bare
// continuations) out of Tests/.

/// How long a wait lasts when its caller names no limit. Everything the tests wait for takes
/// milliseconds to a few seconds; the limit only has to end a wait that would never end, with
/// room for a loaded 2-core machine. `FRAMETAP_TEST_WAIT_SCALE` (a whole number, 1 when unset)
/// multiplies it for builds that run several times slower: `scripts/sanitize.sh` sets it.
public let defaultWaitLimit: Duration = .seconds(30) * waitScale

/// `FRAMETAP_TEST_WAIT_SCALE`, 1 to 20; 1 when unset or not a whole number in that range.
let waitScale: Int = {
    guard let text = ProcessInfo.processInfo.environment["FRAMETAP_TEST_WAIT_SCALE"], let scale = Int(text),
        (1...20).contains(scale)
    else { return 1 }
    return scale
}()

/// A wait that passed its deadline, naming what it waited for.
public struct WaitTimeout: Error, CustomStringConvertible {
    public let waitedFor: String
    public let limit: Duration

    public init(waitingFor waitedFor: String, limit: Duration) {
        self.waitedFor = waitedFor
        self.limit = limit
    }

    public var description: String { "timed out after \(seconds(limit)) waiting for \(waitedFor)" }
}

/// "2.5 s": a duration as the messages print it.
func seconds(_ duration: Duration) -> String {
    let (whole, fraction) = duration.components
    let value = Double(whole) + Double(fraction) / 1e18
    return value.rounded() == value ? "\(Int64(value)) s" : "\(value) s"
}

extension Duration {
    /// The dispatch deadline this far from now.
    var dispatchDeadline: DispatchTime {
        .now() + .nanoseconds(Int(clamping: nanoseconds))
    }
}

extension DispatchSemaphore {
    /// Takes a signal, waiting at most `timeout`; throws `WaitTimeout` naming `what` (phrased to
    /// follow "waiting for", e.g. "the decode queue to reach the hold").
    public func wait(for what: String, timeout: Duration = defaultWaitLimit) throws {
        guard wait(timeout: timeout.dispatchDeadline) == .success else {
            throw WaitTimeout(waitingFor: what, limit: timeout)
        }
    }
}

extension DispatchGroup {
    /// Waits for the group's work to end, at most `timeout`; throws `WaitTimeout` naming `what`.
    public func wait(for what: String, timeout: Duration = defaultWaitLimit) throws {
        guard wait(timeout: timeout.dispatchDeadline) == .success else {
            throw WaitTimeout(waitingFor: what, limit: timeout)
        }
    }
}

extension Process {
    /// Waits for the program to end, at most `timeout`; past it the program is killed and
    /// `WaitTimeout` names `what`.
    public func waitForExit(_ what: String, timeout: Duration = .seconds(120)) throws {
        let deadline = ContinuousClock.now + timeout
        // Foundation's Process and its run loop source hold each other until waitUntilExit()
        // (which returns at once once the program ended) lets the source go.
        defer { if !isRunning { waitUntilExit() } }
        while isRunning {
            guard ContinuousClock.now < deadline else {
                kill(processIdentifier, SIGKILL)
                while isRunning { usleep(1_000) }
                throw WaitTimeout(waitingFor: what, limit: timeout)
            }
            usleep(10_000)
        }
    }
}

/// How long `eventually` polls when its caller names no limit: scaled like `defaultWaitLimit`,
/// since under a sanitizer a condition that holds in milliseconds can take seconds.
public let defaultPollLimit: Duration = .seconds(5) * waitScale

/// Polls `condition` every 10 ms until it holds or `timeout` passes; whether it held. Blocks the
/// calling thread: for synchronous tests. Used inside `#expect`, which names the condition.
public func eventually(timeout: Duration = defaultPollLimit, _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

/// Polls `condition` every 5 ms until it holds or `timeout` passes; whether it held. Sleeps the
/// task, not the thread: for asynchronous tests.
public func eventually(timeout: Duration = defaultPollLimit, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

/// One event a callback delivers and one task awaits: the value stays (`Outcome`) or each
/// wait takes a delivery (`Signal`). A wait ends with the event, at its deadline
/// (`WaitTimeout`), or when its task is cancelled (a Swift Testing time limit cancels the test).
///
/// What was delivered is read under the lock after the wait, never handed through the
/// continuation: a continuation's resumption is a hand-over ThreadSanitizer cannot see (the
/// concurrency runtime is not instrumented), so `make sanitize` would report what the callback's
/// thread wrote before it as racing with the test's reads. The lock is an edge it sees.
final class Rendezvous<Event: Sendable>: Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var event: Event?
        var waiter: Waiter?
        var waits: UInt64 = 0
    }

    private let state = Mutex(State())
    /// Whether a wait takes the event (a signal), or it stays for every later wait (a value).
    private let waitTakesEvent: Bool

    init(waitTakesEvent: Bool) { self.waitTakesEvent = waitTakesEvent }

    var current: Event? { state.withLock { $0.event } }

    /// Delivers `event` to the waiter, or keeps it for the next wait. `replace`: whether a
    /// later delivery replaces one not yet taken (signals) or the first one stays (values).
    func deliver(_ event: Event, replace: Bool) {
        let waiter = state.withLock { state -> Waiter? in
            guard replace || state.event == nil else { return nil }
            if waitTakesEvent, let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.event = event
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.continuation.resume()
    }

    /// Waits for an event at most `timeout`; throws `WaitTimeout` naming `what`, or
    /// `CancellationError`. One wait at a time.
    func wait(for what: String, timeout: Duration) async throws {
        let id = state.withLock { state -> UInt64 in
            state.waits += 1
            return state.waits
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ready = state.withLock { state -> Bool in
                    precondition(state.waiter == nil, "one wait at a time")
                    guard state.event != nil else {
                        state.waiter = Waiter(id: id, continuation: continuation)
                        return false
                    }
                    if waitTakesEvent { state.event = nil }
                    return true
                }
                if ready { return continuation.resume() }
                if Task.isCancelled { return end(id, throwing: CancellationError()) }
                DispatchQueue.global().asyncAfter(deadline: timeout.dispatchDeadline) { [self] in
                    end(id, throwing: WaitTimeout(waitingFor: what, limit: timeout))
                }
            }
        } onCancel: {
            end(id, throwing: CancellationError())
        }
    }

    /// Ends wait `id` with `error`, unless it has already ended.
    private func end(_ id: UInt64, throwing error: any Error) {
        let waiter = state.withLock { state -> Waiter? in
            guard let waiter = state.waiter, waiter.id == id else { return nil }
            state.waiter = nil
            return waiter
        }
        waiter?.continuation.resume(throwing: error)
    }
}

/// Wakes one waiting task; a signal that comes before the wait is kept for it.
public final class Signal: Sendable {
    private let rendezvous = Rendezvous<Void>(waitTakesEvent: true)

    public init() {}

    public func signal() { rendezvous.deliver((), replace: true) }

    /// Waits for the signal at most `timeout`; throws `WaitTimeout` naming `what` (phrased to
    /// follow "waiting for").
    public func wait(for what: String, timeout: Duration = defaultWaitLimit) async throws {
        try await rendezvous.wait(for: what, timeout: timeout)
    }
}

/// The value a callback delivers once (later ones are ignored), for a test to await.
public final class Outcome<Value: Sendable>: Sendable {
    private let rendezvous = Rendezvous<Value>(waitTakesEvent: false)

    public init() {}

    public func set(_ value: Value) { rendezvous.deliver(value, replace: false) }

    /// The value if it was delivered, without waiting.
    public var current: Value? { rendezvous.current }

    /// Waits for the value at most `timeout`; throws `WaitTimeout` naming `what` (phrased to
    /// follow "waiting for", e.g. "the upload's answer").
    public func value(waitingFor what: String, timeout: Duration = defaultWaitLimit) async throws -> Value {
        try await rendezvous.wait(for: what, timeout: timeout)
        // A delivered value stays: a wait that ended without an error found one.
        return rendezvous.current!
    }
}

/// Blocks a dispatch queue (a closure on it waits) until `release()`, so a test can line work
/// up behind it; at most `limit`, so a test that fails before releasing it never leaves the
/// queue blocked for good. Released when it goes away too.
public final class QueueHold: Sendable {
    private let released = DispatchSemaphore(value: 0)
    private let isReleased = Atomic<Bool>(false)

    /// Returns once the queue is held. `what` names the queue in the messages.
    public init(_ queue: DispatchQueue, _ what: String, limit: Duration = defaultWaitLimit) throws {
        let entered = DispatchSemaphore(value: 0)
        queue.async { [released] in
            entered.signal()
            _ = released.wait(timeout: limit.dispatchDeadline)
        }
        try entered.wait(for: "\(what) to reach the hold")
    }

    /// Lines a hold up behind `earlier` (and whatever was queued behind that), then releases
    /// `earlier`, and returns once the queue is held again: what the released work queues in
    /// its turn waits behind this one.
    public init(_ queue: DispatchQueue, _ what: String, after earlier: QueueHold, limit: Duration = defaultWaitLimit) throws {
        let entered = DispatchSemaphore(value: 0)
        queue.async { [released] in
            entered.signal()
            _ = released.wait(timeout: limit.dispatchDeadline)
        }
        earlier.release()
        try entered.wait(for: "\(what) to reach the hold")
    }

    public func release() {
        guard !isReleased.exchange(true, ordering: .relaxed) else { return }
        released.signal()
    }

    deinit { release() }
}

/// For the body of an exit test (`#expect(processExitsWith:)`), whose child process Swift Testing
/// waits for without a limit: past `limit` the child exits with status 0, so an expected
/// failure that never came fails the test instead of holding it forever. `_exit`: a hung child
/// may hold the locks that exit handlers take.
public func exitSuccessfullyAfter(_ limit: Duration, waitingFor what: String) {
    Thread.detachNewThread {
        Thread.sleep(forTimeInterval: Double(limit.nanoseconds) / 1e9)
        FileHandle.standardError.write(Data("\(WaitTimeout(waitingFor: what, limit: limit)): exiting 0\n".utf8))
        _exit(0)
    }
}
