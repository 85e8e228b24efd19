#!/usr/bin/env bash
# Errors are application/problem+json with a stable code.
source "$(dirname "$0")/lib.sh"
P=application/problem+json
s=$(session_name err)
check "400 invalid_session_id" "$(problem_of POST "$BASE/sessions/bad%20id/nalus" --data-binary x)" "400 invalid_session_id $P"
check "404 session_not_found" "$(problem_of GET "$BASE/sessions/$s")" "404 session_not_found $P"
check "404 not_found" "$(problem_of GET "$BASE/nothing/here")" "404 not_found $P"
check "405 method_not_allowed" "$(problem_of PATCH "$BASE/sessions/$s")" "405 method_not_allowed $P"
check "405 has Allow" "$(tr -d '\r' < "$TMP/problem-headers" | awk -F': ' 'tolower($1) == "allow" { print $2 }')" \
    "GET, HEAD, PUT, DELETE"
curl -sS -o /dev/null -X PUT "$BASE/sessions/$s"
check "404 no_frame_yet" "$(problem_of GET "$BASE/sessions/$s/frame/latest.jpg")" "404 no_frame_yet $P"
check "404 no_frame_yet when a long poll's wait ends before the first picture" \
    "$(problem_of GET "$BASE/sessions/$s/frame/latest.jpg?after=0&wait=200")" "404 no_frame_yet $P"
check "400 invalid_parameter (quality)" "$(problem_of GET "$BASE/sessions/$s/frame/latest.jpg?quality=0")" "400 invalid_parameter $P"
check "400 invalid_parameter (PUT body)" "$(problem_of PUT "$BASE/sessions/$s" --data '{"decode":"some"}')" "400 invalid_parameter $P"
if [ -n "${SMOKE_MAX_BODY_BYTES:-}" ]; then
    head -c $((SMOKE_MAX_BODY_BYTES + 1)) /dev/zero > "$TMP/big"
    check "413 body_too_large" "$(problem_of POST "$BASE/sessions/$s/nalus" --data-binary @"$TMP/big")" "413 body_too_large $P"
else
    echo "skip 413 body_too_large (set SMOKE_MAX_BODY_BYTES to the server's --max-body-bytes)"
fi
if [ -n "${SMOKE_MAX_NAL_BYTES:-}" ]; then
    { printf '\x00\x00\x01\x65'; head -c $((SMOKE_MAX_NAL_BYTES + 10)) /dev/zero | tr '\0' '\210'; } > "$TMP/bignal"
    check "413 nal_too_large" "$(problem_of POST "$BASE/sessions/$s/nalus?flush=true" --data-binary @"$TMP/bignal")" \
        "413 nal_too_large $P"
fi
# Garbage is reported, and never costs the picture already decoded: a P slice naming a PPS
# that does not exist (libavcodec: invalid data) after half a stream, then the end of stream.
g=$(session_name garbage)
head -c 6000 "$FIXTURES/baseline_176x144.264" | curl -sS -o /dev/null -X POST --data-binary @- "$BASE/sessions/$g/nalus"
before=$(curl -sS "$BASE/sessions/$g" | jq .latestFrame.seq)
printf '\x00\x00\x00\x01\x41\x98\x44\x00\x00\x00\x01\x41\x98\x44' | \
    curl -sS -o "$TMP/garbage-answer" -w '%{http_code}' -X POST --data-binary @- "$BASE/sessions/$g/nalus?flush=true" \
    > "$TMP/garbage-status"
check "garbage: the request still answers 200" "$(cat "$TMP/garbage-status")" "200"
check "garbage: the answer counts the error" "$(jq -r .error.code "$TMP/garbage-answer")" "invalid_data"
check "garbage: lastError shows it" "$(curl -sS "$BASE/sessions/$g" | jq -r .lastError.code)" "invalid_data"
check "garbage: the last picture is still served" "$(status_of GET "$BASE/sessions/$g/frame/latest.jpg")" "200"
check "garbage: no picture was lost" "$(( $(curl -sS "$BASE/sessions/$g" | jq .latestFrame.seq) >= before ))" "1"
curl -sS -o /dev/null -X DELETE "$BASE/sessions/$g"
check "DELETE: 204" "$(status_of DELETE "$BASE/sessions/$s")" "204"
check "DELETE: then 404" "$(problem_of GET "$BASE/sessions/$s/frame/latest.jpg")" "404 session_not_found $P"
check "DELETE: twice is 404" "$(status_of DELETE "$BASE/sessions/$s")" "404"
check "healthz" "$(curl -sS "$BASE/healthz" | jq -r .status)" "ok"
check "metrics: requests by route" \
    "$(curl -sS "$BASE/metrics" | grep -c '^frametap_http_requests_total{.*route="/sessions/{id}/nalus"' | awk '{ print ($1 > 0) }')" "1"
