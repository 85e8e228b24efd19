#!/usr/bin/env bash
# `make sanitize`: the Swift tests, the curl smoke suite and the hostile clients under
# AddressSanitizer (LeakSanitizer included) and under ThreadSanitizer, each build in its own
# scratch path (.build-asan, .build-tsan).
#
#   scripts/sanitize.sh [address] [thread]        (both when none is named)
#
# The C libraries from Debian (libmicrohttpd, libavcodec, TurboJPEG) are not instrumented:
# ASan still checks every access of the Swift code and intercepts every malloc (so LSan sees C
# leaks too), TSan sees every Swift access and the pthread and libdispatch synchronization it
# intercepts. Swift's Synchronization.Mutex hands a contended lock over in the kernel, which
# TSan cannot see; scripts/tsan-swift-mutex.c (preloaded) tells it (see that file).
#
# Every report goes to .test-output/sanitize/<sanitizer>/ (one file per process). Any report, a
# failed step or a server that does not stop cleanly fails the run. Suppressions, each with the
# reason it is not FrameTap's bug: scripts/lsan.supp, scripts/tsan.supp.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=$ROOT/.test-output/sanitize
SANITIZERS=("$@")
[ ${#SANITIZERS[@]} -gt 0 ] || SANITIZERS=(address thread)
CLANG=${CLANG:-$(dirname "$(readlink -f "$(command -v swift)")")/clang}
FAILED=()
STARTED=$(date +%s)
SUMMARY=$OUT/summary.txt
mkdir -p "$OUT"
: > "$SUMMARY"

# step NAME COMMAND...: runs and times one step; its output goes to OUT/NAME.log.
step() {
    local name=$1 start rc
    shift
    start=$(date +%s)
    echo "== $name: $*"
    "$@" > "$OUT/$name.log" 2>&1
    rc=$?
    local line
    line=$(printf '%-24s %4d s  exit %d' "$name" "$(($(date +%s) - start))" "$rc")
    echo "   $line"
    echo "$line" >> "$SUMMARY"
    if [ "$rc" != 0 ]; then
        FAILED+=("$name")
        tail -25 "$OUT/$name.log" | sed 's/^/   | /'
    fi
}

for sanitizer in "${SANITIZERS[@]}"; do
    case $sanitizer in
        address) short=asan ;;
        thread) short=tsan ;;
        *) echo "unknown sanitizer $sanitizer (address or thread)"; exit 2 ;;
    esac
    scratch=.build-$short
    reports=$OUT/$short
    rm -rf "$reports"
    mkdir -p "$reports"
    build=(--scratch-path "$scratch" --sanitize="$sanitizer")
    step "$short-build" swift build "${build[@]}" --build-tests
    case $sanitizer in
        address)
            # detect_leaks: LSan at every exit (the server's after SIGTERM, the test runner's).
            export ASAN_OPTIONS="log_path=$reports/report:detect_leaks=1:halt_on_error=1"
            export LSAN_OPTIONS="suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0"
            # ASan's quarantine holds freed memory (up to 256 MB) before reusing it, so the hostile
            # suite's flat-RSS bound cannot tell a leak from it; LSan at the server's exit does.
            export HOSTILE_RSS_BOUND=off
            ;;
        thread)
            step tsan-mutex-shim "$CLANG" -shared -fPIC -O1 -Wall -fdollars-in-identifiers \
                -o "$scratch/tsan-swift-mutex.so" scripts/tsan-swift-mutex.c -ldl
            export LD_PRELOAD=$ROOT/$scratch/tsan-swift-mutex.so
            export TSAN_OPTIONS="log_path=$reports/report:suppressions=$ROOT/scripts/tsan.supp:print_suppressions=0:halt_on_error=0"
            ;;
    esac
    # Instrumented tests run several times slower: the watchdog gets a longer deadline and the
    # tests' own waits (TestSupport's defaultWaitLimit) four times theirs. One run per test
    # target: Swift Testing starts every test of a run at once, so on two cores an instrumented
    # run of all 800-odd tests lasts about 10 minutes and tests waiting their turn ran past their
    # time limits (even the pure ones).
    for directory in Tests/*Tests/; do
        target=$(basename "$directory")
        step "$short-$target" env FRAMETAP_TEST_DEADLINE="${FRAMETAP_TEST_DEADLINE:-7200}" FRAMETAP_TEST_WAIT_SCALE=4 \
            scripts/swift-test.sh "${build[@]}" --skip-build --filter "^$target\\."
    done
    # The instrumented server starts and answers more slowly (TSan: 5-15x).
    export SERVER_START_TIMEOUT=60 HOSTILE_HEALTH_TIMEOUT=10 HOSTILE_OUT=$OUT/hostile-$short
    step "$short-smoke" smoke/with-server.sh "$scratch/debug/frametap"
    step "$short-hostile" smoke/hostile.sh "$scratch/debug/frametap"
    unset ASAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS LD_PRELOAD SERVER_START_TIMEOUT HOSTILE_HEALTH_TIMEOUT HOSTILE_OUT \
        HOSTILE_RSS_BOUND

    found=$(find "$reports" -type f | sort)
    if [ -n "$found" ]; then
        FAILED+=("$short-reports")
        echo "   $sanitizer: $(echo "$found" | wc -l) process(es) reported:"
        for report in $found; do
            echo "   $report"
            grep -h '^SUMMARY' "$report" | sort | uniq -c | sed 's/^/     /'
        done
        echo "$short: reports in $reports" >> "$SUMMARY"
    else
        echo "   $sanitizer: no reports"
        echo "$short: no reports" >> "$SUMMARY"
    fi
done

total=$(($(date +%s) - STARTED))
echo "sanitize: ${SANITIZERS[*]} in $((total / 60)) min $((total % 60)) s (summary: $SUMMARY, logs: $OUT/)"
echo "total $total s" >> "$SUMMARY"
if [ ${#FAILED[@]} -gt 0 ]; then
    echo "sanitize FAILED: ${FAILED[*]}"
    exit 1
fi
echo "sanitize passed"
