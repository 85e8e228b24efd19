# Shared helpers for the smoke scripts (sourced, not run). Needs curl, jq, python3, md5sum.
# BASE is the server's URL; FIXTURES the committed fixtures; TMP a scratch directory.

SMOKE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FIXTURES=${FIXTURES:-$SMOKE_DIR/../Tests/Fixtures}
PASSED=${PASSED:-0}
FAILED=${FAILED:-0}

pass() { PASSED=$((PASSED + 1)); echo "ok   $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $*"; }

# check NAME ACTUAL EXPECTED
check() {
    if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: got '$2', want '$3'"; fi
}

# expect NAME CONDITION-RESULT DETAIL: passes when the result is 0 (like `test`)
expect() { if [ "$2" = 0 ]; then pass "$1"; else fail "$1${3:+: $3}"; fi; }

# A fresh session name per run, so scripts can run against a long-lived server.
session_name() { echo "smoke-$1-$$-$RANDOM"; }

# manifest FILE COLUMN: a value from Tests/Fixtures/MANIFEST.tsv
manifest() {
    awk -F'\t' -v file="$1" -v col="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
        $1 == file { print $c }' "$FIXTURES/MANIFEST.tsv"
}

# jpeg_size FILE: "WIDTHxHEIGHT" from the start-of-frame marker, or "not-a-jpeg"
jpeg_size() {
    python3 - "$1" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
if data[:2] != b"\xff\xd8" or data[-2:] != b"\xff\xd9":
    print("not-a-jpeg"); sys.exit()
i = 2
while i + 9 < len(data) and data[i] == 0xFF:
    marker, length = data[i + 1], struct.unpack(">H", data[i + 2:i + 4])[0]
    if 0xC0 <= marker <= 0xC3:
        height, width = struct.unpack(">HH", data[i + 5:i + 9])
        print(f"{width}x{height}"); sys.exit()
    i += 2 + length
print("not-a-jpeg")
PY
}

# multipart FILE HEADERS_FILE: prints "COUNT MD5-OF-CONCATENATED-PARTS CLOSED", checking that
# every part is "--boundary CRLF headers CRLF CRLF bytes CRLF" with a Content-Length.
multipart() {
    python3 - "$1" "$2" <<'PY'
import hashlib, re, sys
data = open(sys.argv[1], "rb").read()
headers = open(sys.argv[2], "rb").read().decode("latin-1")
boundary = re.search(r"boundary=\"?([^\";\r\n]+)", headers).group(1).encode()
opening, closing = b"--" + boundary + b"\r\n", b"--" + boundary + b"--\r\n"
pos, count, md5, closed = 0, 0, hashlib.md5(), False
while pos < len(data):
    if data.startswith(closing, pos):
        closed = True; break
    if not data.startswith(opening, pos): break
    end = data.find(b"\r\n\r\n", pos)
    if end < 0: break
    head = data[pos:end].decode("latin-1")
    length = re.search(r"(?im)^content-length:\s*(\d+)", head)
    if not length or len(data) < end + 4 + int(length.group(1)) + 2: break
    start = end + 4; stop = start + int(length.group(1))
    if data[stop:stop + 2] != b"\r\n": break
    md5.update(data[start:stop]); count += 1; pos = stop + 2
print(count, md5.hexdigest(), "closed" if closed else "open")
PY
}

# push SESSION FILE [QUERY]: POST the whole file in one request; prints the JSON answer
push() {
    curl -sS -X POST --data-binary @"$2" -H 'Content-Type: application/octet-stream' "$BASE/sessions/$1/nalus${3:+?$3}"
}

# status_of METHOD URL [curl args...]: the HTTP status only
status_of() {
    local method=$1 url=$2
    shift 2
    curl -sS -o /dev/null -w '%{http_code}' -X "$method" "$@" "$url"
}

# problem_of METHOD URL [curl args...]: "STATUS CODE CONTENT-TYPE" of a problem answer
problem_of() {
    local method=$1 url=$2
    shift 2
    local body
    body=$(curl -sS -X "$method" -D "$TMP/problem-headers" "$@" "$url")
    local type
    type=$(tr -d '\r' < "$TMP/problem-headers" | awk -F': ' 'tolower($1) == "content-type" { print $2 }' | tail -1)
    echo "$(jq -r '.status' <<<"$body") $(jq -r '.code' <<<"$body") $type"
}

# Browser checks (need chromium and TMP).

# png_check FILE X Y W H: "ok ..." when the rectangle of the PNG shows a picture (at least 90 %
# of its pixels not white and at least 16 distinct colours), otherwise "blank ...". Decodes the
# PNG with zlib only (8-bit RGB/RGBA, not interlaced: what Chromium and GStreamer write).
png_check() {
    python3 - "$@" <<'PY'
import struct, sys, zlib
path, x0, y0, w, h = sys.argv[1], *map(int, sys.argv[2:6])
data = open(path, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, ihdr = 8, b"", None
while pos < len(data):
    length, kind = struct.unpack(">I4s", data[pos:pos + 8])
    chunk = data[pos + 8:pos + 8 + length]
    if kind == b"IHDR": ihdr = struct.unpack(">IIBBBBB", chunk)
    elif kind == b"IDAT": idat += chunk
    pos += 12 + length
width, height, depth, colour, _, _, interlace = ihdr
channels = {2: 3, 6: 4}.get(colour)
if depth != 8 or channels is None or interlace:
    print(f"unsupported PNG depth {depth} colour type {colour} interlace {interlace}"); sys.exit()
raw, stride = zlib.decompress(idat), width * channels
rows, prev = [], bytearray(stride)
for y in range(min(height, y0 + h)):
    kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - channels] if i >= channels else 0
        b = prev[i]
        c = prev[i - channels] if i >= channels else 0
        if kind == 1: line[i] = (line[i] + a) & 255
        elif kind == 2: line[i] = (line[i] + b) & 255
        elif kind == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif kind == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line); prev = line
colours, non_white, total = set(), 0, 0
for y in range(y0, min(height, y0 + h)):
    for x in range(x0, min(width, x0 + w)):
        px = bytes(rows[y][x * channels:x * channels + 3])
        colours.add(px); total += 1
        non_white += px != b"\xff\xff\xff"
fraction = non_white / max(total, 1)
verdict = "ok" if total and fraction >= 0.9 and len(colours) >= 16 else "blank"
print(f"{verdict} ({width}x{height} PNG; in {w}x{h}+{x0}+{y0}: {fraction:.0%} not white, {len(colours)} colours)")
PY
}

# chromium_shot URL PNG: headless Chromium renders a page whose only content is
# (CHROMIUM_EXTRA_FLAGS are added to its command line, e.g. to accept a test certificate)
# <img src=URL width=320 height=240> at the top left; the MJPEG never finishes loading, so the
# virtual time budget ends the page load. Prints Chromium's exit status.
chromium_shot() {
    printf '<!doctype html><html><body style="margin:0;background:#fff"><img src="%s" width="320" height="240"></body></html>\n' \
        "$1" > "$TMP/page.html"
    timeout -k 5 60 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
        ${CHROMIUM_EXTRA_FLAGS:-} --hide-scrollbars --user-data-dir="$TMP/chromium-profile" --window-size=640,480 \
        --virtual-time-budget=4000 --screenshot="$2" "file://$TMP/page.html" > "$TMP/chromium.log" 2>&1
    echo $?
}
