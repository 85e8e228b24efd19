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
# and the full log in .fuzz/logs/<target>.log. Replay one with:
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
        fi
    fi
    report="$report$line"$'\n'
done

echo
echo "fuzz: executions per target (${seconds}s each)"
printf '%s' "$report"
printf '%-16s %12d executions\n' "total" "$total"
if [ -n "$failed" ]; then
    echo "fuzz: FAILED:$failed"
    exit 1
fi
