#!/usr/bin/env bash
# Camera-like H.264 and H.265 Annex B streams for `make bench` (libx264 / libx265, moving content
# with temporal noise).
#   bench/make-streams.sh [DIR]   (default .bench/streams; existing files are kept)
# cam1080.264: 10 s 1920x1080 30 fps High, no B-frames (as IP cameras send), ~6 Mbit/s, IDR every 2 s
#              with SPS/PPS repeated before each IDR.
# cam720b.264: 10 s 1280x720 30 fps Main with B-frames (2), ~3 Mbit/s, IDR every 2 s, headers repeated.
# cam1080.265: 10 s 1920x1080 30 fps HEVC Main, no B-frames, ~4 Mbit/s (H.265 at two thirds of the
#              H.264 rate, as cameras are set up), IDR every 2 s with VPS/SPS/PPS repeated (H1, H3).
# cam1080m10.265: the same scene in HEVC Main 10 (yuv420p10le), ~4 Mbit/s (H2).
set -euo pipefail
dir=${1:-.bench/streams}
mkdir -p "$dir"
# testsrc2 moves (gradients, counters, a sweeping bar); the noise is temporal and uniform like sensor
# noise, and a slow zoom/pan keeps every block changing, as in a real scene.
scene() { # WIDTH HEIGHT
  echo "testsrc2=size=$1x$2:rate=30,noise=alls=10:allf=t+u,format=yuv420p"
}
make_stream() { # NAME WIDTH HEIGHT PROFILE BFRAMES KBPS
  local out="$dir/$1"
  [ -s "$out" ] && return 0
  ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi -i "$(scene "$2" "$3")" -t 10 \
    -c:v libx264 -preset veryfast -profile:v "$4" -pix_fmt yuv420p \
    -b:v "${6}k" -maxrate "${6}k" -bufsize "$((2 * $6))k" \
    -x264-params "keyint=60:min-keyint=60:scenecut=0:bframes=$5:repeat-headers=1" \
    -f h264 "$out.tmp"
  mv "$out.tmp" "$out"
}
make_hevc_stream() { # NAME WIDTH HEIGHT PIX_FMT KBPS
  local out="$dir/$1"
  [ -s "$out" ] && return 0
  ffmpeg -nostdin -hide_banner -loglevel error -y -f lavfi -i "$(scene "$2" "$3")" -t 10 \
    -c:v libx265 -preset veryfast -pix_fmt "$4" -b:v "${5}k" \
    -x265-params "keyint=60:min-keyint=60:scenecut=0:bframes=0:repeat-headers=1:vbv-maxrate=$5:vbv-bufsize=$((2 * $5)):log-level=error" \
    -f hevc "$out.tmp"
  mv "$out.tmp" "$out"
}
make_stream cam1080.264 1920 1080 high 0 6000
make_stream cam720b.264 1280 720 main 2 3000
make_hevc_stream cam1080.265 1920 1080 yuv420p 4000
make_hevc_stream cam1080m10.265 1920 1080 yuv420p10le 4000
for f in "$dir"/cam1080.264 "$dir"/cam720b.264 "$dir"/cam1080.265 "$dir"/cam1080m10.265; do
  frames=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames -of csv=p=0 "$f")
  echo "$(basename "$f"): $(stat -c %s "$f") bytes, $frames frames"
done
