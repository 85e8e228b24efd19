#!/usr/bin/env bash
# The browser's camera as a source (smoke/camera.py): MediaRecorder WebM pushed and checked
# picture-exact, and the console's "Share a camera" (WebCodecs, then MediaRecorder; then with
# --auth-token) in headless Chromium with its fake camera, through Selenium.
#
#   smoke/camera.sh FRAMETAP_BIN
#
# Needs ffmpeg, chromium and chromedriver (Debian's chromium, chromium-driver) and .venv with
# selenium (`make test-deps`). About 45 s on 2 cores. Screenshots and the servers' logs go to
# .test-output/camera/ (CAMERA_OUTPUT to change). The last line is "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:?usage: smoke/camera.sh FRAMETAP_BIN}
VENV=${CAMERA_VENV:-$ROOT/.venv}
OUTPUT=${CAMERA_OUTPUT:-$ROOT/.test-output/camera}

missing=()
for tool in ffmpeg chromium chromedriver; do
    command -v "$tool" > /dev/null || missing+=("$tool")
done
"$VENV/bin/python" -c 'import selenium' 2> /dev/null || missing+=("selenium in $VENV")
[ -x "$BINARY" ] || missing+=("the server at $BINARY (build it first)")
if [ "${#missing[@]}" -gt 0 ]; then
    echo "FAIL missing: ${missing[*]} (make test-deps)"
    echo "0 passed, 1 failed"
    exit 1
fi
exec timeout -k 10 "${CAMERA_TIMEOUT:-300}" "$VENV/bin/python" "$ROOT/smoke/camera.py" --binary "$BINARY" --output "$OUTPUT"
