#!/usr/bin/env bash
# README.md's shell examples, run as a reader runs them (smoke/readme.py says how): every block
# marked ```sh runnable, against servers the examples start themselves, with local stand-ins for
# the cameras they name.
#
#   smoke/readme.sh FRAMETAP_BIN
#
# Needs ffmpeg (libx264, libx265, libsrt), curl, jq, openssl, Debian's python3 with python3-gi,
# gir1.2-gst-rtsp-server-1.0 and python3-jwt, gstreamer1.0-plugins-ugly, nginx with
# libnginx-mod-rtmp (`make test-deps`). About a minute and a half on 2 cores. Scripts and logs
# go to .test-output/readme/. The last line is "N passed, N failed, N skipped".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:?usage: smoke/readme.sh FRAMETAP_BIN}
PYTHON=/usr/bin/python3  # Debian's: the examples' python3 is, and the RTSP stand-in needs its gi bindings

missing=()
for tool in ffmpeg curl jq openssl nginx; do
    command -v "$tool" > /dev/null || missing+=("$tool")
done
"$PYTHON" -c 'import jwt' 2> /dev/null || missing+=("python3-jwt")
"$PYTHON" -c 'import gi; gi.require_version("GstRtspServer", "1.0")' 2> /dev/null || missing+=("python3-gi with GstRtspServer")
[ -f /usr/lib/nginx/modules/ngx_rtmp_module.so ] || missing+=("libnginx-mod-rtmp")
[ -x "$BINARY" ] || missing+=("the server at $BINARY (build it first)")
if [ "${#missing[@]}" -gt 0 ]; then
    echo "FAIL missing: ${missing[*]} (make test-deps)"
    echo "0 passed, 1 failed"
    exit 1
fi
# Bounded as a whole too: each example is bounded by the runner.
exec timeout -k 10 "${README_TIMEOUT:-900}" "$PYTHON" "$ROOT/smoke/readme.py" --binary "$BINARY"
