#!/usr/bin/env python3
"""Soak test (`make soak SOAK_MINUTES=N`): a release server under steady, mixed load for N minutes.

Load, all on 127.0.0.1 and all stopping by themselves at the deadline:
  * live pushes: one `ffmpeg -re -stream_loop -1` chunked POST per live session (fixtures and a
    640x360 clip looping at real time), for the whole run;
  * readers: latest.jpg at several sizes and qualities, over keep-alive connections;
  * MJPEG viewers: frames.mjpeg, reconnecting every 10-40 s; some read slowly (a few KB at a
    time), so the server must skip pictures for them rather than queue;
  * long polls: latest.jpg?after=SEQ&wait=5000 (a newer picture, or 304 when the wait ends);
  * session churn: create with a push, read a picture, sometimes a multipart push, delete, repeat;
  * hostile phases, every 2 minutes from 30 s in: 60 s of slow clients from 127.0.0.2-6 (320
    connections trickling heads and PUT bodies a byte a second, reconnecting when closed, for the
    server's 256 slots), while a client from 127.0.0.7 must get every answer; then 30 s of floods
    (1900 query parameters, 3000 headers, 9000-byte and 100 KB targets), each answered.
    The server runs with --max-connections 256 --max-connections-per-ip 64 for that.

Every sample (5 s) reads the server's RSS and threads (/proc/PID/status) and open fds
(/proc/PID/fd); every minute prints them. The run fails on any failed request, on a server crash
or unclean stop, or when a resource grows: after a warm-up of max(20 % of the run, 2 minutes)
no sample may exceed the highest value seen during the warm-up by more than 10 % (threads: by
more than 10 % or two threads, whichever is more, since a pool such as libdispatch's starts a
worker when one blocks and keeps it, and a tenth of nine threads is no thread). The warm-up
peak (not its last sample) is the baseline because fds and threads move with connections coming
and going and RSS climbs to a plateau (caches, malloc arenas) first; a leak keeps climbing past it.

Results: .test-output/soak/ (samples.csv, summary.txt, server.log, clients' first failures).
"""
import argparse
import http.client
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from harness.attackers import FLOODS, SlowClients, flood_answered, probe  # noqa: E402 - tools/ is on the path only now
from harness.client import is_jpeg, wait_for_picture  # noqa: E402
from harness.proc import open_fds, rss_kb, thread_count  # noqa: E402
from harness.rawhttp import raw_exchange  # noqa: E402
from harness.server import Server  # noqa: E402
from harness.waiting import Failure  # noqa: E402
FIXTURES = ROOT / "Tests" / "Fixtures"
LIVE_FIXTURES = ["high_320x240.264", "slices4_320x240.264", "main_bframes_176x144.264"]
CHURN_FIXTURES = ["baseline_176x144.264", "high_320x240.264", "aud_sei_176x144.264"]
READ_QUERIES = ["", "?width=160", "?width=320&quality=60", "?height=90", "?width=97&height=61", "?quality=95"]
SAMPLE_SECONDS = 5
GROWTH_LIMIT = 1.10
THREAD_SLACK = 2


class Load:
    """What the clients did, shared by their threads."""

    def __init__(self, deadline, out):
        self.deadline, self.out = deadline, out
        self.lock = threading.Lock()
        self.requests = {}
        self.failures = []

    def running(self):
        return time.monotonic() < self.deadline

    def ok(self, kind):
        with self.lock:
            self.requests[kind] = self.requests.get(kind, 0) + 1

    def fail(self, kind, what):
        with self.lock:
            self.failures.append(f"{time.strftime('%H:%M:%S')} {kind}: {what}")
            if len(self.failures) <= 20:
                print(f"FAIL {kind}: {what}", flush=True)

    def total(self):
        with self.lock:
            return sum(self.requests.values()), len(self.failures)


def client_loop(load, kind, body):
    """Runs body() until the deadline; an exception is one failed request of this kind."""
    while load.running():
        try:
            body()
        except Exception as error:  # noqa: BLE001 - any failure of a client counts
            load.fail(kind, f"{type(error).__name__}: {error}")
            time.sleep(0.5)


# --------------------------------------------------------------------------------------------
# The clients.

def live_push(load, port, session, clip, seconds):
    """ffmpeg pushes the clip in a loop at real time for the whole run; it must end with exit 0."""
    command = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-re", "-stream_loop", "-1",
               "-i", str(clip), "-t", f"{seconds:.0f}", "-c", "copy", "-f", "h264", "-method", "POST",
               "-chunked_post", "1", f"http://127.0.0.1:{port}/sessions/{session}/nalus"]
    result = subprocess.run(command, capture_output=True, timeout=seconds + 60)
    if result.returncode != 0:
        load.fail("push", f"{session}: ffmpeg exit {result.returncode}: {result.stderr[-300:]!r}")
    else:
        load.ok("push")


def reader(load, port, sessions, rng):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=15)

    def once():
        nonlocal connection
        path = f"/sessions/{rng.choice(sessions)}/frame/latest.jpg{rng.choice(READ_QUERIES)}"
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            data = response.read()
        except (ConnectionError, http.client.HTTPException):
            connection.close()   # a keep-alive connection closed by the server: retry once on a new one
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
            connection.request("GET", path)
            response = connection.getresponse()
            data = response.read()
        if response.status != 200 or not is_jpeg(data):
            raise RuntimeError(f"GET {path}: {response.status} {data[:120]!r}")
        load.ok("latest.jpg")
        time.sleep(rng.uniform(0.05, 0.3))

    client_loop(load, "latest.jpg", once)


def mjpeg_viewer(load, port, sessions, rng, slow):
    """One viewer: connects, reads parts for 10-40 s, leaves, comes back."""
    def once():
        session = rng.choice(sessions)
        query = rng.choice(["", "?fps=5", "?width=160", "?fps=10&width=320"])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
        try:
            connection.request("GET", f"/sessions/{session}/frames.mjpeg{query}")
            response = connection.getresponse()
            kind = response.getheader("Content-Type", "")
            boundary = re.search(r'boundary="?([^";]+)', kind)
            if response.status != 200 or not boundary:
                raise RuntimeError(f"frames.mjpeg: {response.status} {kind}")
            parts = read_parts(load, response, boundary.group(1).encode(), time.monotonic() + rng.uniform(10, 40), slow)
            if parts == 0:
                raise RuntimeError(f"frames.mjpeg{query} of {session}: no picture in the viewing time")
            load.ok("mjpeg-slow" if slow else "mjpeg")
        finally:
            connection.close()

    client_loop(load, "mjpeg-slow" if slow else "mjpeg", once)


def read_parts(load, response, boundary, until, slow):
    """Reads multipart parts until `until`; each must be a JPEG. Slow readers take 2 KB every 0.2 s."""
    buffer, parts, opening = b"", 0, b"--" + boundary
    while time.monotonic() < until and load.running():
        chunk = response.read1(2048 if slow else 65536)
        if not chunk:
            raise RuntimeError("the MJPEG stream ended")
        buffer += chunk
        while True:
            start = buffer.find(opening)
            end = buffer.find(b"\r\n\r\n", start)
            if start < 0 or end < 0:
                break
            length = re.search(rb"(?i)content-length:\s*(\d+)", buffer[start:end])
            if not length:
                raise RuntimeError(f"a part without Content-Length: {buffer[start:end]!r}")
            stop = end + 4 + int(length.group(1))
            if len(buffer) < stop:
                break
            if not is_jpeg(buffer[end + 4:stop]):
                raise RuntimeError("a part that is not a JPEG")
            parts += 1
            buffer = buffer[stop:]
        if slow:
            time.sleep(0.2)
    return parts


def long_poller(load, port, sessions, rng):
    session = rng.choice(sessions)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    seq = 0

    def once():
        nonlocal seq
        connection.request("GET", f"/sessions/{session}/frame/latest.jpg?after={seq}&wait=5000&width=160")
        response = connection.getresponse()
        data = response.read()
        if response.status == 200 and is_jpeg(data):
            newer = int(response.getheader("X-Frame-Seq", "0"))
            if newer <= seq:
                raise RuntimeError(f"long poll after {seq} answered {newer}")
            seq = newer
        elif response.status != 304:
            raise RuntimeError(f"long poll: {response.status} {data[:120]!r}")
        load.ok("long-poll")

    client_loop(load, "long-poll", once)


def churn(load, port, rng):
    """Sessions come and go: push (JSON or multipart), read, configure, delete."""
    bodies = {name: (FIXTURES / name).read_bytes() for name in CHURN_FIXTURES}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    number = 0

    def call(method, path, body=None, headers=None, want=(200,)):
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        data = response.read()
        if response.status not in want:
            raise RuntimeError(f"{method} {path}: {response.status} {data[:160]!r}")
        return response, data

    def once():
        nonlocal number
        number += 1
        session = f"soak-churn-{number}"
        body = bodies[rng.choice(CHURN_FIXTURES)]
        if rng.random() < 0.3:
            call("PUT", f"/sessions/{session}", b'{"quality": 70}', {"Content-Type": "application/json"}, (201,))
        if rng.random() < 0.3:
            response, data = call("POST", f"/sessions/{session}/nalus?flush=true&width=96", body,
                                  {"Accept": "multipart/mixed"})
            if b"image/jpeg" not in data or b"problem+json" in data:
                raise RuntimeError(f"multipart push to {session}: {data[:160]!r}")
        else:
            call("POST", f"/sessions/{session}/nalus?flush=true", body)
        _, picture = call("GET", f"/sessions/{session}/frame/latest.jpg")
        if not is_jpeg(picture):
            raise RuntimeError(f"{session}: latest.jpg is not a JPEG")
        call("DELETE", f"/sessions/{session}", want=(204,))
        load.ok("churn-cycle")
        time.sleep(rng.uniform(0.05, 0.2))

    client_loop(load, "churn", once)


def hostile_phases(load, port):
    """Every 2 minutes: 60 s of slow clients from five addresses, more than the server's slots,
    with a client that behaves probing from a sixth; 30 s of floods; 30 s of quiet."""
    base = f"http://127.0.0.1:{port}"
    addresses = [f"127.0.0.{n}" for n in range(2, 7)]
    time.sleep(30)
    while load.running():
        phase_end = min(time.monotonic() + 60, load.deadline)
        with SlowClients(port, addresses, per_address=64, kind="mixed", interval=1.0, reconnect_delay=0.5):
            while time.monotonic() < phase_end:
                status, took = probe(port, "127.0.0.7", timeout=10)
                if status == 200:
                    load.ok("probe under slow clients")
                else:
                    load.fail("probe under slow clients", f"{status} after {took:.1f} s")
                time.sleep(2)
        phase_end = min(time.monotonic() + 30, load.deadline)
        while time.monotonic() < phase_end:
            for what, raw, status in FLOODS:
                data, closed = raw_exchange(base, raw, wait=5.0)
                if flood_answered(data, closed, status):
                    load.ok("flood")
                else:
                    load.fail("flood", f"{what}: {data[:80]!r}")
        time.sleep(max(0.0, min(30, load.deadline - time.monotonic())))


# --------------------------------------------------------------------------------------------
# The server and its resources.

def resources(pid):
    return rss_kb(pid), open_fds(pid), thread_count(pid)


def make_clip(out):
    """A 640x360 camera-like clip (10 s, keyframe every second) for the heavier live session."""
    clip = out / "clip_640x360.264"
    if not clip.exists():
        subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                        "testsrc2=size=640x360:rate=25", "-t", "10", "-c:v", "libx264", "-preset", "veryfast",
                        "-g", "25", "-pix_fmt", "yuv420p", "-f", "h264", str(clip)], check=True, timeout=120)
    return clip


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default=str(ROOT / ".build-soak" / "release" / "frametap"))
    parser.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES", "30")))
    parser.add_argument("--out", default=str(ROOT / ".test-output" / "soak"))
    parser.add_argument("--warmup", type=float, help="seconds (default: max(20 %% of the run, 120 s)); for trying the script")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    duration = args.minutes * 60
    warmup = args.warmup if args.warmup is not None else max(0.2 * duration, 120.0)
    if duration <= warmup:
        sys.exit(f"a {args.minutes} minute run is all warm-up ({warmup:.0f} s): use more than {warmup / 60:.0f} minutes")
    seed = int(os.environ.get("SOAK_SEED", "1"))
    rng = random.Random(seed)

    server = Server(args.binary, ["--max-connections", "256", "--max-connections-per-ip", "64"],
                    log_path=out / "server.log", start_timeout=20)
    try:
        server.start()
    except Failure as error:
        sys.exit(f"the server did not come up: {error}")
    port = server.port
    print(f"soak: {args.binary} (pid {server.pid}) on 127.0.0.1:{port}, {args.minutes:g} min, warm-up {warmup:.0f} s, "
          f"limit +{(GROWTH_LIMIT - 1) * 100:.0f} % over the warm-up peak", flush=True)

    started = time.monotonic()
    load = Load(started + duration, out)
    clips = [(f"soak-live-{i}", FIXTURES / name) for i, name in enumerate(LIVE_FIXTURES)]
    clips.append(("soak-live-640", make_clip(out)))
    live = [name for name, _ in clips]
    threads = [threading.Thread(target=live_push, args=(load, port, name, clip, duration - (time.monotonic() - started)))
               for name, clip in clips]
    for thread in threads:
        thread.start()
    for name in live:
        try:
            wait_for_picture(server.base, name, 30, interval=0.2)
        except (Failure, OSError) as error:
            load.fail("push", f"{name}: {error}")
    client_threads = [threading.Thread(target=reader, args=(load, port, live, random.Random(rng.random())))
                      for _ in range(4)]
    client_threads += [threading.Thread(target=mjpeg_viewer, args=(load, port, live, random.Random(rng.random()), slow))
                       for slow in (False, False, True, True)]
    client_threads += [threading.Thread(target=long_poller, args=(load, port, live, random.Random(rng.random())))
                       for _ in range(2)]
    client_threads.append(threading.Thread(target=churn, args=(load, port, random.Random(rng.random()))))
    client_threads.append(threading.Thread(target=hostile_phases, args=(load, port)))
    for thread in client_threads:
        thread.daemon = True
        thread.start()

    samples, crashed = [], False
    csv = open(out / "samples.csv", "w")
    csv.write("seconds,rss_kb,fds,threads,requests,failures\n")
    print(f"{'min':>4} {'RSS MB':>7} {'fds':>5} {'threads':>7} {'requests':>9} {'failures':>8}", flush=True)
    next_print = started + 60
    while load.running():
        time.sleep(min(SAMPLE_SECONDS, max(0.0, load.deadline - time.monotonic())))
        if server.process.poll() is not None:
            crashed = True
            load.fail("server", f"exited with {server.process.returncode} during the run")
            break
        elapsed = time.monotonic() - started
        rss, fds, nthreads = resources(server.pid)
        requests, failures = load.total()
        samples.append((elapsed, rss, fds, nthreads))
        csv.write(f"{elapsed:.0f},{rss},{fds},{nthreads},{requests},{failures}\n")
        csv.flush()
        if time.monotonic() >= next_print or not load.running():
            print(f"{elapsed / 60:4.1f} {rss / 1024:7.1f} {fds:5d} {nthreads:7d} {requests:9d} {failures:8d}", flush=True)
            next_print += 60

    for thread in threads + client_threads:
        thread.join(timeout=60)
    stopped = None
    if not crashed:
        stopped = server.stop(timeout=30)
        if stopped != 0:
            load.fail("server", f"SIGTERM stop: exit {stopped} (want 0)")

    verdicts = growth_verdicts(samples, warmup)
    write_summary(out, args, samples, warmup, verdicts, load, stopped)
    return 0 if not load.failures and all(ok for ok, _ in verdicts) else 1


def growth_verdicts(samples, warmup):
    """(ok, line) per resource: the highest sample after the warm-up against the warm-up peak."""
    verdicts = []
    for index, name in ((1, "RSS KB"), (2, "fds"), (3, "threads")):
        during = [s[index] for s in samples if s[0] <= warmup]
        after = [s[index] for s in samples if s[0] > warmup]
        if not during or not after:
            verdicts.append((False, f"{name}: too few samples"))
            continue
        peak, worst, limit = max(during), max(after), max(during) * GROWTH_LIMIT
        if name == "threads":
            limit = max(limit, peak + THREAD_SLACK)
        verdicts.append((worst <= limit, f"{name}: warm-up peak {peak}, after it at most {worst} "
                                         f"(limit {limit:.0f}, {100 * (worst / peak - 1):+.1f} %)"))
    return verdicts


def write_summary(out, args, samples, warmup, verdicts, load, stopped):
    lines = [f"soak {args.minutes:g} min, warm-up {warmup:.0f} s, server exit after SIGTERM: {stopped}",
             f"{'min':>4} {'RSS MB':>7} {'fds':>5} {'threads':>7}"]
    minute = 0
    for elapsed, rss, fds, nthreads in samples:     # the last sample of each minute
        if elapsed >= (minute + 1) * 60 - SAMPLE_SECONDS / 2 or (elapsed, rss, fds, nthreads) == samples[-1]:
            lines.append(f"{elapsed / 60:4.1f} {rss / 1024:7.1f} {fds:5d} {nthreads:7d}")
            minute += 1
    lines += [("ok   " if ok else "FAIL ") + line for ok, line in verdicts]
    lines.append("requests: " + ", ".join(f"{kind} {count}" for kind, count in sorted(load.requests.items())))
    lines.append(f"failed requests: {len(load.failures)}")
    lines += ["  " + failure for failure in load.failures[:50]]
    text = "\n".join(lines) + "\n"
    (out / "summary.txt").write_text(text)
    print(text, end="")
    print(f"soak: {'passed' if not load.failures and all(ok for ok, _ in verdicts) else 'FAILED'} "
          f"(results in {out})")


if __name__ == "__main__":
    sys.exit(main())
