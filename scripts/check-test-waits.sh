#!/usr/bin/env bash
# Nothing in Tests/ may wait without a limit (see Tests/TestSupport/Waiting.swift for the waits
# that have one), and every suite carries a Swift Testing time limit. Run by scripts/swift-test.sh.
set -uo pipefail
cd "$(dirname "$0")/.."

failed=0
# Waits that never end by themselves: Dispatch's and Foundation's unlimited waits, raw
# continuations (which resume only if someone resumes them), reading a terminal.
unlimited='\.wait\(\)|waitUntilExit\(\)|with(Checked|Unsafe)(Throwing)?Continuation|readLine\(|pthread_cond_wait\(|\.join\(\)'
if grep -rnE "$unlimited" Tests --include='*.swift' | grep -v '^Tests/TestSupport/Waiting.swift:'; then
    echo "check-test-waits: the waits above have no limit: use wait(for:timeout:), waitForExit, Signal or Outcome (Tests/TestSupport/Waiting.swift)"
    failed=1
fi
if grep -rnE '^[[:space:]]*@Suite' Tests --include='*.swift' | grep -v 'timeLimit'; then
    echo "check-test-waits: the suites above have no .timeLimit(...)"
    failed=1
fi
# A suite's limit counts from when its test was started, not from when it got a thread: Swift
# Testing starts every test of a run at once, and on two cores a pure test has waited 70 s for
# the decoding tests ahead of it. Ten minutes is the floor; the hang switch runs only on its own.
if grep -rnE 'timeLimit\([[:space:]]*\.(minutes\([[:space:]]*0*[1-9][[:space:]]*\)|seconds\()' Tests --include='*.swift' \
    | grep -v '^Tests/TestSupportTests/HangSwitchTests.swift:'; then
    echo "check-test-waits: the time limits above are under the 10 minutes a test may wait for a thread in a full run"
    failed=1
fi
# A test outside any @Suite would have no time limit: every file with tests declares its suites.
for file in $(grep -rlE '^[[:space:]]*@Test' Tests --include='*.swift'); do
    grep -qE '^[[:space:]]*@Suite' "$file" || { echo "$file: tests outside a @Suite (no time limit)"; failed=1; }
done
exit $failed
