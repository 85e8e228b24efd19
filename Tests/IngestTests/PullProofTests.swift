import Containers
import Testing

@testable import Ingest

/// Which connections start a pull's back-off again: those that handed on the stream for a
/// while, and an HTTP body that ended as a whole file (a short file that loops). A live stream
/// that drops its client after a second or two proves nothing, so a camera that does so again
/// and again is retried ever more slowly, not every half second.
@Suite(.timeLimit(.minutes(10))) struct PullProofTests {
    @Test func aLiveStreamThatEndsSoonProvesNothing() {
        #expect(!PullSettings.proved(delivering: .seconds(2), sampled: true, end: .sourceEnded, mayBeFile: false))
        #expect(!PullSettings.proved(delivering: nil, sampled: false, end: .sourceEnded, mayBeFile: false))
        #expect(PullSettings.proved(delivering: .seconds(5), sampled: true, end: .sourceEnded, mayBeFile: false))
        #expect(PullSettings.proved(delivering: .seconds(6), sampled: true, end: .sourceTimeout, mayBeFile: false))
    }

    @Test func aWholeFileOverHTTPProvesItself() {
        #expect(PullSettings.proved(delivering: .seconds(1), sampled: true, end: .sourceEnded, mayBeFile: true))
        #expect(!PullSettings.proved(delivering: .seconds(1), sampled: true, end: .sourceTimeout, mayBeFile: true))
        #expect(!PullSettings.proved(delivering: .seconds(1), sampled: false, end: .sourceEnded, mayBeFile: true))
    }
}
