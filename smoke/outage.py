#!/usr/bin/env python3
"""How soon a camera back after an outage shows pictures again, with the server's default
settings: GStreamer RTSP servers (smoke/rtsp-server.py) pulled by one session each are killed,
left off for --outage seconds, and started again one after another across a second (so their
returns fall at every point of the pull's wait); each return is timed from the moment the
camera listens again to the first new picture the session serves (a long poll on latest.jpg
after the picture it had). Repeated for --rounds; the p95 of every return must be at most
--limit seconds.

    smoke/outage.py --binary .build/debug/frametap [--cameras 4] [--rounds 2] [--outage 20] [--limit 5]

Prints each return, then p50, p95 and the slowest, one PASS/FAIL line per check and
"N passed, N failed" last; exits 1 when anything failed.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from harness.checks import Results  # noqa: E402
from harness.client import request, session_status  # noqa: E402
from harness.ports import free_port  # noqa: E402
from harness.proc import end  # noqa: E402
from harness.server import Server  # noqa: E402
from harness.waiting import Failure  # noqa: E402

SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, with the gi bindings of GStreamer's RTSP server


class Camera:
    """One RTSP server on a port of its own, which can be killed and started again there."""

    def __init__(self, port, work):
        self.port, self.work = port, work
        self.process = None

    def start(self):
        """Starts it; the monotonic time it listened (it prints "ready" then)."""
        log = open(os.path.join(self.work, f"rtsp-{self.port}.log"), "a")
        self.process = subprocess.Popen(
            [SYSTEM_PYTHON, os.path.join(ROOT, "smoke", "rtsp-server.py"), "--port", str(self.port)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True)
        line = self.process.stdout.readline()
        if "ready" not in line:
            raise Failure(f"the RTSP server on {self.port} did not start: {line!r}")
        return time.monotonic()

    def kill(self):
        if self.process:
            end(self.process)


def state(base, session):
    return ((session_status(base, session) or {}).get("source") or {}).get("state")


def latest_seq(base, session):
    return ((session_status(base, session) or {}).get("latestFrame") or {}).get("seq") or 0


def wait_until(condition, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise Failure(f"timed out after {seconds} s waiting for {what}")


def time_return(base, session, camera, at, after, samples, errors):
    """Starts `camera` at monotonic time `at` and appends the seconds from its return to the
    session's first newer picture than `after`."""
    time.sleep(max(0.0, at - time.monotonic()))
    try:
        returned = camera.start()
        status, headers, _ = request(base, "GET", f"/sessions/{session}/frame/latest.jpg?after={after}&wait=30000",
                                     timeout=40)
        shown = time.monotonic()
        if status != 200:
            errors.append(f"{session}: no new picture within 30 s of its return (status {status})")
            return
        samples.append((session, shown - returned, int(headers.get("X-Frame-Seq", 0))))
    except (OSError, Failure) as error:
        errors.append(f"{session}: {error}")


def percentile(values, fraction):
    """The nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--cameras", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--outage", type=float, default=20.0)
    parser.add_argument("--limit", type=float, default=5.0, help="the p95 allowed, in seconds")
    parser.add_argument("--log", default=os.path.join(ROOT, ".test-output", "outage"))
    arguments = parser.parse_args()
    os.makedirs(arguments.log, exist_ok=True)
    results = Results()
    work = tempfile.mkdtemp(prefix="frametap-outage-")
    # Pulling needs an allow list; everything about retrying is the default.
    server = Server(arguments.binary, ["--allow-sources", "rtsp://127.0.0.1"],
                    log_path=os.path.join(arguments.log, "server.log"))
    cameras = [Camera(free_port(), work) for _ in range(arguments.cameras)]
    sessions = [f"cam{index}" for index in range(arguments.cameras)]
    samples, errors = [], []
    try:
        server.start()
        for camera, session in zip(cameras, sessions):
            camera.start()
            body = json.dumps({"source": {"url": f"rtsp://127.0.0.1:{camera.port}/cam", "transport": "tcp"}}).encode()
            status, _, answer = request(server.base, "PUT", f"/sessions/{session}", body=body,
                                        headers={"Content-Type": "application/json"})
            if status != 201:
                raise Failure(f"PUT {session}: {status} {answer[:200]!r}")
        for session in sessions:
            wait_until(lambda: latest_seq(server.base, session) >= 25, 30, f"{session} to decode 25 pictures")
        for round_number in range(arguments.rounds):
            for camera in cameras:
                camera.kill()
            killed = time.monotonic()
            for session in sessions:
                wait_until(lambda: state(server.base, session) == "retrying", 20, f"{session}'s source to be lost")
            # The returns spread over a second, a little differently each round.
            offsets = [((index + round_number / arguments.rounds) / arguments.cameras) for index in range(arguments.cameras)]
            time.sleep(max(0.0, killed + arguments.outage - 0.5 - time.monotonic()))
            threads = []
            for camera, session, offset in zip(cameras, sessions, offsets):
                after = latest_seq(server.base, session)
                thread = threading.Thread(target=time_return, args=(server.base, session, camera,
                                                                    killed + arguments.outage + offset, after,
                                                                    samples, errors))
                thread.start()
                threads.append(thread)
            for thread in threads:
                thread.join(timeout=60)
            print(f"round {round_number + 1}: " + ", ".join(
                f"{session} {seconds:.2f} s" for session, seconds, _ in samples[-arguments.cameras:]), flush=True)
    except Failure as error:
        errors.append(str(error))
    finally:
        for camera in cameras:
            camera.kill()
        exit_code = server.stop()
    results.check("the server exited 0 on SIGTERM", exit_code == 0, f"exit {exit_code}")
    results.check("every camera's return was timed", not errors and len(samples) == arguments.cameras * arguments.rounds,
                  "; ".join(errors[:5]))
    if samples:
        seconds = [value for _, value, _ in samples]
        p50, p95 = percentile(seconds, 0.5), percentile(seconds, 0.95)
        print(f"{len(seconds)} returns after {arguments.outage:g} s outages: p50 {p50:.2f} s, p95 {p95:.2f} s, "
              f"slowest {max(seconds):.2f} s")
        results.check(f"pictures again within {arguments.limit:g} s of the camera's return (p95 {p95:.2f} s)",
                      p95 <= arguments.limit)
    print(f"{results.passed} passed, {results.failed} failed")
    return 0 if results.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
