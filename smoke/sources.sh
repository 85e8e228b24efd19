#!/usr/bin/env bash
# Containers and pulled sources against real servers and clients, all started here on loopback:
#   a. ffmpeg pushes MPEG-TS and fragmented MP4 live (-re, chunked POST, Content-Type named);
#   b. MPEG-TS, fragmented MP4 and a plain MP4 (moov at the end) pushed whole: every picture
#      equals the ffmpeg CLI's decode of the same file (multipart yuv answers);
#   c. RTSP from GStreamer's RTSP server (H.264 over TCP, H.265 over UDP); the H.264 server is
#      killed mid-stream and restarted, the pull reconnects (state, lastError, reconnects,
#      events source.lost and source.connected);
#   d. RTMP from nginx with libnginx-mod-rtmp, fed by an ffmpeg push of a file;
#   e. SRT from an ffmpeg listener sending a file;
#   f. HTTP from a plain file server;
#      for d-f (file sources) the last picture equals the file's last picture;
#   g. bad sources: refused, never answering, outside --allow-sources; a 4 GB mdat streamed for
#      200 MB is refused with the server's peak memory bounded; another session is untouched.
# Then SIGTERM (exit 0 wanted).
#
#   smoke/sources.sh FRAMETAP_BIN
#
# Needs ffmpeg (libx264, libsrt), curl, jq, Debian's python3 with python3-gi and
# gir1.2-gst-rtsp-server-1.0, gstreamer1.0-plugins-ugly and -bad (x264enc, x265enc), nginx with
# libnginx-mod-rtmp (`make test-deps`). About a minute on 2 cores. Prints one PASS/FAIL line per
# check and "N passed, N failed" last; exits non-zero when anything failed.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:?usage: smoke/sources.sh FRAMETAP_BIN}
TMP=$(mktemp -d)
export TMP
source "$ROOT/smoke/lib.sh"
source "$ROOT/smoke/server.sh"
SYSTEM_PYTHON=/usr/bin/python3  # the gi bindings are Debian's, not a venv's

BACKGROUND=()
cleanup() {
    for pid in "${BACKGROUND[@]}"; do kill "$pid" 2> /dev/null; done
    [ -f "$TMP/nginx/nginx.pid" ] && kill "$(cat "$TMP/nginx/nginx.pid" 2> /dev/null)" 2> /dev/null
    if [ -n "${SERVER_PID:-}" ]; then kill -KILL "$SERVER_PID" 2> /dev/null; rm -f "$SERVER_LOG"; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
finish() {
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" = 0 ]
    exit
}

for tool in ffmpeg curl jq nginx; do
    command -v "$tool" > /dev/null || fail "tool $tool is not installed (make test-deps)"
done
"$SYSTEM_PYTHON" -c 'import gi; gi.require_version("GstRtspServer", "1.0"); from gi.repository import GstRtspServer' 2> /dev/null ||
    fail "python3-gi with GstRtspServer is not installed (make test-deps)"
[ -f /usr/lib/nginx/modules/ngx_rtmp_module.so ] || fail "libnginx-mod-rtmp is not installed (make test-deps)"
ffmpeg -hide_banner -protocols 2> /dev/null | grep -qw srt || fail "this ffmpeg has no SRT protocol"
[ "$FAILED" = 0 ] || finish

free_port() { python3 "$ROOT/tools/harness/ports.py"; }
# wait_for SECONDS COMMAND...: runs COMMAND every 0.2 s until it succeeds; returns its last status.
wait_for() {
    local deadline=$(($(date +%s) + $1))
    shift
    while true; do
        "$@" && return 0
        [ "$(date +%s)" -ge "$deadline" ] && return 1
        sleep 0.2
    done
}
status() { curl -sS -m 5 "$BASE/sessions/$1"; }
field() { status "$1" | jq -r "$2"; }
frames_at_least() { [ "$(field "$1" .counters.framesDecoded)" -ge "$2" ] 2> /dev/null; }
state_is() { [ "$(field "$1" .source.state)" = "$2" ]; }
pull() { curl -sS -m 10 -o "$TMP/pull.json" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' -d "$2" "$BASE/sessions/$1"; }
latest_md5() { curl -sS -m 10 "$BASE/sessions/$1/frame/latest.yuv" | md5sum | cut -d' ' -f1; }

# A 4 s clip: 320x240, 25 fps, a keyframe every second, no B-frames (live-like).
FRAMES=100
ffmpeg -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=320x240:rate=25 -t 4 -c:v libx264 \
    -preset ultrafast -tune zerolatency -g 25 -pix_fmt yuv420p -f h264 -y "$TMP/clip.264"
ff=(ffmpeg -nostdin -hide_banner -loglevel error -y -i "$TMP/clip.264" -c copy)
"${ff[@]}" "$TMP/clip.mp4"  # the muxer's default: moov after mdat
"${ff[@]}" -f mpegts "$TMP/clip.ts"
"${ff[@]}" -movflags frag_every_frame+empty_moov+default_base_moof "$TMP/clip_fragmented.mp4"
reference() { ffmpeg -nostdin -hide_banner -loglevel error -flags unaligned -i "$1" -autoscale 0 -fps_mode passthrough -f rawvideo -; }
REFERENCE_MD5=$(reference "$TMP/clip.264" | md5sum | cut -d' ' -f1)
PICTURE_BYTES=$((320 * 240 * 3 / 2))
LAST_MD5=$(reference "$TMP/clip.264" | tail -c $PICTURE_BYTES | md5sum | cut -d' ' -f1)
# picture_index MD5: which picture of the clip has this MD5 (-1: none).
reference "$TMP/clip.264" | python3 -c "
import hashlib, sys
data, size = sys.stdin.buffer.read(), $PICTURE_BYTES
for i in range(len(data) // size): print(hashlib.md5(data[i * size:(i + 1) * size]).hexdigest())" > "$TMP/picture-md5s"
picture_index() { awk -v m="$1" '$1 == m { print NR - 1; found = 1 } END { if (!found) print -1 }' "$TMP/picture-md5s"; }
expect "clip: ffmpeg made a 4 s clip and its TS, MP4 and fragmented MP4" \
    "$([ -s "$TMP/clip.ts" ] && [ -s "$TMP/clip.mp4" ] && [ -s "$TMP/clip_fragmented.mp4" ]; echo $?)"

server_start "$BINARY" --allow-sources 'rtsp://127.0.0.1,rtmp://127.0.0.1,srt://127.0.0.1,http://127.0.0.1' \
    --source-connect-timeout 3 --source-read-timeout 3 --source-retry-max 2 --container-seek-window 8388608 ||
    { fail "server start"; finish; }
echo "server on $BASE"
curl -sS -N -m 120 "$BASE/events" > "$TMP/events.txt" 2> /dev/null &
BACKGROUND+=($!)

# --- a. live pushes by ffmpeg ----------------------------------------------------------------
echo "== a. ffmpeg pushes MPEG-TS and fragmented MP4 live"
push_live() {  # push_live SESSION FORMAT CONTENT_TYPE [muxer options]
    local session=$1 format=$2 type=$3
    shift 3
    timeout -k 5 30 ffmpeg -nostdin -hide_banner -loglevel error -re -i "$TMP/clip.264" -c copy -f "$format" "$@" \
        -content_type "$type" -method POST -chunked_post 1 "$BASE/sessions/$session/nalus" > "$TMP/$session.log" 2>&1
}
push_live live-ts mpegts video/mp2t &
TS_PUSH=$!
push_live live-fmp4 mp4 video/mp4 -movflags frag_every_frame+empty_moov+default_base_moof &
FMP4_PUSH=$!
wait "$TS_PUSH"
expect "a: ffmpeg -f mpegts -content_type video/mp2t pushed" "$?" "$(tail -c 300 "$TMP/live-ts.log")"
wait "$FMP4_PUSH"
expect "a: ffmpeg -f mp4 (fragmented) -content_type video/mp4 pushed" "$?" "$(tail -c 300 "$TMP/live-fmp4.log")"
for session in live-ts live-fmp4; do
    curl -sS -m 10 -X POST --data-binary '' "$BASE/sessions/$session/nalus?flush=true" > /dev/null
    check "a: $session: every picture decoded, no error" \
        "$(status "$session" | jq -c '[.counters.framesDecoded, .counters.decodeErrors]')" "[$FRAMES,0]"
    check "a: $session: the last picture is the clip's last" "$(latest_md5 "$session")" "$LAST_MD5"
done

# --- b. whole files, every picture against the ffmpeg CLI ------------------------------------
echo "== b. files pushed whole, multipart yuv answers"
for file in clip.ts:video/mp2t clip_fragmented.mp4:video/iso.segment clip.mp4:video/mp4 clip.mp4:; do
    name=${file%%:*} type=${file#*:}
    curl -sS -m 30 -D "$TMP/file-headers" -o "$TMP/file-answer" -H 'Accept: multipart/mixed' \
        ${type:+-H "Content-Type: $type"} --data-binary @"$TMP/$name" "$BASE/sessions/file-${name//./-}/nalus?flush=true&format=yuv"
    check "b: $name (${type:-sniffed}): pictures equal the ffmpeg CLI's decode of the file" \
        "$(multipart "$TMP/file-answer" "$TMP/file-headers")" "$FRAMES $(reference "$TMP/$name" | md5sum | cut -d' ' -f1) closed"
done
check "b: the clip's own decode agrees" "$(reference "$TMP/clip.mp4" | md5sum | cut -d' ' -f1)" "$REFERENCE_MD5"

# --- c. RTSP from GStreamer's RTSP server ------------------------------------------------------
echo "== c. RTSP (GStreamer RTSP server)"
RTSP_PORT=$(free_port)
rtsp_server() {  # rtsp_server PORT CODEC
    "$SYSTEM_PYTHON" "$ROOT/smoke/rtsp-server.py" --port "$1" --codec "$2" > "$TMP/rtsp-$1.log" 2>&1 &
    RTSP_PID=$!
    BACKGROUND+=("$RTSP_PID")
    wait_for 10 grep -q ready "$TMP/rtsp-$1.log"
}
rtsp_server "$RTSP_PORT" h264
expect "c: the H.264 RTSP server is up" "$?" "$(tail -c 300 "$TMP/rtsp-$RTSP_PORT.log")"
check "c: PUT with an rtsp:// source (user and password in the URL) is 201" \
    "$(pull rtsp "{\"source\": {\"url\": \"rtsp://viewer:s3cret-pw@127.0.0.1:$RTSP_PORT/cam\", \"transport\": \"tcp\"}}")" "201"
expect "c: the pull goes live and decodes" "$(wait_for 20 frames_at_least rtsp 25; echo $?)" "$(status rtsp | head -c 400)"
check "c: the URL shown has no credentials" "$(field rtsp .source.url)" "rtsp://***@127.0.0.1:$RTSP_PORT/cam"
kill "$RTSP_PID"
wait "$RTSP_PID" 2> /dev/null
expect "c: the server killed mid-stream: the source is retrying" "$(wait_for 15 state_is rtsp retrying; echo $?)" \
    "$(status rtsp | jq -c .source)"
before=$(field rtsp .counters.framesDecoded)
rtsp_server "$RTSP_PORT" h264
expect "c: restarted, the pull reconnects and decodes again" \
    "$(wait_for 20 frames_at_least rtsp $((before + 25)); echo $?)" "$(status rtsp | jq -c .source)"
check "c: state live, with reconnects counted and the loss's error kept" \
    "$(status rtsp | jq -c '[.source.state, (.source.reconnects >= 1), (.source.lastError.code != null)]')" '["live",true,true]'
RTSP265_PORT=$(free_port)
rtsp_server "$RTSP265_PORT" h265
check "c: an H.265 RTSP source over UDP is 201" \
    "$(pull rtsp265 "{\"source\": {\"url\": \"rtsp://127.0.0.1:$RTSP265_PORT/cam\", \"transport\": \"udp\"}}")" "201"
expect "c: H.265 over UDP decodes" "$(wait_for 20 frames_at_least rtsp265 25; echo $?)" "$(status rtsp265 | jq -c .source)"
check "c: the session's codec is H.265" "$(field rtsp265 .codec)" "h265"

# --- d. RTMP from nginx ------------------------------------------------------------------------
echo "== d. RTMP (nginx + libnginx-mod-rtmp, fed by ffmpeg)"
RTMP_PORT=$(free_port)
mkdir -p "$TMP/nginx"
cat > "$TMP/nginx/nginx.conf" << EOF
load_module /usr/lib/nginx/modules/ngx_rtmp_module.so;
daemon off;
master_process off;
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log info;
events { worker_connections 64; }
rtmp { server { listen 127.0.0.1:$RTMP_PORT; application live { live on; record off; } } }
EOF
nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" -e "$TMP/nginx/error.log" > "$TMP/nginx/out.log" 2>&1 &
BACKGROUND+=($!)
# The pull comes first and retries until the publisher is there.
check "d: PUT with an rtmp:// source is 201" "$(pull rtmp "{\"source\": {\"url\": \"rtmp://127.0.0.1:$RTMP_PORT/live/cam\"}}")" "201"
timeout -k 5 40 ffmpeg -nostdin -hide_banner -loglevel error -re -stream_loop 1 -i "$TMP/clip.mp4" -c copy -f flv \
    "rtmp://127.0.0.1:$RTMP_PORT/live/cam" > "$TMP/rtmp-push.log" 2>&1 &
RTMP_PUSH=$!
BACKGROUND+=("$RTMP_PUSH")
expect "d: the RTMP pull decodes" "$(wait_for 20 frames_at_least rtmp 25; echo $?)" "$(status rtmp | jq -c .source)"
wait "$RTMP_PUSH"
expect "d: the ffmpeg RTMP push ended" "$?" "$(tail -c 300 "$TMP/rtmp-push.log")"
expect "d: its end is the source's loss" "$(wait_for 10 state_is rtmp retrying; echo $?)"
check "d: the last picture is the file's last" "$(latest_md5 rtmp)" "$LAST_MD5"

# --- e. SRT from an ffmpeg listener ----------------------------------------------------------------
echo "== e. SRT (ffmpeg listener)"
SRT_PORT=$(free_port)
timeout -k 5 40 ffmpeg -nostdin -hide_banner -loglevel error -re -i "$TMP/clip.mp4" -c copy -f mpegts \
    "srt://127.0.0.1:$SRT_PORT?mode=listener" > "$TMP/srt.log" 2>&1 &
SRT_SENDER=$!
BACKGROUND+=("$SRT_SENDER")
sleep 0.5
check "e: PUT with an srt:// source is 201" "$(pull srt "{\"source\": {\"url\": \"srt://127.0.0.1:$SRT_PORT\"}}")" "201"
expect "e: the SRT pull decodes" "$(wait_for 20 frames_at_least srt 25; echo $?)" "$(status srt | jq -c .source)"
wait "$SRT_SENDER"
expect "e: the listener sent the whole file" "$?" "$(tail -c 300 "$TMP/srt.log")"
expect "e: its end is the source's loss" "$(wait_for 10 state_is srt retrying; echo $?)"
# The listener's close reaches the caller as an error, not an end of stream: what was still in
# flight is gone, and the MPEG-TS demuxer never completes the last PES packet (it ends where the
# next one starts). So the newest picture must be exactly one of the file's last few.
index=$(picture_index "$(latest_md5 srt)")
expect "e: the last picture is exactly the file's picture $index (of 0...$((FRAMES - 1)))" \
    "$([ "$index" -ge $((FRAMES - 6)) ]; echo $?)"
curl -sS -m 5 -o /dev/null -X DELETE "$BASE/sessions/srt"

# --- f. HTTP from a file server --------------------------------------------------------------------
echo "== f. HTTP (a file server)"
HTTP_PORT=$(free_port)
(cd "$TMP" && exec python3 -m http.server "$HTTP_PORT" --bind 127.0.0.1 > "$TMP/http.log" 2>&1) &
BACKGROUND+=($!)
wait_for 10 curl -fs -m 1 -o /dev/null "http://127.0.0.1:$HTTP_PORT/clip.ts"
check "f: PUT with an http:// source is 201" "$(pull http "{\"source\": {\"url\": \"http://127.0.0.1:$HTTP_PORT/clip.ts\"}}")" "201"
expect "f: the file is pulled, and pulled again once it ended" \
    "$(wait_for 20 frames_at_least http $((2 * FRAMES)); echo $?)" "$(status http | jq -c .source)"
check "f: the last picture is the file's last" "$(latest_md5 http)" "$LAST_MD5"
curl -sS -m 5 -o /dev/null -X DELETE "$BASE/sessions/http"

# --- g. bad sources and hostile containers -----------------------------------------------------------
echo "== g. bad sources"
CLOSED_PORT=$(free_port)
check "g: a refused connection is 201, then retrying with source_unreachable" \
    "$(pull refused "{\"source\": {\"url\": \"rtsp://127.0.0.1:$CLOSED_PORT/cam\"}}")" "201"
expect "g: ... source_unreachable" \
    "$(wait_for 10 sh -c "curl -sS '$BASE/sessions/refused' | jq -e '.source.lastError.code == \"source_unreachable\"' > /dev/null"; echo $?)"
SILENT_PORT=$(free_port)
python3 -c "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', $SILENT_PORT)); s.listen(8); time.sleep(60)" &
BACKGROUND+=($!)
sleep 0.3
check "g: a source that never answers is 201" "$(pull silent "{\"source\": {\"url\": \"rtsp://127.0.0.1:$SILENT_PORT/cam\"}}")" "201"
expect "g: ... then retrying with source_timeout" \
    "$(wait_for 12 sh -c "curl -sS '$BASE/sessions/silent' | jq -e '.source.lastError.code == \"source_timeout\"' > /dev/null"; echo $?)"
check "g: a host outside --allow-sources is a 403 before any connection" \
    "$(problem_of PUT "$BASE/sessions/outside" -H 'Content-Type: application/json' -d '{"source": {"url": "rtsp://192.0.2.1/cam"}}')" \
    "403 source_not_allowed application/problem+json"
peak_before=$(awk '/VmHWM/ { print $2 }' "/proc/$SERVER_PID/status")
python3 -c '
import sys
out = sys.stdout.buffer
out.write(b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2")
out.write(b"\x00\x00\x00\x01mdat" + (4 << 30).to_bytes(8, "big"))
block = bytes(1 << 20)
for _ in range(200): out.write(block)
' | curl -sS -m 60 -o "$TMP/huge.json" -X POST -H 'Content-Type: video/mp4' -T - "$BASE/sessions/huge/nalus?flush=true"
check "g: a 4 GB mdat streamed for 200 MB: 422 invalid_container" "$(jq -r .code "$TMP/huge.json")" "invalid_container"
peak_after=$(awk '/VmHWM/ { print $2 }' "/proc/$SERVER_PID/status")
growth=$(((peak_after - peak_before) / 1024))
expect "g: the server's peak memory grew ${growth} MiB (at most the 8 MiB seek window and 32 MiB more)" \
    "$([ "$growth" -le 40 ]; echo $?)"
check "g: another session is untouched: a push decodes" \
    "$(curl -sS -m 20 --data-binary @"$FIXTURES/high_320x240.264" "$BASE/sessions/bystander/nalus?flush=true" | jq .frames)" \
    "$(manifest high_320x240.264 frames)"
check "g: the RTSP pull still decodes" "$(wait_for 10 frames_at_least rtsp "$(($(field rtsp .counters.framesDecoded) + 10))"; echo $?)" "0"
check "/healthz answers" "$(curl -sS -m 5 "$BASE/healthz" | jq -r .status)" "ok"

# --- events and the end ----------------------------------------------------------------------------
grep -q '^event: source.lost' "$TMP/events.txt"
expect "events: source.lost was sent" "$?"
connected=$(python3 - "$TMP/events.txt" << 'PY'
import json, sys
sessions = set()
for block in open(sys.argv[1]).read().split("\n\n"):
    fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":"))
    if fields.get("event") == "source.connected":
        sessions.add(json.loads(fields["data"])["session"])
print(" ".join(sorted(sessions)))
PY
)
check "events: source.connected was sent for each pull" "$connected" "http rtmp rtsp rtsp265 srt"
grep -q 's3cret-pw' "$TMP/events.txt" "$SERVER_LOG"
expect "no credentials in the events or the server's log" "$([ $? = 1 ]; echo $?)"
TIMEFORMAT=%R
time_delete=$( { time curl -sS -m 5 -o /dev/null -X DELETE "$BASE/sessions/silent"; } 2>&1)
expect "DELETE of a pull in the middle of a connection takes ${time_delete} s" "$(python3 -c "import sys; sys.exit(0 if float('$time_delete') < 1 else 1)"; echo $?)"
server_stop
expect "SIGTERM: the server exited 0 with pulls running" "$?" "exit ${SERVER_EXIT:-?}"
finish
