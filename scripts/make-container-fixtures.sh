#!/usr/bin/env bash
# Generates the container fixtures (Tests/Fixtures/Containers): H.264 and H.265 in MP4 (moov
# first, moov at the end, fragmented one fragment per picture), MPEG-TS, Matroska and FLV, one
# with AAC audio beside the video, a VP8 WebM (a codec FrameTap refuses) and audio-only files
# (no video track), and writes OUTDIR/MANIFEST.tsv with the MD5 of each file's pictures as the
# ffmpeg CLI decodes that same file (the reference the container tests compare FrameTap with).
#
# Each codec's stream is encoded once and remuxed with -c copy, so the files of one codec carry
# the same pictures; encoders' output changes between versions, so the files and the manifest
# are one unit: regenerate and commit them together.
#
# Usage: scripts/make-container-fixtures.sh OUTDIR
set -euo pipefail
out_dir=${1:?usage: $0 OUTDIR}
for tool in ffmpeg md5sum; do
  command -v "$tool" > /dev/null || { echo "make-container-fixtures: $tool not found" >&2; exit 1; }
done
mkdir -p "$out_dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ff=(ffmpeg -nostdin -hide_banner -loglevel error -y)

# H.264: 20 pictures of 320x240 with B-frames and a keyframe every 10, plus 1 s of AAC audio.
"${ff[@]}" -f lavfi -i testsrc2=size=320x240:rate=25 -f lavfi -i sine=frequency=440:sample_rate=48000 \
  -frames:v 20 -t 0.8 -c:v libx264 -threads 1 -preset medium -crf 32 -g 10 -bf 2 -pix_fmt yuv420p \
  -c:a aac -b:a 32k -movflags +faststart "$out_dir/h264_320x240_aac.mp4"
"${ff[@]}" -i "$out_dir/h264_320x240_aac.mp4" -map 0:v -c copy -movflags +faststart "$out_dir/h264_320x240.mp4"
"${ff[@]}" -i "$out_dir/h264_320x240_aac.mp4" -map 0:v -c copy "$out_dir/h264_320x240_moov_at_end.mp4"
"${ff[@]}" -i "$out_dir/h264_320x240_aac.mp4" -map 0:v -c copy \
  -movflags frag_every_frame+empty_moov+default_base_moof "$out_dir/h264_320x240_fragmented.mp4"
"${ff[@]}" -i "$out_dir/h264_320x240_aac.mp4" -map 0 -c copy -f mpegts "$out_dir/h264_320x240_aac.ts"
"${ff[@]}" -i "$out_dir/h264_320x240_aac.mp4" -map 0:v -c copy "$out_dir/h264_320x240.mkv"
# The same pictures twice in one MPEG-TS, the second time on another video PID (a re-muxed
# source): the PMT changes mid-stream.
"${ff[@]}" -i "$out_dir/h264_320x240_aac.mp4" -map 0:v -c copy -streamid 0:256 -f mpegts "$work/first.ts"
"${ff[@]}" -i "$out_dir/h264_320x240_aac.mp4" -map 0:v -c copy -streamid 0:512 -f mpegts "$work/second.ts"
cat "$work/first.ts" "$work/second.ts" > "$out_dir/h264_320x240_pid_change.ts"
"${ff[@]}" -i "$out_dir/h264_320x240_aac.mp4" -map 0:v -c copy "$out_dir/h264_320x240.flv"

# No B-frames (as IP cameras send): each picture comes out of the decoder as soon as it is in,
# so a fragment per picture shows each picture the moment its fragment's last byte arrived.
"${ff[@]}" -f lavfi -i testsrc2=size=320x240:rate=25 -frames:v 20 -c:v libx264 -threads 1 -preset medium -crf 32 \
  -g 10 -bf 0 -pix_fmt yuv420p -movflags frag_every_frame+empty_moov+default_base_moof \
  "$out_dir/h264_320x240_ipp_fragmented.mp4"

# H.265: 20 pictures of 176x144 with B-frames, x265 pinned to one thread (reproducible).
"${ff[@]}" -f lavfi -i testsrc2=size=176x144:rate=25 -frames:v 20 -c:v libx265 -preset medium -crf 32 \
  -x265-params pools=1:frame-threads=1:log-level=error:wpp=0:keyint=10:bframes=2 -pix_fmt yuv420p \
  -tag:v hvc1 -movflags +faststart "$out_dir/h265_176x144.mp4"
"${ff[@]}" -i "$out_dir/h265_176x144.mp4" -c copy -tag:v hvc1 \
  -movflags frag_every_frame+empty_moov+default_base_moof "$out_dir/h265_176x144_fragmented.mp4"
"${ff[@]}" -i "$out_dir/h265_176x144.mp4" -c copy -f mpegts "$out_dir/h265_176x144.ts"
"${ff[@]}" -i "$out_dir/h265_176x144.mp4" -c copy "$out_dir/h265_176x144.mkv"

# Refused: a VP8 WebM, and audio with no video track.
"${ff[@]}" -f lavfi -i testsrc2=size=176x144:rate=25 -frames:v 5 -c:v libvpx -b:v 200k "$out_dir/vp8_176x144.webm"
"${ff[@]}" -f lavfi -i sine=frequency=440:sample_rate=48000 -t 0.5 -c:a aac -b:a 32k "$out_dir/audio_only.mp4"
"${ff[@]}" -f lavfi -i sine=frequency=440:sample_rate=48000 -t 0.5 -c:a aac -b:a 32k -f mpegts "$out_dir/audio_only.ts"

# The reference: the ffmpeg CLI's decode of each file's first video track, every picture.
# (MPEG-TS read as FrameTap reads it: a PMT's new PIDs continue the same streams.)
reference() {
  local merge=(); case $1 in *.ts) merge=(-merge_pmt_versions 1) ;; esac
  ffmpeg -nostdin -hide_banner -loglevel error -flags unaligned "${merge[@]}" -i "$1" -map 0:v:0 -autoscale 0 \
    -fps_mode passthrough -f rawvideo - | md5sum | cut -d' ' -f1
}
frames() {
  local merge=(); case $1 in *.ts) merge=(-merge_pmt_versions 1) ;; esac
  ffmpeg -nostdin -hide_banner -loglevel error "${merge[@]}" -i "$1" -map 0:v:0 -fps_mode passthrough -f framemd5 - | grep -vc '^#'
}
{
  printf 'file\tcontainer\tcodec\twidth\theight\tframes\tyuv_md5\tnotes\n'
  row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@"; }
  for f in h264_320x240_aac.mp4 h264_320x240.mp4 h264_320x240_moov_at_end.mp4 h264_320x240_fragmented.mp4 \
    h264_320x240_ipp_fragmented.mp4 \
    h264_320x240_aac.ts h264_320x240_pid_change.ts h264_320x240.mkv h264_320x240.flv; do
    case $f in
      *_aac.mp4) c=mp4 n="moov first; AAC audio track beside the video" ;;
      *_moov_at_end.mp4) c=mp4 n="moov after mdat (not faststart)" ;;
      *_ipp_fragmented.mp4) c=mp4 n="no B-frames; fragmented, one moof+mdat per picture" ;;
      *_fragmented.mp4) c=mp4 n="fragmented: empty moov, one moof+mdat per picture" ;;
      *.mp4) c=mp4 n="moov first" ;;
      *_pid_change.ts) c=mpegts n="the pictures twice, the second time on another video PID (PMT change)" ;;
      *.ts) c=mpegts n="AAC audio PID beside the video" ;;
      *.mkv) c=matroska n="" ;;
      *.flv) c=flv n="" ;;
    esac
    row "$f" "$c" h264 320 240 "$(frames "$out_dir/$f")" "$(reference "$out_dir/$f")" "$n"
  done
  for f in h265_176x144.mp4 h265_176x144_fragmented.mp4 h265_176x144.ts h265_176x144.mkv; do
    case $f in *_fragmented.mp4) c=mp4 n="fragmented, hvc1" ;; *.mp4) c=mp4 n="hvc1, moov first" ;;
      *.ts) c=mpegts n="" ;; *.mkv) c=matroska n="" ;; esac
    row "$f" "$c" h265 176 144 "$(frames "$out_dir/$f")" "$(reference "$out_dir/$f")" "$n"
  done
  row vp8_176x144.webm matroska vp8 176 144 5 - "refused: unsupported_codec"
  row audio_only.mp4 mp4 - - - 0 - "refused: no_video_track"
  row audio_only.ts mpegts - - - 0 - "refused: no_video_track"
} > "$out_dir/MANIFEST.tsv"
echo "wrote $(($(wc -l < "$out_dir/MANIFEST.tsv") - 1)) container fixtures to $out_dir"
