#!/usr/bin/env bash
# Hostile clients (smoke/hostile.py) against a live server: starts the already built frametap on a
# free loopback port with the smoke suite's limits, runs the seeded mutated pushes and the hostile
# heads and connections, then stops it with SIGTERM while a multipart answer is left unread, and
# checks that it exited 0 without waiting out its 10 s grace period. Builds nothing.
#   smoke/hostile.sh [path/to/frametap]       HOSTILE_SEED=N reproduces a run
# A failure keeps the offending bodies and the server's log in .test-output/hostile/.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:-$ROOT/.build/debug/frametap}
OUT=${HOSTILE_OUT:-$ROOT/.test-output/hostile}
[ -x "$BINARY" ] || { echo "no executable at $BINARY (build it first)"; exit 2; }
source "$ROOT/smoke/server.sh"
# Connection limits scaled down so that slow clients from a few addresses can outnumber the slots
# in seconds; short header and body deadlines so that the checks of them take seconds.
server_start "$BINARY" --max-body-bytes 4000000 --max-nal-bytes 1000000 --threads 2 \
    --max-connections 64 --max-connections-per-ip 16 --header-timeout 3 --body-timeout 2 || exit 1
python3 "$ROOT/smoke/hostile.py" --base "$BASE" --pid "$SERVER_PID" --out "$OUT" --log "$SERVER_LOG"
RESULT=$?
if [ "$RESULT" != 0 ]; then
    mkdir -p "$OUT"
    cp "$SERVER_LOG" "$OUT/server.log"
    echo "the server's log: $OUT/server.log (last lines below)"
    tail -20 "$SERVER_LOG"
fi
# A multipart answer nobody reads: its end can never go out, and the stop must not wait for it.
HOLD_OUT=$(mktemp)
python3 "$ROOT/smoke/hostile.py" --base "$BASE" --hold-unread-answer > "$HOLD_OUT" 2>&1 &
HOLDER=$!
for _ in $(seq 100); do grep -q holding "$HOLD_OUT" && break; sleep 0.1; done
STOP_STARTED=$(date +%s.%N)
if server_stop; then
    STOP_SECONDS=$(echo "$(date +%s.%N) - $STOP_STARTED" | bc)
    # The grace period is 10 s; a stop that took nearly all of it waited for something that could
    # not end (a request that outlived its connection, an answer nobody reads).
    if [ "$(echo "$STOP_SECONDS >= 9" | bc)" = 1 ]; then
        echo "FAIL the stop took $STOP_SECONDS s: it waited out the grace period"
        RESULT=1
    else
        echo "server stopped cleanly on SIGTERM in $STOP_SECONDS s, a multipart answer left unread"
    fi
else
    RESULT=1
fi
kill "$HOLDER" 2> /dev/null
wait "$HOLDER" 2> /dev/null
rm -f "$HOLD_OUT"
exit $RESULT
