#!/usr/bin/env bash
# Runs fuzz targets built by `make fuzz-build`, each for SECONDS, one after the other (the
# machine has two cores and other work), and prints the executions of each and their total.
#
#   Fuzz/run.sh SECONDS TARGET...
#
# Each target reads its seeds (.fuzz/seeds/<target>, from make-corpus.py) and grows its own
# corpus in .fuzz/corpus/<target>, kept between runs so later runs start where earlier ones
# stopped. A crash, a broken invariant (a trap), a leak, a timeout or running out of memory
# stops that target and makes the whole run fail; the input is kept in .fuzz/crashes/<target>/
# and the full log in .fuzz/logs/<target>.log; the end of the output names the broken check and
# prints a small input (shrunk first) in base64. Replay one with:
#   SWIFT_BACKTRACE=enable=no .build-fuzz/<target> .fuzz/crashes/<target>/crash-...
set -u

if [ $# -lt 2 ]; then
    echo "usage: $0 SECONDS TARGET..." >&2
    exit 64
fi
seconds=$1
shift
build=${FUZZ_BUILD:-.build-fuzz}
root=.fuzz
mkdir -p "$root/logs"

total=0
failed=""
report=""
details=""

# What a failure's reader needs where only the end of the output is kept (a CI log): the
# broken check, and the input shrunk by libFuzzer (for at most 20 s) and printed in base64 when
# it is small enough to paste, so the failure replays without the machine it happened on.
reproducer() {
    local target=$1 artifact=$2 log=$3
    local minimized=$artifact.minimized
    SWIFT_BACKTRACE=enable=no "$build/$target" -minimize_crash=1 -max_total_time=20 -timeout=10 -rss_limit_mb=2048 \
        -exact_artifact_path="$minimized" "$artifact" >"$log.minimize" 2>&1
    [ -s "$minimized" ] || minimized=$artifact
    echo "fuzz: $target failed: $(grep -m 1 -E 'Fatal error|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)' "$log" | cut -c1-600)"
    local size
    size=$(stat -c %s "$minimized")
    if [ "$size" -le 3072 ]; then
        echo "fuzz: $target input, $size bytes: base64 -d > crash <<< $(base64 -w 0 "$minimized")"
        echo "fuzz: then: SWIFT_BACKTRACE=enable=no $build/$target crash"
    else
        echo "fuzz: $target input: $minimized ($size bytes, too long to print)"
    fi
}
for target in "$@"; do
    corpus=$root/corpus/$target
    crashes=$root/crashes/$target
    log=$root/logs/$target.log
    mkdir -p "$corpus" "$crashes"
    # -timeout: an input taking 10 s is a hang. -rss_limit_mb: also the largest single
    # allocation libFuzzer lets through, so unbounded buffering fails instead of swapping.
    options=(-max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048
             -artifact_prefix="$crashes/")
    [ -f "Fuzz/$target.dict" ] && options+=(-dict="Fuzz/$target.dict")
    echo "fuzz: $target for ${seconds}s"
    # The Swift runtime's own crash handler would catch a trap before libFuzzer does and then
    # trip AddressSanitizer while it reads memory; libFuzzer must see the signal itself.
    SWIFT_BACKTRACE=enable=no "$build/$target" "${options[@]}" "$corpus" "$root/seeds/$target" >"$log" 2>&1
    status=$?
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    if [ -z "$executions" ]; then
        # No final statistics after a crash: the last progress line has the count so far.
        executions=$(grep -o '^#[0-9]*' "$log" | tail -n 1 | tr -d '#')
    fi
    executions=${executions:-0}
    total=$((total + executions))
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    corpus_size=$(find "$corpus" -type f | wc -l)
    if [ "$status" -eq 0 ]; then
        line=$(printf '%-16s %12d executions  %7s/s  corpus %d' "$target" "$executions" "${rate:-?}" "$corpus_size")
    else
        artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
        line=$(printf '%-16s %12d executions  FAILED (exit %d)' "$target" "$executions" "$status")
        failed="$failed $target"
        echo "fuzz: $target FAILED (exit $status); log: $log"
        grep -E 'Fatal error|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|SUMMARY:' "$log" | head -n 5 | sed 's/^/fuzz:   /'
        if [ -n "$artifact" ]; then
            echo "fuzz:   input: $artifact"
            echo "fuzz:   replay: SWIFT_BACKTRACE=enable=no $build/$target $artifact"
            details="$details$(reproducer "$target" "$artifact" "$log")"$'\n'
        fi
    fi
    report="$report$line"$'\n'
done

echo
echo "fuzz: executions per target (${seconds}s each)"
printf '%s' "$report"
printf '%-16s %12d executions\n' "total" "$total"
if [ -n "$failed" ]; then
    printf '%s' "$details"
    echo "fuzz: FAILED:$failed"
    exit 1
fi
