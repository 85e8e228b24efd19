"""The server's log under hostile clients (part of smoke/hostile.py): what a client can make it
write, and how much.

  * no byte of the log is a control character but the line ends: text from outside (a
    container's, a stream's, libav's words about either) is written out, never raw;
  * pushes of garbage into new sessions, one request each (a session made, failed and removed
    per request: three lines each before the budget), write no more than the process's budget
    (200 lines at once, then 20 a second), the next line says how many were left out, and
    /metrics counts them.
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
        whole = log.read()
    after = whole[len(before):].decode("utf-8", "replace")
    # C0 controls but the line feed, DEL, and the C1 controls (U+0080-U+009F).
    raw = re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", whole.decode("utf-8", "replace"))
    if raw:
        line = whole.decode("utf-8", "replace")[max(0, raw.start() - 100):raw.start() + 100]
        raise Failure(f"the log holds a raw control character {raw.group()!r}: {line!r}")
    lines = after.count("\n")
    allowed = BURST + PER_SECOND * (elapsed + 1.5) + 10
    if lines > allowed:
        raise Failure(f"{FLOOD} garbage pushes in {elapsed:.1f} s wrote {lines} log lines (the budget allows {allowed:.0f})")
    left_out = [int(n) for n in re.findall(r"(\d+) log lines left out", after)]
    if sum(left_out) < FLOOD:
        raise Failure(f"{FLOOD} garbage pushes wrote {lines} lines and said {sum(left_out)} were left out")
    _, _, metrics = request(base, "GET", "/metrics")
    counted = re.search(rb"^frametap_log_lines_left_out_total (\d+)", metrics, re.M)
    if not counted or int(counted.group(1)) < sum(left_out):
        raise Failure(f"/metrics counts {counted and int(counted.group(1))} log lines left out; the log said {sum(left_out)}")
    print(f"  log: {FLOOD} garbage pushes into new sessions in {elapsed:.1f} s wrote {lines} lines, "
          f"{sum(left_out)} left out and said so; no raw control character in {len(whole)} bytes of log", flush=True)
