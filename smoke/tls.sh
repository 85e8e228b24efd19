#!/usr/bin/env bash
# HTTPS from real clients: makes a certificate for 127.0.0.1 with openssl, starts FRAMETAP_BIN
# with --tls-cert/--tls-key and --auth-token, and checks
#   a. curl --cacert: /healthz, a push, latest.jpg;
#   b. ffmpeg's chunked live push over https (certificate verified);
#   c. a plain-HTTP client on the TLS port is refused cleanly (connection closed, nothing
#      served) and the server goes on serving HTTPS;
#   d. headless Chromium shows the MJPEG stream in an <img> over https with ?access_token=;
#   e. SIGHUP reloads a new certificate for new connections, and a bad one is refused
#      (the previous certificate stays), as is a certificate with another certificate's key;
#   f. a server started with a certificate and a key that do not belong together exits with
#      a message instead of listening;
#   g. `frametap healthcheck` (the image's HEALTHCHECK) speaks TLS to it when the environment or
#      the configuration file says the server has a certificate, and says why a plain probe fails;
# then stops it with SIGTERM (exit 0 wanted).
#
#   smoke/tls.sh FRAMETAP_BIN
#
# Needs openssl, curl, ffmpeg, python3, chromium. Prints one PASS/FAIL line per check and
# "N passed, N failed" last; exits non-zero when anything failed.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:?usage: smoke/tls.sh FRAMETAP_BIN}
TMP=$(mktemp -d)
export TMP
source "$ROOT/smoke/lib.sh"
source "$ROOT/smoke/server.sh"
PASSED=0
FAILED=0
cleanup() {
    [ -n "${SERVER_PID:-}" ] && kill -KILL "$SERVER_PID" 2> /dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

# certificate NAME: a self-signed P-256 certificate for 127.0.0.1 with CN=NAME.
certificate() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj "/CN=$1" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
        -keyout "$TMP/$1.key" -out "$TMP/$1.pem" 2> /dev/null
}
# served_name: the CN of the certificate a new TLS connection gets.
served_name() {
    openssl s_client -connect "127.0.0.1:$PORT" -servername localhost < /dev/null 2> /dev/null |
        openssl x509 -noout -subject 2> /dev/null | sed 's/.*CN *= *//'
}

certificate first
cp "$TMP/first.pem" "$TMP/server.pem"
cp "$TMP/first.key" "$TMP/server.key"
TOKEN=tls-smoke-token
SERVER_SCHEME=https SERVER_CURL_OPTS="--cacert $TMP/server.pem" \
    server_start "$BINARY" --tls-cert "$TMP/server.pem" --tls-key "$TMP/server.key" --auth-token "$TOKEN" ||
    { fail "server start"; echo "$PASSED passed, $FAILED failed"; exit 1; }
echo "server on $BASE"
CURL=(curl -sS -m 10 --cacert "$TMP/first.pem" -H "Authorization: Bearer $TOKEN")

# a. curl
status=$("${CURL[@]}" -o /dev/null -w '%{http_code}' "$BASE/healthz")
expect "a: /healthz over https is 200" "$([ "$status" = 200 ]; echo $?)" "got $status"
frames=$("${CURL[@]}" --data-binary @"$FIXTURES/high_320x240.264" "$BASE/sessions/cam/nalus?flush=true" | jq -r .frames)
expect "a: a push over https decodes every picture" "$([ "$frames" = "$(manifest high_320x240.264 frames)" ]; echo $?)" \
    "frames $frames"
"${CURL[@]}" -o "$TMP/latest.jpg" "$BASE/sessions/cam/frame/latest.jpg"
expect "a: latest.jpg over https is a 320x240 JPEG" "$([ "$(jpeg_size "$TMP/latest.jpg")" = 320x240 ]; echo $?)"

# g. the health check finds HTTPS where serve does
FRAMETAP_PORT=$PORT FRAMETAP_TLS_CERT="$TMP/server.pem" FRAMETAP_TLS_KEY="$TMP/server.key" \
    "$BINARY" healthcheck > "$TMP/health.log" 2>&1
expect "g: healthcheck with FRAMETAP_TLS_CERT set speaks TLS and exits 0" "$?" "$(cat "$TMP/health.log")"
# A camera's secret from a variable this shell lacks is serve's business, not the probe's.
printf 'serve:\n  port: %s\n  tls-cert: %s\n  tls-key: %s\nsessions:\n  door:\n    source:\n      url: rtsp://10.0.0.9/cam\n      username: viewer\n      password: ${FT_SMOKE_UNSET_SECRET}\n' \
    "$PORT" "$TMP/server.pem" "$TMP/server.key" > "$TMP/frametap.yaml"
env -u FT_SMOKE_UNSET_SECRET FRAMETAP_CONFIG="$TMP/frametap.yaml" "$BINARY" healthcheck > "$TMP/health.log" 2>&1
expect "g: healthcheck reads port and certificate from FRAMETAP_CONFIG (its sessions left alone)" "$?" \
    "$(cat "$TMP/health.log")"
"$BINARY" healthcheck --port "$PORT" > "$TMP/health.log" 2>&1
expect "g: a plain probe of the HTTPS port fails and says to use TLS" \
    "$([ $? = 1 ] && grep -q 'probe with TLS' "$TMP/health.log"; echo $?)" "$(cat "$TMP/health.log")"

# b. ffmpeg, verifying the certificate
timeout 60 ffmpeg -nostdin -hide_banner -loglevel error -re -i "$FIXTURES/high_320x240.264" -c copy -f h264 \
    -method POST -chunked_post 1 -headers "Authorization: Bearer $TOKEN"$'\r\n' \
    -tls_verify 1 -ca_file "$TMP/first.pem" "$BASE/sessions/live/nalus" 2> "$TMP/ffmpeg.log"
rc=$?
expect "b: ffmpeg's chunked push over https ended with exit 0" "$rc" "$(tail -c 300 "$TMP/ffmpeg.log")"
decoded=$("${CURL[@]}" "$BASE/sessions/live" | jq -r .counters.framesDecoded)
expect "b: its pictures were decoded ($decoded)" "$([ "${decoded:-0}" -gt 0 ] 2> /dev/null; echo $?)"

# c. plain HTTP on the TLS port
start=$(date +%s%N)
plain=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/healthz")
rc=$?
elapsed=$((($(date +%s%N) - start) / 1000000))
expect "c: plain HTTP on the TLS port gets no answer and a closed connection (curl exit $rc, $elapsed ms)" \
    "$([ "$plain" = 000 ] && [ "$rc" = 52 -o "$rc" = 56 ] && [ "$elapsed" -lt 2000 ]; echo $?)"
status=$("${CURL[@]}" -o /dev/null -w '%{http_code}' "$BASE/healthz")
expect "c: HTTPS still answers after it" "$([ "$status" = 200 ]; echo $?)"

# d. a browser <img>, over https, with the token in the URL
rc=$(CHROMIUM_EXTRA_FLAGS="--ignore-certificate-errors" \
    chromium_shot "$BASE/sessions/cam/frames.mjpeg?access_token=$TOKEN" "$TMP/tls.png")
verdict=$(png_check "$TMP/tls.png" 0 0 320 240 2>&1)
expect "d: Chromium shows the MJPEG stream over https: $verdict" "$([[ $rc == 0 && $verdict == ok* ]]; echo $?)"

# e. SIGHUP reload
expect "e: the first certificate is served" "$([ "$(served_name)" = first ]; echo $?)"
certificate second
cp "$TMP/second.pem" "$TMP/server.pem"
cp "$TMP/second.key" "$TMP/server.key"
kill -HUP "$SERVER_PID"
for _ in $(seq 50); do [ "$(served_name)" = second ] && break; sleep 0.1; done
expect "e: after SIGHUP new connections get the new certificate" "$([ "$(served_name)" = second ]; echo $?)"
status=$(curl -sS -m 10 --cacert "$TMP/second.pem" -o /dev/null -w '%{http_code}' "$BASE/healthz")
expect "e: and verify against it" "$([ "$status" = 200 ]; echo $?)"
echo "not a certificate" > "$TMP/server.pem"
kill -HUP "$SERVER_PID"
sleep 0.5
expect "e: a broken certificate file is not taken (the previous one stays)" "$([ "$(served_name)" = second ]; echo $?)"
expect "e: the log says why" "$(grep -q 'TLS certificate not reloaded' "$SERVER_LOG"; echo $?)"
# A certificate with a key that is not its own: every handshake would fail, so it is refused.
cp "$TMP/first.pem" "$TMP/server.pem"
cp "$TMP/second.key" "$TMP/server.key"
kill -HUP "$SERVER_PID"
for _ in $(seq 20); do grep -q 'does not belong to the certificate' "$SERVER_LOG" && break; sleep 0.1; done
expect "e: a certificate whose key does not match is not taken (the log says so)" \
    "$(grep -q 'does not belong to the certificate' "$SERVER_LOG"; echo $?)"
status=$(curl -sS -m 10 --cacert "$TMP/second.pem" -o /dev/null -w '%{http_code}' "$BASE/healthz")
expect "e: and handshakes go on with the previous pair" "$([ "$status" = 200 ] && [ "$(served_name)" = second ]; echo $?)"

server_stop
expect "SIGTERM: the server exited 0" "$?"

# f. a mismatched pair at start-up
timeout 10 "$BINARY" serve --host 127.0.0.1 --port 0 --tls-cert "$TMP/first.pem" --tls-key "$TMP/second.key" \
    > "$TMP/mismatch.log" 2>&1
rc=$?
expect "f: a mismatched certificate and key stop the start (exit $rc) with a message" \
    "$([ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q 'does not belong to the certificate' "$TMP/mismatch.log" && ! grep -q 'listening' "$TMP/mismatch.log"; echo $?)" \
    "$(tail -c 300 "$TMP/mismatch.log")"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
