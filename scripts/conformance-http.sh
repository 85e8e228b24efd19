#!/usr/bin/env bash
# The conformance check over HTTP: starts FRAMETAP_BIN on a free loopback port and pushes every
# stream listed in CORPUS_DIR/MANIFEST.tsv in one request, asking for the pictures back:
#
#   curl --data-binary @FILE -H 'Content-Type: video/H264' -H 'Accept: multipart/mixed' \
#        'http://127.0.0.1:PORT/sessions/<unique>/nalus?flush=true&format=yuv'
#
# The Content-Type states the codec for .264/.h264 (video/H264) and .265/.h265/.hevc (video/H265)
# files; any other file goes as application/octet-stream and the server detects its codec. The
# multipart body is parsed with the stdlib (boundary from Content-Type, each part read by its
# Content-Length): the MD5 of the concatenated parts must equal the manifest's MD5 (the same
# bytes as `frametap decode --format yuv --output -`), there must be one part per frame, every
# part's X-Frame-Pix-Fmt must be the manifest's pix_fmt, the first part must have the manifest's
# size, and the body must end with the closing delimiter; where the corpus has one MD5 per
# picture over NV12 (<file>.md5), each part converted to NV12 must match it (scripts/corpus.py,
# which also reads both manifest layouts). Rows without an MD5 are negative cases:
# the answer must be a clean problem (application/problem+json with a code) or a 200 with no part,
# and the server must still be healthy afterwards. The server is stopped with SIGTERM at the end
# and must exit 0.
#
# Usage: scripts/conformance-http.sh CORPUS_DIR FRAMETAP_BIN
# Environment: DECODE_TIMEOUT (seconds per stream, default 120).
# Prints one PASS/FAIL line per stream (and per server check), then "N passed, N failed".
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 CORPUS_DIR FRAMETAP_BIN" >&2
    exit 2
fi
corpus=$1
frametap=$2
timeout_s=${DECODE_TIMEOUT:-120}
manifest="$corpus/MANIFEST.tsv"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$manifest" ] || { echo "conformance-http: $manifest not found" >&2; exit 2; }
[ -x "$frametap" ] || { echo "conformance-http: $frametap is not an executable (build it first)" >&2; exit 2; }
source "$ROOT/smoke/server.sh"

work=$(mktemp -d)
cleanup() {
    if [ -n "${SERVER_PID:-}" ]; then kill -KILL "$SERVER_PID" 2> /dev/null; rm -f "$SERVER_LOG"; fi
    rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
report() { # report PASS|FAIL NAME DETAILS
    printf '%-4s  %s  %s\n' "$1" "$2" "$3"
    case $1 in
        PASS) passed=$((passed + 1)) ;;
        FAIL) failed=$((failed + 1)) ;;
    esac
}
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
}

# parse_multipart BODY HEADERS [RAW]: shell assignments (for eval), "status=S type=T parts=N got=MD5
# closed=yes|no pixfmts=a,b size=WxH problem=CODE error=TEXT" (fields that do not apply are "-");
# with RAW, the parts' payloads are also written there back to back.
parse_multipart() {
    python3 - "$@" <<'PY'
import hashlib, json, re, shlex, sys
body_path, head_path = sys.argv[1], sys.argv[2]
raw = open(sys.argv[3], "wb") if len(sys.argv) > 3 else None
head = open(head_path, "rb").read().decode("latin-1").replace("\r\n", "\n")
# curl -D keeps every header block (e.g. a 100 Continue first): the last one is the answer.
blocks = [b for b in head.split("\n\n") if b.startswith("HTTP/")]
block = blocks[-1] if blocks else ""
status = block.split(" ")[1] if block else "-"
ctype = (re.search(r"(?im)^content-type:\s*(.+)$", block) or [None, "-"])[1].strip()
out = {"status": status, "type": ctype.split(";")[0], "parts": "-", "got": "-", "closed": "-",
       "pixfmts": "-", "size": "-", "problem": "-", "problem_status": "-", "error": "-"}
data = open(body_path, "rb").read()
if ctype.startswith("application/problem+json"):
    try: out["problem"] = json.loads(data).get("code") or "-"
    except ValueError as e: out["error"] = "problem body is not JSON"
elif ctype.startswith("multipart/"):
    m = re.search(r'boundary="?([^";]+)"?', ctype)
    if not m:
        out["error"] = "no boundary in Content-Type"
    else:
        boundary = m.group(1).encode()
        opening, closing = b"--" + boundary + b"\r\n", b"--" + boundary + b"--"
        pos, count, md5, pixfmts, size, closed = 0, 0, hashlib.md5(), [], None, False
        while pos < len(data):
            if data.startswith(closing, pos):
                closed = True; break
            if not data.startswith(opening, pos):
                out["error"] = f"no boundary at byte {pos}"; break
            end = data.find(b"\r\n\r\n", pos)
            if end < 0:
                out["error"] = f"part {count + 1} headers not terminated"; break
            part = data[pos + len(opening):end].decode("latin-1")
            fields = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in part.split("\r\n"))}
            if "content-length" not in fields:
                out["error"] = f"part {count + 1} has no Content-Length"; break
            start = end + 4; stop = start + int(fields["content-length"])
            if len(data) < stop + 2 or data[stop:stop + 2] != b"\r\n":
                out["error"] = f"part {count + 1} is cut short or not followed by CRLF"; break
            if fields.get("content-type", "").startswith("application/problem+json"):
                # The push failed after the answer began: its problem ends the answer, as a part.
                try: out["problem"] = json.loads(data[start:stop]).get("code") or "-"
                except ValueError: out["error"] = "problem part is not JSON"
                out["problem_status"] = fields.get("x-problem-status", "-")
                pos = stop + 2; continue
            md5.update(memoryview(data)[start:stop]); count += 1; pos = stop + 2
            if raw: raw.write(memoryview(data)[start:stop])
            pf = fields.get("x-frame-pix-fmt", "?")
            if pf not in pixfmts: pixfmts.append(pf)
            if size is None: size = f'{fields.get("x-frame-width", "?")}x{fields.get("x-frame-height", "?")}'
        out.update(parts=count, got=md5.hexdigest(), closed="yes" if closed else "no",
                   pixfmts=",".join(pixfmts) or "-", size=size or "-")
print(" ".join(f"{k}={shlex.quote(str(v))}" for k, v in out.items()))
PY
}

# The Content-Type a file is pushed with: its codec where the name says it, else none stated.
content_type() {
    case ${1##*.} in
        264 | h264) echo video/H264 ;;
        265 | h265 | hevc) echo video/H265 ;;
        *) echo application/octet-stream ;;
    esac
}

# push FILE SESSION: POSTs the file, keeping the body and the headers; prints curl's exit status.
push() {
    curl -sS -m "$timeout_s" -X POST --data-binary @"$1" -H "Content-Type: $(content_type "$1")" \
        -H 'Accept: multipart/mixed' -D "$work/headers" -o "$work/body" \
        "$BASE/sessions/$2/nalus?flush=true&format=yuv" 2> "$work/curl.err"
    echo $?
}

healthy() { [ "$(curl -sS -m 5 "$BASE/healthz" 2> /dev/null)" = '{"status":"ok"}' ]; }

server_start "$frametap" || { report FAIL server "did not start"; finish; }

check_stream() {
    local file=$1 width=$2 height=$3 frames=$4 pix_fmt=$5 md5=$6 session=$7 per_picture=$8
    local rc result pictures="" stated
    stated=$(content_type "$file")
    rc=$(push "$corpus/$file" "$session")
    if [ "$rc" != 0 ]; then
        report FAIL "$file" "curl exit $rc: $(head -c 200 "$work/curl.err")"
        return
    fi
    result=$(parse_multipart "$work/body" "$work/headers" ${per_picture:+"$work/raw"})
    local status type parts got closed pixfmts size problem problem_status error
    eval "$result"
    if [ -n "$per_picture" ]; then
        if [ ! -f "$corpus/$per_picture" ]; then
            pictures="per-picture reference $per_picture is missing"
        elif pictures=$(python3 "$ROOT/scripts/corpus.py" nv12 "$work/raw" "$width" "$height" "$pix_fmt" \
            "$corpus/$per_picture" 2>&1); then
            pictures=ok:$pictures
        fi
        rm -f "$work/raw"
    fi
    if [ "$status" != 200 ] || [ "$type" != multipart/mixed ]; then
        report FAIL "$file" "HTTP $status $type${problem:+ (problem $problem)}"
    elif [ "$error" != - ]; then
        report FAIL "$file" "malformed multipart: $error (after $parts parts)"
    elif [ "$got" != "$md5" ]; then
        report FAIL "$file" "md5 $got != $md5 ($parts parts, expected $frames)"
    elif [ -n "$frames" ] && [ "$parts" != "$frames" ]; then
        report FAIL "$file" "md5 ok but $parts parts, expected $frames"
    elif [ "$closed" != yes ]; then
        report FAIL "$file" "no closing delimiter"
    elif [ -n "$pix_fmt" ] && [ "$pixfmts" != "$pix_fmt" ]; then
        report FAIL "$file" "X-Frame-Pix-Fmt $pixfmts, expected $pix_fmt"
    elif [ -n "$width" ] && [ "$size" != "${width}x${height}" ]; then
        report FAIL "$file" "first picture $size, expected ${width}x${height}"
    elif [ -n "$per_picture" ] && [ "${pictures#ok:}" = "$pictures" ]; then
        report FAIL "$file" "md5 ok but per-picture NV12: $pictures"
    else
        report PASS "$file" "$parts parts, md5 $got, $pixfmts $size${per_picture:+, NV12 per picture: ${pictures#ok:}}, sent as $stated"
    fi
}

check_negative() {
    local file=$1 session=$2 rc result
    rc=$(push "$corpus/$file" "$session")
    if [ "$rc" != 0 ]; then
        report FAIL "$file" "curl exit $rc: $(head -c 200 "$work/curl.err")"
        return
    fi
    result=$(parse_multipart "$work/body" "$work/headers")
    local status type parts got closed pixfmts size problem problem_status error
    eval "$result"
    if ! healthy; then
        report FAIL "$file" "the server is not healthy after it (HTTP $status $type)"
    elif [ "$type" = application/problem+json ] && [ "$status" -ge 400 ] && [ "$status" -lt 500 ] && [ "$problem" != - ]; then
        report PASS "$file" "rejected as expected: HTTP $status problem $problem"
    elif [ "$type" = multipart/mixed ] && [ "$parts" = 0 ] && [ "$closed" = yes ] && [ "$problem" != - ] \
        && [ "$problem_status" -ge 400 ] 2> /dev/null && [ "$problem_status" -lt 500 ]; then
        report PASS "$file" "rejected as expected: no picture, then a $problem_status problem part $problem"
    elif [ "$status" = 200 ] && [ "$type" = multipart/mixed ] && [ "$parts" = 0 ] && [ "$closed" = yes ] && [ "$error" = - ]; then
        report PASS "$file" "no picture, as expected: HTTP 200 multipart with 0 parts, closed"
    else
        report FAIL "$file" "negative case: HTTP $status $type, parts $parts, problem $problem, error $error"
    fi
}

n=0
# Fields separated by 0x1F (scripts/corpus.py): with IFS=$'\t', read would merge empty columns.
while IFS=$'\x1f' read -r -u 3 file width height frames pix_fmt yuv_md5 per_picture; do
    n=$((n + 1))
    session="conf-$n-$$"
    if [ ! -f "$corpus/$file" ]; then
        report FAIL "$file" "listed in the manifest but missing from $corpus"
    elif [ -n "$yuv_md5" ]; then
        check_stream "$file" "$width" "$height" "$frames" "$pix_fmt" "$yuv_md5" "$session" "$per_picture"
    elif [ -z "$frames" ] || [ "$frames" = 0 ]; then
        check_negative "$file" "$session"
    else
        report SKIP "$file" "no md5 for $frames expected frames"
    fi
    rm -f "$work/body" "$work/headers"
    curl -sS -m 10 -o /dev/null -X DELETE "$BASE/sessions/$session" 2> /dev/null
done 3< <(python3 "$ROOT/scripts/corpus.py" rows "$corpus")

if healthy; then report PASS server "healthy after $n streams"; else report FAIL server "not healthy after $n streams"; fi
if server_stop; then report PASS server "exited 0 on SIGTERM"; else report FAIL server "exit ${SERVER_EXIT:-?} on SIGTERM"; fi
finish
