#!/usr/bin/env bash
# Assembles the hand-written PTX of the GPU's JPEG input kernels (JPEGInputKernels.ptx) with
# NVIDIA's ptxas, for the ISA target it names (sm_52) and for Hopper (sm_90, the cards measured),
# so a kernel the driver would refuse to JIT fails here, on a machine without a GPU, before any
# device time is spent. What the kernels compute is checked by ImagingTests' JPEGInputKernelTests.
#
# ptxas comes from PyPI's nvidia-cuda-nvcc-cu12 wheel (pinned, 22 MB, kept in .bench/wheels).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHEEL=${PTX_CHECK_NVCC:-nvidia-cuda-nvcc-cu12==12.4.131}
SOURCE="$ROOT/Sources/Imaging/Device/JPEGInputKernels.swift"
wheels="$ROOT/.bench/wheels"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! ls "$wheels"/nvidia_cuda_nvcc_cu12-*.whl > /dev/null 2>&1; then
    mkdir -p "$wheels"
    timeout 300 python3 -m pip download --quiet --no-deps --disable-pip-version-check --dest "$wheels" "$WHEEL" \
        || { echo "ptx-check: cannot download $WHEEL from PyPI" >&2; exit 2; }
fi
# The wheel's ptxas, and the PTX as Swift reads the literal: the closing delimiter's indentation
# taken off every line.
python3 - "$(ls "$wheels"/nvidia_cuda_nvcc_cu12-*.whl | head -1)" "$SOURCE" "$work" <<'PY'
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
entries=$(grep -c '^\.visible \.entry ' "$work/kernels.ptx")
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
echo "ptx-check: ptxas ($WHEEL) assembles JPEGInputKernels.ptx ($entries kernels) for sm_52 and sm_90"
