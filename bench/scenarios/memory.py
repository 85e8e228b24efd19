"""B6: RSS per idle 1080p session holding a latest picture, and RSS after many requests and session
create/delete cycles against a baseline; H3: the first for H.265."""
import http.client
import os
import time

from harness.client import post_file
from harness.stats import fmt

from .common import DETAILS, F1080, H1080, ROOT, BenchFailure, frametap, row


def hold_latest_pictures(server, what, prefix, path, sessions, content_type="application/octet-stream"):
    """Sessions PREFIX-0 to PREFIX-(sessions - 1), each pushed the whole file (flushed) and asked
    for its latest.jpg once, so that each holds its latest picture and that picture's JPEG."""
    for k in range(sessions):
        _, _, summary, _ = post_file(server, "%s-%d" % (prefix, k), path, "flush=true", content_type=content_type)
        if summary["frames"] <= 0:
            raise BenchFailure("%s: no picture" % what)
        status, _ = server.get("/sessions/%s-%d/frame/latest.jpg" % (prefix, k))
        if status != 200:
            raise BenchFailure("%s: latest.jpg -> %d" % (what, status))


def bench_memory(runs, sessions=8, requests=10000, cycles=1000):
    server = frametap()
    try:
        time.sleep(0.5)
        empty = server.rss_kb()
        hold_latest_pictures(server, "B6", "b6", F1080, sessions)
        time.sleep(1)
        held = server.rss_kb()
        per_session_mb = (held - empty) / sessions / 1024
        # warm-up of the request and session paths, then the baseline
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)

        def latest_requests(count):
            for j in range(count):
                conn.request("GET", "/sessions/b6-%d/frame/latest.jpg" % (j % sessions))
                resp = conn.getresponse()
                resp.read()
                if resp.status != 200:
                    raise BenchFailure("B6: latest.jpg -> %d" % resp.status)

        def cycle(count):
            small = os.path.join(ROOT, "Tests", "Fixtures", "high_320x240.264")
            with open(small, "rb") as f:
                small_bytes = f.read()
            for j in range(count):
                sid = "b6-cycle-%d" % j
                conn.request("PUT", "/sessions/%s" % sid, body=b"{}")
                r = conn.getresponse()
                r.read()
                if j % 10 == 0:
                    conn.request("POST", "/sessions/%s/nalus?flush=true" % sid, body=small_bytes)
                    r = conn.getresponse()
                    r.read()
                    if r.status != 200:
                        raise BenchFailure("B6: push -> %d" % r.status)
                conn.request("DELETE", "/sessions/%s" % sid)
                r = conn.getresponse()
                r.read()
                if r.status != 204:
                    raise BenchFailure("B6: DELETE -> %d" % r.status)

        latest_requests(500)
        cycle(50)
        time.sleep(1)
        baseline = server.rss_kb()
        start = time.perf_counter()
        latest_requests(requests)
        cycle(cycles)
        elapsed = time.perf_counter() - start
        time.sleep(1)
        final = server.rss_kb()
        conn.close()
    finally:
        server.stop()
    growth = (final - baseline) / baseline * 100
    row("B6", "RSS per idle 1080p session holding a latest picture (MB)", fmt(per_session_mb), "—", "",
        float("nan"), "≤ 30 MB", per_session_mb <= 30)
    row("B6", "RSS after %d latest.jpg + %d session create/delete vs baseline (%%)" % (requests, cycles),
        "%+.1f %%" % growth, "—", "", float("nan"), "within 5 %", abs(growth) <= 5)
    DETAILS.append("### B6 memory\n\nVmRSS of the server: empty %d kB; with %d idle 1080p sessions each holding its "
                   "latest picture and its JPEG %d kB (%.1f MB per session). Baseline after a warm-up of 500 "
                   "requests and 50 cycles: %d kB; after %d latest.jpg requests and %d create/delete cycles "
                   "(every 10th also pushes the 320x240 fixture; %.1f s): %d kB (%+.1f %%).\n"
                   % (empty, sessions, held, per_session_mb, baseline, requests, cycles, elapsed, final, growth))


def bench_hevc_memory(runs, sessions=8):
    server = frametap()
    try:
        time.sleep(0.5)
        empty = server.rss_kb()
        hold_latest_pictures(server, "H3", "h3", H1080, sessions, content_type="video/H265")
        time.sleep(1)
        held = server.rss_kb()
    finally:
        server.stop()
    per_session_mb = (held - empty) / sessions / 1024
    row("H3", "RSS per idle 1080p HEVC session holding a latest picture (MB)", fmt(per_session_mb), "—", "",
        float("nan"), "≤ 30 MB", per_session_mb <= 30)
    DETAILS.append("### H3 HEVC memory\n\nVmRSS of the server: empty %d kB; with %d idle 1080p HEVC sessions each holding "
                   "its latest picture and its JPEG %d kB (%.1f MB per session), measured as B6.\n"
                   % (empty, sessions, held, per_session_mb))
