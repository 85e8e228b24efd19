"""How many real-time pushes a server keeps up with: one trial of N sessions pushed from one
selector loop, and the bounded search for the largest N (make bench's B5, the GPU check's G2)."""
import json
import selectors
import time

from .rawhttp import ChunkedPush
from .waiting import Failure

# A trial whose pushes have not all been written this long after their schedule ended has a
# server that stopped reading: it fails instead of waiting for ever.
SEND_GRACE_SECONDS = 60


def density_trial(server, stream, n, mode, fps=30.0, seconds_tolerance=0.3, loops=1):
    """n real-time pushes of `stream`, `loops` times over (sessions b5-MODE-N-K, created with PUT
    {"decode": mode}); more loops measure the steady state rather than the opening of n decoders.
    Kept up when every session's flushed answer came within `seconds_tolerance` of its last
    access unit, every picture (or keyframe) was decoded, the sender itself kept to its schedule,
    and the decode lag did not grow between the middle and the end. Returns (kept, a line)."""
    ids = ["b5-%s-%d-%d" % (mode, n, k) for k in range(n)]
    for sid in ids:
        server.json("PUT", "/sessions/%s" % sid, body=json.dumps({"decode": mode}).encode())
    sel = selectors.DefaultSelector()
    pushes = []
    for sid in ids:
        p = ChunkedPush(server.port, sid, "flush=true")
        p.sock.setblocking(False)
        pushes.append(p)
    chunks = [ChunkedPush.chunk(au) for au in stream.aus] * loops
    total = len(chunks)
    t0 = time.perf_counter() + 0.2
    give_up = t0 + total / fps + SEND_GRACE_SECONDS
    # stagger the sessions over one frame interval, as independent cameras are
    offsets = [k / (fps * n) for k in range(n)]
    next_index = [0] * n
    sender_late = 0.0
    lag_samples = {}
    sample_at = {total // 2: "mid", total - 1: "end"}
    registered = set()
    while True:
        now = time.perf_counter()
        if now > give_up:
            raise Failure("density trial with %d sessions: bodies still unsent %d s after their schedule"
                          % (n, SEND_GRACE_SECONDS))
        all_sent = True
        for k, p in enumerate(pushes):
            while next_index[k] < total and now >= t0 + offsets[k] + next_index[k] / fps:
                sender_late = max(sender_late, now - (t0 + offsets[k] + next_index[k] / fps))
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
        due = min((t0 + offsets[k] + next_index[k] / fps) for k in range(n) if next_index[k] < total) \
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
            raise Failure("density trial: push answered %d %s" % (status, body[:200]))
        frames.append(json.loads(body)["frames"])
    for sid in ids:
        server.json("DELETE", "/sessions/%s" % sid)
    expected = stream.keyframes * loops if mode == "keyframes" else total
    if any(f != expected for f in frames):
        raise Failure("density trial: %s mode with %d sessions: pictures %s, expected %d each"
                      % (mode, n, sorted(set(frames)), expected))
    growth = lag_samples.get("end", 0) - lag_samples.get("mid", 0)
    kept = max(lateness) <= seconds_tolerance and growth <= 3
    info = "n=%d max answer delay %.3f s, lag mid/end %s/%s pictures, sender late ≤ %.3f s" % (
        n, max(lateness), lag_samples.get("mid"), lag_samples.get("end"), sender_late)
    if sender_late > 0.25:
        info += " (sender could not keep its schedule: result capped by the load generator)"
        kept = False
    return kept, info


def search(trial, start, cap, log_lines, log):
    """Largest n in [1, cap] for which trial(n) holds: doubling, then bisection to within 1/16.
    Each trial's line goes to log_lines and log(); returns (n, whether the cap was reached)."""
    def holds(n):
        ok, info = trial(n)
        log_lines.append(("ok   " if ok else "FAIL ") + info)
        log(info, "ok" if ok else "FAIL")
        return ok

    good, bad = 0, None
    n = start
    while n <= cap:
        if holds(n):
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
        if holds(mid):
            good = mid
        else:
            bad = mid
    return good, False
