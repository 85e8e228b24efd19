#!/usr/bin/env bash
# Packs what the GPU check needs on a machine with a GPU but no Debian packages, no ffmpeg and no
# network (../shared/notes/gpu.md), into .device/ (git-ignored; carry it there):
#   .device/pack/pack.tar.xz   the release frametap with every library it loads (its ldd closure,
#                              glibc excepted, stripped), and libnvjpeg.so.12 from PyPI's
#                              nvidia-nvjpeg-cu12 wheel (frametap loads it at run time to encode
#                              JPEG on the GPU); unpack as ../shared/notes/gpu.md says
#   .device/streams/           a 1080p30 H.264 High camera-like stream (and with GPU_PACK_STREAMS
#                              its H.265 Main twin), 45 pictures (the first 1.5 s of bench/make-streams.sh's), with a MANIFEST.tsv
#                              of their reference decodes made here by ffmpeg (size, pictures,
#                              pixel format, MD5 of every decoded picture): that machine has no
#                              ffmpeg, so the references travel with the streams
#   .device/testdata/h26x      with GPU_PACK_H265_CORPUS=1 / GPU_PACK_H264_CORPUS=1, when there is
#                              room: the third-party conformance streams (../shared/testdata), the
#                              H.265 manifest rewritten into the columns scripts/conformance.sh reads
# and checks that it all, with the repository's own files, stays within what travels (64 MiB).
#
#   scripts/gpu-pack.sh [FRAMETAP_RELEASE_BIN]   (default .build-bench/release/frametap, built by
#                                                `make gpu-pack` / `make bench`)
# Then on the GPU machine: scripts/gpu-check.sh (with .device carried).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/.build-bench/release/frametap}
DEVICE=${GPU_PACK_DIR:-$ROOT/.device}
SHARED=${SHARED_DIR:-$ROOT/../shared}
LIMIT=$((64 << 20))
# The pack is 56 MB since libavformat came (its libraries: libxml2 and ICU, codec2, SRT, GnuTLS,
# ...) and libnvjpeg 3.4 MB more, so the stream is 1.5 s (the first 1.5 s of a 2 s GOP) and the H.264
# conformance corpus (2.4 MB; on NVDEC 10/12 on both cards of 2026-11-25, BENCHMARKS.md) stays
# here unless asked for; with it, its two largest streams stay here anyway:
# PPH10I1_Panasonic_A (High 10, which NVDEC refuses; its software fallback is what `make test`
# checks) and HPCVMOLQ_BRCM_B (1.9 MB of 8-bit High 4:2:0, the profile the 1080p streams exercise).
PICTURES=${GPU_PACK_PICTURES:-45}
H264_CORPUS=${GPU_PACK_H264_CORPUS:-0}
H265_CORPUS=${GPU_PACK_H265_CORPUS:-0}
# The 1080p streams: H.264 only by default; the H.265 one (1.1 MB: H1 and G5's H.265 row, both
# measured on 2026-11-25) and the H.265 corpus when GPU_PACK_STREAMS / GPU_PACK_H265_CORPUS ask
# and there is room. What travels is counted in disk blocks, as the device tool counts it.
STREAMS=${GPU_PACK_STREAMS:-gpu1080.264}
LEAVE_OUT=${GPU_PACK_LEAVE_OUT-PPH10I1_Panasonic_A.264 HPCVMOLQ_BRCM_B.264}
# libnvjpeg from PyPI (the one registry besides Debian's): pinned, kept in .bench/wheels.
NVJPEG_WHEEL=${GPU_PACK_NVJPEG:-nvidia-nvjpeg-cu12==12.4.0.76}
[ -x "$BIN" ] || { echo "gpu-pack: no release binary at $BIN (make gpu-pack builds it)" >&2; exit 2; }
for tool in ffmpeg ffprobe python3 xz strip; do
    command -v "$tool" > /dev/null || { echo "gpu-pack: $tool is not installed" >&2; exit 2; }
done
mkdir -p "$DEVICE"

# The binary and its libraries, stripped (the binary's symbols are three quarters of it), and
# libnvjpeg; xz -9e, which packs them 0.7 MB smaller than -9. Unpacked as device-pack.sh's are.
wheels="$ROOT/.bench/wheels"
if ! ls "$wheels"/nvidia_nvjpeg_cu12-*.whl > /dev/null 2>&1; then
    mkdir -p "$wheels"
    python=python3
    [ -x "$ROOT/.venv/bin/python" ] && python="$ROOT/.venv/bin/python"  # Debian's python3 has pip only with python3-pip
    "$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$wheels" "$NVJPEG_WHEEL" \
        || { echo "gpu-pack: cannot download $NVJPEG_WHEEL from PyPI" >&2; exit 2; }
fi
staging="$DEVICE/staging"
rm -rf "$staging" "$DEVICE/pack"
mkdir -p "$staging/bin" "$staging/libs" "$DEVICE/pack"
strip -o "$staging/bin/frametap" "$BIN"
ldd "$BIN" | awk '/=> \//{print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|libresolv)\.so|ld-linux' | sort -u |
    while read -r lib; do cp -L "$lib" "$staging/libs/"; done
python3 - "$(ls "$wheels"/nvidia_nvjpeg_cu12-*.whl | head -1)" "$staging/libs" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    member = next(name for name in wheel.namelist() if name.endswith("/lib/libnvjpeg.so.12"))
    with open(sys.argv[2] + "/libnvjpeg.so.12", "wb") as out:
        out.write(wheel.read(member))
PY
chmod u+w "$staging"/libs/*
strip --strip-unneeded "$staging"/libs/* 2> /dev/null || true
tar -C "$staging" -cf - bin libs | xz -T1 -9e > "$DEVICE/pack/pack.tar.xz"
echo "gpu-pack: frametap + $(ls "$staging/libs" | wc -l) libraries in $DEVICE/pack/pack.tar.xz ($(du -h "$DEVICE/pack/pack.tar.xz" | cut -f1))"
rm -rf "$staging"

# The streams: cut at access-unit boundaries (tools/harness/annexb.py's splitters), from an IDR, so each is a
# stream of its own; their reference decodes in the manifest format of scripts/conformance.sh.
"$ROOT/bench/make-streams.sh" "$ROOT/.bench/streams" > /dev/null
rm -rf "$DEVICE/streams"
mkdir -p "$DEVICE/streams"
python3 - "$ROOT" "$DEVICE/streams" "$PICTURES" $STREAMS <<'PY'
import os, sys
root, out, pictures, wanted = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
sys.path.insert(0, os.path.join(root, "tools"))
from harness.annexb import Stream
for source, name in (("cam1080.264", "gpu1080.264"), ("cam1080.265", "gpu1080.265")):
    if name not in wanted:
        continue
    stream = Stream(os.path.join(root, ".bench", "streams", source))
    if not stream.idr[0]:
        sys.exit("gpu-pack: %s does not start with a keyframe" % source)
    with open(os.path.join(out, name), "wb") as f:
        f.write(b"".join(stream.aus[:pictures]))
PY
{
    printf 'file\tsource\tnotes\twidth\theight\tframes\tpix_fmt\tfield_order\tyuv_md5\tmd5_source\tdecode_flags\n'
    for name in $STREAMS; do
        raw=$([ "${name##*.}" = 265 ] && echo hevc || echo h264)
        md5=$(ffmpeg -nostdin -hide_banner -loglevel error -f "$raw" -i "$DEVICE/streams/$name" -f rawvideo - | md5sum | cut -d' ' -f1)
        IFS=, read -r width height pix_fmt < <(ffprobe -v error -select_streams v:0 \
            -show_entries stream=width,height,pix_fmt -of csv=p=0 "$DEVICE/streams/$name")
        frames=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames -of csv=p=0 \
            "$DEVICE/streams/$name")
        printf '%s\tbench/make-streams.sh, first %s pictures\t1080p30 camera-like %s\t%s\t%s\t%s\t%s\tprogressive\t%s\t%s\t\n' \
            "$name" "$PICTURES" "$raw" "$width" "$height" "$frames" "$pix_fmt" "$md5" "ffmpeg $(ffmpeg -version | head -1 | cut -d' ' -f3)"
    done
} > "$DEVICE/streams/MANIFEST.tsv"

# The conformance corpora; H.265's manifest (file, bytes, frames, size, pix_fmt,
# md5_whole_yuv420p, ...) in the standard columns.
rm -rf "$DEVICE/testdata"
mkdir -p "$DEVICE/testdata"
if [ "$H264_CORPUS" = 1 ] && [ -d "$SHARED/testdata/h264" ]; then
    cp -r "$SHARED/testdata/h264" "$DEVICE/testdata/h264"
    for name in $LEAVE_OUT; do
        rm -f "$DEVICE/testdata/h264/$name"
        grep -v -F "$name" "$DEVICE/testdata/h264/MANIFEST.tsv" > "$DEVICE/testdata/h264/MANIFEST.tsv.new" || true
        mv "$DEVICE/testdata/h264/MANIFEST.tsv.new" "$DEVICE/testdata/h264/MANIFEST.tsv"
    done
fi
if [ "$H265_CORPUS" = 1 ] && [ -d "$SHARED/testdata/h265" ]; then
    mkdir -p "$DEVICE/testdata/h265"
    cp "$SHARED"/testdata/h265/*.h265 "$DEVICE/testdata/h265/"
    python3 - "$SHARED/testdata/h265/MANIFEST.tsv" > "$DEVICE/testdata/h265/MANIFEST.tsv" <<'PY'
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
header = rows[0]
col = {name: header.index(name) for name in header}
print("file\tsource\tnotes\twidth\theight\tframes\tpix_fmt\tfield_order\tyuv_md5\tmd5_source\tdecode_flags")
for row in rows[1:]:
    width, height = row[col["size"]].split("x")
    print("\t".join([row[col["file"]], "chromeos/cros-codecs (../shared/testdata/h265)", row[col["notes"]], width, height,
                     row[col["frames"]], row[col["pix_fmt"]], "progressive", row[col["md5_whole_yuv420p"]],
                     "libavcodec 5.1, checked against the per-picture NV12 references", ""]))
PY
fi
chmod -R u+w "$DEVICE/testdata"

# What travels: the tracked files and .device.
tracked=$(cd "$ROOT" && git ls-files -z | xargs -0 du -c --block-size=1 2> /dev/null | tail -1 | cut -f1)
carried=$(du -s --block-size=1 "$DEVICE" | cut -f1)
total=$((tracked + carried))
echo "gpu-pack: $(du -sh "$DEVICE/pack/pack.tar.xz" | cut -f1) pack, $(du -sh "$DEVICE/streams" | cut -f1) streams," \
    "$(du -sh "$DEVICE/testdata" | cut -f1) conformance streams, $((tracked >> 10)) KiB of tracked files:" \
    "$total of $LIMIT bytes ($((total >> 20)) MiB of $((LIMIT >> 20)))"
if [ "$total" -gt "$LIMIT" ]; then
    echo "gpu-pack: over the $((LIMIT >> 20)) MiB that travel; shorten the streams (PICTURES) or leave a corpus out" >&2
    exit 1
fi
echo "gpu-pack: carry .device; there run scripts/gpu-check.sh (results in \$OUT/gpu-check.md)"
