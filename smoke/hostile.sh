#!/usr/bin/env bash
# Hostile clients (smoke/hostile.py) against a live server: starts the already built frametap on a
# free loopback port with the smoke suite's limits, runs the seeded mutated pushes, then stops it
# with SIGTERM and checks that it exited 0. Builds nothing.
#   smoke/hostile.sh [path/to/frametap]       HOSTILE_SEED=N reproduces a run
# A failure keeps the offending bodies and the server's log in .test-output/hostile/.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:-$ROOT/.build/debug/frametap}
OUT=${HOSTILE_OUT:-$ROOT/.test-output/hostile}
[ -x "$BINARY" ] || { echo "no executable at $BINARY (build it first)"; exit 2; }
source "$ROOT/smoke/server.sh"
server_start "$BINARY" --max-body-bytes 4000000 --max-nal-bytes 1000000 || exit 1
python3 "$ROOT/smoke/hostile.py" --base "$BASE" --pid "$SERVER_PID" --out "$OUT"
RESULT=$?
if [ "$RESULT" != 0 ]; then
    mkdir -p "$OUT"
    cp "$SERVER_LOG" "$OUT/server.log"
    echo "the server's log: $OUT/server.log (last lines below)"
    tail -20 "$SERVER_LOG"
fi
if server_stop; then
    echo "server stopped cleanly on SIGTERM"
else
    RESULT=1
fi
exit $RESULT
