#!/usr/bin/env bash
# The per-session cost behind the resource requests in deploy/k8s/deployment.yaml: a server
# (release build) takes one live push (ffmpeg -re, chunked POST) of a generated 720p or 1080p
# stream, optionally with one MJPEG viewer, and this prints the server's CPU (cores, averaged
# over the push) and RSS (idle, peak) for each case.
#   scripts/measure-session-cost.sh [path/to/release/frametap] [seconds]
set -euo pipefail
BINARY=${1:-.build/release/frametap}
SECONDS_PER_RUN=${2:-20}
T=$(mktemp -d)
trap 'kill $SERVER 2> /dev/null; rm -rf "$T"' EXIT
TICKS=$(getconf CLK_TCK)
for size in 1280x720 1920x1080; do
    rate=$([ $size = 1280x720 ] && echo 4M || echo 8M)
    ffmpeg -v error -y -f lavfi -i "testsrc2=size=$size:rate=30" \
        -f lavfi -i "nullsrc=size=$size:rate=30,geq=random(1)*255:128:128" \
        -filter_complex "[0][1]blend=all_mode=addition:all_opacity=0.1,format=yuv420p" \
        -t "$SECONDS_PER_RUN" -c:v libx264 -preset veryfast -profile:v high -g 60 -bf 0 \
        -tune zerolatency -b:v "$rate" -f h264 "$T/$size.264"
done
PORT=$(python3 "$(dirname "$0")/../tools/harness/ports.py")
"$BINARY" serve --host 127.0.0.1 --port "$PORT" --log-level warning &
SERVER=$!
sleep 1
rss() { awk '/^VmRSS/ { print int($2 / 1024) }' "/proc/$SERVER/status"; }
cpu() { awk '{ print $14 + $15 }' "/proc/$SERVER/stat"; }
echo "idle server: RSS $(rss) MiB"
printf '%-10s %-8s %6s %10s %10s\n' stream viewer cores "peak MiB" "after MiB"
for size in 1280x720 1920x1080; do
    for viewer in none mjpeg; do
        s="measure-$size-$viewer"
        c0=$(cpu); t0=$(date +%s%N); peak=0
        if [ $viewer = mjpeg ]; then
            (sleep 1; curl -sS -N -o /dev/null "http://127.0.0.1:$PORT/sessions/$s/frames.mjpeg") &
            VIEW=$!
        fi
        ffmpeg -v error -re -i "$T/$size.264" -c copy -f h264 -method POST -chunked_post 1 \
            "http://127.0.0.1:$PORT/sessions/$s/nalus" &
        PUSH=$!
        while kill -0 $PUSH 2> /dev/null; do r=$(rss); [ "$r" -gt "$peak" ] && peak=$r; sleep 0.25; done
        c1=$(cpu); t1=$(date +%s%N)
        [ $viewer = mjpeg ] && kill $VIEW 2> /dev/null
        cores=$(python3 -c "print(f'{($c1 - $c0) / $TICKS / (($t1 - $t0) / 1e9):.2f}')")
        curl -sS -o /dev/null -X DELETE "http://127.0.0.1:$PORT/sessions/$s"
        sleep 1
        printf '%-10s %-8s %6s %10s %10s\n' $size $viewer "$cores" "$peak" "$(rss)"
    done
done
