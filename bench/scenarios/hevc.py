"""H1 / H2: H.265 ingest and decode + JPEG of every picture against ffmpeg, measured as B1 and
B2 are."""
from harness.client import post_file
from harness.stats import runs_text

from .common import (DETAILS, H1080, H1080M10, TMP_BASE, BenchFailure, check_frames, command, ffmpeg_to_jpegs, frametap,
                     row_against_peer, run_ffmpeg)


def bench_hevc_ingest(runs):
    server = frametap("--decoder-threads", "1")
    frames_expected = None
    ft, ff = [], []
    command("curl -H 'Content-Type: video/H265' --data-binary @.bench/streams/cam1080.265 "
            "'http://127.0.0.1:PORT/sessions/ID/nalus?flush=true'")
    command("ffmpeg -threads 1 -f hevc -i .bench/streams/cam1080.265 -f null -")
    try:
        for i in range(runs):
            t, (frames, _) = run_ffmpeg(["-threads", "1", "-f", "hevc", "-i", H1080, "-f", "null", "-"])
            frames_expected = frames
            ff.append(frames / t)
            t, _, summary, _ = post_file(server, "h1-%d" % i, H1080, "flush=true", content_type="video/H265")
            check_frames("H1", summary["frames"], frames_expected)
            if (summary.get("format") or {}).get("codec") != "h265":
                raise BenchFailure("H1: the session did not decode H.265: %s" % summary.get("format"))
            ft.append(summary["frames"] / t)
            server.json("DELETE", "/sessions/h1-%d" % i)
    finally:
        server.stop()
    row_against_peer("H1", "ingest 1080p30 HEVC Main, 1 session, `--decoder-threads 1` (fps)", ft, "ffmpeg -threads 1",
                     ff, 1.0)
    DETAILS.append("### H1 HEVC ingest\n\n%d pictures per push (`cam1080.265`, HEVC Main 1080p30, no B-frames), all "
                   "counted in the JSON answer and equal to ffmpeg's; measured as B1 (the whole request against the "
                   "whole ffmpeg process).\n\n| runs (fps) | values |\n|---|---|\n| FrameTap | %s |\n| ffmpeg | %s |\n"
                   % (frames_expected, runs_text(ft), runs_text(ff)))


def bench_hevc_multipart(runs):
    server = frametap("--decoder-threads", "1")
    ft, ff = [], []
    sizes = {}
    expected = None
    command("curl -H 'Accept: multipart/mixed' -H 'Content-Type: video/H265' --data-binary @.bench/streams/cam1080m10.265 "
            "'http://127.0.0.1:PORT/sessions/ID/nalus?flush=true&format=jpeg&quality=85'")
    command("ffmpeg -threads 1 -f hevc -i .bench/streams/cam1080m10.265 -q:v 3 -f image2 OUT/%04d.jpg")
    try:
        for i in range(runs):
            fps, expected, sizes["ffmpeg"] = ffmpeg_to_jpegs("H2", ["-f", "hevc", "-i", H1080M10])
            ff.append(fps)
            t, _, parts, _ = post_file(server, "h2-%d" % i, H1080M10, "flush=true&format=jpeg&quality=85",
                                       accept="multipart/mixed", content_type="video/H265")
            check_frames("H2", parts, expected)
            ft.append(parts / t)
            server.json("DELETE", "/sessions/h2-%d" % i)
    finally:
        server.stop()
    row_against_peer("H2", "decode + JPEG q85 of every 1080p HEVC Main 10 picture, multipart answer (fps)", ft,
                     "ffmpeg -threads 1 (mjpeg -q:v 3)", ff, 1.3)
    DETAILS.append("### H2 HEVC Main 10 decode + JPEG\n\n%d parts counted in every multipart answer (closing delimiter "
                   "checked), equal to ffmpeg's file count; both convert each 10-bit picture to 8 bits (FrameTap with "
                   "its range, straight into JPEG's full range; ffmpeg to yuvj420p for its mjpeg encoder). ffmpeg "
                   "writes to %s; its mean JPEG size %.0f KB.\n\n| runs (fps) | values |\n|---|---|\n| FrameTap | %s |\n"
                   "| ffmpeg | %s |\n" % (expected, TMP_BASE or "a temporary directory", sizes.get("ffmpeg", 0) / 1e3,
                                        runs_text(ft), runs_text(ff)))
