"""B1 / B1b: ingest throughput of whole 1080p H.264 pushes against ffmpeg; B2: decode + JPEG of
every picture, answered as multipart, against ffmpeg and GStreamer."""
import os
import subprocess
import tempfile
import threading
import time

from harness.client import post_file
from harness.rawhttp import ChunkedPush
from harness.stats import fmt, median, runs_text

from .common import (DETAILS, F1080, TMP_BASE, BenchFailure, check_frames, command, count_jpegs, ffmpeg_to_jpegs,
                     frametap, row, row_against_peer, run_ffmpeg)


def bench_ingest(runs):
    server = frametap("--decoder-threads", "1")
    frames_expected = None
    ft1, ff1, ft2, ff2 = [], [], [], []
    megabytes = os.path.getsize(F1080) / 1e6
    new_session_faults, steady_faults = [], []
    command("curl --data-binary @.bench/streams/cam1080.264 'http://127.0.0.1:PORT/sessions/ID/nalus?flush=true'")
    command("ffmpeg -threads 1 -i .bench/streams/cam1080.264 -f null -")
    try:
        for i in range(runs):
            # peer first, FrameTap second, then the pair: alternation within every run
            t, (frames, _) = run_ffmpeg(["-threads", "1", "-i", F1080, "-f", "null", "-"])
            frames_expected = frames
            ff1.append(frames / t)
            faults = server.minor_faults()
            t, _, summary, _ = post_file(server, "b1-%d" % i, F1080, "flush=true")
            check_frames("B1", summary["frames"], frames_expected)
            ft1.append(summary["frames"] / t)
            server.json("DELETE", "/sessions/b1-%d" % i)
            new_session_faults.append((server.minor_faults() - faults) / megabytes)

            results = [None, None]

            def ff(k):
                results[k] = run_ffmpeg(["-threads", "1", "-i", F1080, "-f", "null", "-"])
            start = time.perf_counter()
            threads = [threading.Thread(target=ff, args=(k,)) for k in range(2)]
            [t_.start() for t_ in threads]
            [t_.join() for t_ in threads]
            wall = time.perf_counter() - start
            for r in results:
                if r[1][0] != frames_expected:
                    raise BenchFailure("B1b: ffmpeg decoded %d pictures" % r[1][0])
            ff2.append(2 * frames_expected / wall)

            answers = [None, None]

            def ft(k):
                answers[k] = post_file(server, "b1b-%d-%d" % (i, k), F1080, "flush=true")
            start = time.perf_counter()
            threads = [threading.Thread(target=ft, args=(k,)) for k in range(2)]
            [t_.start() for t_ in threads]
            [t_.join() for t_ in threads]
            wall = time.perf_counter() - start
            for k in range(2):
                check_frames("B1b", answers[k][2]["frames"], frames_expected)
                server.json("DELETE", "/sessions/b1b-%d-%d" % (i, k))
            ft2.append(2 * frames_expected / wall)
        # Steady state: one long push of the stream over and over into one session, whose history
        # is full after the first copies (they need memory the server never had); from then on
        # it drops a GOP for each one it takes. Faults are counted per copy sent (the queue
        # between the socket and the decoder holds a few MB at most).
        with open(F1080, "rb") as f:
            data = f.read()
        fill = (64 << 20) // len(data) + 1
        push = ChunkedPush(server.port, "b1-steady", "flush=true")
        for k in range(fill + max(4, runs)):
            faults = server.minor_faults()
            for start in range(0, len(data), 1 << 20):
                push.sock.sendall(ChunkedPush.chunk(data[start:start + (1 << 20)]))
            if k >= fill:
                steady_faults.append((server.minor_faults() - faults) / megabytes)
        status, body = push.finish_and_read(300)
        if status != 200:
            raise BenchFailure("B1f: the long push was answered %d: %s" % (status, body[:300]))
        server.json("DELETE", "/sessions/b1-steady")
    finally:
        server.stop()
    row("B1f", "server page faults per pushed MB, one session, history full (default bounds)",
        fmt(median(steady_faults), 0), "—", "", float("nan"), "≤ 100", median(steady_faults) <= 100)
    row_against_peer("B1", "ingest 1080p, 1 session, `--decoder-threads 1` (fps)", ft1, "ffmpeg -threads 1", ff1, 1.0)
    row_against_peer("B1b", "ingest 1080p, 2 sessions at once (total fps)", ft2, "2 × ffmpeg -threads 1", ff2, 1.0)
    DETAILS.append("### B1 / B1b ingest\n\n%d pictures per push, all counted in the JSON answer and equal to "
                   "ffmpeg's. fps = pictures / wall time of the whole request (upload included), and of the "
                   "whole ffmpeg process (start and demuxing included).\n\n"
                   "| runs | FrameTap | ffmpeg |\n|---|---|---|\n| B1 | %s | %s |\n| B1b | %s | %s |\n\n"
                   "Minor page faults of the server per pushed MB (`/proc/PID/stat`): B1's pushes, each into a "
                   "new session deleted after it (its decoder's pictures are new memory): %s; one long push of "
                   "the stream repeated, per copy after %d copies filled the session's 64 MiB history (B1f): %s.\n"
                   % (frames_expected, runs_text(ft1), runs_text(ff1), runs_text(ft2), runs_text(ff2),
                      runs_text(new_session_faults), fill, runs_text(steady_faults)))


def bench_multipart(runs):
    server = frametap("--decoder-threads", "1")
    ft, ff, gst = [], [], []
    sizes = {}
    command("curl -H 'Accept: multipart/mixed' --data-binary @.bench/streams/cam1080.264 "
            "'http://127.0.0.1:PORT/sessions/ID/nalus?flush=true&format=jpeg&quality=85'")
    command("ffmpeg -threads 1 -i .bench/streams/cam1080.264 -q:v 3 -f image2 OUT/%04d.jpg")
    command("gst-launch-1.0 filesrc location=.bench/streams/cam1080.264 ! h264parse ! avdec_h264 ! jpegenc ! "
            "multifilesink location=OUT/%04d.jpg")
    expected = None
    try:
        for i in range(runs):
            fps, expected, sizes["ffmpeg"] = ffmpeg_to_jpegs("B2", ["-i", F1080])
            ff.append(fps)
            t, _, parts, _ = post_file(server, "b2-%d" % i, F1080, "flush=true&format=jpeg&quality=85",
                                       accept="multipart/mixed")
            check_frames("B2", parts, expected)
            ft.append(parts / t)
            server.json("DELETE", "/sessions/b2-%d" % i)
            with tempfile.TemporaryDirectory(dir=TMP_BASE) as d:
                start = time.perf_counter()
                p = subprocess.run(["gst-launch-1.0", "-q", "filesrc", "location=" + F1080, "!", "h264parse", "!",
                                    "avdec_h264", "!", "jpegenc", "!", "multifilesink",
                                    "location=" + os.path.join(d, "%04d.jpg")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                t = time.perf_counter() - start
                if p.returncode != 0:
                    raise BenchFailure("gst-launch failed: %s" % p.stderr[-400:])
                n = count_jpegs(d)
                if n != expected:
                    raise BenchFailure("B2: GStreamer wrote %d pictures, ffmpeg %d" % (n, expected))
                sizes["gst"] = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d)) / n
                gst.append(n / t)
    finally:
        server.stop()
    row_against_peer("B2", "decode + JPEG q85 of every 1080p picture, multipart answer (fps)", ft,
                     "ffmpeg -threads 1 (mjpeg -q:v 3)", ff, 1.3)
    row_against_peer("B2", "same (vs GStreamer)", ft, "GStreamer avdec_h264 ! jpegenc", gst, 1.0)
    DETAILS.append("### B2 decode + JPEG\n\n%d parts counted in every multipart answer (closing delimiter "
                   "checked), equal to ffmpeg's and GStreamer's file counts. Peers write to %s. Mean JPEG size: "
                   "ffmpeg %.0f KB, GStreamer %.0f KB (FrameTap's q85 1080p: see M2).\n\n"
                   "| runs (fps) | values |\n|---|---|\n| FrameTap | %s |\n| ffmpeg | %s |\n| GStreamer | %s |\n"
                   % (expected, TMP_BASE or "a temporary directory", sizes.get("ffmpeg", 0) / 1e3,
                      sizes.get("gst", 0) / 1e3, runs_text(ft), runs_text(ff), runs_text(gst)))
