"""What the scenarios of bench/bench.py share: the paths, the report being written (rows, details,
the exact commands), FrameTap started the benchmarks' way, ffmpeg runs and real-time pushes."""
import http.client
import json
import os
import re
import subprocess
import tempfile
import time

from harness.rawhttp import ChunkedPush
from harness.report import Commands, logger
from harness.report import described as described_in
from harness.server import benchmark_server
from harness.stats import fmt, median
from harness.waiting import Failure

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRATCH = os.environ.get("BENCH_SCRATCH", ".build-bench")
BIN = os.path.join(ROOT, SCRATCH, "release", "frametap")
FRAMETAP_BENCH = os.path.join(ROOT, SCRATCH, "release", "frametap-bench")
LOADGEN = os.path.join(ROOT, SCRATCH, "loadgen")
WORK = os.path.join(ROOT, ".bench")
STREAMS = os.path.join(WORK, "streams")
F1080 = os.path.join(STREAMS, "cam1080.264")
F720 = os.path.join(STREAMS, "cam720b.264")
H1080 = os.path.join(STREAMS, "cam1080.265")
H1080M10 = os.path.join(STREAMS, "cam1080m10.265")
FPS = 30.0
TMP_BASE = "/dev/shm" if os.path.isdir("/dev/shm") else None

RESULTS = []          # rows for the table
DETAILS = []          # markdown sections
COMMANDS = Commands()  # exact commands
command = COMMANDS.add
log = logger("bench")


class BenchFailure(Failure):
    """A figure that cannot be trusted (a frame count that differs from the peer's, a tool that
    failed): the suite stops and the run fails loudly."""


def described(args):
    """A command line as the report shows it: paths inside the repository relative to it."""
    return described_in(args, ROOT)


def row(rid, measure, frametap, peer_name, peer, ratio, target, met, note=""):
    RESULTS.append(dict(id=rid, measure=measure, frametap=frametap, peer_name=peer_name, peer=peer,
                        ratio=ratio, target=target, met=met, note=note))
    log("%s: %s | %s %s | ratio %s | %s" % (rid, frametap, peer_name, peer, ratio, "MET" if met else "NOT MET"))


def row_against_peer(rid, measure, ours, peer_name, theirs, at_least, digits=1):
    """A row of the medians of FrameTap's runs and the peer's, met when their ratio is at least `at_least`."""
    ratio = median(ours) / median(theirs)
    row(rid, measure, fmt(median(ours), digits), peer_name, fmt(median(theirs), digits), ratio, "≥ %s" % at_least,
        ratio >= at_least)


def check_frames(what, got, expected):
    if got != expected:
        raise BenchFailure("%s: FrameTap returned %s pictures, the peer decoded %s" % (what, got, expected))


def count_jpegs(directory):
    return sum(1 for n in os.listdir(directory) if n.endswith(".jpg"))


# --------------------------------------------------------------------------------------------
# FrameTap

def frametap(*extra, name="frametap"):
    """A started `frametap serve` for one scenario (harness.server.benchmark_server), its log in
    .bench/out/NAME-PORT.log."""
    server = benchmark_server(BIN, *extra, log_dir=os.path.join(WORK, "out"), name=name)
    command(described(server.command))
    return server


# --------------------------------------------------------------------------------------------
# ffmpeg

def run_ffmpeg(args, env=None):
    """Runs ffmpeg; returns (seconds, frames reported, speed)."""
    start = time.perf_counter()
    p = subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-stats", "-loglevel", "error", *args],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    elapsed = time.perf_counter() - start
    if p.returncode != 0:
        raise BenchFailure("ffmpeg %s failed: %s" % (" ".join(args), p.stderr[-500:]))
    return elapsed, parse_ffmpeg_stats(p.stderr)


def parse_ffmpeg_stats(stderr):
    text = stderr.decode(errors="replace")
    frames = re.findall(r"frame=\s*(\d+)", text)
    speed = re.findall(r"speed=\s*([\d.]+)x", text)
    return (int(frames[-1]) if frames else -1), (float(speed[-1]) if speed else float("nan"))


def ffmpeg_to_jpegs(what, input_args):
    """ffmpeg (one thread) decoding to one mjpeg -q:v 3 file per picture in TMP_BASE: (pictures
    per second of the whole process, pictures, mean file size). Each file must be a picture."""
    with tempfile.TemporaryDirectory(dir=TMP_BASE) as d:
        t, (frames, _) = run_ffmpeg(["-threads", "1", *input_args, "-q:v", "3", "-f", "image2",
                                     os.path.join(d, "%04d.jpg")])
        n = count_jpegs(d)
        if n != frames:
            raise BenchFailure("%s: ffmpeg wrote %d files for %d frames" % (what, n, frames))
        return n / t, n, sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d)) / n


# --------------------------------------------------------------------------------------------
# Readers

def long_poll(port, session, wait_ms, stop, on_picture):
    """Long-polls the session's newest picture (latest.jpg?after=SEQ&wait=WAIT_MS on one kept-alive
    connection) until `stop` is set; on_picture(seq, t) for each picture answered, t the
    perf_counter() when its last byte was read."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    after = 0
    while not stop.is_set():
        conn.request("GET", "/sessions/%s/frame/latest.jpg?after=%d&wait=%d" % (session, after, wait_ms))
        resp = conn.getresponse()
        resp.read()
        t = time.perf_counter()
        if resp.status == 200:
            after = int(resp.getheader("X-Frame-Seq"))
            on_picture(after, t)
    conn.close()


# --------------------------------------------------------------------------------------------
# Real-time pushers

def realtime_push(server, stream, session, on_sent=None, query="flush=true", loops=1, stop=None):
    """Sends `stream` at FPS access units per second (blocking sendall); on_sent(i, t_begin, t_end)."""
    push = ChunkedPush(server.port, session, query)
    t0 = time.perf_counter() + 0.05
    total = len(stream.aus) * loops
    for i in range(total):
        if stop is not None and stop.is_set():
            break
        due = t0 + i / FPS
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        begin = time.perf_counter()
        push.sock.sendall(ChunkedPush.chunk(stream.aus[i % len(stream.aus)]))
        end = time.perf_counter()
        if on_sent:
            on_sent(i, begin, end)
    status, body = push.finish_and_read()
    if status != 200:
        raise BenchFailure("push -> %d %s" % (status, body[:300]))
    return json.loads(body)
