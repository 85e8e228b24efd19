#!/usr/bin/env bash
# Starts the already built .build/debug/frametap on a free loopback port, runs smoke/run.sh
# against it, then stops it with SIGTERM and checks that it exited 0. Builds nothing.
#   smoke/with-server.sh [path/to/frametap]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:-$ROOT/.build/debug/frametap}
[ -x "$BINARY" ] || { echo "no executable at $BINARY (build it first)"; exit 2; }
source "$ROOT/smoke/server.sh"
export SMOKE_MAX_BODY_BYTES=4000000 SMOKE_MAX_NAL_BYTES=1000000
server_start "$BINARY" --max-body-bytes "$SMOKE_MAX_BODY_BYTES" --max-nal-bytes "$SMOKE_MAX_NAL_BYTES" || exit 1
"$ROOT/smoke/run.sh" "$BASE"
RESULT=$?
if server_stop; then
    echo "server stopped cleanly on SIGTERM"
else
    RESULT=1
fi
exit $RESULT
