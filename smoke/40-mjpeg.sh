#!/usr/bin/env bash
# MJPEG: parts with Content-Type, Content-Length and X-Frame-Seq; the last picture repeats.
source "$(dirname "$0")/lib.sh"
s=$(session_name mjpeg)
push "$s" "$FIXTURES/baseline_176x144.264" flush=true > /dev/null
# curl ends this one itself (exit 28 after 3 s): MJPEG never ends on its own.
curl -s -N --max-time 3 -D "$TMP/jh" -o "$TMP/mjpeg" "$BASE/sessions/$s/frames.mjpeg?width=88" || true
check "mjpeg: content type" "$(tr -d '\r' < "$TMP/jh" | awk -F': ' 'tolower($1) == "content-type" { print $2 }' | cut -d';' -f1)" \
    "multipart/x-mixed-replace"
read -r count md5 closed < <(multipart "$TMP/mjpeg" "$TMP/jh")
check "mjpeg: at least two parts in 3 s (repeats while idle)" "$(( count >= 2 ))" "1"
check "mjpeg: parts carry X-Frame-Seq" "$(grep -ac '^X-Frame-Seq: 20' "$TMP/mjpeg" | awk '{ print ($1 >= 2) }')" "1"
# A real client: FFmpeg's mpjpeg demuxer is strict about the multipart syntax.
if command -v ffmpeg > /dev/null; then
    check "mjpeg: ffmpeg -f mpjpeg reads two pictures" "$(timeout 20 ffmpeg -nostdin -hide_banner -loglevel error \
        -f mpjpeg -i "$BASE/sessions/$s/frames.mjpeg" -frames:v 2 -f null - > /dev/null 2>&1; echo $?)" "0"
else
    echo "skip ffmpeg -f mpjpeg (no ffmpeg)"
fi
# DELETE ends a viewer cleanly: the stream closes with the closing delimiter.
curl -sS -N --max-time 10 -D "$TMP/jh2" -o "$TMP/mjpeg2" "$BASE/sessions/$s/frames.mjpeg" &
viewer=$!
sleep 1
curl -sS -o /dev/null -X DELETE "$BASE/sessions/$s"
wait $viewer
check "mjpeg: viewer ended by DELETE without error" "$?" "0"
read -r count md5 closed < <(multipart "$TMP/mjpeg2" "$TMP/jh2")
check "mjpeg: closing delimiter after DELETE" "$closed" "closed"
