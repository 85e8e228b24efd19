"""B7: fan-out, 50 MJPEG viewers and 50 long pollers of one 720p30 session: one JPEG encode per
picture whoever watches, and the server's CPU against one viewer's."""
import subprocess
import threading
import time

from harness.annexb import Stream
from harness.client import wait_for_picture
from harness.metrics import metric_value
from harness.proc import end
from harness.stats import fmt, median

from .common import DETAILS, F720, command, frametap, long_poll, realtime_push, row


def fanout_trial(server, stream, clients, pollers, seconds=10):
    session = "b7-%d-%d" % (clients, pollers)
    server.json("PUT", "/sessions/%s" % session, body=b"{}")
    stop = threading.Event()
    pusher = threading.Thread(target=lambda: realtime_push(server, stream, session, query="", loops=3, stop=stop))
    pusher.daemon = True
    pusher.start()
    wait_for_picture(server.base, session, 10, interval=0.05)
    viewers = [subprocess.Popen(["curl", "-s", "-N", "-o", "/dev/null", server.url("/sessions/%s/frames.mjpeg"
                                                                                      % session)])
               for _ in range(clients)]
    poll_counts = [0] * pollers

    def poll(k):
        def counted(seq, t):
            poll_counts[k] += 1
        long_poll(server.port, session, 2000, stop, counted)
    poll_threads = [threading.Thread(target=poll, args=(k,), daemon=True) for k in range(pollers)]
    [t.start() for t in poll_threads]
    time.sleep(1.5)
    m0 = server.metrics()
    c0 = server.cpu_seconds()
    s0 = server.json("GET", "/sessions/%s" % session)
    t0 = time.perf_counter()
    time.sleep(seconds)
    m1 = server.metrics()
    c1 = server.cpu_seconds()
    s1 = server.json("GET", "/sessions/%s" % session)
    wall = time.perf_counter() - t0
    stop.set()
    for v in viewers:
        end(v)
    pusher.join(timeout=60)
    server.json("DELETE", "/sessions/%s" % session)
    [t.join(timeout=5) for t in poll_threads]
    encodes = metric_value(m1, "frametap_picture_encodes_total") - metric_value(m0, "frametap_picture_encodes_total")
    frames = s1["counters"]["framesDecoded"] - s0["counters"]["framesDecoded"]
    return dict(encodes_per_s=encodes / wall, frames_per_s=frames / wall, cpu=(c1 - c0) / wall,
                subscribers=s1["subscribers"], polls_per_s=sum(poll_counts) / (wall + 1.5))


def bench_fanout(runs):
    stream = Stream(F720)
    server = frametap()
    one, many = [], []
    command("one 720p30 real-time push; 50 × curl -N http://127.0.0.1:PORT/sessions/ID/frames.mjpeg and 50 long-poll "
            "loops GET .../frame/latest.jpg?after=SEQ&wait=2000 (bench.py threads); CPU from /proc/PID/stat")
    try:
        for i in range(max(3, runs // 2 + 1)):
            one.append(fanout_trial(server, stream, 1, 0))
            many.append(fanout_trial(server, stream, 50, 50))
    finally:
        server.stop()
    cpu1 = median([x["cpu"] for x in one])
    cpun = median([x["cpu"] for x in many])
    enc = median([x["encodes_per_s"] for x in many])
    fps = median([x["frames_per_s"] for x in many])
    ratio = cpun / cpu1
    row("B7", "fan-out: 50 MJPEG + 50 latest.jpg pollers on one 720p30 session: JPEG encodes/s vs pictures/s",
        "%s / %s" % (fmt(enc), fmt(fps)), "—", "", enc / fps if fps else float("nan"), "≈ 1", 0.9 <= enc / fps <= 1.1)
    row("B7", "same, server CPU (cores)", fmt(cpun, 3), "1 MJPEG client", fmt(cpu1, 3), ratio, "≤ 1.5", ratio <= 1.5)
    DETAILS.append("### B7 fan-out\n\n| runs | encodes/s | pictures/s | CPU (cores) | MJPEG viewers | polls/s |\n"
                   "|---|---|---|---|---|---|\n" +
                   "".join("| 1 client | %.1f | %.1f | %.3f | %d | %.0f |\n" % (x["encodes_per_s"], x["frames_per_s"],
                                                                               x["cpu"], x["subscribers"],
                                                                               x["polls_per_s"]) for x in one) +
                   "".join("| 50+50 | %.1f | %.1f | %.3f | %d | %.0f |\n" % (x["encodes_per_s"], x["frames_per_s"],
                                                                            x["cpu"], x["subscribers"],
                                                                            x["polls_per_s"]) for x in many))
