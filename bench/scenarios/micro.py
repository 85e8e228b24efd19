"""M1: the Annex B splitter's throughput against a memchr start-code scan; M2: JPEG encoding of a
1080p picture from its YUV planes against tjbench (frametap-bench, built with make bench)."""
import json
import os
import subprocess

from harness.stats import fmt, runs_text

from .common import DETAILS, F1080, FRAMETAP_BENCH, WORK, BenchFailure, command, row, row_against_peer


def bench_micro(runs):
    command(".build-bench/release/frametap-bench splitter .bench/streams/cam1080.264 --rounds %d" % max(runs, 5))
    command(".build-bench/release/frametap-bench jpeg .bench/streams/cam1080.264 --quality 85 --rounds %d"
            % max(runs, 5))
    command("ffmpeg -i .bench/streams/cam1080.264 -frames:v 1 .bench/out/frame1.ppm && "
            "tjbench .bench/out/frame1.ppm 85 -subsamp 420 -yuv -componly -benchtime 2 -warmup 0.5 -quiet -nowrite")
    out = subprocess.run([FRAMETAP_BENCH, "splitter", F1080, "--rounds", str(max(runs, 5))], capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise BenchFailure("frametap-bench splitter: %s" % out.stderr)
    m1 = json.loads(out.stdout.strip().splitlines()[-1])
    row("M1", "Annex B splitter throughput, 64 KiB pushes, every unit copied out (GB/s)", fmt(m1["splitterGBps"], 2),
        "memchr start-code scan", fmt(m1["memchrStartCodesGBps"], 2),
        m1["splitterGBps"] / m1["memchrStartCodesGBps"], "≥ 2 GB/s", m1["splitterGBps"] >= 2)
    ppm = os.path.join(WORK, "out", "frame1.ppm")
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-i", F1080, "-frames:v", "1", ppm], check=True)
    ft, tj = [], []
    for _ in range(runs):
        out = subprocess.run([FRAMETAP_BENCH, "jpeg", F1080, "--quality", "85", "--rounds", "3", "--encodes", "40"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise BenchFailure("frametap-bench jpeg: %s" % out.stderr)
        m2 = json.loads(out.stdout.strip().splitlines()[-1])
        ft.append(m2["megapixelsPerSecond"])
        p = subprocess.run(["tjbench", ppm, "85", "-subsamp", "420", "-yuv", "-componly", "-benchtime", "2",
                            "-warmup", "0.5", "-quiet", "-nowrite"], capture_output=True, text=True)
        line = [x for x in p.stdout.splitlines() if "4:2:0" in x]
        if not line:
            raise BenchFailure("tjbench: %s %s" % (p.stdout, p.stderr))
        # Pixel Format, Subsamp, Qual, W, H, Encode Perf (RGB->YUV), Comp Perf (YUV->JPEG), ...
        fields = line[-1].split()
        tj.append(float(fields[7]))
    row_against_peer("M2", "JPEG q85 of a 1080p picture from its YUV planes (Mpixel/s)", ft,
                     "tjbench -yuv (compress from YUV)", tj, 0.9)
    DETAILS.append("### M1 / M2\n\nM1: %.1f MB (the 1080p stream 8 times), %d NAL units found by both; splitter runs "
                   "%s GB/s; memchr runs %s GB/s.\n\nM2: FrameTap `PictureEncoder` on the first decoded picture "
                   "(limited range, so the encoder expands it to full range first; %d-byte JPEG); tjbench compresses "
                   "the same picture converted to RGB by ffmpeg, from its own YUV planes. Runs (Mpixel/s): FrameTap "
                   "%s; tjbench %s.\n"
                   % (m1["bytes"] / 1e6, m1["nalUnits"], runs_text(m1["splitterRuns"], 2),
                      runs_text(m1["memchrRuns"], 2), m2["jpegBytes"], runs_text(ft), runs_text(tj)))
