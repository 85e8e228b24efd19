#!/usr/bin/env bash
# Real clients against a live server: starts FRAMETAP_BIN on a free loopback port and checks
#   a. a real-time chunked push from ffmpeg (-re, -chunked_post) while latest.jpg is polled:
#      X-Frame-Seq strictly increases, the JPEG is valid;
#   b. ffmpeg's mpjpeg demuxer reads pictures from frames.mjpeg during the push;
#   c. GStreamer souphttpsrc ! multipartdemux ! jpegdec reads pictures;
#   d. headless Chromium shows the MJPEG stream in an <img> (the screenshot is not blank);
#   h. H.265: ffmpeg encodes with libx265 live (-re) and pushes chunked (Content-Type video/H265)
#      while latest.jpg is polled (X-Frame-Seq increases, every picture decoded, codec h265);
#      ffmpeg's mpjpeg demuxer and GStreamer read the session's MJPEG; a GStreamer x265enc stream
#      pushed with curl decodes to every picture GStreamer encoded; headless Chromium (which cannot
#      decode H.265 itself) shows the H.265 session's MJPEG;
#   e. openapi.yaml is a valid OpenAPI document, and schemathesis (every check) finds nothing
#      against the live server, which still answers /healthz afterwards;
# then stops it with SIGTERM (exit 0 wanted), and repeats d. on a server with --auth-token
# (the <img> passes ?access_token=; without it the picture must not show).
#
#   smoke/clients.sh FRAMETAP_BIN
#
# Needs ffmpeg (with libx264 and libx265), curl, jq, python3, gst-launch-1.0 (souphttpsrc from
# gstreamer1.0-plugins-good, x265enc from gstreamer1.0-plugins-bad), chromium, and .venv with schemathesis and openapi-spec-validator
# (`make test-deps`). Every client runs under `timeout`. Prints one PASS/FAIL line per check and
# "N passed, N failed" last; exits non-zero when anything failed.
# Environment: SCHEMATHESIS_MAX_EXAMPLES (default 20), SCHEMATHESIS_SEED (default 1; "random"
# for a fresh one), CLIENTS_VENV (default ROOT/.venv).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:?usage: smoke/clients.sh FRAMETAP_BIN}
VENV=${CLIENTS_VENV:-$ROOT/.venv}
TMP=$(mktemp -d)
export TMP
source "$ROOT/smoke/lib.sh"
source "$ROOT/smoke/server.sh"
PASSED=0
FAILED=0
finish() {
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" = 0 ]
    exit
}

BACKGROUND=()
cleanup() {
    for pid in "${BACKGROUND[@]}"; do kill "$pid" 2> /dev/null; done
    if [ -n "${SERVER_PID:-}" ]; then kill -KILL "$SERVER_PID" 2> /dev/null; rm -f "$SERVER_LOG"; fi
    rm -rf "$TMP"
}
trap cleanup EXIT

for tool in ffmpeg curl jq python3 gst-launch-1.0 chromium; do
    command -v "$tool" > /dev/null || fail "tool $tool is not installed (make test-deps)"
done
[ "$FAILED" = 0 ] || finish

# header FILE NAME: a header's value from a curl -D dump (the last one of that name)
header() { tr -d '\r' < "$1" | awk -F': ' -v n="$(tr 'A-Z' 'a-z' <<<"$2")" 'tolower($1) == n { v = $2 } END { print v }'; }

server_start "$BINARY" --max-sessions 4096 || { fail "server start"; finish; }
echo "server on $BASE"
CAM=$BASE/sessions/cam

# A 12 s live-like clip: 320x240, 25 fps, a keyframe every second, no B-frames.
FRAMES=300
timeout 60 ffmpeg -nostdin -hide_banner -loglevel error -f lavfi -i testsrc2=size=320x240:rate=25 -t 12 \
    -c:v libx264 -preset ultrafast -tune zerolatency -g 25 -pix_fmt yuv420p -f h264 -y "$TMP/live.264"
expect "clip: ffmpeg/libx264 made a 12 s test stream" "$([ -s "$TMP/live.264" ]; echo $?)"

# --- a. real-time push (chunked POST at the stream's pace) while latest.jpg is polled --------
echo "== a. ffmpeg -re chunked push, latest.jpg polled"
timeout -k 5 60 ffmpeg -nostdin -hide_banner -loglevel error -re -i "$TMP/live.264" -c copy -f h264 \
    -method POST -chunked_post 1 "$CAM/nalus" > "$TMP/push.log" 2>&1 &
PUSH=$!
BACKGROUND+=("$PUSH")
seqs=()
for _ in $(seq 40); do  # up to 12 s for 12 polls that found a picture
    kill -0 "$PUSH" 2> /dev/null || break
    code=$(curl -sS -m 5 -D "$TMP/lh" -o "$TMP/poll.jpg" -w '%{http_code}' "$CAM/frame/latest.jpg")
    if [ "$code" = 200 ]; then
        seqs+=("$(header "$TMP/lh" X-Frame-Seq)")
        cp "$TMP/poll.jpg" "$TMP/latest.jpg"
    fi
    [ "${#seqs[@]}" -ge 12 ] && break
    sleep 0.3
done
increasing=$(python3 -c 'import sys; s = [int(v) for v in sys.argv[1:]]; print(int(len(s) >= 8 and all(a < b for a, b in zip(s, s[1:]))))' "${seqs[@]}")
expect "a: X-Frame-Seq strictly increases over ${#seqs[@]} polls during the push" "$([ "$increasing" = 1 ]; echo $?)" \
    "seqs ${seqs[*]:-none}"
check "a: latest.jpg is a 320x240 JPEG" "$(jpeg_size "$TMP/latest.jpg" 2> /dev/null)" "320x240"
jpeg_errors=$(timeout 20 ffmpeg -nostdin -hide_banner -loglevel error -i "$TMP/latest.jpg" -f null - 2>&1; echo "rc=$?")
check "a: ffmpeg decodes latest.jpg without an error" "$jpeg_errors" "rc=0"

# --- b. ffmpeg's mpjpeg demuxer (strict multipart syntax) during the push -------------------
echo "== b. ffmpeg -f mpjpeg"
mkdir -p "$TMP/mpjpeg"
during=$(kill -0 "$PUSH" 2> /dev/null && echo "during the push" || echo "after the push")
rc=$(timeout -k 5 30 ffmpeg -nostdin -hide_banner -loglevel error -f mpjpeg -i "$CAM/frames.mjpeg" -frames:v 10 \
    -c copy -f image2 "$TMP/mpjpeg/%02d.jpg" > "$TMP/mpjpeg.log" 2>&1; echo $?)
expect "b: ffmpeg -f mpjpeg read 10 pictures ($during)" "$rc" "exit $rc: $(tail -c 300 "$TMP/mpjpeg.log")"
sizes=$(for f in "$TMP"/mpjpeg/*.jpg; do jpeg_size "$f"; done | sort | uniq -c | awk '{ print $1 "x " $2 }')
check "b: every picture is a 320x240 JPEG" "$sizes" "10x 320x240"

# --- c. GStreamer souphttpsrc ! multipartdemux ----------------------------------------------
echo "== c. GStreamer"
during=$(kill -0 "$PUSH" 2> /dev/null && echo "during the push" || echo "after the push")
rc=$(timeout -k 5 30 gst-launch-1.0 -q souphttpsrc location="$CAM/frames.mjpeg" timeout=10 ! multipartdemux ! \
    image/jpeg ! jpegdec ! fakesink num-buffers=10 > "$TMP/gst.log" 2>&1; echo $?)
expect "c: gst-launch souphttpsrc ! multipartdemux ! jpegdec decoded 10 pictures ($during)" "$rc" \
    "exit $rc: $(tail -c 300 "$TMP/gst.log")"
rc=$(timeout -k 5 30 gst-launch-1.0 -q souphttpsrc location="$CAM/frames.mjpeg?width=160" timeout=10 ! multipartdemux ! \
    image/jpeg ! jpegdec ! videoconvert ! pngenc snapshot=true ! filesink location="$TMP/gst.png" > "$TMP/gst.log" 2>&1
    echo $?)
expect "c: GStreamer snapshot of a 160-wide thumbnail stream" "$rc" "exit $rc: $(tail -c 300 "$TMP/gst.log")"
verdict=$(png_check "$TMP/gst.png" 0 0 160 120 2>&1)
expect "c: the snapshot shows the picture: $verdict" "$([[ $verdict == ok* && $verdict == *"160x120 PNG"* ]]; echo $?)"

# --- d. headless Chromium, <img src=frames.mjpeg> -------------------------------------------
echo "== d. Chromium"
during=$(kill -0 "$PUSH" 2> /dev/null && echo "during the push" || echo "after the push")
start=$(date +%s)
rc=$(chromium_shot "$CAM/frames.mjpeg" "$TMP/chromium.png")
expect "d: chromium --headless --screenshot exited by itself ($during, $(($(date +%s) - start)) s)" "$rc" \
    "exit $rc: $(grep -v dbus "$TMP/chromium.log" | tail -c 300)"
verdict=$(png_check "$TMP/chromium.png" 0 0 320 240 2>&1)
expect "d: the screenshot shows the picture: $verdict" "$([[ $verdict == ok* ]]; echo $?)"
[ -n "${CLIENTS_KEEP_SCREENSHOT:-}" ] && cp "$TMP/chromium.png" "$CLIENTS_KEEP_SCREENSHOT"

# --- the push ends: every picture decoded, viewers freed ------------------------------------
wait "$PUSH"
rc=$?
expect "a: the ffmpeg push ended with exit 0" "$rc" "exit $rc: $(tail -c 300 "$TMP/push.log")"
flushed=$(curl -sS -m 10 -X POST --data-binary '' "$CAM/nalus?flush=true" | jq -c '{flushed, latestSeq}')
check "a: an empty flush ends the stream" "$flushed" "{\"flushed\":true,\"latestSeq\":$FRAMES}"
check "a: every picture of the live push was decoded" \
    "$(curl -sS -m 5 "$CAM" | jq -c '[.counters.framesDecoded, .counters.decodeErrors]')" "[$FRAMES,0]"
subscribers=
for _ in $(seq 50); do  # a gone viewer is noticed at the next repeat (about a second)
    subscribers=$(curl -sS -m 5 "$CAM" | jq .subscribers)
    [ "$subscribers" = 0 ] && break
    sleep 0.1
done
check "every MJPEG viewer is freed once its client left" "$subscribers" "0"

# --- h. H.265: a live x265 push, its pictures read by ffmpeg, GStreamer and Chromium --------
echo "== h. H.265"
HCAM=$BASE/sessions/hcam
timeout -k 5 60 ffmpeg -nostdin -hide_banner -loglevel error -re -f lavfi -i testsrc2=size=320x240:rate=25 -t 12 \
    -c:v libx265 -preset ultrafast -tune zerolatency -x265-params keyint=25:log-level=error -pix_fmt yuv420p \
    -f hevc -content_type video/H265 -method POST -chunked_post 1 "$HCAM/nalus" > "$TMP/hpush.log" 2>&1 &
HPUSH=$!
BACKGROUND+=("$HPUSH")
seqs=()
for _ in $(seq 40); do
    kill -0 "$HPUSH" 2> /dev/null || break
    code=$(curl -sS -m 5 -D "$TMP/hh" -o "$TMP/hpoll.jpg" -w '%{http_code}' "$HCAM/frame/latest.jpg")
    if [ "$code" = 200 ]; then
        seqs+=("$(header "$TMP/hh" X-Frame-Seq)")
        cp "$TMP/hpoll.jpg" "$TMP/hlatest.jpg"
    fi
    [ "${#seqs[@]}" -ge 12 ] && break
    sleep 0.3
done
increasing=$(python3 -c 'import sys; s = [int(v) for v in sys.argv[1:]]; print(int(len(s) >= 8 and all(a < b for a, b in zip(s, s[1:]))))' "${seqs[@]}")
expect "h: a live libx265 push: X-Frame-Seq strictly increases over ${#seqs[@]} polls" "$([ "$increasing" = 1 ]; echo $?)" \
    "seqs ${seqs[*]:-none}"
check "h: latest.jpg of the H.265 session is a 320x240 JPEG" "$(jpeg_size "$TMP/hlatest.jpg" 2> /dev/null)" "320x240"
check "h: the session's codec is h265, Main, from the stream" \
    "$(curl -sS -m 5 "$HCAM" | jq -c '[.codec, .format.codec, .format.profile, .format.tier]')" '["h265","h265","Main","Main"]'
mkdir -p "$TMP/hmpjpeg"
during=$(kill -0 "$HPUSH" 2> /dev/null && echo "during the push" || echo "after the push")
rc=$(timeout -k 5 30 ffmpeg -nostdin -hide_banner -loglevel error -f mpjpeg -i "$HCAM/frames.mjpeg" -frames:v 5 \
    -c copy -f image2 "$TMP/hmpjpeg/%02d.jpg" > "$TMP/hmpjpeg.log" 2>&1; echo $?)
expect "h: ffmpeg -f mpjpeg read 5 pictures of the H.265 session ($during)" "$rc" "exit $rc: $(tail -c 300 "$TMP/hmpjpeg.log")"
rc=$(timeout -k 5 30 gst-launch-1.0 -q souphttpsrc location="$HCAM/frames.mjpeg?width=160" timeout=10 ! multipartdemux ! \
    image/jpeg ! jpegdec ! videoconvert ! pngenc snapshot=true ! filesink location="$TMP/hgst.png" > "$TMP/hgst.log" 2>&1
    echo $?)
expect "h: GStreamer snapshot of the H.265 session's 160-wide MJPEG" "$rc" "exit $rc: $(tail -c 300 "$TMP/hgst.log")"
verdict=$(png_check "$TMP/hgst.png" 0 0 160 120 2>&1)
expect "h: the GStreamer snapshot shows the picture: $verdict" "$([[ $verdict == ok* && $verdict == *"160x120 PNG"* ]]; echo $?)"
start=$(date +%s)
rc=$(chromium_shot "$HCAM/frames.mjpeg" "$TMP/hchromium.png")
expect "h: chromium showed the H.265 session's MJPEG ($(($(date +%s) - start)) s)" "$rc" \
    "exit $rc: $(grep -v dbus "$TMP/chromium.log" | tail -c 300)"
verdict=$(png_check "$TMP/hchromium.png" 0 0 320 240 2>&1)
expect "h: the Chromium screenshot shows the picture: $verdict" "$([[ $verdict == ok* ]]; echo $?)"
wait "$HPUSH"
rc=$?
expect "h: the libx265 push ended with exit 0" "$rc" "exit $rc: $(tail -c 300 "$TMP/hpush.log")"
flushed=$(curl -sS -m 10 -X POST --data-binary '' "$HCAM/nalus?flush=true" | jq -c '{flushed, latestSeq}')
check "h: an empty flush ends the H.265 stream" "$flushed" "{\"flushed\":true,\"latestSeq\":$FRAMES}"
check "h: every picture of the live H.265 push was decoded" \
    "$(curl -sS -m 5 "$HCAM" | jq -c '[.counters.framesDecoded, .counters.decodeErrors]')" "[$FRAMES,0]"
# GStreamer's own H.265 encoder, its byte stream pushed whole: every picture it encoded decodes.
rc=$(timeout -k 5 60 gst-launch-1.0 -q videotestsrc num-buffers=50 ! video/x-raw,width=320,height=240,framerate=25/1 ! \
    x265enc speed-preset=ultrafast key-int-max=25 ! h265parse ! video/x-h265,stream-format=byte-stream,alignment=au ! \
    filesink location="$TMP/gst.265" > "$TMP/gstenc.log" 2>&1; echo $?)
expect "h: GStreamer x265enc made a 50-picture H.265 stream" "$rc" "exit $rc: $(tail -c 300 "$TMP/gstenc.log")"
check "h: the GStreamer x265enc stream pushed with curl decodes to its 50 pictures" \
    "$(curl -sS -m 30 -H 'Content-Type: video/H265' --data-binary @"$TMP/gst.265" "$BASE/sessions/gsthevc/nalus?flush=true" |
        jq -c '[.frames, .decodeErrors, .format.codec]')" '[50,0,"h265"]'

# --- e. the OpenAPI document against the live server ----------------------------------------
echo "== e. spec checks"
if [ -x "$VENV/bin/schemathesis" ] && [ -x "$VENV/bin/python" ]; then
    out=$("$VENV/bin/python" -m openapi_spec_validator "$ROOT/openapi.yaml" 2>&1)
    expect "e: openapi-spec-validator: $out" "$?"
    # Every check runs (schemathesis' default; `--checks all` would override the per-operation
    # exceptions in smoke/schemathesis.toml, each explained there).
    seed=${SCHEMATHESIS_SEED:-1}
    seed_args=()
    [ "$seed" = random ] || seed_args=(--seed "$seed")
    start=$(date +%s)
    (cd "$TMP" && timeout -k 10 600 "$VENV/bin/schemathesis" --config-file "$ROOT/smoke/schemathesis.toml" \
        run "$ROOT/openapi.yaml" --url "$BASE" --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-20}" \
        --request-timeout 15 --generation-database none --no-color "${seed_args[@]}" > "$TMP/schemathesis.log" 2>&1)
    rc=$?
    summary=$(grep -E '^ *[0-9]+ generated' "$TMP/schemathesis.log" | tr -s ' ')
    operations=$(grep -oE 'Operations: +[0-9]+ selected / [0-9]+ total' "$TMP/schemathesis.log" | tr -s ' ' | cut -d' ' -f2-)
    expect "e: schemathesis, every check, ${operations:-? operations}:${summary:- no summary} ($(($(date +%s) - start)) s)" "$rc" "exit $rc"
    [ "$rc" = 0 ] || sed -n '/ERRORS\|FAILURES/,$p' "$TMP/schemathesis.log" | head -100
    expect "e: the server survived schemathesis" "$(kill -0 "$SERVER_PID" 2> /dev/null; echo $?)"
    check "e: /healthz answers after schemathesis" "$(curl -sS -m 5 "$BASE/healthz" | jq -r .status)" "ok"
else
    fail "e: $VENV has no schemathesis (make test-deps)"
fi
# Errors of the stream route (schemathesis only names a session that never exists there).
check "e: frames.mjpeg?fps=0 is a 400 problem" "$(problem_of GET "$CAM/frames.mjpeg?fps=0")" \
    "400 invalid_parameter application/problem+json"
check "e: frames.mjpeg of a missing session is a 404 problem" \
    "$(problem_of GET "$BASE/sessions/never-made/frames.mjpeg")" "404 session_not_found application/problem+json"

server_stop
expect "SIGTERM: the server exited 0" "$?" "exit ${SERVER_EXIT:-?}"

# --- d. again with --auth-token: the <img> passes ?access_token= ----------------------------
echo "== d. Chromium with --auth-token"
TOKEN=clients-$RANDOM$RANDOM
if server_start "$BINARY" --auth-token "$TOKEN"; then
    check "auth: a push without the token is 401" \
        "$(status_of POST "$BASE/sessions/cam/nalus?flush=true" --data-binary @"$FIXTURES/high_320x240.264")" "401"
    check "auth: a push with Authorization: Bearer decodes" \
        "$(curl -sS -m 20 -H "Authorization: Bearer $TOKEN" --data-binary @"$FIXTURES/high_320x240.264" \
            "$BASE/sessions/cam/nalus?flush=true" | jq .frames)" "$(manifest high_320x240.264 frames)"
    rc=$(chromium_shot "$BASE/sessions/cam/frames.mjpeg?access_token=$TOKEN" "$TMP/auth.png")
    verdict=$(png_check "$TMP/auth.png" 0 0 320 240 2>&1)
    expect "auth: <img src=...?access_token=> shows the picture: $verdict" "$([[ $rc == 0 && $verdict == ok* ]]; echo $?)" \
        "chromium exit $rc"
    rc=$(chromium_shot "$BASE/sessions/cam/frames.mjpeg" "$TMP/noauth.png")
    verdict=$(png_check "$TMP/noauth.png" 0 0 320 240 2>&1)
    expect "auth: without the token the <img> stays empty: $verdict" "$([[ $rc == 0 && $verdict == blank* ]]; echo $?)" \
        "chromium exit $rc"
    server_stop
    expect "SIGTERM: the auth server exited 0" "$?" "exit ${SERVER_EXIT:-?}"
else
    fail "auth: server start"
fi
finish
