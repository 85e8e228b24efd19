import Testing
import TestSupport

@testable import Sessions

/// The on-demand decoder's life as a value: every transition, driven event by event with times
/// given in, no thread and no clock; each checks the state it leads to and the actions it asks for.
@Suite(.timeLimit(.minutes(10))) struct DecoderDemandTests {
    typealias Action = DecoderDemand.Action

    /// Seconds on the session's clock, as uptime.
    static func at(_ seconds: Double) -> UInt64 { UInt64(seconds * 1e9) }

    static let refusal = SessionError(.catchUpQueueFull, "full", retryAfterSeconds: 2)
    static let openFailure = SessionError(.decoding(.decoderMemoryExceeded), "no memory")
    static let gone = SessionError(.sessionNotFound, "the session was deleted")

    /// What happens to the machine, as the executor reports it.
    enum Event: CustomStringConvertible, Sendable {
        case demanded(DecodeDemand, waiter: UInt64?, at: Double)
        case viewerLeft(at: Double)
        case multipartBegan(at: Double)
        case multipartEnded(at: Double)
        case slotQueued(ticket: UInt64)
        case slotRefused(caller: UInt64?)
        case slotGranted(at: Double)
        case opened(catchingUp: Bool)
        case failedToOpen
        case progressed
        case reachedRequests
        case done(lostItsPlace: Bool, units: Int, at: Double)
        case lingerCheck(watched: Bool, at: Double)
        case modeChanged(DecodeMode)
        case backEndReplaced
        case closed

        var description: String {
            switch self {
            case .demanded(let reason, let waiter, let at): "\(reason.rawValue) by \(waiter.map { "#\($0)" } ?? "nobody waiting") at \(at) s"
            case .viewerLeft(let at): "viewer left at \(at) s"
            case .multipartBegan(let at): "multipart answer began at \(at) s"
            case .multipartEnded(let at): "multipart answer ended at \(at) s"
            case .slotQueued(let ticket): "slot queued (ticket \(ticket))"
            case .slotRefused(let caller): "slot refused (caller \(caller.map(String.init) ?? "none"))"
            case .slotGranted(let at): "slot granted at \(at) s"
            case .opened(let catchingUp): "decoder opened\(catchingUp ? ", catching up" : ", nothing held")"
            case .failedToOpen: "decoder failed to open"
            case .progressed: "catch-up progressed"
            case .reachedRequests: "catch-up reached the requests"
            case .done(let lost, let units, let at): "catch-up done (\(units) units\(lost ? ", lost its place" : "")) at \(at) s"
            case .lingerCheck(let watched, let at): "linger check at \(at) s\(watched ? ", watched" : "")"
            case .modeChanged(let mode): "mode changed to \(mode.rawValue)"
            case .backEndReplaced: "back end replaced"
            case .closed: "closed"
            }
        }
    }

    /// Where a transition starts: a fresh machine taken through these events.
    struct Start: MachineStart {
        let name: String
        var mode: DecodeMode = .onDemand
        var linger: Duration = .seconds(10)
        var events: [Event] = []

        var description: String { name }

        func fresh() -> DecoderDemand { DecoderDemand(mode: mode, linger: linger) }

        static let idle = Start(name: "idle")
        /// Request #1 woke it at 100 s (linger check due at 110 s); the pool has not answered.
        static let queued = Start(name: "queued", events: [.demanded(.pictureRequest, waiter: 1, at: 100)])
        static let queuedWithTicket = Start(name: "queued (ticket 7)", events: queued.events + [.slotQueued(ticket: 7)])
        static let catchingUp = Start(
            name: "catching up", events: queuedWithTicket.events + [.slotGranted(at: 101), .opened(catchingUp: true)])
        /// Caught up at 102 s, #1 answered; the linger check still due at 110 s.
        static let live = Start(name: "live", events: catchingUp.events + [.done(lostItsPlace: false, units: 9, at: 102)])
        /// The 110 s check found nobody since the demand at 105 s: released at 115 s unless asked.
        static let lingering = Start(
            name: "lingering",
            events: live.events + [.demanded(.pictureRequest, waiter: nil, at: 105), .lingerCheck(watched: false, at: 110)])
        static let starting = Start(name: "starting (multipart)", events: [.multipartBegan(at: 100)])
        static let all = Start(name: "always (all)", mode: .all)
        static let keyframes = Start(name: "always (keyframes)", mode: .keyframes)
        static let closed = Start(name: "closed", events: queuedWithTicket.events + [.closed])
    }

    typealias Transition = MachineTransition<Start>

    static let transitions: [Transition] = [
        // Waking
        Transition(
            start: .idle, event: .demanded(.pictureRequest, waiter: 1, at: 100), state: .queued(.pictureRequest, ticket: nil),
            actions: [.requestSlot(.pictureRequest), .scheduleLingerCheck(at: at(110))], answersAtOnce: false),
        Transition(
            start: .idle, event: .demanded(.mjpegViewer, waiter: nil, at: 100), state: .queued(.mjpegViewer, ticket: nil),
            actions: [.requestSlot(.mjpegViewer), .scheduleLingerCheck(at: at(110))], answersAtOnce: false),
        Transition(
            start: .queued, event: .demanded(.pictureRequest, waiter: 2, at: 101), state: .queued(.pictureRequest, ticket: nil),
            actions: [], answersAtOnce: false),
        Transition(start: .queued, event: .slotQueued(ticket: 7), state: .queued(.pictureRequest, ticket: 7), actions: []),
        Transition(
            start: .queued, event: .slotRefused(caller: 1), state: .idle, actions: [.recordCatchUp(.refused)]),
        Transition(
            start: Start(name: "queued, two waiting", events: Start.queued.events + [.demanded(.pictureRequest, waiter: 2, at: 100.5)]),
            event: .slotRefused(caller: 2), state: .idle, actions: [.answer([1], refusal), .recordCatchUp(.refused)]),
        Transition(
            start: .queuedWithTicket, event: .slotGranted(at: 101), state: .catchingUp(.pictureRequest, startedAt: at(101)),
            actions: [.openDecoder(.catchUp)]),
        // Opening
        Transition(
            start: Start(name: "slot granted", events: Start.queuedWithTicket.events + [.slotGranted(at: 101)]),
            event: .opened(catchingUp: true), state: .catchingUp(.pictureRequest, startedAt: at(101)),
            actions: [.announceDecoderStarted(.pictureRequest), .continueCatchUp]),
        Transition(
            start: Start(name: "slot granted", events: Start.queuedWithTicket.events + [.slotGranted(at: 101)]),
            event: .opened(catchingUp: false), state: .live,
            actions: [.releaseSlot, .announceDecoderStarted(.pictureRequest), .goLive(waitsForKeyframe: true), .answer([1], nil)],
            answersAtOnce: true),
        Transition(
            start: Start(name: "slot granted", events: Start.queuedWithTicket.events + [.slotGranted(at: 101)]),
            event: .failedToOpen, state: .idle,
            // No room in the memory budget is a refusal, not a failed decode.
            actions: [.releaseSlot, .recordError(openFailure), .recordCatchUp(.refused), .answer([1], openFailure)]),
        // Catching up
        Transition(
            start: .catchingUp, event: .progressed, state: .catchingUp(.pictureRequest, startedAt: at(101)),
            actions: [.continueCatchUp]),
        Transition(
            start: .catchingUp, event: .reachedRequests, state: .catchingUp(.pictureRequest, startedAt: at(101)),
            actions: [.publishCatchUpPicture, .answer([1], nil), .continueCatchUp]),
        Transition(
            start: .catchingUp, event: .demanded(.pictureRequest, waiter: 2, at: 101.5),
            state: .catchingUp(.pictureRequest, startedAt: at(101)), actions: [], answersAtOnce: false),
        Transition(
            start: .catchingUp, event: .done(lostItsPlace: false, units: 9, at: 102.5), state: .live,
            actions: [
                .endCatchUp(publishing: true), .releaseSlot, .recordCatchUp(.ok(duration: at(1.5), units: 9)),
                .goLive(waitsForKeyframe: false), .answer([1], nil),
            ]),
        Transition(
            start: .catchingUp, event: .done(lostItsPlace: true, units: 30, at: 104), state: .live,
            actions: [
                .endCatchUp(publishing: true), .releaseSlot, .recordCatchUp(.ok(duration: at(3), units: 30)),
                .goLive(waitsForKeyframe: true), .answer([1], nil),
            ]),
        Transition(start: .catchingUp, event: .multipartBegan(at: 101.5), state: .catchingUp(.pictureRequest, startedAt: at(101)),
            actions: [.finishCatchUpNow]),
        Transition(
            start: .catchingUp, event: .lingerCheck(watched: false, at: 110), state: .catchingUp(.pictureRequest, startedAt: at(101)),
            actions: [.scheduleLingerCheck(at: at(120))]),
        // Live and lingering
        Transition(
            start: .live, event: .demanded(.pictureRequest, waiter: 2, at: 103), state: .live, actions: [], answersAtOnce: true),
        Transition(start: .live, event: .progressed, state: .live, actions: []),
        Transition(start: .live, event: .done(lostItsPlace: false, units: 1, at: 103), state: .live, actions: []),
        Transition(start: .live, event: .multipartBegan(at: 103), state: .live, actions: []),
        Transition(start: .live, event: .slotGranted(at: 103), state: .live, actions: [.releaseSlot]),
        Transition(
            start: .live, event: .lingerCheck(watched: true, at: 110), state: .live,
            actions: [.scheduleLingerCheck(at: at(120))]),
        Transition(
            start: Start(name: "live, asked at 105 s", events: Start.live.events + [.demanded(.pictureRequest, waiter: nil, at: 105)]),
            event: .lingerCheck(watched: false, at: 110), state: .lingering, actions: [.scheduleLingerCheck(at: at(115))]),
        Transition(
            start: .live, event: .lingerCheck(watched: false, at: 110), state: .idle, actions: [.releaseDecoder(reason: "idle")]),
        Transition(
            start: .lingering, event: .lingerCheck(watched: false, at: 115), state: .idle,
            actions: [.releaseDecoder(reason: "idle")]),
        Transition(
            start: .lingering, event: .lingerCheck(watched: true, at: 115), state: .live,
            actions: [.scheduleLingerCheck(at: at(125))]),
        Transition(
            start: .lingering, event: .demanded(.mjpegViewer, waiter: nil, at: 112), state: .live, actions: [],
            answersAtOnce: true),
        Transition(
            start: Start(name: "live, checked at 110 s", events: Start.live.events + [.lingerCheck(watched: true, at: 110)]),
            event: .viewerLeft(at: 111), state: .live, actions: []),
        Transition(
            start: Start(name: "live, check ran", events: Start.live.events + [.lingerCheck(watched: false, at: 110)]),
            event: .viewerLeft(at: 111), state: .idle, actions: []),
        Transition(
            start: .lingering, event: .multipartEnded(at: 113), state: .lingering, actions: []),
        Transition(
            start: Start(name: "live, zero linger", linger: .zero, events: Start.live.events),
            event: .lingerCheck(watched: true, at: 110), state: .live, actions: [.scheduleLingerCheck(at: at(110.1))]),
        // A multipart answer
        Transition(
            start: .idle, event: .multipartBegan(at: 100), state: .starting(.multipartAnswer),
            actions: [.openDecoder(.live(.onDemand))]),
        Transition(
            start: .queuedWithTicket, event: .multipartBegan(at: 101), state: .starting(.multipartAnswer),
            actions: [.cancelQueuedSlot(ticket: 7), .openDecoder(.live(.onDemand))]),
        Transition(
            start: .starting, event: .opened(catchingUp: false), state: .live,
            actions: [
                .announceDecoderStarted(.multipartAnswer), .goLive(waitsForKeyframe: true), .scheduleLingerCheck(at: at(110)),
            ]),
        Transition(
            start: Start(name: "queued, then multipart", events: Start.queued.events + [.multipartBegan(at: 100.5)]),
            event: .failedToOpen, state: .idle, actions: [.recordError(openFailure), .answer([1], nil)]),
        // The pool answering late
        Transition(start: .idle, event: .slotQueued(ticket: 9), state: .idle, actions: [.cancelQueuedSlot(ticket: 9)]),
        Transition(start: .idle, event: .slotGranted(at: 100), state: .idle, actions: [.releaseSlot]),
        Transition(start: .idle, event: .lingerCheck(watched: true, at: 100), state: .idle, actions: []),
        // Not on demand
        Transition(
            start: .all, event: .demanded(.pictureRequest, waiter: 1, at: 100), state: .always, actions: [],
            answersAtOnce: true),
        Transition(start: .all, event: .multipartBegan(at: 100), state: .always, actions: []),
        Transition(start: .all, event: .backEndReplaced, state: .always, actions: []),
        Transition(start: .all, event: .modeChanged(.keyframes), state: .always, actions: []),
        Transition(
            start: .all, event: .modeChanged(.onDemand), state: .idle, actions: [.releaseDecoder(reason: "mode_changed")]),
        Transition(
            start: .keyframes, event: .modeChanged(.onDemand), state: .idle,
            actions: [.releaseDecoder(reason: "mode_changed")]),
        // Modes and back ends
        Transition(start: .idle, event: .modeChanged(.all), state: .always, actions: [.openDecoder(.live(.all))]),
        Transition(
            start: .queuedWithTicket, event: .modeChanged(.keyframes), state: .always,
            actions: [.cancelQueuedSlot(ticket: 7), .openDecoder(.live(.keyframes)), .answer([1], nil)]),
        Transition(
            start: .catchingUp, event: .modeChanged(.all), state: .always,
            actions: [.endCatchUp(publishing: false), .releaseSlot, .goLive(waitsForKeyframe: true), .answer([1], nil)]),
        Transition(start: .live, event: .modeChanged(.all), state: .always, actions: [.goLive(waitsForKeyframe: true)]),
        Transition(start: .live, event: .modeChanged(.onDemand), state: .live, actions: []),
        Transition(
            start: Start(name: "opening for a mode", events: [.modeChanged(.all)]), event: .opened(catchingUp: false),
            state: .always, actions: [.announceDecoderStarted(.modeChanged), .goLive(waitsForKeyframe: true)]),
        Transition(
            start: Start(name: "opening for a mode", events: [.modeChanged(.all)]), event: .failedToOpen, state: .always,
            actions: [.recordError(openFailure)]),
        Transition(
            start: .catchingUp, event: .backEndReplaced, state: .idle,
            actions: [.endCatchUp(publishing: false), .releaseSlot, .answer([1], nil)]),
        Transition(
            start: .queuedWithTicket, event: .backEndReplaced, state: .idle,
            actions: [.cancelQueuedSlot(ticket: 7), .answer([1], nil)]),
        Transition(start: .live, event: .backEndReplaced, state: .idle, actions: []),
        // Closing
        Transition(
            start: .queuedWithTicket, event: .closed, state: .closed, actions: [.cancelQueuedSlot(ticket: 7), .answer([1], gone)]),
        Transition(start: .catchingUp, event: .closed, state: .closed, actions: [.answer([1], gone)]),
        Transition(start: .closed, event: .slotGranted(at: 102), state: .closed, actions: [.releaseSlot]),
        Transition(start: .closed, event: .slotQueued(ticket: 8), state: .closed, actions: [.cancelQueuedSlot(ticket: 8)]),
        Transition(
            start: .closed, event: .demanded(.pictureRequest, waiter: 3, at: 103), state: .closed, actions: [],
            answersAtOnce: true),
        Transition(start: .closed, event: .modeChanged(.all), state: .closed, actions: []),
        Transition(start: .closed, event: .closed, state: .closed, actions: []),
    ]

    @Test(arguments: transitions)
    func transition(_ transition: Transition) {
        transition.check()
    }

    /// What the status shows for each state.
    @Test func theStatusNamesEachState() {
        let expected: [(Start, DecoderActivity)] = [
            (.idle, .idle), (.queued, .queued), (.catchingUp, .catchingUp), (.starting, .catchingUp), (.live, .live),
            (.lingering, .live), (.all, .live), (.closed, .idle),
        ]
        for (start, activity) in expected {
            #expect(start.machine().activity == activity, "\(start)")
        }
    }

    /// At most one linger check is pending, whatever comes in meanwhile.
    @Test func oneLingerCheckAtATime() {
        var machine = Start.queued.machine()
        var scheduled = 0
        let events: [Event] = [
            .demanded(.pictureRequest, waiter: 2, at: 101), .viewerLeft(at: 101.5), .slotGranted(at: 102),
            .opened(catchingUp: true), .done(lostItsPlace: false, units: 3, at: 103), .multipartEnded(at: 104),
            .demanded(.mjpegViewer, waiter: nil, at: 105),
        ]
        for event in events {
            scheduled += machine.apply(event).filter { if case .scheduleLingerCheck = $0 { true } else { false } }.count
        }
        #expect(scheduled == 0, "the one scheduled at the first demand is still pending")
        #expect(machine.lingerCheckDue == Self.at(110))
        let later = machine.apply(.lingerCheck(watched: false, at: 110))
        #expect(later == [.scheduleLingerCheck(at: Self.at(115))])
        #expect(machine.state == .lingering)
    }

    /// Every request that waited is answered exactly once, however the catch-up ends.
    @Test(arguments: [Event.done(lostItsPlace: false, units: 5, at: 103), .failedToOpen, .backEndReplaced, .closed, .modeChanged(.all)])
    func everyWaiterIsAnsweredOnce(_ ending: Event) {
        var machine = Start.queued.machine()
        var answered: [UInt64] = []
        func note(_ actions: [Action]) {
            for case .answer(let tokens, _) in actions { answered += tokens }
        }
        note(machine.apply(.demanded(.pictureRequest, waiter: 2, at: 100.5)))
        note(machine.apply(.slotGranted(at: 101)))
        if case .failedToOpen = ending {} else { note(machine.apply(.opened(catchingUp: true))) }
        note(machine.apply(.demanded(.pictureRequest, waiter: 3, at: 101.5)))
        note(machine.apply(ending))
        #expect(answered.sorted() == [1, 2, 3])
        #expect(machine.waiters.isEmpty)
    }
}

extension DecoderDemand: TableDrivenMachine {
    /// Runs one event of the table.
    mutating func apply(_ event: DecoderDemandTests.Event) -> [Action] {
        let at = DecoderDemandTests.at
        switch event {
        case .demanded(let reason, let waiter, let time): return demanded(reason, waiter: waiter, at: at(time))
        case .viewerLeft(let time): return viewerLeft(at: at(time))
        case .multipartBegan(let time): return multipartAnswerBegan(at: at(time))
        case .multipartEnded(let time): return multipartAnswerEnded(at: at(time))
        case .slotQueued(let ticket): return slotQueued(ticket: ticket)
        case .slotRefused(let caller): return slotRefused(DecoderDemandTests.refusal, caller: caller)
        case .slotGranted(let time): return slotGranted(at: at(time))
        case .opened(let catchingUp): return decoderOpened(catchingUp: catchingUp)
        case .failedToOpen: return decoderFailedToOpen(DecoderDemandTests.openFailure)
        case .progressed: return catchUpProgressed()
        case .reachedRequests: return catchUpReachedRequests()
        case .done(let lost, let units, let time): return catchUpDone(lostItsPlace: lost, units: units, at: at(time))
        case .lingerCheck(let watched, let time): return lingerCheckDue(watched: watched, at: at(time))
        case .modeChanged(let mode): return modeChanged(to: mode)
        case .backEndReplaced: return backEndReplaced()
        case .closed: return closed()
        }
    }
}
