#!/usr/bin/env bash
# The multipart answer: one part per picture, raw parts equal to the reference decode.
source "$(dirname "$0")/lib.sh"
for file in high_320x240.264 main_bframes_176x144.264; do
    s=$(session_name mp)
    curl -sS -X POST -H 'Accept: multipart/mixed' --data-binary @"$FIXTURES/$file" -D "$TMP/mh" -o "$TMP/mp" \
        "$BASE/sessions/$s/nalus?flush=true&format=yuv"
    read -r count md5 closed < <(multipart "$TMP/mp" "$TMP/mh")
    check "multipart $file: one part per picture" "$count" "$(manifest $file frames)"
    check "multipart $file: raw bytes equal the reference md5" "$md5" "$(manifest $file yuv_md5)"
    check "multipart $file: closing delimiter" "$closed" "closed"
    curl -sS -o /dev/null -X DELETE "$BASE/sessions/$s"
done
s=$(session_name mpj)
curl -sS -X POST -H 'Accept: multipart/mixed' --data-binary @"$FIXTURES/baseline_176x144.264" -D "$TMP/mh" -o "$TMP/mp" \
    "$BASE/sessions/$s/nalus?flush=true&width=88"
read -r count md5 closed < <(multipart "$TMP/mp" "$TMP/mh")
check "multipart jpeg: one part per picture" "$count" "$(manifest baseline_176x144.264 frames)"
curl -sS -o /dev/null -X DELETE "$BASE/sessions/$s"
