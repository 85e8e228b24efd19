#!/usr/bin/env bash
# make container-test: builds the Dockerfile with podman, runs the image, runs the curl smoke
# suite (smoke/run.sh) against the container, checks the image's health check and that
# `podman stop` (SIGTERM) ends it with exit status 0 within a few seconds.
#
# No Docker engine and no image registry are needed (see ../shared/notes/containers.md):
# - installs podman, runc and debootstrap from apt when missing, and sets
#   default_ulimits = [] in /etc/containers/containers.conf;
# - makes the base images locally and keeps them between runs (podman image exists):
#     $RUNTIME_BASE  debootstrap --variant=minbase bookworm, trimmed like debian:bookworm-slim
#     $BUILDER_BASE  that plus the Swift toolchain's runtime packages; the toolchain itself
#                    ($SWIFT_TOOLCHAIN, /opt/swift) and the package mirror are mounted into the
#                    build, like an official swift:*-bookworm image would provide them.
#
#   scripts/container-test.sh            # IMAGE=localhost/frametap:test
#   KEEP_IMAGE=0 scripts/container-test.sh   # remove the built image at the end
#
# Prints "ok"/"FAIL" lines, then "N passed, N failed"; exit status non-zero on any failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

IMAGE=${IMAGE:-localhost/frametap:test}
RUNTIME_BASE=${RUNTIME_BASE:-localhost/frametap-base:bookworm-slim}
BUILDER_BASE=${BUILDER_BASE:-localhost/frametap-swift-builder:bookworm}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SWIFT_TOOLCHAIN=${SWIFT_TOOLCHAIN:-/opt/swift}
SWIFT_PACKAGES=${SWIFT_PACKAGES:-/opt/swift-packages}
STOP_LIMIT=${STOP_LIMIT:-5}
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
PODMAN=(podman --runtime runc)
START=$(date +%s)

PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "ok   $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL $*"; }
step() { echo "== $* ($(($(date +%s) - START)) s)"; }
finish() {
    echo "container-test took $(($(date +%s) - START)) s"
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" = 0 ]
    exit
}

# --- host set-up (idempotent) -----------------------------------------------------------------
apt_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q 'ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "container-test: installing ${missing[*]}"
        $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
            --no-install-recommends "${missing[@]}" > /dev/null
    fi
}
step "host packages"
apt_install podman runc debootstrap curl jq python3 || { fail "apt install podman runc debootstrap"; finish; }

# rootless or not, podman here fails with "setrlimit RLIMIT_NOFILE: Operation not permitted"
# unless containers get no default ulimits.
CONF=/etc/containers/containers.conf
if ! grep -qs '^[[:space:]]*default_ulimits' "$CONF"; then
    if grep -qs '^\[containers\]' "$CONF"; then
        $SUDO sed -i 's/^\[containers\]/[containers]\ndefault_ulimits = []/' "$CONF"
    else
        printf '[containers]\ndefault_ulimits = []\n' | $SUDO tee -a "$CONF" > /dev/null
    fi
fi

# --- base images (cached) ---------------------------------------------------------------------
WORK=$(mktemp -d)
CONTAINER=""
cleanup() {
    [ -n "$CONTAINER" ] && "${PODMAN[@]}" rm -f -t 0 "$CONTAINER" > /dev/null 2>&1
    [ "${KEEP_IMAGE:-1}" = 0 ] && podman rmi -f "$IMAGE" > /dev/null 2>&1
    $SUDO rm -rf "$WORK"
}
trap cleanup EXIT

if ! podman image exists "$RUNTIME_BASE"; then
    step "debootstrap $RUNTIME_BASE"
    rootfs=$WORK/rootfs
    if ! $SUDO debootstrap --variant=minbase bookworm "$rootfs" "$DEBIAN_MIRROR" > "$WORK/debootstrap.log" 2>&1; then
        tail -20 "$WORK/debootstrap.log"; fail "debootstrap bookworm"; finish
    fi
    # What debian:bookworm-slim has: the three suites, no docs/man pages/locales in packages.
    $SUDO tee "$rootfs/etc/apt/sources.list" > /dev/null <<EOF
deb $DEBIAN_MIRROR bookworm main
deb $DEBIAN_MIRROR bookworm-updates main
deb ${DEBIAN_MIRROR%/debian}/debian-security bookworm-security main
EOF
    $SUDO tee "$rootfs/etc/dpkg/dpkg.cfg.d/docker" > /dev/null <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
EOF
    $SUDO find "$rootfs/usr/share/doc" -mindepth 2 -not -name copyright -not -type d -delete
    $SUDO rm -rf "$rootfs"/usr/share/{man,info,groff,lintian,linda}/* "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
    $SUDO find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
    if ! $SUDO tar -C "$rootfs" -c . | podman import --change 'CMD ["bash"]' - "$RUNTIME_BASE" > /dev/null 2>&1; then
        fail "podman import $RUNTIME_BASE"; finish
    fi
    $SUDO rm -rf "$rootfs"
fi
if ! podman image exists "$BUILDER_BASE"; then
    step "build $BUILDER_BASE"
    # The toolchain's runtime dependencies (those of the official swift:*-bookworm image, minus
    # the toolchain itself, which is mounted read-only into the build from $SWIFT_TOOLCHAIN).
    if ! podman build --isolation chroot --network host -t "$BUILDER_BASE" -f - "$WORK" > "$WORK/builder.log" 2>&1 <<EOF
FROM $RUNTIME_BASE
RUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      binutils libc6-dev gcc libstdc++-12-dev libcurl4 libxml2 libedit2 libsqlite3-0 libpython3.11 \
      libncurses6 zlib1g-dev git pkg-config ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=$SWIFT_TOOLCHAIN/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
EOF
    then
        tail -20 "$WORK/builder.log"; fail "build $BUILDER_BASE"; finish
    fi
fi
pass "base images $RUNTIME_BASE and $BUILDER_BASE"

# --- the image --------------------------------------------------------------------------------
step "podman build $IMAGE"
MOUNTS=(-v "$SWIFT_TOOLCHAIN:$SWIFT_TOOLCHAIN:ro")
[ -d "$SWIFT_PACKAGES" ] && MOUNTS+=(-v "$SWIFT_PACKAGES:$SWIFT_PACKAGES:ro")
[ -f /etc/gitconfig ] && MOUNTS+=(-v /etc/gitconfig:/etc/gitconfig:ro)
build_start=$(date +%s)
# --format docker keeps HEALTHCHECK (the OCI image format has no such field).
if podman build --isolation chroot --network host --format docker "${MOUNTS[@]}" \
    --build-arg BUILDER_IMAGE="$BUILDER_BASE" --build-arg RUNTIME_IMAGE="$RUNTIME_BASE" \
    -t "$IMAGE" . > "$WORK/build.log" 2>&1; then
    pass "podman build ($(($(date +%s) - build_start)) s)"
else
    tail -40 "$WORK/build.log"; fail "podman build"; finish
fi
size=$(podman image inspect --format '{{.Size}}' "$IMAGE")
base_size=$(podman image inspect --format '{{.Size}}' "$RUNTIME_BASE")
echo "image $IMAGE: $((size / 1000000)) MB (base $((base_size / 1000000)) MB)"

config=$(podman image inspect --format '{{.Config.User}} {{json .Config.ExposedPorts}} {{.Config.StopSignal}} {{json .Config.Healthcheck.Test}}' "$IMAGE")
case $config in
    "10001:10001 "*8080/tcp*" SIGTERM "*healthcheck*) pass "image config: non-root user, port 8080, SIGTERM, health check" ;;
    *) fail "image config: $config" ;;
esac
libs=$("${PODMAN[@]}" run --rm --no-healthcheck --network none --entrypoint /bin/sh "$IMAGE" -c \
    'ldd /usr/local/bin/frametap | grep -c "not found"; ls /usr/lib/x86_64-linux-gnu/dri 2>/dev/null | tr "\n" " "')
check_libs=$(echo "$libs" | head -1)
[ "$check_libs" = 0 ] && pass "every shared library of frametap resolves in the image" || fail "missing libraries: $libs"
echo "VA drivers in the image: $(echo "$libs" | tail -1)"

# --- run it -----------------------------------------------------------------------------------
PORT=$(python3 "$ROOT/tools/harness/ports.py")
export SMOKE_MAX_BODY_BYTES=4000000 SMOKE_MAX_NAL_BYTES=1000000
CONTAINER=frametap-ct-$$
step "podman run on port $PORT"
if ! "${PODMAN[@]}" run -d --name "$CONTAINER" --network host \
    -e FRAMETAP_HOST=127.0.0.1 -e FRAMETAP_PORT="$PORT" -e FRAMETAP_MAX_BODY_BYTES="$SMOKE_MAX_BODY_BYTES" \
    -e FRAMETAP_MAX_NAL_BYTES="$SMOKE_MAX_NAL_BYTES" "$IMAGE" > /dev/null 2> "$WORK/run.log"; then
    # (podman logs an error when it cannot add a systemd timer for the health check: harmless)
    cat "$WORK/run.log"; fail "podman run"; finish
fi
for _ in $(seq 100); do
    curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz" 2> /dev/null && break
    sleep 0.1
done
if curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz"; then
    pass "container answers /healthz"
else
    "${PODMAN[@]}" logs "$CONTAINER" | tail -20; fail "container did not come up"; finish
fi
ids=$("${PODMAN[@]}" exec "$CONTAINER" id)
case $ids in
    "uid=10001(frametap) gid=10001(frametap)"*) pass "server runs as $ids" ;;
    *) fail "server runs as $ids (want uid and gid 10001, frametap)" ;;
esac
"${PODMAN[@]}" exec "$CONTAINER" /usr/local/bin/frametap healthcheck && pass "frametap healthcheck exits 0" \
    || fail "frametap healthcheck"
# The configured health check itself (podman runs it once; no systemd timer needed).
"${PODMAN[@]}" healthcheck run "$CONTAINER" > /dev/null 2>&1
check_health=$("${PODMAN[@]}" inspect --format '{{.State.Health.Status}}' "$CONTAINER")
[ "$check_health" = healthy ] && pass "podman healthcheck run: healthy" || fail "health: $check_health"
# The log is read whole first: with pipefail, `grep -q` quitting early would SIGPIPE podman.
LOG_TEXT=$("${PODMAN[@]}" logs "$CONTAINER" 2>&1)
grep -q 'hardware decoding' <<< "$LOG_TEXT" && pass "start-up log reports hardware decoding" \
    || fail "no hardware report in the log"
system=$(curl -fsS "http://127.0.0.1:$PORT/system" | jq -c '[.version, (.hardware.renderNodes | length), .vaapiAvailable, .hardware.libavcodecVAAPI]')
case $system in
    '["'*'",'*',false,true]' | '["'*'",'*',true,true]') pass "GET /system in the container: $system (version, render nodes, VA-API usable, libavcodec VA-API)" ;;
    *) fail "GET /system: $system" ;;
esac

step "smoke suite against the container"
if "$ROOT/smoke/run.sh" "http://127.0.0.1:$PORT" > "$WORK/smoke.log" 2>&1; then
    pass "smoke suite: $(tail -1 "$WORK/smoke.log")"
else
    grep -E '^FAIL' "$WORK/smoke.log"; fail "smoke suite: $(tail -1 "$WORK/smoke.log")"
fi

# --- graceful stop ----------------------------------------------------------------------------
step "podman stop (SIGTERM)"
stop_start=$(date +%s%N)
"${PODMAN[@]}" stop -t 30 "$CONTAINER" > /dev/null 2>&1
stop_ms=$((($(date +%s%N) - stop_start) / 1000000))
exit_code=$("${PODMAN[@]}" inspect --format '{{.State.ExitCode}}' "$CONTAINER")
[ "$exit_code" = 0 ] && pass "exit status 0 after SIGTERM" || {
    "${PODMAN[@]}" logs "$CONTAINER" 2>&1 | tail -20; fail "exit status $exit_code after SIGTERM"; }
[ "$stop_ms" -le $((STOP_LIMIT * 1000)) ] && pass "stopped in $stop_ms ms (limit ${STOP_LIMIT} s)" \
    || fail "stop took $stop_ms ms (limit ${STOP_LIMIT} s)"
LOG_TEXT=$("${PODMAN[@]}" logs "$CONTAINER" 2>&1)
grep -q 'stopped' <<< "$LOG_TEXT" && pass "server logged its graceful stop" \
    || fail "no 'stopped' line in the log"

finish
