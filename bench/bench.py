#!/usr/bin/env python3
"""`make bench`: FrameTap against its peers on camera-like streams; writes BENCHMARKS.md.

Every figure with a peer is the median of RUNS runs that alternate FrameTap and the peer in the same
session of this script. Any frame-count mismatch with what the peer decoded aborts the whole run
(exit 1) instead of reporting a figure. Standard library only; the tools come from Debian
(ffmpeg, wrk, nginx, gstreamer1.0-libav, libjpeg-turbo-progs).

    bench/bench.py [--only B1,B3,H1,D1,...] [--runs N] [--out BENCHMARKS.md]

The on-demand suites (D1-D4) push with bench/loadgen.c, compiled here with cc: a Python sender
could not keep hundreds of cameras on schedule (B5's keyframes figure is capped by it).
"""

import argparse
import http.client
import json
import functools
import os
import platform
import re
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRATCH = os.environ.get("BENCH_SCRATCH", ".build-bench")
BIN = os.path.join(ROOT, SCRATCH, "release", "frametap")
HARNESS = os.path.join(ROOT, SCRATCH, "release", "frametap-bench")
LOADGEN = os.path.join(ROOT, SCRATCH, "loadgen")
WORK = os.path.join(ROOT, ".bench")
STREAMS = os.path.join(WORK, "streams")
F1080 = os.path.join(STREAMS, "cam1080.264")
F720 = os.path.join(STREAMS, "cam720b.264")
H1080 = os.path.join(STREAMS, "cam1080.265")
H1080M10 = os.path.join(STREAMS, "cam1080m10.265")
FPS = 30.0
TMP_BASE = "/dev/shm" if os.path.isdir("/dev/shm") else None

RESULTS = []   # rows for the table
DETAILS = []   # markdown sections
COMMANDS = []  # exact commands


class BenchFailure(Exception):
    pass


def log(*args):
    print("[bench %s]" % time.strftime("%H:%M:%S"), *args, file=sys.stderr, flush=True)


def median(values):
    return statistics.median(values) if values else float("nan")


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def command(text):
    if text not in COMMANDS:
        COMMANDS.append(text)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# --------------------------------------------------------------------------------------------
# Streams: access units as the pusher sends them (one chunk per picture, in decode order).

def split_access_units(data):
    """Cuts an Annex B stream before the first NAL unit of each access unit (AUD/SPS/PPS/SEI
    after a picture, or a slice with first_mb_in_slice == 0 after a picture). Each piece starts
    with its own start code, as a camera sends it."""
    starts = []
    i = 0
    n = len(data)
    while True:
        j = data.find(b"\x00\x00\x01", i)
        if j < 0 or j + 3 >= n:
            break
        nal = j + 3
        begin = j - 1 if j > 0 and data[j - 1] == 0 else j
        starts.append((begin, data[nal] & 0x1F, data[nal + 1] if nal + 1 < n else 0))
        i = nal
    aus = []
    current = None
    has_picture = False
    idr = []
    is_idr = False
    for begin, t, nxt in starts:
        vcl = t in (1, 5)
        new_au = False
        if current is None:
            new_au = True
        elif has_picture and (t in (6, 7, 8, 9) or (14 <= t <= 18) or (vcl and nxt & 0x80)):
            new_au = True
        if new_au:
            if current is not None:
                aus.append(current)
                idr.append(is_idr)
            current = begin
            has_picture = False
            is_idr = False
        if vcl:
            has_picture = True
            is_idr = is_idr or t == 5
    if current is not None:
        aus.append(current)
        idr.append(is_idr)
    bounds = aus + [n]
    pieces = [data[bounds[k]:bounds[k + 1]] for k in range(len(aus))]
    return pieces, idr


def split_access_units_hevc(data):
    """The same for H.265 (base layer): a new access unit at an AUD, VPS/SPS/PPS or prefix SEI
    after a picture, or at a slice segment with first_slice_segment_in_pic_flag; keyframes are
    IRAP pictures (types 16-23)."""
    starts = []
    i = 0
    n = len(data)
    while True:
        j = data.find(b"\x00\x00\x01", i)
        if j < 0 or j + 4 >= n:
            break
        nal = j + 3
        begin = j - 1 if j > 0 and data[j - 1] == 0 else j
        starts.append((begin, (data[nal] >> 1) & 0x3F, data[nal + 2] if nal + 2 < n else 0))
        i = nal
    bounds, irap = [], []
    has_picture = False
    for begin, t, first_byte in starts:
        vcl = t < 32
        if not bounds or (has_picture and (t in (32, 33, 34, 35, 39) or (41 <= t <= 44) or (vcl and first_byte & 0x80))):
            bounds.append(begin)
            irap.append(False)
            has_picture = False
        if vcl:
            has_picture = True
            irap[-1] = irap[-1] or 16 <= t <= 23
    edges = bounds + [n]
    return [data[edges[k]:edges[k + 1]] for k in range(len(bounds))], irap


class Stream:
    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.data = f.read()
        split = split_access_units_hevc if path.endswith(".265") else split_access_units
        self.aus, self.idr = split(self.data)
        self.keyframes = sum(self.idr)


# --------------------------------------------------------------------------------------------
# Processes

@functools.lru_cache(maxsize=None)
def per_address_unlimited():
    """`--max-connections-per-ip 0` when the binary has it (older builds, compared in the same run, do not)."""
    help_text = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True).stdout
    return ["--max-connections-per-ip", "0"] if "--max-connections-per-ip" in help_text else []


def watch_served(port, session, served, done):
    """Long-polls the session's newest picture until `done` is set, noting in `served` when each
    picture number was first served (perf_counter seconds); returns the started thread."""
    def observe():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        after = 0
        while not done.is_set():
            conn.request("GET", "/sessions/%s/frame/latest.jpg?after=%d&wait=1000" % (session, after))
            resp = conn.getresponse()
            resp.read()
            t = time.perf_counter()
            if resp.status == 200:
                seq = int(resp.getheader("X-Frame-Seq"))
                served.setdefault(seq, t)
                after = seq
        conn.close()

    observer = threading.Thread(target=observe)
    observer.start()
    return observer


class Server:
    def __init__(self, *extra, name="frametap"):
        self.port = free_port()
        self.log = open(os.path.join(WORK, "out", "%s-%d.log" % (name, self.port)), "w")
        # Every camera and reader of a benchmark comes from 127.0.0.1, as from a proxy: no per-address cap.
        self.args = [BIN, "serve", "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning",
                     "--max-sessions", "2048", *per_address_unlimited(), *extra]
        command(" ".join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a for a in self.args))
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                if self.get("/healthz")[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise BenchFailure("frametap serve did not start")

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def request(self, method, path, body=None, headers=None, timeout=60):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout, blocksize=1 << 20)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.read(), resp
        finally:
            conn.close()

    def get(self, path):
        status, body, _ = self.request("GET", path, timeout=10)
        return status, body

    def json(self, method, path, body=None):
        status, data, _ = self.request(method, path, body=body)
        if status >= 300:
            raise BenchFailure("%s %s -> %d %s" % (method, path, status, data[:300]))
        return json.loads(data) if data else None

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def cpu_seconds(self):
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def metrics(self):
        status, body = self.get("/metrics")
        return body.decode()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def metric_value(text, name, labels=None):
    total = 0.0
    found = False
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        if head.split("{")[0] != name:
            continue
        if labels and not all('%s="%s"' % kv in head for kv in labels.items()):
            continue
        total += float(value)
        found = True
    return total if found else 0.0


def histogram(text, name):
    """Cumulative buckets [(le, count)] of a Prometheus histogram, summed over label sets."""
    buckets = {}
    for line in text.splitlines():
        if line.startswith(name + "_bucket"):
            le = re.search(r'le="([^"]+)"', line).group(1)
            buckets[le] = buckets.get(le, 0) + float(line.rpartition(" ")[2])
    items = sorted(((float("inf") if k == "+Inf" else float(k)), v) for k, v in buckets.items())
    return items


def histogram_delta(after, before):
    b = dict(before)
    return [(le, c - b.get(le, 0)) for le, c in after]


def histogram_quantile(buckets, q):
    """Upper bound of the bucket holding quantile q (as Prometheus would bound it)."""
    if not buckets or buckets[-1][1] <= 0:
        return float("nan")
    total = buckets[-1][1]
    for le, c in buckets:
        if c >= q * total:
            return le
    return float("inf")


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


def row(rid, measure, frametap, peer_name, peer, ratio, target, met, note=""):
    RESULTS.append(dict(id=rid, measure=measure, frametap=frametap, peer_name=peer_name, peer=peer,
                        ratio=ratio, target=target, met=met, note=note))
    log("%s: %s | %s %s | ratio %s | %s" % (rid, frametap, peer_name, peer, ratio, "MET" if met else "NOT MET"))


def fmt(x, digits=1):
    if isinstance(x, float) and (x != x):
        return "n/a"
    return ("%%.%df" % digits) % x


def runs_text(values, digits=1):
    return ", ".join(fmt(v, digits) for v in values)


# --------------------------------------------------------------------------------------------
# HTTP clients

def post_file(server, session, path, query, accept=None, content_type="application/octet-stream"):
    """POSTs the whole file (1 MiB writes); returns (seconds, status, body bytes or part count, headers)."""
    headers = {"Content-Type": content_type, "Content-Length": str(os.path.getsize(path))}
    if accept:
        headers["Accept"] = accept
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300, blocksize=1 << 20)
    start = time.perf_counter()
    with open(path, "rb") as f:
        conn.request("POST", "/sessions/%s/nalus?%s" % (session, query), body=f, headers=headers)
        resp = conn.getresponse()
        if accept:
            ctype = resp.getheader("Content-Type", "")
            m = re.search(r'boundary="?([^";]+)"?', ctype)
            if resp.status != 200 or not m:
                raise BenchFailure("multipart POST -> %d %s %s" % (resp.status, ctype, resp.read()[:300]))
            delim = b"--" + m.group(1).encode()
            count, tail, closed = 0, b"", False
            while True:
                chunk = resp.read(1 << 20)
                if not chunk:
                    break
                buf = tail + chunk
                count += buf.count(delim)
                # a delimiter cut between two reads is counted once, in the next buffer
                tail = buf[-(len(delim) + 2):]
                count -= tail.count(delim)
                if (delim + b"--") in buf:
                    closed = True
            count += tail.count(delim)
            elapsed = time.perf_counter() - start
            if not closed:
                raise BenchFailure("multipart answer ended without its closing delimiter")
            conn.close()
            return elapsed, resp.status, count - 1, None
        body = resp.read()
    elapsed = time.perf_counter() - start
    conn.close()
    if resp.status != 200:
        raise BenchFailure("POST -> %d %s" % (resp.status, body[:300]))
    return elapsed, resp.status, json.loads(body), None


def check_frames(what, got, expected):
    if got != expected:
        raise BenchFailure("%s: FrameTap returned %s pictures, the peer decoded %s" % (what, got, expected))


# --------------------------------------------------------------------------------------------
# B1 / B1b: ingest throughput

def bench_ingest(runs):
    server = Server("--decoder-threads", "1")
    frames_expected = None
    ft1, ff1, ft2, ff2 = [], [], [], []
    command("curl --data-binary @.bench/streams/cam1080.264 'http://127.0.0.1:PORT/sessions/ID/nalus?flush=true'")
    command("ffmpeg -threads 1 -i .bench/streams/cam1080.264 -f null -")
    try:
        for i in range(runs):
            # peer first, FrameTap second, then the pair: alternation within every run
            t, (frames, _) = run_ffmpeg(["-threads", "1", "-i", F1080, "-f", "null", "-"])
            frames_expected = frames
            ff1.append(frames / t)
            t, _, summary, _ = post_file(server, "b1-%d" % i, F1080, "flush=true")
            check_frames("B1", summary["frames"], frames_expected)
            ft1.append(summary["frames"] / t)
            server.json("DELETE", "/sessions/b1-%d" % i)

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
    finally:
        server.stop()
    r1, r2 = median(ft1) / median(ff1), median(ft2) / median(ff2)
    row("B1", "ingest 1080p, 1 session, `--decoder-threads 1` (fps)", fmt(median(ft1)), "ffmpeg -threads 1",
        fmt(median(ff1)), r1, "≥ 1.0", r1 >= 1.0)
    row("B1b", "ingest 1080p, 2 sessions at once (total fps)", fmt(median(ft2)), "2 × ffmpeg -threads 1",
        fmt(median(ff2)), r2, "≥ 1.0", r2 >= 1.0)
    DETAILS.append("### B1 / B1b ingest\n\n%d pictures per push, all counted in the JSON answer and equal to "
                   "ffmpeg's. fps = pictures / wall time of the whole request (upload included), and of the "
                   "whole ffmpeg process (start and demuxing included).\n\n"
                   "| runs | FrameTap | ffmpeg |\n|---|---|---|\n| B1 | %s | %s |\n| B1b | %s | %s |\n"
                   % (frames_expected, runs_text(ft1), runs_text(ff1), runs_text(ft2), runs_text(ff2)))


# --------------------------------------------------------------------------------------------
# B2: decode + JPEG of every picture

def count_jpegs(directory):
    return sum(1 for n in os.listdir(directory) if n.endswith(".jpg"))


def bench_multipart(runs):
    server = Server("--decoder-threads", "1")
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
            with tempfile.TemporaryDirectory(dir=TMP_BASE) as d:
                t, (frames, _) = run_ffmpeg(["-threads", "1", "-i", F1080, "-q:v", "3", "-f", "image2",
                                             os.path.join(d, "%04d.jpg")])
                n = count_jpegs(d)
                if n != frames:
                    raise BenchFailure("B2: ffmpeg wrote %d files for %d frames" % (n, frames))
                expected = n
                sizes["ffmpeg"] = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d)) / n
                ff.append(n / t)
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
    r_ff, r_gst = median(ft) / median(ff), median(ft) / median(gst)
    row("B2", "decode + JPEG q85 of every 1080p picture, multipart answer (fps)", fmt(median(ft)),
        "ffmpeg -threads 1 (mjpeg -q:v 3)", fmt(median(ff)), r_ff, "≥ 1.3", r_ff >= 1.3)
    row("B2", "same (vs GStreamer)", fmt(median(ft)), "GStreamer avdec_h264 ! jpegenc", fmt(median(gst)),
        r_gst, "≥ 1.0", r_gst >= 1.0)
    DETAILS.append("### B2 decode + JPEG\n\n%d parts counted in every multipart answer (closing delimiter "
                   "checked), equal to ffmpeg's and GStreamer's file counts. Peers write to %s. Mean JPEG size: "
                   "ffmpeg %.0f KB, GStreamer %.0f KB (FrameTap's q85 1080p: see M2).\n\n"
                   "| runs (fps) | values |\n|---|---|\n| FrameTap | %s |\n| ffmpeg | %s |\n| GStreamer | %s |\n"
                   % (expected, TMP_BASE or "a temporary directory", sizes.get("ffmpeg", 0) / 1e3,
                      sizes.get("gst", 0) / 1e3, runs_text(ft), runs_text(ff), runs_text(gst)))


# --------------------------------------------------------------------------------------------
# Real-time pushers

class ChunkedPush:
    """One real-time chunked POST over a raw socket; each access unit is one HTTP chunk."""

    def __init__(self, port, session, query="", sndbuf=None, content_type="application/octet-stream"):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = ("POST /sessions/%s/nalus%s HTTP/1.1\r\nHost: bench\r\nContent-Type: %s\r\n"
                "Transfer-Encoding: chunked\r\n\r\n" % (session, "?" + query if query else "", content_type)).encode()
        self.sock.sendall(head)
        self.outbox = bytearray()
        self.answer = bytearray()

    @staticmethod
    def chunk(data):
        return b"%x\r\n" % len(data) + data + b"\r\n"

    def finish_and_read(self, timeout=60):
        self.sock.setblocking(True)
        self.sock.settimeout(timeout)
        self.sock.sendall(bytes(self.outbox) + b"0\r\n\r\n")
        self.outbox.clear()
        return self.read_answer(timeout)

    def read_answer(self, timeout=60):
        data = bytes(self.answer)
        self.sock.settimeout(timeout)
        while b"\r\n\r\n" not in data:
            more = self.sock.recv(65536)
            if not more:
                break
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        m = re.search(rb"Content-Length:\s*(\d+)", head, re.I)
        length = int(m.group(1)) if m else 0
        while len(body) < length:
            more = self.sock.recv(65536)
            if not more:
                break
            body += more
        self.sock.close()
        status = int(head.split()[1]) if head else 0
        return status, body


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


# --------------------------------------------------------------------------------------------
# B3: latest.jpg under wrk, nginx as the peer

def parse_wrk(text):
    rps = float(re.search(r"Requests/sec:\s*([\d.]+)", text).group(1))
    p99 = None
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", text)
    if m:
        p99 = float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
    bad = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", text)
    errors = re.search(r"Socket errors:.*", text)
    return rps, p99, int(bad.group(1)) if bad else 0, errors.group(0) if errors else ""


def wrk(url, seconds=10):
    p = subprocess.run(["wrk", "-t2", "-c64", "-d%ds" % seconds, "--latency", url], capture_output=True, text=True)
    if p.returncode != 0:
        raise BenchFailure("wrk failed: %s" % p.stderr)
    return parse_wrk(p.stdout), p.stdout


def start_nginx(root):
    port = free_port()
    prefix = tempfile.mkdtemp(prefix="nginx-", dir=os.path.join(WORK, "out"))
    conf = os.path.join(prefix, "nginx.conf")
    with open(conf, "w") as f:
        f.write("""worker_processes auto;
daemon off;
error_log %s/error.log warn;
pid %s/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  types { image/jpeg jpg; }
  client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s; uwsgi_temp_path %s; scgi_temp_path %s;
  server { listen 127.0.0.1:%d; root %s; }
}
""" % ((prefix,) * 7 + (port, root)))
    proc = subprocess.Popen(["nginx", "-c", conf, "-p", prefix], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise BenchFailure("nginx did not start")


def bench_latest(runs, seconds=10):
    server = Server()
    ft_rps, ft_p99, ng_rps, ng_p99 = [], [], [], []
    ft_frames = []
    command("ffmpeg -re -framerate 30 -stream_loop -1 -i .bench/streams/cam1080.264 -c copy -f h264 -method POST "
            "-chunked_post 1 http://127.0.0.1:PORT/sessions/b3/nalus")
    command("wrk -t2 -c64 -d%ds --latency http://127.0.0.1:PORT/sessions/b3/frame/latest.jpg" % seconds)
    command("wrk -t2 -c64 -d%ds --latency http://127.0.0.1:NGINX_PORT/latest.jpg  (nginx -c bench-generated "
            "conf: worker_processes auto, sendfile on, access_log off)" % seconds)
    # nginx's workers run as nobody: the page lives in a world-readable directory
    www = tempfile.mkdtemp(prefix="frametap-bench-www-", dir=TMP_BASE)
    os.chmod(www, 0o755)
    nginx = None
    try:
        for i in range(runs):
            session = "b3-%d" % i
            push = subprocess.Popen(["ffmpeg", "-nostdin", "-loglevel", "error", "-re", "-framerate", "30",
                                     "-stream_loop", "-1", "-i", F1080, "-c", "copy", "-f", "h264", "-method", "POST",
                                     "-chunked_post", "1", server.url("/sessions/%s/nalus" % session)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                deadline = time.time() + 10
                while time.time() < deadline:
                    status, body = server.get("/sessions/%s/frame/latest.jpg" % session)
                    if status == 200:
                        break
                    time.sleep(0.1)
                else:
                    raise BenchFailure("B3: no picture from the ffmpeg push")
                with open(os.path.join(www, "latest.jpg"), "wb") as f:
                    f.write(body)
                os.chmod(os.path.join(www, "latest.jpg"), 0o644)
                before = server.json("GET", "/sessions/%s" % session)["counters"]["framesDecoded"]
                (rps, p99, bad, errs), out = wrk(server.url("/sessions/%s/frame/latest.jpg" % session), seconds)
                after = server.json("GET", "/sessions/%s" % session)["counters"]["framesDecoded"]
                if bad:
                    raise BenchFailure("B3: %d non-2xx answers from FrameTap\n%s" % (bad, out))
                ft_rps.append(rps)
                ft_p99.append(p99)
                ft_frames.append((after - before) / seconds)
            finally:
                push.terminate()
                push.wait()
            server.json("DELETE", "/sessions/%s" % session)
            if nginx is None:
                nginx, nginx_port = start_nginx(www)
            (rps, p99, bad, errs), out = wrk("http://127.0.0.1:%d/latest.jpg" % nginx_port, seconds)
            if bad:
                raise BenchFailure("B3: nginx answered %d non-2xx" % bad)
            ng_rps.append(rps)
            ng_p99.append(p99)
    finally:
        if nginx:
            nginx.terminate()
            nginx.wait()
        server.stop()
        shutil.rmtree(www, ignore_errors=True)
    ratio = median(ft_rps) / median(ng_rps)
    row("B3", "latest.jpg under wrk -t2 -c64 during a 1080p30 push (req/s)", fmt(median(ft_rps), 0), "nginx static",
        fmt(median(ng_rps), 0), ratio, "≥ 0.5", ratio >= 0.5)
    row("B3", "same, p99 latency (ms)", fmt(median(ft_p99), 2), "nginx static", fmt(median(ng_p99), 2),
        median(ft_p99) / median(ng_p99), "≤ 10 ms", median(ft_p99) <= 10)
    DETAILS.append("### B3 latest.jpg under load\n\nThe push kept decoding at %s pictures/s during the wrk runs "
                   "(every new picture is one shared encode). nginx runs without a push beside it.\n\n"
                   "| runs | req/s | p99 ms |\n|---|---|---|\n| FrameTap | %s | %s |\n| nginx | %s | %s |\n"
                   % (runs_text(ft_frames), runs_text(ft_rps, 0), runs_text(ft_p99, 2), runs_text(ng_rps, 0),
                      runs_text(ng_p99, 2)))


# --------------------------------------------------------------------------------------------
# B4: freshness

def bench_freshness(runs):
    stream = Stream(F1080)
    server = Server()
    pooled_last, pooled_next = [], []
    per_run = []
    try:
        before = server.metrics()
        for r in range(runs):
            session = "b4-%d" % r
            sent_end = {}
            sent_begin = {}
            served = {}
            done = threading.Event()
            server.json("PUT", "/sessions/%s" % session, body=b"{}")

            observer = watch_served(server.port, session, served, done)

            def sent(i, begin, end):
                sent_begin[i] = begin
                sent_end[i] = end

            summary = realtime_push(server, stream, session, on_sent=sent)
            time.sleep(0.2)
            done.set()
            observer.join()
            check_frames("B4", summary["frames"], len(stream.aus))
            last, nxt = [], []
            # seq k is access unit k-1 (one picture per unit, no reordering in this stream);
            # the last picture is only known complete at the flush, so it is left out.
            for seq, t in served.items():
                i = seq - 1
                if i + 1 in sent_begin:
                    last.append((t - sent_end[i]) * 1000)
                    nxt.append((t - sent_begin[i + 1]) * 1000)
            if len(last) < 0.95 * (len(stream.aus) - 1):
                raise BenchFailure("B4: the long poll saw only %d of %d pictures" % (len(last), len(stream.aus)))
            pooled_last += last
            pooled_next += nxt
            per_run.append((percentile(last, 50), percentile(last, 99), percentile(nxt, 50), percentile(nxt, 99),
                            len(last)))
            server.json("DELETE", "/sessions/%s" % session)
        after = server.metrics()
    finally:
        server.stop()
    dec = histogram_delta(histogram(after, "frametap_decode_latency_seconds"),
                          histogram(before, "frametap_decode_latency_seconds"))
    enc = histogram_delta(histogram(after, "frametap_picture_encode_seconds"),
                          histogram(before, "frametap_picture_encode_seconds"))
    enc_sum = metric_value(after, "frametap_picture_encode_seconds_sum") - metric_value(
        before, "frametap_picture_encode_seconds_sum")
    enc_count = metric_value(after, "frametap_picture_encode_seconds_count") - metric_value(
        before, "frametap_picture_encode_seconds_count")
    dec_sum = metric_value(after, "frametap_decode_latency_seconds_sum") - metric_value(
        before, "frametap_decode_latency_seconds_sum")
    dec_count = metric_value(after, "frametap_decode_latency_seconds_count") - metric_value(
        before, "frametap_decode_latency_seconds_count")
    p50, p99 = percentile(pooled_last, 50), percentile(pooled_last, 99)
    n50, n99 = percentile(pooled_next, 50), percentile(pooled_next, 99)
    row("B4", "freshness, 1080p30 real-time push: last byte of a picture → served by the long poll (ms p50 / p99)",
        "%s / %s" % (fmt(p50), fmt(p99)), "—", "", float("nan"), "p50 ≤ 10, p99 ≤ 25", p50 <= 10 and p99 <= 25,
        "from the first byte of the *next* picture: %s / %s ms" % (fmt(n50), fmt(n99)))
    DETAILS.append(
        "### B4 freshness\n\nA python pusher sends each access unit of the 1080p stream as one HTTP chunk at 30/s "
        "and notes when its last byte was written; a long poll (`latest.jpg?after=N&wait=1000`, keep-alive) notes "
        "when each picture arrives. Pooled over %d runs (%d pictures):\n\n"
        "| measured from | p50 ms | p99 ms |\n|---|---|---|\n"
        "| last byte of the picture's access unit written | %s | %s |\n"
        "| first byte of the next access unit written | %s | %s |\n\n"
        "Per run (p50/p99 from last byte; p50/p99 from next unit; pictures): %s\n\n"
        "Server side (/metrics over these runs): receipt of the completing bytes → picture published: mean %.2f ms, "
        "p50 ≤ %s s, p99 ≤ %s s (bucket bounds); JPEG encode: mean %.2f ms over %d encodes, p50 ≤ %s s, p99 ≤ %s s.\n"
        % (runs, len(pooled_last), fmt(p50, 2), fmt(p99, 2), fmt(n50, 2), fmt(n99, 2),
           "; ".join("%.1f/%.1f; %.1f/%.1f; %d" % x for x in per_run),
           1000 * dec_sum / max(dec_count, 1), histogram_quantile(dec, 0.5), histogram_quantile(dec, 0.99),
           1000 * enc_sum / max(enc_count, 1), enc_count, histogram_quantile(enc, 0.5), histogram_quantile(enc, 0.99)))


# --------------------------------------------------------------------------------------------
# B4c: freshness of a fragmented-MP4 push

def mp4_boxes(data):
    """Top-level MP4 boxes as (type, bytes)."""
    boxes, offset = [], 0
    while offset + 8 <= len(data):
        size = int.from_bytes(data[offset:offset + 4], "big")
        kind = data[offset + 4:offset + 8].decode("latin-1")
        if size == 1:
            size = int.from_bytes(data[offset + 8:offset + 16], "big")
        if size < 8 or offset + size > len(data):
            raise BenchFailure("B4c: a malformed box %r at %d" % (kind, offset))
        boxes.append((kind, data[offset:offset + size]))
        offset += size
    return boxes


def fragmented_1080():
    """cam1080.264 as fragmented MP4, one fragment per picture: (init segment, [fragment per picture])."""
    path = os.path.join(STREAMS, "cam1080_fragmented.mp4")
    if not os.path.exists(path):
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-r", "30", "-i", F1080, "-c", "copy",
                        "-movflags", "frag_every_frame+empty_moov+default_base_moof", path + ".tmp.mp4"], check=True)
        os.rename(path + ".tmp.mp4", path)
    command("ffmpeg -r 30 -i %s -c copy -movflags frag_every_frame+empty_moov+default_base_moof %s"
            % (os.path.relpath(F1080, ROOT), os.path.relpath(path, ROOT)))
    with open(path, "rb") as f:
        boxes = mp4_boxes(f.read())
    init = b"".join(body for kind, body in boxes if kind in ("ftyp", "moov"))
    fragments, current = [], b""
    for kind, body in boxes:
        if kind in ("ftyp", "moov"):
            continue
        current += body
        if kind == "mdat":
            fragments.append(current)
            current = b""
    return init, fragments


def bench_freshness_fmp4(runs):
    stream = Stream(F1080)
    init, fragments = fragmented_1080()
    if len(fragments) != len(stream.aus):
        raise BenchFailure("B4c: %d fragments for %d pictures" % (len(fragments), len(stream.aus)))
    server = Server()
    pooled = []
    per_run = []
    try:
        for r in range(runs):
            session = "b4c-%d" % r
            sent_end, served = {}, {}
            done = threading.Event()
            server.json("PUT", "/sessions/%s" % session, body=b"{}")

            observer = watch_served(server.port, session, served, done)
            push = ChunkedPush(server.port, session, "flush=true", content_type="video/mp4")
            push.sock.sendall(ChunkedPush.chunk(init))
            t0 = time.perf_counter() + 0.05
            for i, fragment in enumerate(fragments):
                delay = t0 + i / FPS - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                push.sock.sendall(ChunkedPush.chunk(fragment))
                sent_end[i] = time.perf_counter()
            status, body = push.finish_and_read()
            if status != 200:
                raise BenchFailure("B4c: push -> %d %s" % (status, body[:300]))
            time.sleep(0.2)
            done.set()
            observer.join()
            check_frames("B4c", json.loads(body)["frames"], len(fragments))
            # seq k is the picture of fragment k-1 (no reordering in this stream). Unlike Annex B, the
            # last picture needs no next one: every fragment counts.
            latencies = [(t - sent_end[seq - 1]) * 1000 for seq, t in served.items() if seq - 1 in sent_end]
            if len(latencies) < 0.95 * len(fragments):
                raise BenchFailure("B4c: the long poll saw only %d of %d pictures" % (len(latencies), len(fragments)))
            pooled += latencies
            per_run.append((percentile(latencies, 50), percentile(latencies, 99), len(latencies)))
            server.json("DELETE", "/sessions/%s" % session)
    finally:
        server.stop()
    p50, p99 = percentile(pooled, 50), percentile(pooled, 99)
    row("B4c", "freshness, 1080p30 fragmented-MP4 push (one fragment per picture, real time): last byte of a "
        "fragment → its picture served by the long poll (ms p50 / p99)",
        "%s / %s" % (fmt(p50), fmt(p99)), "—", "", float("nan"), "p50 ≤ 10, p99 ≤ 25", p50 <= 10 and p99 <= 25)
    DETAILS.append(
        "### B4c freshness of a fragmented-MP4 push\n\nThe 1080p stream remuxed by ffmpeg into fragmented MP4 "
        "(`frag_every_frame+empty_moov+default_base_moof`: an init segment, then one moof+mdat per picture). A python "
        "pusher sends the init segment, then each fragment as one HTTP chunk at 30/s (`Content-Type: video/mp4`), and "
        "notes when its last byte was written; a long poll notes when each picture arrives. The demuxer (libavformat's "
        "mov, on the session's demuxer thread) hands over each sample when its last byte is read, and the decoder "
        "ends the access unit there, so unlike B4 no picture waits for the next one. Pooled over %d runs (%d "
        "pictures): p50 %s ms, p99 %s ms. Per run (p50/p99; pictures): %s.\n"
        % (runs, len(pooled), fmt(p50, 2), fmt(p99, 2), "; ".join("%.1f/%.1f; %d" % x for x in per_run)))


# --------------------------------------------------------------------------------------------
# P1: CPU of a pulled RTSP session

RTSP_SERVER = os.path.join(ROOT, "smoke", "rtsp-server.py")


def p1_stream():
    """cam720b.264 three times over (30 s) in Matroska, for the RTSP server to play with timestamps."""
    path = os.path.join(STREAMS, "cam720b_30s.mkv")
    command("ffmpeg -r 30 -i %s -c copy once.mp4 && ffmpeg -stream_loop 2 -i once.mp4 -c copy %s"
            % (os.path.relpath(F720, ROOT), os.path.relpath(path, ROOT)))
    if not os.path.exists(path):
        once = path + ".once.mp4"
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-r", "30", "-i", F720, "-c", "copy", once],
                       check=True)
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-stream_loop", "2", "-i", once, "-c", "copy",
                        path + ".tmp.mkv"], check=True)
        os.rename(path + ".tmp.mkv", path)
        os.remove(once)
    return path


def start_rtsp_file_server(path):
    port = free_port()
    args = ["/usr/bin/python3", RTSP_SERVER, "--port", str(port), "--file", path]
    command(" ".join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a for a in args))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise BenchFailure("P1: the RTSP server did not start")
    return proc, "rtsp://127.0.0.1:%d/cam" % port


def wait_for_event(server, session, kind, ready, timeout=120):
    """Blocks until GET /events?session= sends `kind` (`ready` is set once the stream is open)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    conn.request("GET", "/events?session=%s" % session)
    resp = conn.getresponse()
    ready.set()
    try:
        while True:
            line = resp.fp.readline()
            if not line:
                raise BenchFailure("P1: the event stream ended before %s" % kind)
            if line.decode().strip() == "event: %s" % kind:
                return
    finally:
        conn.close()


def bench_pull_cpu(runs):
    path = p1_stream()
    expected = int(subprocess.run(
        ["ffprobe", "-v", "error", "-count_packets", "-select_streams", "v:0", "-show_entries", "stream=nb_read_packets",
         "-of", "csv=p=0", path], capture_output=True, text=True, check=True).stdout.strip())
    rtsp, url = start_rtsp_file_server(path)
    gross, marginal, idle_rates, ff, ft_frames, ff_frames = [], [], [], [], [], []
    try:
        for r in range(runs):
            # FrameTap: one pull session. Its server's CPU from the PUT until the stream ended (the
            # event source.lost, read from an open event stream: no polling), less what the same
            # server costs idle over as long (measured just before).
            server = Server("--allow-sources", "rtsp://127.0.0.1", "--source-retry-max", "30")
            try:
                session = "p1-%d" % r
                time.sleep(1)
                idle0, i0 = server.cpu_seconds(), time.time()
                time.sleep(10)
                idle_rate = (server.cpu_seconds() - idle0) / (time.time() - i0)
                ready = threading.Event()
                ended = threading.Thread(target=wait_for_event, args=(server, session, "source.lost", ready))
                ended.start()
                ready.wait(10)
                cpu0, t0 = server.cpu_seconds(), time.time()
                server.json("PUT", "/sessions/%s" % session,
                            body=json.dumps({"source": {"url": url, "transport": "tcp"}}).encode())
                ended.join(120)
                cpu, wall = server.cpu_seconds() - cpu0, time.time() - t0
                # The stream's end flushes the decoder's delayed pictures right after: count them too.
                decoded = -1
                for _ in range(20):
                    settled = server.json("GET", "/sessions/%s" % session)["counters"]["framesDecoded"]
                    if settled == decoded:
                        break
                    decoded = settled
                    time.sleep(0.1)
                server.json("DELETE", "/sessions/%s" % session)
                gross.append(cpu)
                idle_rates.append(idle_rate)
                marginal.append(cpu - idle_rate * wall)
                ft_frames.append(decoded)
            finally:
                server.stop()
            # ffmpeg pulling and decoding the same stream, one decoder thread like FrameTap's default.
            args = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-stats", "-threads", "1",
                    "-rtsp_transport", "tcp", "-i", url, "-fps_mode", "passthrough", "-f", "null", "-"]
            command(" ".join(args))
            before = os.times()
            proc = subprocess.run(args, capture_output=True, text=True)
            after = os.times()
            ff.append((after.children_user - before.children_user) + (after.children_system - before.children_system))
            frames = re.findall(r"frame=\s*(\d+)", proc.stderr)
            ff_frames.append(int(frames[-1]) if frames else 0)
    finally:
        rtsp.send_signal(signal.SIGTERM)
        rtsp.wait()
    for got in ft_frames + ff_frames:
        check_frames("P1", got, expected)
    ratio = median(marginal) / median(ff)
    seconds = expected / FPS
    row("P1", "CPU of one pulled 720p30 RTSP session (H.264 Main with B-frames, ~3 Mbit/s): cores over the 30 s "
        "stream (the session's CPU seconds / 30)", fmt(median(marginal) / seconds, 3),
        "ffmpeg -threads 1 -rtsp_transport tcp -i URL -f null -", fmt(median(ff) / seconds, 3), ratio,
        "≤ 1.0×", ratio <= 1.0, "the whole server process, idle cost included: %s"
        % fmt(median(gross) / seconds, 3))
    DETAILS.append(
        "### P1 CPU of a pulled RTSP session\n\nGStreamer's RTSP server (`smoke/rtsp-server.py --file`) plays "
        "`cam720b.264` three times over from Matroska (30 s, %d pictures, paced by the server's clock), a new "
        "pipeline per client so each starts at the first picture. FrameTap: a fresh server per run with one pull "
        "session (`PUT` with the `rtsp://` source, TCP); its process's CPU time (user + system) from the PUT until "
        "the stream ended (the `source.lost` event on an event stream opened before, so nothing polls), every "
        "picture decoded. The session's share is that less what the same server costs idle over as long (HTTP "
        "threads, timers; measured over the 10 s before the PUT). ffmpeg: the same URL pulled and decoded to "
        "`-f null` with one decoder thread (FrameTap's default, `--decoder-threads 1`); the CPU time of its whole "
        "run, start-up included. Both are CPU seconds for the same %d pictures (so the ratio is CPU per picture); "
        "the table shows them over the stream's 30 s.\n\n"
        "| runs (CPU s) | values |\n|---|---|\n| FrameTap, the session | %s |\n| FrameTap, the whole process | %s |\n"
        "| FrameTap idle (cores) | %s |\n| ffmpeg | %s |\n\nPictures: FrameTap %s; ffmpeg %s.\n"
        % (expected, expected, runs_text(marginal, 3), runs_text(gross, 3), runs_text(idle_rates, 4),
           runs_text(ff, 3), ft_frames, ff_frames))


# --------------------------------------------------------------------------------------------
# B5: density

def frametap_density_trial(server, stream, n, mode, seconds_tolerance=0.3):
    """n real-time pushes from one selector loop. Kept up when every session's flushed answer came
    within `seconds_tolerance` of its last access unit, every picture (or keyframe) was decoded, the
    sender itself kept to its schedule, and the decode lag did not grow between the middle and the end."""
    ids = ["b5-%s-%d-%d" % (mode, n, k) for k in range(n)]
    for sid in ids:
        server.json("PUT", "/sessions/%s" % sid, body=json.dumps({"decode": mode}).encode())
    sel = selectors.DefaultSelector()
    pushes = []
    for sid in ids:
        p = ChunkedPush(server.port, sid, "flush=true")
        p.sock.setblocking(False)
        pushes.append(p)
    chunks = [ChunkedPush.chunk(au) for au in stream.aus]
    total = len(chunks)
    t0 = time.perf_counter() + 0.2
    # stagger the sessions over one frame interval, as independent cameras are
    offsets = [k / (FPS * n) for k in range(n)]
    next_index = [0] * n
    sender_late = 0.0
    lag_samples = {}
    sample_at = {total // 2: "mid", total - 1: "end"}
    registered = set()
    while True:
        now = time.perf_counter()
        all_sent = True
        for k, p in enumerate(pushes):
            while next_index[k] < total and now >= t0 + offsets[k] + next_index[k] / FPS:
                sender_late = max(sender_late, now - (t0 + offsets[k] + next_index[k] / FPS))
                p.outbox += chunks[next_index[k]]
                next_index[k] += 1
            if next_index[k] < total:
                all_sent = False
            if p.outbox:
                try:
                    sent = p.sock.send(p.outbox)
                    del p.outbox[:sent]
                except BlockingIOError:
                    pass
            if p.outbox and k not in registered:
                sel.register(p.sock, selectors.EVENT_WRITE, k)
                registered.add(k)
            elif not p.outbox and k in registered:
                sel.unregister(p.sock)
                registered.discard(k)
        sent_min = min(next_index)
        for idx, name in list(sample_at.items()):
            if sent_min > idx:
                sessions = server.json("GET", "/sessions")["sessions"]
                lag_samples[name] = max(
                    (min(next_index) - s["counters"]["framesDecoded"] - s["counters"]["framesSkippedNotKeyframe"]
                     - s["counters"]["framesDroppedBeforeKeyframe"]) for s in sessions if s["id"] in ids)
                del sample_at[idx]
        if all_sent and not any(p.outbox for p in pushes):
            break
        # sleep until the next due chunk or writable socket
        due = min((t0 + offsets[k] + next_index[k] / FPS) for k in range(n) if next_index[k] < total) \
            if not all_sent else time.perf_counter() + 0.005
        timeout = max(0.0, due - time.perf_counter())
        if registered:
            sel.select(timeout=min(timeout, 0.005))
        elif timeout > 0:
            time.sleep(timeout)
    last_sent = time.perf_counter()
    for k in list(registered):
        sel.unregister(pushes[k].sock)
    sel.close()
    # end every body; the answers come once each session decoded everything
    for p in pushes:
        p.sock.setblocking(True)
        p.sock.sendall(b"0\r\n\r\n")
    lateness = []
    frames = []
    for p in pushes:
        status, body = p.read_answer(timeout=120)
        lateness.append(time.perf_counter() - last_sent)
        if status != 200:
            raise BenchFailure("B5: push answered %d %s" % (status, body[:200]))
        frames.append(json.loads(body)["frames"])
    for sid in ids:
        server.json("DELETE", "/sessions/%s" % sid)
    expected = stream.keyframes if mode == "keyframes" else total
    if any(f != expected for f in frames):
        raise BenchFailure("B5: %s mode with %d sessions: pictures %s, expected %d each"
                           % (mode, n, sorted(set(frames)), expected))
    growth = lag_samples.get("end", 0) - lag_samples.get("mid", 0)
    kept = max(lateness) <= seconds_tolerance and growth <= 3
    info = "n=%d max answer delay %.3f s, lag mid/end %s/%s pictures, sender late ≤ %.3f s" % (
        n, max(lateness), lag_samples.get("mid"), lag_samples.get("end"), sender_late)
    if sender_late > 0.25:
        info += " (sender could not keep its schedule: result capped by the load generator)"
        kept = False
    return kept, info


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


def search(trial, start, cap, log_lines):
    """Largest n in [1, cap] for which trial(n) holds: doubling, then bisection."""
    good, bad = 0, None
    n = start
    while n <= cap:
        ok, info = trial(n)
        log_lines.append(("ok   " if ok else "FAIL ") + info)
        log(info, "ok" if ok else "FAIL")
        if ok:
            good = n
            if n == cap:
                break
            n = min(cap, n * 2)
        else:
            bad = n
            break
    if bad is None:
        return good, True
    while bad - good > max(1, good // 16):
        mid = (good + bad) // 2
        ok, info = trial(mid)
        log_lines.append(("ok   " if ok else "FAIL ") + info)
        log(info, "ok" if ok else "FAIL")
        if ok:
            good = mid
        else:
            bad = mid
    return good, False


# The ffmpeg peer of B5, kept for D1 when both run.
FFMPEG_DENSITY = {}


def bench_density(runs, cap_all=96, cap_key=640):
    stream = Stream(F720)
    lines_ff, lines_all, lines_key = [], [], []
    command("N × ffmpeg -re -framerate 30 -i .bench/streams/cam720b.264 -f null -   (all at once)")
    command("N × real-time chunked POST /sessions/ID/nalus?flush=true from bench.py (one selector loop), "
            "sessions created with PUT {\"decode\": \"all\"|\"keyframes\"}")
    ff_n, _ = search(lambda n: ffmpeg_density_trial(n, F720), 4, cap_all, lines_ff)
    FFMPEG_DENSITY.update(n=ff_n, lines=lines_ff)
    server = Server()
    try:
        all_n, _ = search(lambda n: frametap_density_trial(server, stream, n, "all"), max(2, ff_n // 2), cap_all,
                          lines_all)
        key_n, capped = search(lambda n: frametap_density_trial(server, stream, n, "keyframes"), max(2, 5 * all_n),
                               cap_key, lines_key)
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


# --------------------------------------------------------------------------------------------
# B6: memory

def bench_memory(runs, sessions=8, requests=10000, cycles=1000):
    server = Server()
    try:
        time.sleep(0.5)
        empty = server.rss_kb()
        for k in range(sessions):
            _, _, summary, _ = post_file(server, "b6-%d" % k, F1080, "flush=true")
            if summary["frames"] <= 0:
                raise BenchFailure("B6: no picture")
            status, _ = server.get("/sessions/b6-%d/frame/latest.jpg" % k)
            if status != 200:
                raise BenchFailure("B6: latest.jpg -> %d" % status)
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


# --------------------------------------------------------------------------------------------
# B7: fan-out

def fanout_trial(server, stream, clients, pollers, seconds=10):
    session = "b7-%d-%d" % (clients, pollers)
    server.json("PUT", "/sessions/%s" % session, body=b"{}")
    stop = threading.Event()
    pusher = threading.Thread(target=lambda: realtime_push(server, stream, session, query="", loops=3, stop=stop))
    pusher.daemon = True
    pusher.start()
    deadline = time.time() + 10
    while server.get("/sessions/%s/frame/latest.jpg" % session)[0] != 200:
        if time.time() > deadline:
            raise BenchFailure("B7: no picture")
        time.sleep(0.05)
    viewers = [subprocess.Popen(["curl", "-s", "-N", "-o", "/dev/null", server.url("/sessions/%s/frames.mjpeg"
                                                                                      % session)])
               for _ in range(clients)]
    poll_counts = [0] * pollers

    def poll(k):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        after = 0
        while not stop.is_set():
            conn.request("GET", "/sessions/%s/frame/latest.jpg?after=%d&wait=2000" % (session, after))
            resp = conn.getresponse()
            resp.read()
            if resp.status == 200:
                after = int(resp.getheader("X-Frame-Seq"))
                poll_counts[k] += 1
        conn.close()
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
        v.terminate()
        v.wait()
    pusher.join(timeout=60)
    server.json("DELETE", "/sessions/%s" % session)
    [t.join(timeout=5) for t in poll_threads]
    encodes = metric_value(m1, "frametap_picture_encodes_total") - metric_value(m0, "frametap_picture_encodes_total")
    frames = s1["counters"]["framesDecoded"] - s0["counters"]["framesDecoded"]
    return dict(encodes_per_s=encodes / wall, frames_per_s=frames / wall, cpu=(c1 - c0) / wall,
                subscribers=s1["subscribers"], polls_per_s=sum(poll_counts) / (wall + 1.5))


def bench_fanout(runs):
    stream = Stream(F720)
    server = Server()
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


# --------------------------------------------------------------------------------------------
# M1 / M2

def bench_micro(runs):
    command(".build-bench/release/frametap-bench splitter .bench/streams/cam1080.264 --rounds %d" % max(runs, 5))
    command(".build-bench/release/frametap-bench jpeg .bench/streams/cam1080.264 --quality 85 --rounds %d"
            % max(runs, 5))
    command("ffmpeg -i .bench/streams/cam1080.264 -frames:v 1 .bench/out/frame1.ppm && "
            "tjbench .bench/out/frame1.ppm 85 -subsamp 420 -yuv -componly -benchtime 2 -warmup 0.5 -quiet -nowrite")
    out = subprocess.run([HARNESS, "splitter", F1080, "--rounds", str(max(runs, 5))], capture_output=True,
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
        out = subprocess.run([HARNESS, "jpeg", F1080, "--quality", "85", "--rounds", "3", "--encodes", "40"],
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
    ratio = median(ft) / median(tj)
    row("M2", "JPEG q85 of a 1080p picture from its YUV planes (Mpixel/s)", fmt(median(ft)),
        "tjbench -yuv (compress from YUV)", fmt(median(tj)), ratio, "≥ 0.9", ratio >= 0.9)
    DETAILS.append("### M1 / M2\n\nM1: %.1f MB (the 1080p stream 8 times), %d NAL units found by both; splitter runs "
                   "%s GB/s; memchr runs %s GB/s.\n\nM2: FrameTap `PictureEncoder` on the first decoded picture "
                   "(limited range, so the encoder expands it to full range first; %d-byte JPEG); tjbench compresses "
                   "the same picture converted to RGB by ffmpeg, from its own YUV planes. Runs (Mpixel/s): FrameTap "
                   "%s; tjbench %s.\n"
                   % (m1["bytes"] / 1e6, m1["nalUnits"], runs_text(m1["splitterRuns"], 2),
                      runs_text(m1["memchrRuns"], 2), m2["jpegBytes"], runs_text(ft), runs_text(tj)))


# --------------------------------------------------------------------------------------------
# H1 / H2 / H3: H.265 (issue 15), measured as B1, B2 and B6 are

def bench_hevc_ingest(runs):
    server = Server("--decoder-threads", "1")
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
    ratio = median(ft) / median(ff)
    row("H1", "ingest 1080p30 HEVC Main, 1 session, `--decoder-threads 1` (fps)", fmt(median(ft)), "ffmpeg -threads 1",
        fmt(median(ff)), ratio, "≥ 1.0", ratio >= 1.0)
    DETAILS.append("### H1 HEVC ingest\n\n%d pictures per push (`cam1080.265`, HEVC Main 1080p30, no B-frames), all "
                   "counted in the JSON answer and equal to ffmpeg's; measured as B1 (the whole request against the "
                   "whole ffmpeg process).\n\n| runs (fps) | values |\n|---|---|\n| FrameTap | %s |\n| ffmpeg | %s |\n"
                   % (frames_expected, runs_text(ft), runs_text(ff)))


def bench_hevc_multipart(runs):
    server = Server("--decoder-threads", "1")
    ft, ff = [], []
    sizes = {}
    expected = None
    command("curl -H 'Accept: multipart/mixed' -H 'Content-Type: video/H265' --data-binary @.bench/streams/cam1080m10.265 "
            "'http://127.0.0.1:PORT/sessions/ID/nalus?flush=true&format=jpeg&quality=85'")
    command("ffmpeg -threads 1 -f hevc -i .bench/streams/cam1080m10.265 -q:v 3 -f image2 OUT/%04d.jpg")
    try:
        for i in range(runs):
            with tempfile.TemporaryDirectory(dir=TMP_BASE) as d:
                t, (frames, _) = run_ffmpeg(["-threads", "1", "-f", "hevc", "-i", H1080M10, "-q:v", "3", "-f", "image2",
                                             os.path.join(d, "%04d.jpg")])
                n = count_jpegs(d)
                if n != frames:
                    raise BenchFailure("H2: ffmpeg wrote %d files for %d frames" % (n, frames))
                expected = n
                sizes["ffmpeg"] = sum(os.path.getsize(os.path.join(d, x)) for x in os.listdir(d)) / n
                ff.append(n / t)
            t, _, parts, _ = post_file(server, "h2-%d" % i, H1080M10, "flush=true&format=jpeg&quality=85",
                                       accept="multipart/mixed", content_type="video/H265")
            check_frames("H2", parts, expected)
            ft.append(parts / t)
            server.json("DELETE", "/sessions/h2-%d" % i)
    finally:
        server.stop()
    ratio = median(ft) / median(ff)
    row("H2", "decode + JPEG q85 of every 1080p HEVC Main 10 picture, multipart answer (fps)", fmt(median(ft)),
        "ffmpeg -threads 1 (mjpeg -q:v 3)", fmt(median(ff)), ratio, "≥ 1.3", ratio >= 1.3)
    DETAILS.append("### H2 HEVC Main 10 decode + JPEG\n\n%d parts counted in every multipart answer (closing delimiter "
                   "checked), equal to ffmpeg's file count; both convert each 10-bit picture to 8 bits (FrameTap with "
                   "its range, straight into JPEG's full range; ffmpeg to yuvj420p for its mjpeg encoder). ffmpeg "
                   "writes to %s; its mean JPEG size %.0f KB.\n\n| runs (fps) | values |\n|---|---|\n| FrameTap | %s |\n"
                   "| ffmpeg | %s |\n" % (expected, TMP_BASE or "a temporary directory", sizes.get("ffmpeg", 0) / 1e3,
                                        runs_text(ft), runs_text(ff)))


def bench_hevc_memory(runs, sessions=8):
    server = Server()
    try:
        time.sleep(0.5)
        empty = server.rss_kb()
        for k in range(sessions):
            _, _, summary, _ = post_file(server, "h3-%d" % k, H1080, "flush=true", content_type="video/H265")
            if summary["frames"] <= 0:
                raise BenchFailure("H3: no picture")
            status, _ = server.get("/sessions/h3-%d/frame/latest.jpg" % k)
            if status != 200:
                raise BenchFailure("H3: latest.jpg -> %d" % status)
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


# --------------------------------------------------------------------------------------------

# --------------------------------------------------------------------------------------------
# D1-D4: on-demand sessions and history, pushed by bench/loadgen.c

def build_loadgen():
    source = os.path.join(ROOT, "bench", "loadgen.c")
    if not os.path.exists(LOADGEN) or os.path.getmtime(LOADGEN) < os.path.getmtime(source):
        subprocess.run(["cc", "-O2", "-Wall", "-o", LOADGEN, source, "-lpthread", "-lm"], check=True)
    command("cc -O2 -Wall -o %s bench/loadgen.c -lpthread -lm" % os.path.relpath(LOADGEN, ROOT))


def units_file(stream):
    """The stream's access units as loadgen reads them: a 4-byte big-endian length, then the bytes."""
    path = os.path.join(WORK, "out", os.path.basename(stream.path) + ".units")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            for au in stream.aus:
                f.write(len(au).to_bytes(4, "big") + au)
    return path


class LoadGen:
    """bench/loadgen.c pushing `sessions` cameras in real time (and long-polling every k-th)."""

    def __init__(self, server, stream, sessions, prefix, loops=1, watch_every=0, watch_after=2.0, wait_ms=2000,
                 query="flush=true"):
        self.args = [LOADGEN, "--port", str(server.port), "--units", units_file(stream), "--sessions", str(sessions),
                     "--prefix", prefix, "--loops", str(loops), "--watch-every", str(watch_every),
                     "--watch-after", str(watch_after), "--wait-ms", str(wait_ms), "--query", query]
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def described(self):
        return " ".join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a for a in self.args)

    def wait_for(self, word):
        """Reads stdout up to a line starting with `word` (returns it), or None at the end."""
        for line in self.proc.stdout:
            if line.startswith(word):
                return line.strip()
        return None

    def result(self):
        line = self.wait_for("RESULT")
        _, err = self.proc.communicate(timeout=300)
        if line is None or self.proc.returncode != 0:
            raise BenchFailure("loadgen failed (%s): %s" % (self.proc.returncode, err[-500:]))
        return json.loads(line.split(" ", 1)[1])


def density_on_demand_trial(server, stream, n, empty_kb, loops=2, watch_every=20):
    """n real-time 720p30 pushes to on-demand sessions, every 20th watched by one long poll. Kept up:
    every push answered 200 within 0.3 s of its last unit (every access unit ingested in time), the
    ingest lag at the middle at most 3 access units, the sender on schedule, every reader answered
    with pictures whose age (receipt of the picture's access unit to its answer) stays under 0.5 s at
    p99, and the server's memory within 2 MB per session plus the history it holds plus 40 MB per
    watched session."""
    prefix = "d1-%d" % n
    gen = LoadGen(server, stream, n, prefix, loops=loops, watch_every=watch_every, watch_after=3.0)
    mid = gen.wait_for("MID")
    lag = None
    rss_mid = server.rss_kb()
    if mid:
        sent = len(stream.aus) * loops // 2
        sessions = [s for s in server.json("GET", "/sessions")["sessions"] if s["id"].startswith(prefix + "-")]
        lag = max(sent - s["counters"]["accessUnits"] for s in sessions) if sessions else None
    result = gen.result()
    rss_end = server.rss_kb()
    history_bytes = metric_value(server.metrics(), "frametap_history_bytes")
    decoding_peak = sum(1 for s in server.json("GET", "/sessions")["sessions"]
                        if s["id"].startswith(prefix + "-") and s["decoding"])
    for k in range(n):
        server.json("DELETE", "/sessions/%s-%d" % (prefix, k))
    watched = result["readers"]
    memory_bound_kb = empty_kb + n * 2048 + history_bytes / 1024 + watched * 40 * 1024
    fresh = result["ageP99Seconds"] <= 0.5 and result["readerFailures"] == 0 and result["readerAnswers"] >= watched
    kept = (result["answeredOK"] == n and result["maxAnswerDelaySeconds"] <= 0.3 and lag is not None and lag <= 3
            and fresh and rss_end <= memory_bound_kb and result["senderLateSeconds"] <= 0.25)
    info = ("n=%d answers %d/%d, max answer delay %.3f s, ingest lag at mid %s units, %d watched (%d answers, "
            "picture age p50/p99/max %.0f/%.0f/%.0f ms, first wait ≤ %.0f ms, %d failures), %d decoding at the end, "
            "RSS mid/end %.0f/%.0f MB (bound %.0f MB, history %.0f MB), sender late ≤ %.3f s, loadgen CPU %.1f s "
            "of %.1f s") % (
        n, result["answeredOK"], n, result["maxAnswerDelaySeconds"], lag, watched, result["readerAnswers"],
        result["ageP50Seconds"] * 1000, result["ageP99Seconds"] * 1000, result["ageMaxSeconds"] * 1000,
        result["maxFirstWaitSeconds"] * 1000, result["readerFailures"], decoding_peak, rss_mid / 1024,
        rss_end / 1024, memory_bound_kb / 1024, history_bytes / 2 ** 20, result["senderLateSeconds"],
        result["cpuSeconds"], result["wallSeconds"])
    if result["senderLateSeconds"] > 0.25:
        info += " (sender could not keep its schedule: result capped by the load generator)"
    return kept, info


def bench_on_demand_density(runs, cap=2048):
    build_loadgen()
    stream = Stream(F720)
    lines_ff, lines = FFMPEG_DENSITY.get("lines", []), []
    ff_n = FFMPEG_DENSITY.get("n")
    if ff_n is None:
        command("N × ffmpeg -re -framerate 30 -i .bench/streams/cam720b.264 -f null -   (all at once)")
        ff_n, _ = search(lambda n: ffmpeg_density_trial(n, F720), 4, 96, lines_ff)
    server = Server("--default-decode", "on-demand")
    try:
        time.sleep(0.5)
        empty_kb = server.rss_kb()
        command("%s --port PORT --units .bench/out/cam720b.264.units --sessions N --prefix d1-N --loops 2 "
                "--watch-every 20 --watch-after 3 --wait-ms 2000 --query flush=true" % os.path.relpath(LOADGEN, ROOT))
        found, capped = search(lambda n: density_on_demand_trial(server, stream, n, empty_kb),
                               max(16, 8 * ff_n), cap, lines)
    finally:
        server.stop()
    ratio = found / ff_n if ff_n else float("nan")
    row("D1", "density: 720p30 real-time pushes kept up, decode=on-demand, 1 in 20 watched by a long poll "
        "(sessions)", ("≥ %d" % found) if capped else str(found), "ffmpeg -re processes", str(ff_n), ratio, "≥ 10",
        ratio >= 10)
    DETAILS.append("### D1 on-demand density\n\nThe same stream and search as B5 (doubling, then bisection to "
                   "within 1/16), each trial 20 s (the stream twice), pushed by `bench/loadgen` (C, one thread for "
                   "every push, one thread per reader; its own CPU is in each line). Sessions are on demand "
                   "(`--default-decode on-demand`, history 10 s); every 20th has one reader long-polling "
                   "`latest.jpg?after=SEQ&wait=2000` from 3 s in, which wakes it (a catch-up) and keeps it "
                   "decoding. Kept up: every push answered 200 within 0.3 s of its last access unit, ingest lag "
                   "at the middle ≤ 3 access units, the sender on schedule, every reader served with a picture "
                   "age (its access unit's receipt to the answer) ≤ 0.5 s at p99 and no failure, and RSS within "
                   "2 MB per session + the history held + 40 MB per watched session.\n\n```\nffmpeg:\n%s\n"
                   "FrameTap decode=on-demand:\n%s\n```\n" % ("\n".join(lines_ff), "\n".join(lines)))


def bench_first_picture(runs, sessions=8, samples=100):
    """D2: idle on-demand 1080p30 sessions (2 s GOP) pushed in real time; each request for
    latest.jpg finds its session idle (`--on-demand-linger 0`) and is timed from request to answer."""
    build_loadgen()
    stream = Stream(F1080)
    server = Server("--default-decode", "on-demand", "--on-demand-linger", "0")
    times = []
    skipped = 0
    try:
        gen = LoadGen(server, stream, sessions, "d2", loops=12, query="")
        command(gen.described().replace(str(server.port), "PORT"))
        time.sleep(3)
        before = server.metrics()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        j = 0
        while len(times) < samples and gen.proc.poll() is None:
            sid = "d2-%d" % (j % sessions)
            j += 1
            status = server.json("GET", "/sessions/%s" % sid)
            if status["decoder"] != "idle":
                skipped += 1
                time.sleep(0.05)
                continue
            # A random point in the GOP: the catch-up decodes from the keyframe to there.
            time.sleep(0.1 + (j * 0.37) % 0.5)
            start = time.perf_counter()
            conn.request("GET", "/sessions/%s/frame/latest.jpg" % sid)
            resp = conn.getresponse()
            resp.read()
            elapsed = time.perf_counter() - start
            if resp.status != 200:
                raise BenchFailure("D2: latest.jpg -> %d" % resp.status)
            times.append(elapsed * 1000)
        conn.close()
        after = server.metrics()
        gen.proc.kill()
        gen.proc.communicate()
    finally:
        server.stop()
    if len(times) < samples // 2:
        raise BenchFailure("D2: only %d samples" % len(times))
    catch_up = histogram_delta(histogram(after, "frametap_catchup_seconds"), histogram(before, "frametap_catchup_seconds"))
    units = (metric_value(after, "frametap_catchup_access_units_total", {"kind": "wake"})
             - metric_value(before, "frametap_catchup_access_units_total", {"kind": "wake"}))
    wakes = (metric_value(after, "frametap_catchup_decodes_total", {"kind": "wake", "result": "ok"})
             - metric_value(before, "frametap_catchup_decodes_total", {"kind": "wake", "result": "ok"}))
    p50, p99 = percentile(times, 50), percentile(times, 99)
    row("D2", "first picture of an idle 1080p30 on-demand session (2 s GOP), request to answer (ms p50 / p99)",
        "%.1f / %.1f" % (p50, p99), "—", "", float("nan"), "p99 ≤ 150 ms", p99 <= 150)
    DETAILS.append("### D2 first picture on demand\n\n%d sessions of the 1080p stream (IP only, IDR every 2 s) pushed "
                   "in real time by `bench/loadgen`; `--on-demand-linger 0`, so each session is idle again a "
                   "moment after it answered. Every request (one keep-alive connection, sessions in turn, %d "
                   "timed, %d skipped because a session was not idle yet) found its session idle and was timed "
                   "from the request to the last byte of the JPEG. Request to answer (ms): p50 %.1f, p90 %.1f, "
                   "p99 %.1f, max %.1f. Server side over these requests: %d catch-ups decoding %.1f access units "
                   "each on average (the keyframe to the newest unit, or the GOP before too when the last GOP is "
                   "too short to have output a picture), catch-up time p50 ≤ %s s, p99 ≤ %s s (bucket bounds); "
                   "`--catchup-decoder-threads 2`.\n"
                   % (sessions, len(times), skipped, p50, percentile(times, 90), p99, max(times), wakes,
                      units / wakes if wakes else float("nan"), histogram_quantile(catch_up, 0.5),
                      histogram_quantile(catch_up, 0.99)))


def bench_idle_memory(runs, sessions=16):
    """D3: RSS per idle on-demand 1080p session holding 2 s of history."""
    build_loadgen()
    stream = Stream(F1080)
    server = Server("--default-decode", "on-demand", "--history-seconds", "2")
    try:
        time.sleep(0.5)
        empty = server.rss_kb()
        gen = LoadGen(server, stream, sessions, "d3", loops=1)
        command(gen.described().replace(str(server.port), "PORT"))
        result = gen.result()
        if result["answeredOK"] != sessions:
            raise BenchFailure("D3: %d of %d pushes answered" % (result["answeredOK"], sessions))
        time.sleep(1)
        held = server.rss_kb()
        histories = [server.json("GET", "/sessions/d3-%d/history" % k) for k in range(sessions)]
        statuses = [server.json("GET", "/sessions/d3-%d" % k) for k in range(sessions)]
        decoder_memory = metric_value(server.metrics(), "frametap_decoder_memory_used_bytes")
    finally:
        server.stop()
    per_session_mb = (held - empty) / sessions / 1024
    history_mb = sum(h["bytes"] for h in histories) / sessions / 2 ** 20
    decoding = sum(1 for s in statuses if s["decoding"])
    gop_mb = len(stream.data) / stream.keyframes / 2 ** 20
    met = per_session_mb <= 2 * 1.048576 + history_mb and decoding == 0 and decoder_memory == 0
    row("D3", "RSS per idle on-demand 1080p session holding 2 s of history (MB; its history's bytes in brackets)",
        "%.2f (%.2f)" % (per_session_mb, history_mb), "—", "", float("nan"), "≤ 2 MB + the GOP's bytes", met)
    DETAILS.append("### D3 memory of idle on-demand sessions\n\nVmRSS of a server with `--history-seconds 2`: "
                   "empty %d kB; after %d sessions of the 1080p stream (10 s each, pushed in real time by "
                   "`bench/loadgen`, flushed) %d kB: %.2f MB per session. Each holds %.2f MB of history on "
                   "average (%.1f GOPs; a GOP of this stream is %.2f MB), no decoder (%d decoding, decoder memory "
                   "in use %d bytes). RSS counts what glibc keeps of freed upload buffers too.\n"
                   % (empty, sessions, held, per_session_mb, history_mb,
                      sum(h["gops"] for h in histories) / sessions, gop_mb, decoding, decoder_memory))


def bench_past_picture(runs, requests=20):
    """D4: at.jpg of a picture 30 s back, while the stream goes on."""
    build_loadgen()
    stream = Stream(F1080)
    server = Server("--default-decode", "on-demand", "--history-seconds", "35")
    times, units = [], []
    try:
        gen = LoadGen(server, stream, 1, "d4", loops=5, query="")
        command(gen.described().replace(str(server.port), "PORT"))
        time.sleep(33)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        for j in range(requests):
            before = metric_value(server.metrics(), "frametap_catchup_access_units_total", {"kind": "history"})
            # 30 s back, at different places in the GOP.
            t = int((time.time() - 30 + (j % 10) * 0.2) * 1000)
            start = time.perf_counter()
            conn.request("GET", "/sessions/d4-0/frame/at.jpg?t=%d" % t)
            resp = conn.getresponse()
            resp.read()
            elapsed = time.perf_counter() - start
            if resp.status != 200:
                raise BenchFailure("D4: at.jpg -> %d" % resp.status)
            times.append(elapsed * 1000)
            units.append(metric_value(server.metrics(), "frametap_catchup_access_units_total", {"kind": "history"}) - before)
            time.sleep(0.2)
        command("GET /sessions/d4-0/frame/at.jpg?t=<now - 30 s, in ms>  (%d times, one keep-alive connection)" % requests)
        conn.close()
        gen.proc.kill()
        gen.proc.communicate()
    finally:
        server.stop()
    p50, p99 = percentile(times, 50), percentile(times, 99)
    row("D4", "at.jpg of a 1080p picture 30 s back (ms p50 / p99)", "%.1f / %.1f" % (p50, p99), "—", "",
        float("nan"), "—", True)
    DETAILS.append("### D4 a picture from the past\n\nOne 1080p30 session pushed in real time (`--history-seconds "
                   "35`), %d requests of `at.jpg?t=` 30 s back (sequential, 0.2 s apart), each decoded from its "
                   "GOP's keyframe by a catch-up decoder while the push goes on. Request to answer (ms): p50 %.1f, "
                   "p99 %.1f, max %.1f; access units decoded per request: %s (mean %.1f).\n"
                   % (requests, p50, p99, max(times), runs_text(units, 0), statistics.mean(units)))


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) // 1024 // 1024
    os_name = "?"
    if os.path.exists("/etc/os-release"):
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME"):
                    os_name = line.split("=", 1)[1].strip().strip('"')

    def version(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, shell=True).stdout.strip().splitlines()[0]
        except Exception:
            return "?"

    def pkg(name):
        return version("dpkg-query -W -f='${Version}' %s 2>/dev/null || echo '?'" % name)
    lines = [
        "- CPU: %s, %d cores; %d GiB memory; %s, kernel %s" % (cpu, os.cpu_count(), mem, os_name, platform.release()),
        "- %s" % version("swift --version 2>&1 | grep -i 'swift version'"),
        "- libavcodec %s (libavcodec59), libswscale %s, libturbojpeg %s, libmicrohttpd %s"
        % (pkg("libavcodec59"), pkg("libswscale6"), pkg("libturbojpeg0"), pkg("libmicrohttpd12")),
        "- peers: ffmpeg %s, GStreamer %s (gstreamer1.0-libav %s, plugins-good %s), nginx %s, wrk %s, "
        "libjpeg-turbo-progs %s" % (pkg("ffmpeg"), pkg("libgstreamer1.0-0"), pkg("gstreamer1.0-libav"),
                                    pkg("gstreamer1.0-plugins-good"), pkg("nginx-light") if pkg("nginx-light") != "?"
                                    else pkg("nginx"), pkg("wrk"), pkg("libjpeg-turbo-progs")),
    ]
    return lines


SUITES = [("B1", bench_ingest), ("B2", bench_multipart), ("B3", bench_latest), ("B4", bench_freshness),
          ("B4c", bench_freshness_fmp4), ("P1", bench_pull_cpu), ("B5", bench_density), ("B6", bench_memory), ("B7", bench_fanout), ("M", bench_micro),
          ("H1", bench_hevc_ingest), ("H2", bench_hevc_multipart), ("H3", bench_hevc_memory),
          ("D1", bench_on_demand_density), ("D2", bench_first_picture), ("D3", bench_idle_memory),
          ("D4", bench_past_picture)]


def write_report(path, runs, started, loads, failed):
    elapsed = time.time() - started
    out = ["# FrameTap benchmarks", "",
           "Written by `make bench` (bench/bench.py) on %s; the whole run took %.1f minutes. Re-run it to measure "
           "your machine; every number below comes from this one run." % (time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                          time.gmtime()),
                                                                            elapsed / 60), ""]
    out += ["## Machine", ""] + machine() + [
        "- load average (1/5/15 min) before each suite: %s" % "; ".join("%s %s" % kv for kv in loads),
        "- figures with a peer: median of %d runs alternating FrameTap and the peer; ratio = FrameTap / peer "
        "(for B5: sessions / processes)." % runs, ""]
    out += ["## Streams", "",
            "Made by `bench/make-streams.sh` (ffmpeg + libx264 and libx265, testsrc2 with temporal noise, IDR every "
            "2 s, parameter sets repeated):", ""]
    for path_ in (F1080, F720, H1080, H1080M10):
        s = Stream(path_)
        out.append("- `%s`: %d bytes, %d access units, %d keyframes, %.2f Mbit/s over %.0f s"
                   % (os.path.relpath(path_, ROOT), len(s.data), len(s.aus), s.keyframes,
                      len(s.data) * 8 / (len(s.aus) / FPS) / 1e6, len(s.aus) / FPS))
    out += ["", "## Results", "", "| id | measure | FrameTap | peer | peer figure | ratio | target | met |",
            "|---|---|---|---|---|---|---|---|"]
    for r in RESULTS:
        ratio = "" if r["ratio"] != r["ratio"] else "%.2f" % r["ratio"]
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["id"], r["measure"] + (" — " + r["note"] if r["note"] else ""), r["frametap"], r["peer_name"],
            r["peer"], ratio, r["target"], "yes" if r["met"] else "**no**"))
    if failed:
        out += ["", "**Suites that failed:** " + "; ".join(failed)]
    out += ["", "## Details", ""] + DETAILS + ["## Commands", "", "```"] + COMMANDS + ["```", ""]
    notes = os.path.join(ROOT, "bench", "NOTES.md")
    if os.path.exists(notes):
        with open(notes) as f:
            out += [f.read()]
    with open(path, "w") as f:
        f.write("\n".join(out))
    log("wrote %s" % path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(ROOT, "BENCHMARKS.md"))
    args = parser.parse_args()
    os.makedirs(os.path.join(WORK, "out"), exist_ok=True)
    for p in (BIN, HARNESS, F1080, F720, H1080, H1080M10):
        if not os.path.exists(p):
            sys.exit("bench: %s is missing (run `make bench`)" % p)
    only = set(x.strip() for x in args.only.split(",") if x.strip())
    started = time.time()
    loads = []
    failed = []
    for name, suite in SUITES:
        if only and name not in only:
            continue
        loads.append((name, load_average()))
        log("suite %s (load %s)" % (name, loads[-1][1]))
        try:
            suite(args.runs)
        except BenchFailure as e:
            log("FAILED %s: %s" % (name, e))
            failed.append("%s: %s" % (name, e))
    write_report(args.out, args.runs, started, loads, failed)
    if failed:
        sys.exit("bench: %d suite(s) failed loudly: %s" % (len(failed), "; ".join(failed)))


if __name__ == "__main__":
    main()
