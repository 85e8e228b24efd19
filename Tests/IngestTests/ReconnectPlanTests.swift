import Containers
import Foundation
import Ingest
import Testing
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// What a pull does between a failed attempt and the next one: the plan on its own (values,
/// no clock), and the probe against real loopback sockets.
@Suite(.timeLimit(.minutes(10))) struct ReconnectPlanTests {
    static let second: UInt64 = 1_000_000_000

    @Test func aSourceThatCannotBeProbedWaitsOutItsBackOff() {
        let plan = ReconnectPlan(failedAt: 10 * Self.second, backOff: .seconds(8), probeInterval: nil)
        #expect(plan.next(at: 10 * Self.second) == .wait(until: 18 * Self.second))
        #expect(plan.next(at: 17 * Self.second) == .wait(until: 18 * Self.second))
        #expect(plan.next(at: 18 * Self.second) == .connect)
    }

    @Test func aShortBackOffIsNotProbed() {
        let plan = ReconnectPlan(failedAt: 0, backOff: .seconds(1), probeInterval: .seconds(1))
        #expect(plan.next(at: 0) == .wait(until: Self.second))
        #expect(plan.next(at: Self.second) == .connect)
    }

    @Test func aSourceAwayIsProbedEveryIntervalAndConnectedOnceItAccepts() {
        var plan = ReconnectPlan(failedAt: 0, backOff: .seconds(16), probeInterval: .seconds(1))
        // The first probe as the wait begins: is the camera away, or only its stream?
        #expect(plan.next(at: 0) == .probe)
        plan.probed(reachable: false, at: 0)
        #expect(plan.next(at: 5_000_000) == .wait(until: Self.second))
        for tick in 1...5 {
            #expect(plan.next(at: UInt64(tick) * Self.second) == .probe)
            plan.probed(reachable: false, at: UInt64(tick) * Self.second)
        }
        #expect(!plan.sourceReturned)
        #expect(plan.next(at: 6 * Self.second) == .probe)
        plan.probed(reachable: true, at: 6 * Self.second)
        #expect(plan.next(at: 6 * Self.second + 1) == .connect)
        #expect(plan.sourceReturned)
    }

    @Test func aSourceThatAcceptsWhileItsStreamFailsWaitsOutItsBackOffUnprobed() {
        var plan = ReconnectPlan(failedAt: 0, backOff: .seconds(8), probeInterval: .seconds(1))
        #expect(plan.next(at: 0) == .probe)
        plan.probed(reachable: true, at: 0)
        #expect(plan.next(at: 1) == .wait(until: 8 * Self.second))
        #expect(plan.next(at: 8 * Self.second) == .connect)
        #expect(!plan.sourceReturned)
    }

    @Test func theLastProbeBeforeTheBackOffEndsDoesNotDelayIt() {
        var plan = ReconnectPlan(failedAt: 0, backOff: .milliseconds(2500), probeInterval: .seconds(1))
        plan.probed(reachable: false, at: 0)
        plan.probed(reachable: false, at: Self.second)
        plan.probed(reachable: false, at: 2 * Self.second)
        #expect(plan.next(at: 2 * Self.second + 1) == .wait(until: 2_500_000_000))
        #expect(plan.next(at: 2_500_000_000) == .connect)
    }

    @Test func aRetryAskedForEndsTheWait() {
        var plan = ReconnectPlan(failedAt: 0, backOff: .seconds(30), probeInterval: .seconds(1))
        plan.retryNow()
        #expect(plan.next(at: 1) == .connect)
        #expect(!plan.sourceReturned)
    }

    @Test func theProbeFindsAListeningPortAndAClosedOne() throws {
        let listener = try LoopbackListener()
        let open = try SourceURL("rtsp://127.0.0.1:\(listener.port)/cam")
        #expect(ReachabilityProbe.canProbe(open))
        #expect(ReachabilityProbe.accepts(open, timeout: .seconds(2)))
        let port = listener.port
        listener.close()
        #expect(!ReachabilityProbe.accepts(try SourceURL("rtsp://127.0.0.1:\(port)/cam"), timeout: .seconds(2)))
        #expect(!ReachabilityProbe.canProbe(try SourceURL("srt://127.0.0.1:\(port)")))
    }
}

/// A TCP socket listening on a free loopback port, which accepts (in the kernel's backlog)
/// without anyone calling `accept`.
private final class LoopbackListener {
    let socket: Int32
    let port: UInt16

    init() throws {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) }
        }
        guard bound == 0, listen(socket, 4) == 0 else {
            Glibc.close(socket)
            throw TestFailure("cannot listen on 127.0.0.1: errno \(errno)")
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        self.socket = socket
        port = UInt16(bigEndian: address.sin_port)
    }

    func close() {
        Glibc.close(socket)
    }
}
