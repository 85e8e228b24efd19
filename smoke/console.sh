#!/usr/bin/env bash
# The web console in headless Chromium (Selenium + chromedriver): smoke/console.py runs the page
# against a server without a token and one with --auth-token, starting and stopping each itself
# (free loopback port, /healthz, SIGTERM with exit 0, as smoke/server.sh does).
#
#   smoke/console.sh FRAMETAP_BIN
#
# Needs ffmpeg, curl, chromium and chromedriver (Debian's chromium, chromium-driver) and .venv
# with selenium (`make test-deps`). Screenshots and the browser console log go to
# .test-output/console/ (CONSOLE_OUTPUT to change). The last line is "N passed, N failed, N skipped".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:?usage: smoke/console.sh FRAMETAP_BIN}
VENV=${CONSOLE_VENV:-$ROOT/.venv}
OUTPUT=${CONSOLE_OUTPUT:-$ROOT/.test-output/console}

missing=()
for tool in ffmpeg curl chromium chromedriver; do
    command -v "$tool" > /dev/null || missing+=("$tool")
done
"$VENV/bin/python" -c 'import selenium' 2> /dev/null || missing+=("selenium in $VENV")
[ -x "$BINARY" ] || missing+=("the server at $BINARY (build it first)")
if [ "${#missing[@]}" -gt 0 ]; then
    echo "FAIL missing: ${missing[*]} (make test-deps)"
    echo "0 passed, 1 failed"
    exit 1
fi
# The whole run is bounded: a wedged browser must not hold CI until its own limit.
exec timeout -k 10 "${CONSOLE_TIMEOUT:-600}" "$VENV/bin/python" "$ROOT/smoke/console.py" \
    --binary "$BINARY" --output "$OUTPUT" --fixtures "$ROOT/Tests/Fixtures"
