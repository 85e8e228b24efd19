#!/usr/bin/env bash
# Assembles the hand-written PTX of the GPU's JPEG input kernels (JPEGInputKernels.ptx) with
# NVIDIA's ptxas, for the ISA target it names (sm_52) and for Hopper (sm_90, the cards measured),
# so a kernel the driver would refuse to JIT fails here, on a machine without a GPU, before any
# device time is spent. What the kernels compute is checked by ImagingTests' JPEGInputKernelTests.
#
# ptxas comes from PyPI's nvidia-cuda-nvcc-cu12 wheel (pinned by version and hash, 22 MB, kept in
# .bench/wheels), fetched with the pip of the project's .venv (make test-deps makes it; Debian's
# python3 has no pip of its own), or of python3 where it has one.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=12.4.131
WHEEL_FILE=nvidia_cuda_nvcc_cu12-$VERSION-py3-none-manylinux2014_x86_64.whl
WHEEL_SHA256=e4c9a35435c3b0e36c6397c5696334c9ea6650e524736cbd1c5d345ea099bb04
SOURCE="$ROOT/Sources/Imaging/Device/JPEGInputKernels.swift"
wheels="$ROOT/.bench/wheels"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ ! -f "$wheels/$WHEEL_FILE" ]; then
    python=""
    for candidate in "$ROOT/.venv/bin/python" python3; do
        if "$candidate" -m pip --version > /dev/null 2>&1; then python=$candidate; break; fi
    done
    [ -n "$python" ] || { echo "ptx-check: no pip to fetch $WHEEL_FILE (make test-deps makes .venv)" >&2; exit 2; }
    mkdir -p "$wheels"
    timeout 300 "$python" -m pip download --quiet --no-deps --only-binary=:all: --disable-pip-version-check \
        --platform manylinux2014_x86_64 --dest "$work/download" "nvidia-cuda-nvcc-cu12==$VERSION" \
        || { echo "ptx-check: cannot download nvidia-cuda-nvcc-cu12==$VERSION from PyPI" >&2; exit 2; }
    [ -f "$work/download/$WHEEL_FILE" ] || { echo "ptx-check: PyPI gave $(ls "$work/download"), not $WHEEL_FILE" >&2; exit 2; }
    mv "$work/download/$WHEEL_FILE" "$wheels/$WHEEL_FILE"
fi
if ! echo "$WHEEL_SHA256  $wheels/$WHEEL_FILE" | sha256sum --check --status; then
    echo "ptx-check: $wheels/$WHEEL_FILE is not the wheel pinned (sha256 $WHEEL_SHA256); remove it to fetch it again" >&2
    exit 2
fi
# The wheel's ptxas, and the PTX as Swift reads the literal: the closing delimiter's indentation
# taken off every line.
python3 - "$wheels/$WHEEL_FILE" "$SOURCE" "$work" <<'PY'
import os, re, sys, zipfile
wheel, source, work = sys.argv[1:]
with zipfile.ZipFile(wheel) as archive:
    member = next(name for name in archive.namelist() if name.endswith("/bin/ptxas"))
    with open(os.path.join(work, "ptxas"), "wb") as out:
        out.write(archive.read(member))
os.chmod(os.path.join(work, "ptxas"), 0o755)
text = open(source).read()
match = re.search(r'static let ptx = """\n(.*?)\n( *)"""', text, re.S)
if not match:
    sys.exit(f"ptx-check: no `static let ptx = \"\"\"` literal in {source}")
indent = len(match.group(2))
lines = [line[indent:] if line.strip() else "" for line in match.group(1).split("\n")]
with open(os.path.join(work, "kernels.ptx"), "w") as out:
    out.write("\n".join(lines) + "\n")
PY
entries=$(grep -c '^\.visible \.entry ' "$work/kernels.ptx" || true)
[ "$entries" -gt 0 ] || { echo "ptx-check: no .visible .entry in the PTX of $SOURCE" >&2; exit 1; }
for gpu in sm_52 sm_90; do
    if ! "$work/ptxas" --gpu-name "$gpu" --warn-on-spills -o "$work/kernels.$gpu.cubin" "$work/kernels.ptx" 2> "$work/errors"; then
        echo "ptx-check: ptxas refuses JPEGInputKernels.ptx for $gpu:" >&2
        cat "$work/errors" >&2
        exit 1
    fi
    if [ -s "$work/errors" ]; then
        echo "ptx-check: ptxas warns for $gpu:" >&2
        cat "$work/errors" >&2
        exit 1
    fi
done
echo "ptx-check: ptxas $VERSION assembles JPEGInputKernels.ptx ($entries kernels) for sm_52 and sm_90"
