#!/usr/bin/env bash
# Cameras that stay: declared sessions from a configuration file, its reloads (SIGHUP, a change
# on disk, a ConfigMap's swap, a broken file), --state-dir across a restart and kill -9, against
# GStreamer's RTSP server with a user and password (smoke/cameras.py); then --state-dir under
# kill -9 at random moments while clients stream PUTs and DELETEs (smoke/state-kill.py).
#
#   smoke/cameras.sh FRAMETAP_BIN
#
# Needs python3-gi with GstRtspServer and x264enc (make test-deps). About 45 s on 2 cores. The
# servers' logs go to .test-output/cameras/ (CAMERAS_OUTPUT to change). The last line of each
# script is "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:?usage: smoke/cameras.sh FRAMETAP_BIN}
OUTPUT=${CAMERAS_OUTPUT:-$ROOT/.test-output/cameras}
SYSTEM_PYTHON=/usr/bin/python3  # the gi bindings are Debian's, not a venv's

missing=()
"$SYSTEM_PYTHON" -c 'import gi; gi.require_version("GstRtspServer", "1.0"); from gi.repository import GstRtspServer' 2> /dev/null ||
    missing+=("python3-gi with GstRtspServer")
[ -x "$BINARY" ] || missing+=("the server at $BINARY (build it first)")
if [ "${#missing[@]}" -gt 0 ]; then
    echo "FAIL missing: ${missing[*]} (make test-deps)"
    echo "0 passed, 1 failed"
    exit 1
fi
status=0
timeout -k 10 "${CAMERAS_TIMEOUT:-180}" "$SYSTEM_PYTHON" "$ROOT/smoke/cameras.py" --binary "$BINARY" --output "$OUTPUT" || status=1
timeout -k 10 "${STATE_KILL_TIMEOUT:-120}" "$SYSTEM_PYTHON" "$ROOT/smoke/state-kill.py" --binary "$BINARY" --output "$OUTPUT" || status=1
exit $status
