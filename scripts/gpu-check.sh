#!/usr/bin/env bash
# The GPU check in one command: H.264 and H.265 conformance on `--backend cuda` and the GPU
# benchmarks (G1-G5, G1x, H1 on cuda against software), written to one results file. Made for the GPU
# machine of ../shared/notes/gpu.md (no Debian packages, no ffmpeg, no network, python3): it runs
# the release build packed by `make gpu-pack` (.device/pack/pack.tar.xz, carried with .device),
# unpacked to /tmp/ft as that note says. Without CUDA (here) it says so and runs the software half.
#
#   scripts/gpu-check.sh                      # results in $OUT/gpu-check.md when OUT is set (the
#                                             # GPU machine's returned folder), else
#                                             # .test-output/gpu-check/gpu-check.md
#   FRAMETAP_BIN=path scripts/gpu-check.sh    # a binary of this machine instead of the pack
# Environment: GPU_CHECK_BUDGET (seconds, default 450: the whole run stays under 8 minutes),
# GPU_CHECK_DEVICE_DIR (default .device), GPU_CHECK_STEPS (a subset of conformance,g1x,jpeg,g5,g2,g1,g3,
# for a rerun). Exit 1 when a conformance run failed.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEVICE=${GPU_CHECK_DEVICE_DIR:-$ROOT/.device}
RESULTS=${OUT:-$ROOT/.test-output/gpu-check}
BIN=${FRAMETAP_BIN:-}
mkdir -p "$RESULTS"
if [ -z "$BIN" ]; then
    if [ ! -f "$DEVICE/pack/pack.tar.xz" ]; then
        echo "gpu-check: no $DEVICE/pack/pack.tar.xz: run \`make gpu-pack\` first (and carry .device)" >&2
        exit 2
    fi
    UNPACK=${GPU_CHECK_UNPACK:-/tmp/ft}
    rm -rf "$UNPACK"
    mkdir -p "$UNPACK"
    tar xJf "$DEVICE/pack/pack.tar.xz" -C "$UNPACK" || { echo "gpu-check: cannot unpack the pack" >&2; exit 2; }
    export LD_LIBRARY_PATH=$UNPACK/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PATH=$UNPACK/bin:$PATH
    BIN=$UNPACK/bin/frametap
fi
exec python3 "$ROOT/scripts/gpu-check.py" --binary "$BIN" --device-dir "$DEVICE" --results "$RESULTS"
