import Foundation
import Testing

/// With FRAMETAP_TEST_HANG=1, a test that blocks its thread for good, as a wait with no limit
/// does: what `scripts/swift-test.sh` must end, naming it and showing every thread. Its time limit
/// cannot end it: Swift Testing cancels the test's task, which a blocked thread never sees.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["FRAMETAP_TEST_HANG"] == "1", "FRAMETAP_TEST_HANG=1 only"), .timeLimit(.minutes(1)))
struct HangSwitchTests {
    @Test func blocksForeverOnPurpose() {
        while true { sleep(3600) }
    }
}
