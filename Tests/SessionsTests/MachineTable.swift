import Testing

@testable import Sessions

/// An on-demand state machine as its table tests drive it: one event at a time, given times,
/// no thread and no clock. `DecoderDemandTests` and `ConnectionDemandTests` write their tables
/// of `MachineTransition`s over it.
protocol TableDrivenMachine {
    associatedtype Event: CustomStringConvertible & Sendable
    associatedtype State: Equatable & Sendable
    associatedtype Action: Equatable & Sendable
    var state: State { get }
    /// Whether a request may go on at once.
    var answersAtOnce: Bool { get }
    /// Runs one event of the table: the actions the machine asks for.
    mutating func apply(_ event: Event) -> [Action]
}

/// Where a transition starts: a fresh machine taken through these events.
protocol MachineStart: CustomStringConvertible, Sendable {
    associatedtype Machine: TableDrivenMachine
    var events: [Machine.Event] { get }
    func fresh() -> Machine
}

extension MachineStart {
    func machine() -> Machine {
        var machine = fresh()
        for event in events { _ = machine.apply(event) }
        return machine
    }
}

/// One row of a table: from `start`, `event` leads to `state` and asks for `actions` (and, when
/// given, whether a request then goes on at once).
struct MachineTransition<Start: MachineStart>: CustomTestStringConvertible, Sendable {
    let start: Start
    let event: Start.Machine.Event
    let state: Start.Machine.State
    let actions: [Start.Machine.Action]
    var answersAtOnce: Bool? = nil

    var testDescription: String { "\(start) + \(event)" }

    func check(sourceLocation: SourceLocation = #_sourceLocation) {
        var machine = start.machine()
        let actions = machine.apply(event)
        #expect(machine.state == state, sourceLocation: sourceLocation)
        #expect(actions == self.actions, sourceLocation: sourceLocation)
        if let answersAtOnce { #expect(machine.answersAtOnce == answersAtOnce, sourceLocation: sourceLocation) }
    }
}
