#!/usr/bin/env bash
# `swift test` that cannot hang: runs it (arguments go to `swift test`, e.g. --filter X) with its
# output streamed line by line, and ends it when
#   - the tests run past FRAMETAP_TEST_DEADLINE seconds (default 1800; the build before them
#     is not counted, but it has FRAMETAP_TEST_BUILD_DEADLINE, default 3600),
#   - no test has started or finished for FRAMETAP_TEST_STALL seconds (default 600), or
#   - a test that passed its Swift Testing time limit is still running FRAMETAP_TEST_GRACE
#     seconds later (default 60): the limit cancels a test's task, which a test blocked on a
#     thread never sees.
# Then it prints the tests that started and did not finish, the processes of the run and a
# backtrace of every thread of each test process (gdb), kills them and exits 124.
# FRAMETAP_TEST_HANG=1 enables a test that blocks forever (TestSupportTests), to see all this.
set -uo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
deadline=${FRAMETAP_TEST_DEADLINE:-1800}
build_deadline=${FRAMETAP_TEST_BUILD_DEADLINE:-3600}
stall=${FRAMETAP_TEST_STALL:-600}
grace=${FRAMETAP_TEST_GRACE:-60}

say() { printf 'swift-test.sh: %s\n' "$*"; }

scripts/check-test-waits.sh || exit 1

fifo=$(mktemp -u /tmp/swift-test.XXXXXX)
mkfifo "$fifo"
# Its own session, so that everything it starts can be found and ended. Line-buffered: a test
# process writing into a pipe would otherwise hold its output back until it ends.
setsid stdbuf -oL -eL "$SWIFT" test "$@" > "$fifo" 2>&1 &
runner=$!
exec 3< "$fifo"
rm -f "$fifo"

# Every process of the run: the runner and its descendants (Foundation starts its children in
# process groups of their own, so the runner's group is not enough).
processes() {
    local -a queue=("$runner") found=()
    local pid child
    while [ ${#queue[@]} -gt 0 ]; do
        pid=${queue[0]}
        queue=("${queue[@]:1}")
        kill -0 "$pid" 2> /dev/null || continue
        found+=("$pid")
        for child in $(ps -o pid= --ppid "$pid" 2> /dev/null); do queue+=("$child"); done
    done
    echo "${found[@]}"
}

end_run() {
    local pids
    pids=$(processes)
    [ -n "$pids" ] && kill -TERM $pids 2> /dev/null
    sleep 2
    pids=$(processes)
    [ -n "$pids" ] && kill -KILL $pids 2> /dev/null
    wait "$runner" 2> /dev/null
}
trap 'say "interrupted"; end_run; exit 130' INT TERM

declare -A running=() suites=() started_at=() last_case=()
started=$SECONDS
testing_since=
last_progress=$SECONDS
over_limit_at=
over_limit_test=

backtraces() {
    local pid=$1
    if command -v gdb > /dev/null; then
        # `swift demangle` turns the Swift frames into names people read.
        timeout 300 gdb -p "$pid" -batch -nx -iex 'set complaints 0' -ex 'set print frame-arguments none' \
            -ex 'thread apply all bt' 2>&1 |
            grep -v -e '^\[New LWP' -e '^During symbol reading' -e '^warning: Section .debug_names' |
            { "$SWIFT" demangle --simplified 2> /dev/null || cat; }
    else
        say "no gdb (make test-deps installs it): each thread's name and where the kernel holds it"
        for task in /proc/"$pid"/task/*; do
            echo "  $(cat "$task/comm" 2> /dev/null) in $(cat "$task/wchan" 2> /dev/null)"
        done
    fi
}

report_and_end() {
    say "$1"
    say "tests started and not finished:"
    local name any=
    for name in "${!running[@]}"; do
        if [ "${running[$name]}" -gt 0 ]; then
            any=1
            echo "  $name (started $((SECONDS - ${started_at[$name]})) s ago)${last_case[$name]:+, last case: ${last_case[$name]}}"
        fi
    done
    [ -n "$any" ] || echo "  none"
    say "suites started and not finished:"
    any=
    for name in "${!suites[@]}"; do
        [ "${suites[$name]}" -gt 0 ] && { any=1; echo "  $name"; }
    done
    [ -n "$any" ] || echo "  none"
    local pids pid
    pids=$(processes)
    say "processes of the run:"
    [ -n "$pids" ] && ps -o pid,ppid,etime,stat,wchan:24,args -p "${pids// /,}" | cut -c1-200
    for pid in $pids; do
        case $(cat /proc/"$pid"/cmdline 2> /dev/null | tr '\0' ' ') in
            *PackageTests*)
                say "threads of test process $pid:"
                backtraces "$pid"
                ;;
        esac
    done
    say "ending the run"
    end_run
    exit 124
}

# Swift Testing's lines: "◇ Test name() started.", "✔ Test name() passed after 1.2 seconds.",
# "✘ Test name() failed after ...", the same for suites; a parameterized test has a "◇ Test case
# passing 1 argument x → 3 to name(x:) started." for each case (with no end of its own) and ends
# "with 9 test cases passed after ...". Test names are not unique (two suites may have a test of
# the same name), so they are counted.
follow() {
    local text=$1 kind name
    if [ -z "$testing_since" ] && [[ $text == "Test Suite '"* || $text == *"Test run started."* ]]; then
        testing_since=$SECONDS
        last_progress=$SECONDS
    fi
    if [[ $text =~ ^[^[:space:]]*[[:space:]]?(Test\ case\ passing|Passing)\ (.+)\ to\ (.+)\ started\.$ ]]; then
        last_case[${BASH_REMATCH[3]}]=${BASH_REMATCH[2]}
        last_progress=$SECONDS
    elif [[ $text =~ ^[^[:space:]]*[[:space:]]?(Test|Suite)\ (.+)\ started\.$ ]]; then
        kind=${BASH_REMATCH[1]} name=${BASH_REMATCH[2]}
        [ "$name" = run ] && return
        last_progress=$SECONDS
        if [ "$kind" = Test ]; then
            running[$name]=$((${running[$name]:-0} + 1))
            started_at[$name]=$SECONDS
        else
            suites[$name]=$((${suites[$name]:-0} + 1))
        fi
    elif [[ $text =~ ^[^[:space:]]*[[:space:]]?(Test|Suite)\ (.+)\ (passed|failed)\ after\ [0-9.]+\ seconds ]]; then
        kind=${BASH_REMATCH[1]} name=${BASH_REMATCH[2]}
        [[ $name == "run with "* ]] && return
        # A parameterized test ends as "Test name(x:) with 9 test cases passed after ...".
        [[ $name =~ ^(.+)\ with\ [0-9]+\ test\ cases?$ ]] && name=${BASH_REMATCH[1]}
        last_progress=$SECONDS
        if [ "$kind" = Test ]; then
            running[$name]=$((${running[$name]:-1} - 1))
            if [ "$name" = "$over_limit_test" ] && [ "${running[$name]}" -le 0 ]; then over_limit_at=; fi
        else
            suites[$name]=$((${suites[$name]:-1} - 1))
        fi
    elif [[ $text == *"Time limit was exceeded"* && $text =~ (Test|Suite)\ (.+)\ recorded\ an?\ issue ]]; then
        over_limit_test=${BASH_REMATCH[2]}
        over_limit_at=$SECONDS
    fi
}

check_limits() {
    local now=$SECONDS
    if [ -z "$testing_since" ]; then
        if [ $((now - started)) -ge "$build_deadline" ]; then
            report_and_end "the build ran past its deadline of $build_deadline s"
        fi
        return
    fi
    if [ $((now - testing_since)) -ge "$deadline" ]; then
        report_and_end "the tests ran past their deadline of $deadline s"
    elif [ $((now - last_progress)) -ge "$stall" ]; then
        report_and_end "no test started or finished for $stall s"
    elif [ -n "$over_limit_at" ] && [ $((now - over_limit_at)) -ge "$grace" ]; then
        report_and_end "$over_limit_test passed its time limit and was still running $grace s later"
    fi
}

pending=
while true; do
    if IFS= read -r -t 5 -u 3 part; then
        printf '%s\n' "$pending$part"
        follow "$pending$part"
        pending=
    elif [ $? -gt 128 ]; then
        # No line for 5 s; what came of one waits for its end.
        pending+=$part
    else
        [ -n "$pending$part" ] && printf '%s\n' "$pending$part"
        break
    fi
    check_limits
done

wait "$runner"
exit $?
