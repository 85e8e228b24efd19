#!/usr/bin/env bash
# H.265 over curl: a push in two requests (a start code split between them), every picture and
# its format, latest.jpg and a thumbnail, the raw pictures of a multipart answer against the
# reference decode (Main 10 and 4:2:2 10-bit included), and the codec statements: a push that says
# H.265 but carries H.264 is 415 codec_mismatch, bytes of neither codec 422 unknown_codec, and
# ?codec= against the Content-Type 400.
source "$(dirname "$0")/lib.sh"
file=main_bframes_176x144.265
frames=$(manifest $file frames)
s=$(session_name hevc)
cut=$(python3 -c "
import re
data = open('$FIXTURES/$file', 'rb').read()
print([m.start() for m in re.finditer(b'\x00\x00\x01', data)][9] + 2)")
head -c "$cut" "$FIXTURES/$file" > "$TMP/h1"
tail -c +"$((cut + 1))" "$FIXTURES/$file" > "$TMP/h2"
a=$(curl -sS -X POST -H 'Transfer-Encoding: chunked' -H 'Content-Type: video/H265' --data-binary @- "$BASE/sessions/$s/nalus" < "$TMP/h1")
b=$(curl -sS -X POST -H 'Transfer-Encoding: chunked' --data-binary @- "$BASE/sessions/$s/nalus?flush=true" < "$TMP/h2")
check "hevc: every picture decoded" "$(( $(jq .frames <<<"$a") + $(jq .frames <<<"$b") ))" "$frames"
check "hevc: the format names H.265, its profile and tier" "$(jq -c '[.format.codec, .format.profile, .format.tier]' <<<"$b")" \
    '["h265","Main","Main"]'
check "hevc: the status names the codec" "$(curl -sS "$BASE/sessions/$s" | jq -c '[.codec, .codecStated]')" '["h265",false]'
curl -sS -o "$TMP/h.jpg" "$BASE/sessions/$s/frame/latest.jpg"
check "hevc: latest.jpg" "$(jpeg_size "$TMP/h.jpg")" "176x144"
curl -sS -o "$TMP/t.jpg" "$BASE/sessions/$s/frame/latest.jpg?width=88"
check "hevc: thumbnail" "$(jpeg_size "$TMP/t.jpg")" "88x72"
for file in main10_320x240.265 yuv422p10_176x144.265; do
    m=$(session_name hmp)
    curl -sS -X POST -H 'Accept: multipart/mixed' --data-binary @"$FIXTURES/$file" -D "$TMP/mh" -o "$TMP/mp" \
        "$BASE/sessions/$m/nalus?flush=true&format=yuv"
    read -r count md5 closed < <(multipart "$TMP/mp" "$TMP/mh")
    check "hevc multipart $file: raw parts equal the reference md5 ($count parts)" "$md5 $closed" \
        "$(manifest $file yuv_md5) closed"
    check "hevc multipart $file: X-Frame-Pix-Fmt" "$(grep -a -m1 -i '^X-Frame-Pix-Fmt:' "$TMP/mp" | tr -d '\r' | cut -d' ' -f2)" \
        "$(manifest $file pix_fmt)"
    curl -sS -o /dev/null -X DELETE "$BASE/sessions/$m"
done
check "hevc: a push that says H.265 but carries H.264 is 415" \
    "$(problem_of POST "$BASE/sessions/$(session_name mismatch)/nalus?flush=true" --data-binary @"$FIXTURES/baseline_176x144.264" \
        -H 'Content-Type: video/H265')" "415 codec_mismatch application/problem+json"
printf '\0\0\0\1\x09\xf0\0\0\0\1\x09\xf0' > "$TMP/aud"
check "hevc: NAL units of neither codec are 422" \
    "$(problem_of POST "$BASE/sessions/$(session_name neither)/nalus?flush=true" --data-binary @"$TMP/aud")" \
    "422 unknown_codec application/problem+json"
check "hevc: ?codec=h265 with Content-Type video/H264 is 400" \
    "$(problem_of POST "$BASE/sessions/$(session_name both)/nalus?codec=h265" --data-binary @"$FIXTURES/$file" \
        -H 'Content-Type: video/H264')" "400 invalid_parameter application/problem+json"
curl -sS -o /dev/null -X DELETE "$BASE/sessions/$s"
