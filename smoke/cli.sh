#!/usr/bin/env bash
# The offline command line as a user meets it: outputs, sizes and the documented exit codes
# for bad input, for H.264 and H.265, and serve's refusals before it listens. Starts no server
# but one on ::1 for the health probe.
#   smoke/cli.sh [path/to/frametap] [conformance corpus dir]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/.build/debug/frametap}
CORPUS=${2:-$ROOT/../shared/testdata/h264}
. "$ROOT/smoke/lib.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# expect_exit NAME CODE COMMAND...: the exit code and a "frametap: error:" line on stderr
expect_exit() {
    local name=$1 want=$2; shift 2
    "$@" > /dev/null 2> "$TMP/stderr" < /dev/null
    local got=$?
    check "$name exits $want" "$got" "$want"
    if [ "$want" != 0 ]; then
        grep -q '^frametap: error: ' "$TMP/stderr" && pass "$name explains itself: $(head -c 120 "$TMP/stderr")" \
            || fail "$name printed no error line"
    fi
}

FIXTURE=$FIXTURES/high_320x240.264
head -c 65536 /dev/urandom | tr -d '\000' > "$TMP/noise.bin"
python3 -c "
import random; random.seed(7)
open('$TMP/startcodes.bin', 'wb').write(b''.join(b'\x00\x00\x01' + bytes(random.randrange(256) for _ in range(300)) for _ in range(200)))"
: > "$TMP/empty.264"

expect_exit "decode of a missing file" 3 "$BIN" decode "$TMP/missing.264" --output "$TMP/out"
expect_exit "decode of a directory" 3 "$BIN" decode "$TMP" --output "$TMP/out"
expect_exit "decode of bytes without start codes" 4 "$BIN" decode "$TMP/noise.bin" --output "$TMP/out"
expect_exit "decode of an empty file" 4 "$BIN" decode "$TMP/empty.264" --output "$TMP/out"
expect_exit "decode of garbage between start codes" 1 "$BIN" decode "$TMP/startcodes.bin" --output "$TMP/out"
: > "$TMP/a-file"
expect_exit "decode into an empty output path" 3 "$BIN" decode "$FIXTURE" --output ""
expect_exit "decode into a path that is a file" 3 "$BIN" decode "$FIXTURE" --output "$TMP/a-file/out"
grep -q "(at $TMP/a-file): it exists and is not a directory" "$TMP/stderr" \
    && pass "an output path through a file names the file" || fail "an output path through a file: $(cat "$TMP/stderr")"
expect_exit "probe of a missing file" 3 "$BIN" probe "$TMP/missing.264"
expect_exit "probe of bytes without start codes" 4 "$BIN" probe "$TMP/noise.bin"
expect_exit "decode of an MPEG-TS file (its packets hold start codes)" 4 "$BIN" decode "$FIXTURES/Containers/h264_320x240_aac.ts" --output "$TMP/out"
expect_exit "probe of an MPEG-TS file" 4 "$BIN" probe "$FIXTURES/Containers/h264_320x240_aac.ts"
"$BIN" decode "$FIXTURE" --every 0 > /dev/null 2>&1; check "decode --every 0 is a usage error" "$?" 64
"$BIN" decode "$FIXTURE" --quality 101 > /dev/null 2>&1; check "decode --quality 101 is a usage error" "$?" 64
"$BIN" decode "$FIXTURE" --max-nal-bytes 0 > /dev/null 2>&1; check "decode --max-nal-bytes 0 is a usage error" "$?" 64
"$BIN" probe "$FIXTURE" --max-nal-bytes 0 > /dev/null 2>&1; check "probe --max-nal-bytes 0 is a usage error" "$?" 64

# serve's options are read before anything listens: bad usage is 64 and names its place.
"$BIN" serve --prot 1 > /dev/null 2> "$TMP/stderr"; check "serve --prot is a usage error" "$?" 64
grep -q "unknown option '--prot' (did you mean '--port'?)" "$TMP/stderr" && pass "serve --prot suggests --port" \
    || fail "serve --prot: $(head -c 200 "$TMP/stderr")"
FRAMETAP_PORT=70000 "$BIN" serve > /dev/null 2> "$TMP/stderr"; check "FRAMETAP_PORT=70000 is a usage error" "$?" 64
grep -q "FRAMETAP_PORT: must be 0...65535" "$TMP/stderr" && pass "FRAMETAP_PORT=70000 names the variable" \
    || fail "FRAMETAP_PORT=70000: $(head -c 200 "$TMP/stderr")"
printf 'serve:\n  port: 8080\n  max-sesions: 3\n' > "$TMP/typo.yaml"
"$BIN" serve --config "$TMP/typo.yaml" > /dev/null 2> "$TMP/stderr"; check "a typo in the configuration file is a usage error" "$?" 64
grep -q "typo.yaml:3:3: serve.max-sesions: unknown option (did you mean 'max-sessions'?)" "$TMP/stderr" \
    && pass "the typo is named with its line" || fail "typo: $(head -c 200 "$TMP/stderr")"
check "serve --help lists an option with its variable" \
    "$("$BIN" serve --help | grep -o -e '--max-sessions <n>' -e 'FRAMETAP_MAX_SESSIONS\b' | wc -l)" 2
check "the example configuration resolves" \
    "$(FRONT_DOOR_USER=u FRONT_DOOR_PASSWORD=p "$BIN" serve --config "$ROOT/deploy/frametap.yaml" --print-config | grep -c -e '^  max-sessions: 32  #' -e '^  front-door:')" 2

"$BIN" serve --host localhost > /dev/null 2> "$TMP/stderr"; check "serve --host localhost is a usage error" "$?" 64
grep -q "the host must be a numeric IPv4 or IPv6 address, not 'localhost'" "$TMP/stderr" \
    && pass "--host localhost says why" || fail "--host localhost: $(head -c 200 "$TMP/stderr")"
"$BIN" serve --tls-cert "$TMP/missing.pem" --tls-key "$TMP/missing.key" > /dev/null 2> "$TMP/stderr"
check "serve with a TLS certificate that is not there is a usage error" "$?" 64
# An empty variable (a template's unset value) never turns access control off: it is refused.
printf 'serve:\n  auth-token: from-the-file\n' > "$TMP/token.yaml"
FRAMETAP_AUTH_TOKEN= "$BIN" serve --config "$TMP/token.yaml" > /dev/null 2> "$TMP/stderr"
check "an empty FRAMETAP_AUTH_TOKEN is a usage error" "$?" 64
grep -q "FRAMETAP_AUTH_TOKEN: is empty" "$TMP/stderr" && pass "the empty variable is named" \
    || fail "empty FRAMETAP_AUTH_TOKEN: $(head -c 200 "$TMP/stderr")"
"$BIN" sync --config "$TMP/token.yaml" --url http://127.0.0.1:9 --once --token $'abc\r\nX-Injected: yes' > /dev/null 2> "$TMP/stderr"
check "sync with a token holding a line break is a usage error" "$?" 64

# The health probe of a server on IPv6: its address as given, and :: asked on ::1.
port=$(python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0)); print(s.getsockname()[1])')
"$BIN" serve --host ::1 --port "$port" 2> "$TMP/serve6.log" &
server=$!
for _ in $(seq 100); do "$BIN" healthcheck --host ::1 --port "$port" > /dev/null 2>&1 && break; sleep 0.1; done
"$BIN" healthcheck --host ::1 --port "$port" > "$TMP/health.log" 2>&1
check "healthcheck --host ::1 asks a server on ::1" "$?" 0
FRAMETAP_HOST=:: FRAMETAP_PORT=$port "$BIN" healthcheck > "$TMP/health.log" 2>&1
check "healthcheck with FRAMETAP_HOST=:: asks ::1" "$?" 0
kill -TERM "$server"; wait "$server"; check "the IPv6 server stops on SIGTERM" "$?" 0

# --log-format json: every line of the server's log is one JSON object, a push's garbage and
# libav's own lines (--log-level debug) too.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN" serve --host 127.0.0.1 --port "$port" --log-format json --log-level debug 2> "$TMP/json.log" &
server=$!
for _ in $(seq 100); do "$BIN" healthcheck --host 127.0.0.1 --port "$port" > /dev/null 2>&1 && break; sleep 0.1; done
curl -s -o /dev/null --data-binary @"$FIXTURE" "http://127.0.0.1:$port/sessions/json/nalus?flush=true"
# A Matroska DocType libavformat does not know, with a quote, a line feed and an escape in it:
# libav says so in a line of its own.
python3 -c 'import sys; b = open(sys.argv[1], "rb").read(); sys.stdout.buffer.write(b.replace(b"\x88matroska", b"\x88ma\"\n\x1b[3m", 1))' \
    "$ROOT/Tests/Fixtures/Containers/h264_320x240.mkv" > "$TMP/doctype.mkv"
curl -s -o /dev/null --data-binary @"$TMP/doctype.mkv" -H 'Content-Type: video/x-matroska' \
    "http://127.0.0.1:$port/sessions/json2/nalus?flush=true"
kill -TERM "$server"; wait "$server"; check "the JSON-logging server stops on SIGTERM" "$?" 0
check "--log-format json writes only JSON lines, with time, level, logger, source and message" "$(python3 -c '
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
bad = [line for line in lines if not all(k in json.loads(line) for k in ("time", "level", "logger", "source", "message"))]
libav = [json.loads(line)["message"] for line in lines if json.loads(line)["logger"] == "libav"]
doctype = any("doctype" in message and "\\u{1B}" in message for message in libav)
print("ok" if lines and not bad and doctype else "%d lines, bad: %r, libav: %r" % (len(lines), bad[:2], libav[:3]))
' "$TMP/json.log" 2>&1)" ok
"$BIN" serve --log-format json --port 99999 2> "$TMP/json-usage.log"
check "a start refused for its options is one JSON line too (exit 64)" "$? $(python3 -c '
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
print(len(lines), json.loads(lines[0])["metadata"]["reason"])
' "$TMP/json-usage.log" 2>&1)" "64 1 --port: must be 0...65535, not '99999'"
check "the log starts with the version and the options given" "$(python3 -c '
import json, sys
first = json.loads(open(sys.argv[1], encoding="utf-8").readline())
print(first["message"], first["metadata"]["options"], bool(first["metadata"]["version"]))
' "$TMP/json.log" 2>&1)" "starting host=127.0.0.1 (--host), port=$port (--port), log-level=debug (--log-level), log-format=json (--log-format) True"

frames=$(manifest high_320x240.264 frames)
"$BIN" decode "$FIXTURE" --output "$TMP/jpegs" 2> /dev/null
check "decode writes one JPEG per frame" "$(ls "$TMP/jpegs" | wc -l)" "$frames"
check "frame-000001.jpg is a 320x240 JPEG" "$(jpeg_size "$TMP/jpegs/frame-000001.jpg")" 320x240
"$BIN" decode "$FIXTURE" --output "$TMP/thumbs" --width 101 --every 5 2> /dev/null
check "--every 5 keeps every fifth frame" "$(ls "$TMP/thumbs" | wc -l)" $(((frames + 4) / 5))
check "--width 101 keeps the aspect ratio" "$(jpeg_size "$TMP/thumbs/frame-000001.jpg")" 101x76
check "--format rgb --output - writes w*h*3 per frame" \
    "$("$BIN" decode "$FIXTURE" --format rgb --width 64 --height 48 --output - 2> /dev/null | wc -c)" $((64 * 48 * 3 * frames))
check "decode from standard input equals the manifest md5" \
    "$("$BIN" decode - --format yuv --output - < "$FIXTURE" 2> /dev/null | md5sum | cut -d' ' -f1)" \
    "$(manifest high_320x240.264 yuv_md5)"
"$BIN" decode "$FIXTURE" --keyframes-only --output "$TMP/keys" 2> /dev/null
check "--keyframes-only decodes only the IDR" "$(ls "$TMP/keys" | wc -l)" 1

check "probe shows the cropped size of the odd fixture" \
    "$("$BIN" probe "$FIXTURES/odd_crop_322x242.264" | grep -c 'display size   322x242')" 1
check "probe --json parses and counts access units" \
    "$("$BIN" probe --json "$FIXTURE" | jq '.pictures')" "$frames"
check "probe names the codec on its first line" \
    "$("$BIN" probe "$FIXTURE" | head -n 1)" "codec: H.264 (AVC), detected from its first parameter set"
check "probe --json names the codec as the API does" \
    "$("$BIN" probe --json "$FIXTURE" | jq -r '"\(.codec) \(.codecStated)"')" "h264 false"
# H.265: detected from its first parameter set, or stated with --codec.
HEVC=$FIXTURES/odd_crop_322x242.265
check "H.265: probe shows the size after the conformance window" \
    "$("$BIN" probe "$HEVC" | grep -c 'display size   322x242')" 1
check "H.265: probe names the codec on its first line" \
    "$("$BIN" probe "$HEVC" | head -n 1)" "codec: H.265 (HEVC), detected from its first parameter set"
check "H.265: probe --json names the codec and counts pictures" \
    "$("$BIN" probe --json - < "$HEVC" | jq -r '"\(.codec) \(.sequenceParameterSets[0].format.codec) \(.pictures) \(.videoParameterSets | length)"')" \
    "h265 h265 $(manifest odd_crop_322x242.265 frames) 1"
check "H.265: decode from standard input equals the manifest md5" \
    "$("$BIN" decode - --format yuv --output - < "$HEVC" 2> /dev/null | md5sum | cut -d' ' -f1)" \
    "$(manifest odd_crop_322x242.265 yuv_md5)"
check "H.265: --codec h265 decodes the same" \
    "$("$BIN" decode "$HEVC" --codec h265 --format yuv --output - 2> /dev/null | md5sum | cut -d' ' -f1)" \
    "$(manifest odd_crop_322x242.265 yuv_md5)"
expect_exit "decode of H.265 stated as H.264" 1 "$BIN" decode "$HEVC" --codec h264 --output "$TMP/out"
# Start codes but no parameter set of either codec: the slices of an H.265 fixture alone.
python3 -c "
data = open('$HEVC', 'rb').read()
units = [u.rstrip(b'\x00') for u in data.split(b'\x00\x00\x01')[1:]]
open('$TMP/slices.bin', 'wb').write(b''.join(b'\x00\x00\x00\x01' + u for u in units if (u[0] >> 1) & 0x3F < 32))"
expect_exit "decode of units with no parameter set" 4 "$BIN" decode "$TMP/slices.bin" --output "$TMP/out"
expect_exit "probe of units with no parameter set" 4 "$BIN" probe "$TMP/slices.bin"
# NAL units each after a 4-byte length (VideoToolbox's samples), not Annex B.
python3 -c '
import sys
data = open(sys.argv[1], "rb").read()
units = [u.rstrip(b"\0") for u in data.split(b"\0\0\1")[1:]]
sys.stdout.buffer.write(b"".join(len(u).to_bytes(4, "big") + u for u in units))' "$FIXTURE" > "$TMP/avcc.bin"
expect_exit "decode of length-prefixed units" 4 "$BIN" decode "$TMP/avcc.bin" --output "$TMP/avcc"
check "decode of length-prefixed units says how to send them" "$(grep -c 'in place of each length' "$TMP/stderr")" 1
check "probe --codec h265 reads units with no parameter set" \
    "$("$BIN" probe --codec h265 --json "$TMP/slices.bin" | jq -r '"\(.codec) \(.codecStated) \(.pictures)"')" \
    "h265 true $(manifest odd_crop_322x242.265 frames)"
"$BIN" probe --codec h265 "$FIXTURE" > "$TMP/wrong-codec.txt" 2> "$TMP/wrong-codec.err"
check "probe --codec of the other codec lists the units and exits 1, as decode does" \
    "$? $(grep -c codec_mismatch "$TMP/wrong-codec.txt") $(cat "$TMP/wrong-codec.err")" \
    "1 1 frametap: error: no decodable picture in $FIXTURE: it carries H.264 parameter sets, but --codec says H.265"
check "probe --codec h265 says the codec was stated" \
    "$("$BIN" probe --codec h265 "$TMP/slices.bin" | head -n 1)" "codec: H.265 (HEVC), as --codec states"

if [ -f "$CORPUS/CVFC1_Sony_C.jsv" ]; then
    check "probe shows 300x168 for CVFC1" \
        "$("$BIN" probe --json "$CORPUS/CVFC1_Sony_C.jsv" | jq -r '.sequenceParameterSets[0].format | "\(.width)x\(.height)"')" 300x168
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
