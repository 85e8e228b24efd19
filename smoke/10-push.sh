#!/usr/bin/env bash
# Push a fixture in chunks (the stream continues across requests, a start code split between
# two of them), flush, and check the frame count against the manifest.
source "$(dirname "$0")/lib.sh"
file=high_320x240.264
frames=$(manifest $file frames)
s=$(session_name push)
size=$(stat -c %s "$FIXTURES/$file")
# Cut in the middle of a start code: two bytes after the start of the 8th one.
cut=$(python3 -c "
import re, sys
data = open('$FIXTURES/$file', 'rb').read()
print([m.start() for m in re.finditer(b'\x00\x00\x01', data)][7] + 2)")
head -c "$cut" "$FIXTURES/$file" > "$TMP/part1"
tail -c +"$((cut + 1))" "$FIXTURES/$file" > "$TMP/part2"
# Chunked transfer encoding (curl sends stdin chunked), in small pieces.
a=$(curl -sS -X POST -H 'Transfer-Encoding: chunked' --data-binary @- "$BASE/sessions/$s/nalus" < "$TMP/part1")
b=$(curl -sS -X POST -H 'Transfer-Encoding: chunked' --data-binary @- "$BASE/sessions/$s/nalus?flush=true" < "$TMP/part2")
check "push: bytes of both requests add up" "$(( $(jq .bytes <<<"$a") + $(jq .bytes <<<"$b") ))" "$size"
check "push: every picture decoded" "$(( $(jq .frames <<<"$a") + $(jq .frames <<<"$b") ))" "$frames"
check "push: flushed" "$(jq .flushed <<<"$b")" "true"
check "push: format width" "$(jq .format.width <<<"$b")" "$(manifest $file width)"
check "push: session status counts the pictures" \
    "$(curl -sS "$BASE/sessions/$s" | jq .counters.framesDecoded)" "$frames"
check "push: listed in GET /sessions" \
    "$(curl -sS "$BASE/sessions" | jq --arg s "$s" '[.sessions[].id] | index($s) != null')" "true"
curl -sS -o /dev/null -X DELETE "$BASE/sessions/$s"
