#!/usr/bin/env bash
# Starts the already built .build/debug/frametap on a free loopback port, runs smoke/run.sh
# against it, then stops it with SIGTERM and checks that it exited 0. Builds nothing.
#   smoke/with-server.sh [path/to/frametap]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:-$ROOT/.build/debug/frametap}
[ -x "$BINARY" ] || { echo "no executable at $BINARY (build it first)"; exit 2; }
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
LOG=$(mktemp)
export SMOKE_MAX_BODY_BYTES=4000000 SMOKE_MAX_NAL_BYTES=1000000
"$BINARY" serve --host 127.0.0.1 --port "$PORT" --max-body-bytes "$SMOKE_MAX_BODY_BYTES" \
    --max-nal-bytes "$SMOKE_MAX_NAL_BYTES" 2> "$LOG" &
SERVER=$!
for _ in $(seq 100); do
    curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz" 2> /dev/null && break
    kill -0 "$SERVER" 2> /dev/null || break
    sleep 0.1
done
if ! curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz"; then
    echo "the server did not come up:"; cat "$LOG"; kill "$SERVER" 2> /dev/null; exit 1
fi
"$ROOT/smoke/run.sh" "http://127.0.0.1:$PORT"
RESULT=$?
kill -TERM "$SERVER"
# The graceful stop takes at most the HTTP grace period (10 s); never wait forever.
for _ in $(seq 300); do kill -0 "$SERVER" 2> /dev/null || break; sleep 0.1; done
if kill -0 "$SERVER" 2> /dev/null; then
    echo "the server did not stop within 30 s of SIGTERM"; kill -KILL "$SERVER"
fi
wait "$SERVER"
EXIT=$?
if [ "$EXIT" != 0 ]; then
    echo "the server exited with $EXIT after SIGTERM (want 0); its log:"; cat "$LOG"; RESULT=1
else
    echo "server stopped cleanly on SIGTERM"
fi
rm -f "$LOG"
exit $RESULT
