#!/usr/bin/env bash
# A camera back after an outage shows pictures again within 5 s of its return (p95), with the
# server's default retry settings: smoke/outage.py kills GStreamer RTSP servers for 20 s and
# starts them again, twice, timing each return to the first new picture.
#
#   smoke/outage.sh FRAMETAP_BIN
#
# Needs Debian's python3 with python3-gi and gir1.2-gst-rtsp-server-1.0, and
# gstreamer1.0-plugins-ugly (`make test-deps`). About a minute. The last line is
# "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:?usage: smoke/outage.sh FRAMETAP_BIN}
/usr/bin/python3 -c 'import gi; gi.require_version("GstRtspServer", "1.0")' 2> /dev/null || {
    echo "FAIL python3-gi with GstRtspServer is not installed (make test-deps)"
    echo "0 passed, 1 failed"
    exit 1
}
exec timeout -k 10 "${OUTAGE_TIMEOUT:-300}" /usr/bin/python3 "$ROOT/smoke/outage.py" --binary "$BINARY" "${@:2}"
