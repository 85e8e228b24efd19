#!/usr/bin/env bash
# Generates FrameTap's own small H.264 (.264, libx264) and H.265 (.265, libx265) Annex B test
# streams with ffmpeg and writes OUTDIR/MANIFEST.tsv in the same format as the third-party
# conformance manifest, so that scripts/conformance.sh can check both.
#
# The encoders' output depends on their versions (and defaults), so the expected MD5s are
# measured from the files just produced, with the reference decode below. The streams and the
# manifest are therefore one unit: regenerate and commit them together, never one without the
# other.
#
# Usage: scripts/make-fixtures.sh OUTDIR
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
out_dir=$1

for tool in ffmpeg ffprobe python3 md5sum; do
  command -v "$tool" >/dev/null || { echo "make-fixtures: $tool not found" >&2; exit 1; }
done
# Captured first: grep -q would close the pipe early and pipefail would report ffmpeg's SIGPIPE.
x264_help=$(ffmpeg -hide_banner -h encoder=libx264 2>/dev/null || true)
if ! grep -q 'Supported pixel formats' <<<"$x264_help"; then
  echo "make-fixtures: this ffmpeg has no libx264 encoder" >&2
  exit 1
fi
x265_help=$(ffmpeg -hide_banner -h encoder=libx265 2>/dev/null || true)
if ! grep -q 'Supported pixel formats' <<<"$x265_help"; then
  echo "make-fixtures: this ffmpeg has no libx265 encoder" >&2
  exit 1
fi

mkdir -p "$out_dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ffmpeg_quiet=(ffmpeg -nostdin -hide_banner -loglevel error -y)

# One x264 thread: x264's bitstream depends on its thread count, and the automatic count
# depends on the machine, so pinning it keeps regeneration reproducible across hosts.
x264_common=(-c:v libx264 -threads 1 -preset medium -crf 30)

# encode OUTFILE SOURCE_FILTER FRAMES [encoder args...]
encode() {
  local outfile=$1 source=$2 frames=$3
  shift 3
  "${ffmpeg_quiet[@]}" -f lavfi -i "$source" -frames:v "$frames" "${x264_common[@]}" "$@" \
    -f h264 "$outfile"
}

# x265 the same way: its thread pool and frame threads pinned to one (its output then does not
# depend on the machine; checked by encoding twice), wavefronts off unless a fixture is about
# them (x265 turns them on by default), and no log on stderr.
x265_common=(-c:v libx265 -preset medium -crf 30)
x265_pinned="pools=1:frame-threads=1:log-level=error:wpp=0"

# encode265 OUTFILE SOURCE_FILTER FRAMES X265_PARAMS [encoder args...]
# ffmpeg's raw HEVC output repeats VPS, SPS and PPS before every IRAP picture (it sets x265's
# repeat-headers, since the raw muxer has nowhere else to put them).
encode265() {
  local outfile=$1 source=$2 frames=$3 params=$4
  shift 4
  "${ffmpeg_quiet[@]}" -f lavfi -i "$source" -frames:v "$frames" "${x265_common[@]}" "$@" \
    -x265-params "$x265_pinned${params:+:$params}" -f hevc "$outfile"
}

# The demuxer of a fixture: raw H.264 or raw H.265, by its extension.
raw_format() {
  case $1 in
    *.265) echo hevc ;;
    *) echo h264 ;;
  esac
}

# The reference decode that defines every expected MD5 (same command as the third-party manifest).
reference_md5() {
  ffmpeg -nostdin -loglevel error -flags unaligned -f "$(raw_format "$1")" -i "$1" -autoscale 0 \
    -fps_mode passthrough -f rawvideo - | md5sum | cut -d' ' -f1
}

reference_frame_count() {
  ffmpeg -nostdin -loglevel error -flags unaligned -f "$(raw_format "$1")" -i "$1" -autoscale 0 \
    -fps_mode passthrough -f framecrc - | grep -cv '^#' || true
}

probe() {  # prints "width height pix_fmt field_order profile" of the first picture size
  ffprobe -v error -f "$(raw_format "$1")" -select_streams v:0 \
    -show_entries stream=width,height,pix_fmt,field_order,profile -of default=nw=1 "$1" |
    awk -F= '{v[$1]=$2} END {print v["width"], v["height"], v["pix_fmt"], v["field_order"], v["profile"]}'
}

src_testsrc() { echo "testsrc2=size=$1:rate=25"; }
src_noisy() { echo "testsrc2=size=$1:rate=25,noise=alls=10:allf=t"; }
src_mandelbrot() { echo "mandelbrot=size=$1:rate=25"; }

manifest="$work/MANIFEST.tsv"
printf 'file\tsource\tnotes\twidth\theight\tframes\tpix_fmt\tfield_order\tyuv_md5\tmd5_source\tdecode_flags\n' >"$manifest"
x264_version=""
x265_version=""

# add_fixture FILE EXPECTED_FRAMES "W H PIX_FMT FIELD_ORDER PROFILE" SOURCE_DESC NOTES
# Checks the stream really is what it claims (a newer x264 could silently pick another
# profile or format) and appends its manifest row.
add_fixture() {
  local file=$1 expected_frames=$2 expected_probe=$3 source_desc=$4 notes=$5
  local path="$out_dir/$file" actual_probe frames md5 width height pix_fmt field_order
  actual_probe=$(probe "$path")
  if [ "$actual_probe" != "$expected_probe" ]; then
    echo "make-fixtures: $file probes as '$actual_probe', expected '$expected_probe'" >&2
    exit 1
  fi
  frames=$(reference_frame_count "$path")
  if [ "$frames" != "$expected_frames" ]; then
    echo "make-fixtures: $file decodes to $frames frames, expected $expected_frames" >&2
    exit 1
  fi
  md5=$(reference_md5 "$path")
  read -r width height pix_fmt field_order _ <<<"$actual_probe"
  local encoder
  case $file in
    *.265)
      if [ -z "$x265_version" ]; then
        x265_version=$(grep -aoE 'x265 \(build [0-9]+\) - [0-9][0-9.+a-z]*' "$path" | head -n1 |
          sed -E 's/^x265 \(build ([0-9]+)\) - (.*)/\2, build \1/')
      fi
      encoder="libx265 ($x265_version)" ;;
    *)
      if [ -z "$x264_version" ]; then
        x264_version=$(grep -aoE 'x264 - core [0-9]+ r[0-9]+ [0-9a-f]+' "$path" | head -n1 | sed 's/x264 - //')
      fi
      encoder="libx264 ($x264_version)" ;;
  esac
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
    "$file" "scripts/make-fixtures.sh: $source_desc -> $encoder" "$notes" \
    "$width" "$height" "$frames" "$pix_fmt" "$field_order" "$md5" \
    "libavcodec 5.1 output at fixture creation" "" >>"$manifest"
  printf '%-40s %7d bytes %3d frames %s\n' "$file" "$(stat -c %s "$path")" "$frames" "$pix_fmt"
}

count_start_codes() {  # prints "four_byte three_byte_only"
  python3 - "$1" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read()
four = data.count(b"\x00\x00\x00\x01")
print(four, data.count(b"\x00\x00\x01") - four)
EOF
}

# --- The fixtures ------------------------------------------------------------------------

f=baseline_176x144.264
encode "$out_dir/$f" "$(src_testsrc 176x144)" 20 -profile:v baseline -pix_fmt yuv420p
add_fixture $f 20 "176 144 yuv420p progressive Constrained Baseline" "lavfi testsrc2" \
  "Constrained Baseline; CAVLC; I/P only; 20 frames"

f=main_bframes_176x144.264
encode "$out_dir/$f" "$(src_mandelbrot 176x144)" 25 -profile:v main -pix_fmt yuv420p \
  -x264-params bframes=3:b-pyramid=normal:keyint=250
add_fixture $f 25 "176 144 yuv420p progressive Main" "lavfi mandelbrot" \
  "Main; CABAC; 3 B-frames with B-pyramid (output order != decode order); 25 frames"

f=high_320x240.264
encode "$out_dir/$f" "$(src_noisy 320x240)" 15 -profile:v high -pix_fmt yuv420p -x264-params 8x8dct=1
add_fixture $f 15 "320 240 yuv420p progressive High" "lavfi testsrc2+noise" \
  "High; CABAC; 8x8 transform; B-frames; 15 frames"

f=slices4_320x240.264
encode "$out_dir/$f" "$(src_testsrc 320x240)" 15 -profile:v high -pix_fmt yuv420p -x264-params slices=4
add_fixture $f 15 "320 240 yuv420p progressive High" "lavfi testsrc2" \
  "High; 4 slices per picture (first_mb_in_slice != 0); 15 frames"

f=interlaced_tff_320x240.264
encode "$out_dir/$f" "$(src_testsrc 320x240)" 16 -profile:v high -pix_fmt yuv420p \
  -x264-params interlaced=1:tff=1
add_fixture $f 16 "320 240 yuv420p tt High" "lavfi testsrc2" \
  "High; interlaced MBAFF (frame_mbs_only_flag=0, mb_adaptive_frame_field_flag=1), top field first; coded 320x256 cropped to 240 lines; pic timing SEI per picture; B-frames; 16 frames"

f=yuv422p_320x240.264
encode "$out_dir/$f" "$(src_testsrc 320x240)" 12 -profile:v high422 -pix_fmt yuv422p
add_fixture $f 12 "320 240 yuv422p progressive High 4:2:2" "lavfi testsrc2" \
  "High 4:2:2; 8-bit 4:2:2 (chroma_format_idc=2); 12 frames"

f=yuv444p_176x144.264
encode "$out_dir/$f" "$(src_testsrc 176x144)" 12 -profile:v high444 -pix_fmt yuv444p
add_fixture $f 12 "176 144 yuv444p progressive High 4:4:4 Predictive" "lavfi testsrc2" \
  "High 4:4:4 Predictive; 8-bit 4:4:4 (chroma_format_idc=3); 12 frames"

f=high10_320x240.264
encode "$out_dir/$f" "$(src_testsrc 320x240)" 12 -profile:v high10 -pix_fmt yuv420p10le
add_fixture $f 12 "320 240 yuv420p10le progressive High 10" "lavfi testsrc2" \
  "High 10; 10-bit 4:2:0 (bit_depth 10), inter frames with B-frames; 12 frames"

f=yuv422p10_176x144.264
encode "$out_dir/$f" "$(src_testsrc 176x144)" 10 -profile:v high422 -pix_fmt yuv422p10le
add_fixture $f 10 "176 144 yuv422p10le progressive High 4:2:2" "lavfi testsrc2" \
  "High 4:2:2; 10-bit 4:2:2; 10 frames"

f=gray_176x144.264
encode "$out_dir/$f" "$(src_testsrc 176x144)" 15 -profile:v high -pix_fmt gray -color_range tv
add_fixture $f 15 "176 144 yuv420p progressive High" "lavfi testsrc2 (grey)" \
  "High; monochrome 4:0:0 (chroma_format_idc=0), decoded by libavcodec as yuv420p with chroma planes at 128; 15 frames"

f=odd_crop_322x242.264
encode "$out_dir/$f" "$(src_testsrc 322x242)" 15 -profile:v high -pix_fmt yuv420p
add_fixture $f 15 "322 242 yuv420p progressive High" "lavfi testsrc2" \
  "High; odd picture size 322x242: coded 336x256 with frame cropping right 14, bottom 14; 15 frames"

f=fullrange_176x144.264
encode "$out_dir/$f" "$(src_testsrc 176x144)" 15 -profile:v high -pix_fmt yuvj420p -color_range pc
add_fixture $f 15 "176 144 yuvj420p progressive High" "lavfi testsrc2" \
  "High; full range (VUI video_full_range_flag=1), libavcodec reports yuvj420p; 15 frames"

f=aud_sei_176x144.264
encode "$out_dir/$f" "$(src_testsrc 176x144)" 15 -profile:v main -pix_fmt yuv420p -x264-params aud=1
add_fixture $f 15 "176 144 yuv420p progressive Main" "lavfi testsrc2" \
  "Main; access unit delimiter (NAL 9) before every picture; x264 user-data-unregistered SEI (NAL 6) in the first access unit; 15 frames"

f=repeat_headers_176x144.264
encode "$out_dir/$f" "$(src_testsrc 176x144)" 20 -profile:v main -pix_fmt yuv420p \
  -x264-params repeat-headers=1:keyint=8:min-keyint=8:scenecut=0
add_fixture $f 20 "176 144 yuv420p progressive Main" "lavfi testsrc2" \
  "Main; SPS/PPS repeated before every IDR (x264 repeat-headers; IDR every 8 frames, 3 IDRs); 20 frames"

# Resolution change: two complete streams back to back, each opening with SPS/PPS/IDR.
f=res_change_176x144_320x240.264
encode "$work/part1.264" "$(src_testsrc 176x144)" 10 -profile:v main -pix_fmt yuv420p
encode "$work/part2.264" "$(src_testsrc 320x240)" 10 -profile:v main -pix_fmt yuv420p
cat "$work/part1.264" "$work/part2.264" >"$out_dir/$f"
add_fixture $f 20 "176 144 yuv420p progressive Main" "lavfi testsrc2, two streams concatenated" \
  "RES-CHANGE: Main; 10 frames 176x144 then a new SPS/PPS/IDR and 10 frames 320x240 (ffprobe shows only the first size; decode output has both); 20 frames"

# Only 3-byte start codes: x264 writes 00 00 00 01 before parameter sets and the first slice,
# and the splitter must find units behind the short form just as well.
f=startcode3_176x144.264
encode "$work/long.264" "$(src_testsrc 176x144)" 15 -profile:v main -pix_fmt yuv420p -x264-params slices=2
read -r long_four long_three <<<"$(count_start_codes "$work/long.264")"
python3 - "$work/long.264" "$out_dir/$f" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read()
# Emulation prevention keeps 00 00 00 out of NAL payloads, so every 00 00 00 01 is a start code.
open(sys.argv[2], "wb").write(data.replace(b"\x00\x00\x00\x01", b"\x00\x00\x01"))
EOF
read -r short_four short_three <<<"$(count_start_codes "$out_dir/$f")"
if [ "$short_four" != 0 ] || [ "$short_three" != $((long_four + long_three)) ]; then
  echo "make-fixtures: start code rewrite failed ($long_four+$long_three -> $short_four+$short_three)" >&2
  exit 1
fi
if [ "$(reference_md5 "$work/long.264")" != "$(reference_md5 "$out_dir/$f")" ]; then
  echo "make-fixtures: $f decodes differently from its 4-byte start code original" >&2
  exit 1
fi
add_fixture $f 15 "176 144 yuv420p progressive Main" "lavfi testsrc2, start codes rewritten" \
  "Main; 2 slices per picture; every start code is 3-byte 00 00 01 (rewritten from x264's $long_four 4-byte ones); 15 frames"

# --- H.265 -------------------------------------------------------------------------------
# x265 cannot code tiles or dependent slice segments: the tests build those syntax elements
# themselves. Every x265 stream carries a prefix SEI with the encoder's settings (user data
# unregistered) in its first access unit.

f=main_bframes_176x144.265
encode265 "$out_dir/$f" "$(src_mandelbrot 176x144)" 25 \
  "bframes=3:b-pyramid=1:keyint=250:temporal-layers=1:aud=1:hash=1" -pix_fmt yuv420p
add_fixture $f 25 "176 144 yuv420p unknown Main" "lavfi mandelbrot" \
  "Main; 3 B-frames with B-pyramid (output order != decode order); non-reference B pictures in temporal sub-layer 1 (TSA_N); access unit delimiter before and MD5 picture hash suffix SEI after every picture; 25 frames"

f=main10_320x240.265
encode265 "$out_dir/$f" "$(src_testsrc 320x240)" 12 "" -pix_fmt yuv420p10le
add_fixture $f 12 "320 240 yuv420p10le unknown Main 10" "lavfi testsrc2" \
  "Main 10; 10-bit 4:2:0 (bit_depth 10); B-frames; 12 frames"

f=slices4_320x240.265
# x265 codes several slices only with wavefronts on.
encode265 "$out_dir/$f" "$(src_testsrc 320x240)" 15 "wpp=1:slices=4" -pix_fmt yuv420p
add_fixture $f 15 "320 240 yuv420p unknown Main" "lavfi testsrc2" \
  "Main; 4 slices per picture (first_slice_segment_in_pic_flag 0, slice_segment_address != 0), with wavefronts (x265 needs them for slices); 15 frames"

f=wpp_320x240.265
encode265 "$out_dir/$f" "$(src_noisy 320x240)" 15 "wpp=1" -pix_fmt yuv420p
add_fixture $f 15 "320 240 yuv420p unknown Main" "lavfi testsrc2+noise" \
  "Main; wavefront parallel processing (entropy_coding_sync_enabled_flag, entry points in every slice header); 15 frames"

f=open_gop_176x144.265
encode265 "$out_dir/$f" "$(src_testsrc 176x144)" 30 \
  "keyint=8:min-keyint=8:scenecut=0:open-gop=1:bframes=3" -pix_fmt yuv420p
add_fixture $f 30 "176 144 yuv420p unknown Main" "lavfi testsrc2" \
  "Main; open GOP: IDR first, then a CRA every 8 pictures, each followed by RASL leading pictures (RASL_R, RASL_N); 30 frames"

f=radl_176x144.265
encode265 "$out_dir/$f" "$(src_testsrc 176x144)" 30 \
  "keyint=8:min-keyint=8:scenecut=0:open-gop=0:bframes=3:radl=2" -pix_fmt yuv420p
add_fixture $f 30 "176 144 yuv420p unknown Main" "lavfi testsrc2" \
  "Main; closed GOP with decodable leading pictures: IDR_N_LP first, then IDR_W_RADL every 8 pictures, each followed by RADL_R and RADL_N; 30 frames"

f=yuv422p10_176x144.265
encode265 "$out_dir/$f" "$(src_testsrc 176x144)" 10 "" -pix_fmt yuv422p10le
add_fixture $f 10 "176 144 yuv422p10le unknown Rext" "lavfi testsrc2" \
  "Main 4:2:2 10 (format range extensions; ffprobe says Rext); 10-bit 4:2:2 (chroma_format_idc 2); 10 frames"

f=yuv444p_176x144.265
encode265 "$out_dir/$f" "$(src_testsrc 176x144)" 10 "" -pix_fmt yuv444p
add_fixture $f 10 "176 144 yuv444p unknown Rext" "lavfi testsrc2" \
  "Main 4:4:4 (format range extensions; ffprobe says Rext); 8-bit 4:4:4 (chroma_format_idc 3); 10 frames"

f=gray_176x144.265
encode265 "$out_dir/$f" "$(src_testsrc 176x144)" 10 "" -pix_fmt gray
add_fixture $f 10 "176 144 gray unknown Rext" "lavfi testsrc2 (grey)" \
  "Monochrome (format range extensions; ffprobe says Rext); 4:0:0 (chroma_format_idc 0), decoded by libavcodec as gray; 10 frames"

f=fullrange_bt709_176x144.265
encode265 "$out_dir/$f" "$(src_testsrc 176x144)" 10 "" -pix_fmt yuvj420p -color_range pc \
  -color_primaries bt709 -color_trc bt709 -colorspace bt709
add_fixture $f 10 "176 144 yuvj420p unknown Main" "lavfi testsrc2" \
  "Main; full range (VUI video_full_range_flag 1, libavcodec reports yuvj420p) with a bt709 colour description; 10 frames"

f=odd_crop_322x242.265
encode265 "$out_dir/$f" "$(src_testsrc 322x242)" 10 "" -pix_fmt yuv420p
add_fixture $f 10 "322 242 yuv420p unknown Main" "lavfi testsrc2" \
  "Main; odd picture size 322x242: coded 328x248 with a conformance window (right 3, bottom 3 in chroma units); 10 frames"

f=repeat_headers_176x144.265
encode265 "$out_dir/$f" "$(src_testsrc 176x144)" 20 "keyint=8:min-keyint=8:scenecut=0:open-gop=0" -pix_fmt yuv420p
add_fixture $f 20 "176 144 yuv420p unknown Main" "lavfi testsrc2" \
  "Main; VPS/SPS/PPS before every IDR (as ffmpeg writes raw HEVC; IDR every 8 pictures, 3 IDRs); 20 frames"

# Parameter sets only at the start: x265's repeat-headers=0 puts them nowhere in a raw stream
# (they would go to the container's header), so the repeats of the stream above are taken out.
f=headers_once_176x144.265
python3 - "$out_dir/repeat_headers_176x144.265" "$out_dir/$f" <<'EOF2'
import sys
data = open(sys.argv[1], "rb").read()
starts, index = [], data.find(b"\x00\x00\x01")
while index >= 0:
    starts.append(index)
    index = data.find(b"\x00\x00\x01", index + 3)
seen, kept = set(), []
for number, start in enumerate(starts):
    end = starts[number + 1] if number + 1 < len(starts) else len(data)
    unit = data[start + 3:end].rstrip(b"\x00")
    kind = unit[0] >> 1 & 0x3F
    if kind in (32, 33, 34) and kind in seen:  # VPS, SPS, PPS seen before
        continue
    seen.add(kind)
    kept.append(b"\x00\x00\x00\x01" + unit)
open(sys.argv[2], "wb").write(b"".join(kept))
EOF2
if [ "$(reference_md5 "$out_dir/repeat_headers_176x144.265")" != "$(reference_md5 "$out_dir/$f")" ]; then
  echo "make-fixtures: $f decodes differently from the stream it was cut from" >&2
  exit 1
fi
add_fixture $f 20 "176 144 yuv420p unknown Main" "lavfi testsrc2, repeated parameter sets removed" \
  "Main; VPS/SPS/PPS only at the start (IDR every 8 pictures, 3 IDRs; the repeats of repeat_headers_176x144.265 removed); 20 frames"

# Resolution change: two complete streams back to back, each opening with VPS/SPS/PPS/IDR.
f=res_change_176x144_320x240.265
encode265 "$work/part1.265" "$(src_testsrc 176x144)" 10 "" -pix_fmt yuv420p
encode265 "$work/part2.265" "$(src_testsrc 320x240)" 10 "" -pix_fmt yuv420p
cat "$work/part1.265" "$work/part2.265" >"$out_dir/$f"
add_fixture $f 20 "176 144 yuv420p unknown Main" "lavfi testsrc2, two streams concatenated" \
  "RES-CHANGE: Main; 10 frames 176x144 then a new VPS/SPS/PPS (same ids) and IDR and 10 frames 320x240 (ffprobe shows only the first size; decode output has both); 20 frames"

mv "$manifest" "$out_dir/MANIFEST.tsv"
total=$(find "$out_dir" -maxdepth 1 \( -name '*.264' -o -name '*.265' \) -printf '%s\n' | awk '{s+=$1} END {print s}')
echo "make-fixtures: wrote $(($(wc -l <"$out_dir/MANIFEST.tsv") - 1)) fixtures ($total bytes) and MANIFEST.tsv to $out_dir"
