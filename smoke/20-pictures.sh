#!/usr/bin/env bash
# latest.jpg is a valid JPEG of the stream's size, thumbnails have the exact size, 304 works.
source "$(dirname "$0")/lib.sh"
file=high_320x240.264
s=$(session_name pic)
push "$s" "$FIXTURES/$file" flush=true > /dev/null
curl -sS -D "$TMP/h" -o "$TMP/latest.jpg" "$BASE/sessions/$s/frame/latest.jpg"
check "latest.jpg: size" "$(jpeg_size "$TMP/latest.jpg")" "$(manifest $file width)x$(manifest $file height)"
etag=$(tr -d '\r' < "$TMP/h" | awk -F': ' 'tolower($1) == "etag" { print $2 }')
check "latest.jpg: ETag names the newest picture (and the session's mark)" "${etag%@*}" "\"$(manifest $file frames)"
check "latest.jpg: X-Frame-Seq" "$(tr -d '\r' < "$TMP/h" | awk -F': ' 'tolower($1) == "x-frame-seq" { print $2 }')" \
    "$(manifest $file frames)"
curl -sS -o "$TMP/thumb.jpg" "$BASE/sessions/$s/frame/latest.jpg?width=160"
check "thumbnail: width only keeps the aspect ratio" "$(jpeg_size "$TMP/thumb.jpg")" "160x120"
curl -sS -o "$TMP/thumb2.jpg" "$BASE/sessions/$s/frame/latest.jpg?width=100&height=50&quality=50"
check "thumbnail: exact size" "$(jpeg_size "$TMP/thumb2.jpg")" "100x50"
check "latest.yuv: raw size" "$(curl -sS "$BASE/sessions/$s/frame/latest.yuv" | wc -c)" "$((320 * 240 * 3 / 2))"
check "If-None-Match: 304" "$(status_of GET "$BASE/sessions/$s/frame/latest.jpg" -H "If-None-Match: $etag")" "304"
start=$(date +%s%N)
check "long poll: 304 when nothing newer comes" \
    "$(status_of GET "$BASE/sessions/$s/frame/latest.jpg?wait=500" -H "If-None-Match: $etag")" "304"
check "long poll: waited" "$(( ($(date +%s%N) - start) / 1000000 >= 450 ))" "1"
curl -sS -o /dev/null -X DELETE "$BASE/sessions/$s"
