"""B5: density, how many 720p30 real-time pushes one server keeps up with (decode=all and
decode=keyframes) against how many `ffmpeg -re` processes keep up at once."""
import subprocess

from harness.annexb import Stream
from harness.density import density_trial, search

from .common import DETAILS, F720, command, frametap, log, parse_ffmpeg_stats, row


def ffmpeg_density_trial(n, stream_path, tolerance=0.97):
    procs = []
    for _ in range(n):
        procs.append(subprocess.Popen(["ffmpeg", "-nostdin", "-hide_banner", "-stats", "-loglevel", "error", "-re",
                                       "-framerate", "30", "-i", stream_path, "-f", "null", "-"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    speeds, frames = [], []
    for p in procs:
        _, err = p.communicate()
        f, s = parse_ffmpeg_stats(err)
        speeds.append(s)
        frames.append(f)
    kept = min(speeds) >= tolerance and all(f == frames[0] for f in frames)
    return kept, "n=%d min speed %.3fx frames %s" % (n, min(speeds), sorted(set(frames)))


# The ffmpeg peer of B5, kept for D1 when both run.
FFMPEG_DENSITY = {}


def bench_density(runs, cap_all=96, cap_key=640):
    stream = Stream(F720)
    lines_ff, lines_all, lines_key = [], [], []
    command("N × ffmpeg -re -framerate 30 -i .bench/streams/cam720b.264 -f null -   (all at once)")
    command("N × real-time chunked POST /sessions/ID/nalus?flush=true from bench.py (one selector loop), "
            "sessions created with PUT {\"decode\": \"all\"|\"keyframes\"}")
    ff_n, _ = search(lambda n: ffmpeg_density_trial(n, F720), 4, cap_all, lines_ff, log)
    FFMPEG_DENSITY.update(n=ff_n, lines=lines_ff)
    server = frametap()
    try:
        all_n, _ = search(lambda n: density_trial(server, stream, n, "all"), max(2, ff_n // 2), cap_all,
                          lines_all, log)
        key_n, capped = search(lambda n: density_trial(server, stream, n, "keyframes"), max(2, 5 * all_n),
                               cap_key, lines_key, log)
    finally:
        server.stop()
    ratio = all_n / ff_n if ff_n else float("nan")
    row("B5", "density: 720p30 real-time pushes kept up, decode=all (sessions)", str(all_n),
        "ffmpeg -re processes", str(ff_n), ratio, "≥ 0.9", ratio >= 0.9)
    kratio = key_n / all_n if all_n else float("nan")
    row("B5", "density, decode=keyframes (sessions)", ("≥ %d" % key_n) if capped else str(key_n), "decode=all",
        str(all_n), kratio, "≥ 5", kratio >= 5)
    DETAILS.append("### B5 density\n\nBounded search (doubling, then bisection to within 1/16), one 10 s trial per "
                   "step; the 720p Main stream (B-frames) has %d access units and %d keyframes. Kept up: every "
                   "flushed answer within 0.3 s of the last unit sent, every picture (keyframes mode: every "
                   "keyframe) decoded, lag not growing between the middle and the end; ffmpeg: every process at "
                   "speed ≥ 0.97x with the same frame count.\n\n```\nffmpeg:\n%s\nFrameTap decode=all:\n%s\n"
                   "FrameTap decode=keyframes:\n%s\n```\n"
                   % (len(stream.aus), stream.keyframes, "\n".join(lines_ff), "\n".join(lines_all),
                      "\n".join(lines_key)))
