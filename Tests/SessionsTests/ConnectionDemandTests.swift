import Ingest
import Testing
import TestSupport

@testable import Sessions

/// The on-demand connection of a pull as a value: every transition, driven event by event with
/// times given in, no thread and no clock; each checks the state it leads to and the actions it
/// asks for. Linger 10 s, a request waits 20 s for the first picture.
@Suite(.timeLimit(.minutes(10))) struct ConnectionDemandTests {
    typealias Action = ConnectionDemand.Action

    /// Seconds on the session's clock, as uptime.
    static func at(_ seconds: Double) -> UInt64 { UInt64(seconds * 1e9) }

    static let failure = SessionError(
        .sourceNotReady, "the source could not be connected for this request: refused", retryAfterSeconds: 1,
        facts: ["sourceError": .text("source_unreachable")])
    static let timeout = SessionError(
        .sourceNotReady, "no picture came from the source within 20 s of the request (it connects on demand)",
        retryAfterSeconds: 1)
    static let refusal = SessionError(.catchUpQueueFull, "full", retryAfterSeconds: 2)
    static let gone = SessionError(.sessionNotFound, "the session was deleted")

    /// What happens to the machine, as the executor reports it.
    enum Event: CustomStringConvertible, Sendable {
        case demanded(DecodeDemand, waiter: UInt64?, at: Double)
        /// A long poll's request, which waits `limit` seconds at most.
        case demandedWaiting(waiter: UInt64, limit: Double, at: Double)
        case viewerLeft(at: Double)
        case connected(at: Double)
        case failed
        case picture(receivedAt: Double)
        case decoderRefused
        case waitExpired(token: UInt64, at: Double)
        case lingerCheck(watched: Bool, at: Double)
        case pullChanged(ConnectMode?)
        case closed

        var description: String {
            switch self {
            case .demanded(let reason, let waiter, let at): "\(reason.rawValue) by \(waiter.map { "#\($0)" } ?? "nobody waiting") at \(at) s"
            case .demandedWaiting(let waiter, let limit, let at): "request #\(waiter) waiting \(limit) s at \(at) s"
            case .viewerLeft(let at): "viewer left at \(at) s"
            case .connected(let at): "connected at \(at) s"
            case .failed: "attempt failed"
            case .picture(let receivedAt): "picture of bytes received at \(receivedAt) s"
            case .decoderRefused: "decoder refused"
            case .waitExpired(let token, let at): "wait of #\(token) expired at \(at) s"
            case .lingerCheck(let watched, let at): "linger check at \(at) s\(watched ? ", watched" : "")"
            case .pullChanged(let connect): "pull changed to \(connect?.rawValue ?? "none")"
            case .closed: "closed"
            }
        }
    }

    /// Where a transition starts: a fresh machine taken through these events.
    struct Start: MachineStart {
        let name: String
        var connect: ConnectMode = .onDemand
        var events: [Event] = []

        var description: String { name }

        func fresh() -> ConnectionDemand {
            ConnectionDemand(connect: connect, linger: .seconds(10), firstPictureWait: .seconds(20))
        }

        static let idle = Start(name: "idle")
        /// Request #1 asked at 100 s (linger check due at 110 s, its wait ends at 120 s).
        static let connecting = Start(name: "connecting", events: [.demanded(.pictureRequest, waiter: 1, at: 100)])
        /// The pull connected at 101 s; #1 still waits for a picture.
        static let connected = Start(name: "connected", events: connecting.events + [.connected(at: 101)])
        /// The first attempt failed: #1 was told.
        static let failing = Start(name: "failing", events: connecting.events + [.failed])
        /// A picture of the connection came at 101.5 s: #1 went on, and the linger runs from its
        /// answer (to 111.5 s); the check still due at 110 s.
        static let live = Start(name: "live", events: connected.events + [.picture(receivedAt: 101.5)])
        /// The 110 s check found nobody since the demand at 105 s: let go at 115 s unless asked.
        static let lingering = Start(
            name: "lingering",
            events: live.events + [.demanded(.pictureRequest, waiter: nil, at: 105), .lingerCheck(watched: false, at: 110)])
        static let always = Start(name: "always", connect: .always)
        static let closed = Start(name: "closed", events: connecting.events + [.closed])
    }

    typealias Transition = MachineTransition<Start>

    static let transitions: [Transition] = [
        // Connecting
        Transition(
            start: .idle, event: .demanded(.pictureRequest, waiter: 1, at: 100), state: .connecting(.pictureRequest),
            actions: [.connect, .scheduleWaitDeadline(token: 1, at: at(120)), .scheduleLingerCheck(at: at(110))],
            answersAtOnce: false),
        Transition(
            start: .idle, event: .demanded(.mjpegViewer, waiter: nil, at: 100), state: .connecting(.mjpegViewer),
            actions: [.connect, .scheduleLingerCheck(at: at(110))], answersAtOnce: false),
        Transition(
            start: .connecting, event: .demanded(.pictureRequest, waiter: 2, at: 101), state: .connecting(.pictureRequest),
            actions: [.scheduleWaitDeadline(token: 2, at: at(121))], answersAtOnce: false),
        // A long poll waits for as long as it said, when that is shorter than a first picture may take.
        Transition(
            start: .connecting, event: .demandedWaiting(waiter: 2, limit: 3, at: 101), state: .connecting(.pictureRequest),
            actions: [.scheduleWaitDeadline(token: 2, at: at(104))], answersAtOnce: false),
        Transition(
            start: .connecting, event: .demandedWaiting(waiter: 2, limit: 30, at: 101), state: .connecting(.pictureRequest),
            actions: [.scheduleWaitDeadline(token: 2, at: at(121))], answersAtOnce: false),
        Transition(
            start: Start(name: "connecting, #2 waiting 3 s", events: Start.connecting.events + [.demandedWaiting(waiter: 2, limit: 3, at: 101)]),
            event: .waitExpired(token: 2, at: 104), state: .connecting(.pictureRequest),
            actions: [
                .answer(
                    [2],
                    SessionError(
                        .sourceNotReady, "no picture came from the source within 3 s of the request (it connects on demand)",
                        retryAfterSeconds: 1))
            ]),
        Transition(
            start: .connecting, event: .connected(at: 101), state: .connecting(.pictureRequest),
            actions: [.wakeDecoder(.pictureRequest)]),
        Transition(start: .connecting, event: .picture(receivedAt: 100.5), state: .connecting(.pictureRequest), actions: []),
        // The first picture
        Transition(
            start: .connected, event: .picture(receivedAt: 100.5), state: .connecting(.pictureRequest), actions: []),
        Transition(
            start: .connected, event: .picture(receivedAt: 101.5), state: .live, actions: [.answer([1], nil)],
            answersAtOnce: true),
        Transition(
            start: .connected, event: .decoderRefused, state: .connecting(.pictureRequest), actions: [.answer([1], refusal)]),
        Transition(start: .connected, event: .waitExpired(token: 1, at: 120), state: .connecting(.pictureRequest),
            actions: [.answer([1], timeout)]),
        Transition(start: .connected, event: .waitExpired(token: 1, at: 119), state: .connecting(.pictureRequest), actions: []),
        Transition(start: .connected, event: .waitExpired(token: 5, at: 120), state: .connecting(.pictureRequest), actions: []),
        // Failing
        Transition(start: .connected, event: .failed, state: .connecting(.pictureRequest), actions: [.answer([1], failure)]),
        Transition(
            start: .failing, event: .demanded(.pictureRequest, waiter: 2, at: 102), state: .connecting(.pictureRequest),
            actions: [.answer([2], failure)]),
        Transition(
            start: .failing, event: .demanded(.mjpegViewer, waiter: nil, at: 102), state: .connecting(.pictureRequest),
            actions: []),
        Transition(
            start: .failing, event: .connected(at: 103), state: .connecting(.pictureRequest),
            actions: [.wakeDecoder(.pictureRequest)]),
        Transition(start: .failing, event: .lingerCheck(watched: false, at: 110), state: .idle, actions: [.release]),
        Transition(start: .failing, event: .waitExpired(token: 1, at: 120), state: .connecting(.pictureRequest), actions: []),
        // Live and lingering
        Transition(
            start: .live, event: .demanded(.pictureRequest, waiter: 2, at: 103), state: .live, actions: [], answersAtOnce: true),
        Transition(start: .live, event: .waitExpired(token: 1, at: 120), state: .live, actions: []),
        Transition(start: .live, event: .connected(at: 103), state: .live, actions: []),
        Transition(start: .live, event: .failed, state: .live, actions: []),
        // The linger runs from the first picture's answer, not from the request.
        Transition(
            start: .live, event: .lingerCheck(watched: false, at: 110), state: .lingering,
            actions: [.scheduleLingerCheck(at: at(111.5))]),
        Transition(
            start: Start(name: "live, checked at 110 s unwatched", events: Start.live.events + [.lingerCheck(watched: false, at: 110)]),
            event: .lingerCheck(watched: false, at: 111.5), state: .idle, actions: [.release]),
        Transition(
            start: .live, event: .lingerCheck(watched: true, at: 110), state: .live,
            actions: [.scheduleLingerCheck(at: at(120))]),
        Transition(
            start: Start(name: "live, asked at 105 s", events: Start.live.events + [.demanded(.pictureRequest, waiter: nil, at: 105)]),
            event: .lingerCheck(watched: false, at: 110), state: .lingering, actions: [.scheduleLingerCheck(at: at(115))]),
        Transition(start: .lingering, event: .lingerCheck(watched: false, at: 115), state: .idle, actions: [.release]),
        Transition(
            start: .lingering, event: .lingerCheck(watched: true, at: 115), state: .live,
            actions: [.scheduleLingerCheck(at: at(125))]),
        Transition(
            start: .lingering, event: .demanded(.mjpegViewer, waiter: nil, at: 112), state: .live, actions: [],
            answersAtOnce: true),
        Transition(
            start: Start(
                name: "live, let go",
                events: Start.live.events + [.lingerCheck(watched: false, at: 110), .lingerCheck(watched: false, at: 111.5)]),
            event: .viewerLeft(at: 112), state: .idle, actions: []),
        Transition(
            start: Start(name: "live, checked at 110 s", events: Start.live.events + [.lingerCheck(watched: true, at: 110)]),
            event: .viewerLeft(at: 111), state: .live, actions: []),
        // Requests still waiting keep the connection, whoever else left.
        Transition(
            start: .connected, event: .lingerCheck(watched: false, at: 110), state: .connecting(.pictureRequest),
            actions: [.scheduleLingerCheck(at: at(120))]),
        // Idle
        Transition(start: .idle, event: .lingerCheck(watched: true, at: 100), state: .idle, actions: []),
        Transition(start: .idle, event: .connected(at: 100), state: .idle, actions: []),
        Transition(start: .idle, event: .picture(receivedAt: 100), state: .idle, actions: []),
        // Always connected, or no pull
        Transition(
            start: .always, event: .demanded(.pictureRequest, waiter: 1, at: 100), state: .always, actions: [],
            answersAtOnce: true),
        Transition(start: .always, event: .connected(at: 100), state: .always, actions: []),
        Transition(start: .always, event: .failed, state: .always, actions: []),
        Transition(start: .always, event: .lingerCheck(watched: false, at: 100), state: .always, actions: []),
        Transition(start: .always, event: .pullChanged(.onDemand), state: .idle, actions: []),
        Transition(start: .idle, event: .pullChanged(.always), state: .always, actions: []),
        Transition(start: .connected, event: .pullChanged(nil), state: .always, actions: [.answer([1], nil)]),
        Transition(start: .live, event: .pullChanged(.onDemand), state: .idle, actions: []),
        // Closing
        Transition(start: .connected, event: .closed, state: .closed, actions: [.answer([1], gone)]),
        Transition(
            start: .closed, event: .demanded(.pictureRequest, waiter: 3, at: 103), state: .closed, actions: [],
            answersAtOnce: true),
        Transition(start: .closed, event: .pullChanged(.onDemand), state: .closed, actions: []),
        Transition(start: .closed, event: .closed, state: .closed, actions: []),
    ]

    @Test(arguments: transitions)
    func transition(_ transition: Transition) {
        transition.check()
    }

    /// The pull is connected exactly while the connection is wanted.
    @Test func thePullIsWantedWhileAskedFor() {
        let expected: [(Start, Bool)] = [
            (.idle, false), (.connecting, true), (.connected, true), (.failing, true), (.live, true), (.lingering, true),
            (.always, false), (.closed, false),
        ]
        for (start, wanted) in expected {
            #expect(start.machine().wantsConnection == wanted, "\(start)")
        }
    }

    /// A whole cycle: connected for a request, let go after the linger, connected again for the
    /// next one, whose request waits for a picture of the new connection, not of the old.
    @Test func connectedAgainForTheNextRequest() {
        var machine = Start.live.machine()
        #expect(machine.apply(.lingerCheck(watched: false, at: 110)) == [.scheduleLingerCheck(at: Self.at(111.5))])
        #expect(machine.apply(.lingerCheck(watched: false, at: 111.5)) == [.release])
        #expect(machine.state == .idle)
        let asked = machine.apply(.demanded(.pictureRequest, waiter: 2, at: 200))
        #expect(asked == [.connect, .scheduleWaitDeadline(token: 2, at: Self.at(220)), .scheduleLingerCheck(at: Self.at(210))])
        // A late picture of the old connection's bytes answers nobody.
        #expect(machine.apply(.picture(receivedAt: 109)) == [])
        #expect(machine.apply(.connected(at: 201)) == [.wakeDecoder(.pictureRequest)])
        #expect(machine.apply(.picture(receivedAt: 200.9)) == [])
        #expect(machine.apply(.picture(receivedAt: 201.2)) == [.answer([2], nil)])
        #expect(machine.state == .live)
        #expect(machine.apply(.lingerCheck(watched: false, at: 210)) == [.scheduleLingerCheck(at: Self.at(211.2))])
        #expect(machine.apply(.lingerCheck(watched: false, at: 211.2)) == [.release])
    }

    /// At most one linger check is pending, whatever comes in meanwhile.
    @Test func oneLingerCheckAtATime() {
        var machine = Start.connecting.machine()
        var scheduled = 0
        let events: [Event] = [
            .demanded(.pictureRequest, waiter: 2, at: 101), .viewerLeft(at: 101.5), .connected(at: 102),
            .picture(receivedAt: 102.5), .demanded(.mjpegViewer, waiter: nil, at: 105),
        ]
        for event in events {
            scheduled += machine.apply(event).filter { if case .scheduleLingerCheck = $0 { true } else { false } }.count
        }
        #expect(scheduled == 0, "the one scheduled at the first demand is still pending")
        #expect(machine.lingerCheckDue == Self.at(110))
        #expect(machine.apply(.lingerCheck(watched: false, at: 110)) == [.scheduleLingerCheck(at: Self.at(115))])
        #expect(machine.state == .lingering)
    }

    /// Every request that waited is answered exactly once, however the wait ends.
    @Test(arguments: [
        Event.picture(receivedAt: 102), .failed, .decoderRefused, .closed, .pullChanged(nil), .waitExpired(token: 1, at: 200),
    ])
    func everyWaiterIsAnsweredOnce(_ ending: Event) {
        var machine = Start.connecting.machine()
        var answered: [UInt64] = []
        func note(_ actions: [Action]) {
            for case .answer(let tokens, _) in actions { answered += tokens }
        }
        note(machine.apply(.demanded(.pictureRequest, waiter: 2, at: 100.5)))
        note(machine.apply(.connected(at: 101)))
        note(machine.apply(.demanded(.pictureRequest, waiter: 3, at: 101.5)))
        note(machine.apply(ending))
        if case .waitExpired = ending {
            note(machine.apply(.waitExpired(token: 2, at: 200)))
            note(machine.apply(.waitExpired(token: 3, at: 200)))
        }
        for token: UInt64 in [1, 2, 3] { note(machine.apply(.waitExpired(token: token, at: 300))) }
        #expect(answered.sorted() == [1, 2, 3])
        #expect(machine.waiters.isEmpty)
    }
}

extension ConnectionDemand: TableDrivenMachine {
    /// Runs one event of the table.
    mutating func apply(_ event: ConnectionDemandTests.Event) -> [Action] {
        let at = ConnectionDemandTests.at
        switch event {
        case .demanded(let reason, let waiter, let time): return demanded(reason, waiter: waiter, at: at(time))
        case .demandedWaiting(let waiter, let limit, let time):
            return demanded(.pictureRequest, waiter: waiter, waitLimit: UInt64(limit * 1e9), at: at(time))
        case .viewerLeft(let time): return viewerLeft(at: at(time))
        case .connected(let time): return connected(at: at(time))
        case .failed: return connectionFailed(ConnectionDemandTests.failure)
        // Published as its bytes are received.
        case .picture(let receivedAt): return picturePublished(receivedAt: at(receivedAt), at: at(receivedAt))
        case .decoderRefused: return decoderRefused(ConnectionDemandTests.refusal)
        case .waitExpired(let token, let time): return waitExpired(token: token, at: at(time))
        case .lingerCheck(let watched, let time): return lingerCheckDue(watched: watched, at: at(time))
        case .pullChanged(let connect): return pullChanged(to: connect)
        case .closed: return closed()
        }
    }
}
