"""The server's log under hostile clients (part of smoke/hostile.py): what a client can make it
write, and how much.

  * no byte of the log is a control character but the line ends: text from outside (a
    container's, a stream's, libav's words about either) is written out, never raw;
  * pushes of garbage into new sessions, one request each (a session made, failed and removed
    per request: three lines each before the budget), write no more than the process's budget
    (200 lines at once, then 20 a second), and the next line says how many were left out.
"""
import re
import time

from harness.client import request
from harness.waiting import Failure

BURST, PER_SECOND = 200, 20
FLOOD = 600


def log_checks(base, log_path, seed):
    with open(log_path, "rb") as log:
        before = log.read()
    raw = sorted({byte for byte in before if byte < 0x20 and byte != 0x0A} | ({0x7F} & set(before)))
    if raw:
        line = next(line for line in before.split(b"\n") if any(byte in line for byte in raw))
        raise Failure(f"the log holds raw control bytes {raw}: {line[:200]!r}")
    garbage = bytes((index * 131 + 7) & 0xFF | 0x10 for index in range(300))
    started = time.monotonic()
    for index in range(FLOOD):
        status, _, _ = request(base, "POST", f"/sessions/hostile-{seed}-log{index}/nalus", body=garbage)
        if status != 422:
            raise Failure(f"garbage push {index} into a new session answered {status}, not 422")
    elapsed = time.monotonic() - started
    time.sleep(1.2)
    request(base, "POST", f"/sessions/hostile-{seed}-log-after/nalus", body=garbage)
    time.sleep(0.3)
    with open(log_path, "rb") as log:
        after = log.read()[len(before):].decode("utf-8", "replace")
    lines = after.count("\n")
    allowed = BURST + PER_SECOND * (elapsed + 1.5) + 10
    if lines > allowed:
        raise Failure(f"{FLOOD} garbage pushes in {elapsed:.1f} s wrote {lines} log lines (the budget allows {allowed:.0f})")
    left_out = [int(n) for n in re.findall(r"(\d+) log lines left out", after)]
    if sum(left_out) < FLOOD:
        raise Failure(f"{FLOOD} garbage pushes wrote {lines} lines and said {sum(left_out)} were left out")
    print(f"  log: {FLOOD} garbage pushes into new sessions in {elapsed:.1f} s wrote {lines} lines, "
          f"{sum(left_out)} left out and said so; no raw control byte in {len(before)} bytes of log", flush=True)
