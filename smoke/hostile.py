#!/usr/bin/env python3
"""Hostile clients against a live FrameTap server (part of `make test`, via smoke/hostile.sh).

About 150 seeded pushes of mutated H.264 and H.265 (bit flips, byte runs, truncation, duplicated or removed
start codes, corrupt NAL headers, SPS/PPS with huge sizes, garbage, empty bodies, two fixtures
spliced) sent whole, chunked (random chunk sizes, some cut mid-body by closing the socket) or
answered as multipart/mixed, some on reused keep-alive connections. It checks what a hostile
client must never achieve:

  * every answer is well-formed HTTP: 200 (a JSON summary, or a well-framed multipart answer that
    may end with one application/problem+json part), or a problem+json 4xx/5xx with a `code`;
  * after every few pushes and at the end the server still runs, /healthz answers 200 quickly,
    and the victim sessions (fed a good fixture first, then garbage) still serve a JPEG as their
    latest picture, with the same X-Frame-Seq or a newer one.

Then hostile heads and connections (hostile_http.py): smuggling heads, floods, vanishing and slow
clients; and with --log, what clients can make the server's log hold (hostile_log.py).

By surface: the bodies' H.264 mutations are in hostile_h264.py, H.265's in hostile_h265.py, the
containers' in hostile_containers.py, the codec-neutral ones in hostile_bodies.py; the pushes and their answers' checks in hostile_pushes.py;
raw HTTP in hostile_http.py; the HTTP client and reader they share in tools/harness/.

The server must run with the limits hostile.sh gives it (64 connections, 16 per address, short
header and body timeouts). The seed is printed; HOSTILE_SEED=N reproduces the same bodies and
transports (HOSTILE_PUSHES and HOSTILE_CONTAINER_PUSHES change the counts). On a failure it prints the seed and push number and saves the offending
bodies (every push since the last passed check) and answers under --out. Python stdlib only; it
speaks HTTP over raw sockets so that it can cut bodies, reuse connections and check the framing.
"""
import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from harness.proc import alive  # noqa: E402  (tools/ is on the path only now)
from harness.waiting import Failure  # noqa: E402

from hostile_http import edge_checks, hold_unread_answer  # noqa: E402
from hostile_log import log_checks  # noqa: E402
from hostile_bodies import hostile_body  # noqa: E402
from hostile_containers import hostile_container  # noqa: E402
from hostile_pushes import (CONTAINER_VICTIM_FIXTURES, VICTIM_FIXTURES, check_health, delete_session, do_push, feed_victim,  # noqa: E402
                            plan_push, stale_uploads)

FIXTURES = ROOT / "Tests" / "Fixtures"
CHECK_EVERY = 10  # pushes between health checks


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the server, http://127.0.0.1:PORT")
    parser.add_argument("--pid", type=int, help="the server's pid (checked to be alive)")
    parser.add_argument("--out", default=str(ROOT / ".test-output" / "hostile"), help="where failures are saved")
    parser.add_argument("--hold-unread-answer", action="store_true", help="hold a multipart answer unread, for ever")
    parser.add_argument("--log", help="the server's log, for the checks of what clients can make it write")
    args = parser.parse_args()
    if args.hold_unread_answer:
        return hold_unread_answer(args.base, (FIXTURES / "high_320x240.264").read_bytes())
    seed = int(os.environ.get("HOSTILE_SEED") or random.SystemRandom().randrange(1, 1 << 31))
    pushes = int(os.environ.get("HOSTILE_PUSHES", "150"))
    container_pushes = int(os.environ.get("HOSTILE_CONTAINER_PUSHES", "80"))
    print(f"hostile: seed {seed} (HOSTILE_SEED={seed} reproduces), {pushes} Annex B and {container_pushes} container "
          f"pushes against {args.base}", flush=True)

    fixtures = sorted((p.name, p.read_bytes()) for p in FIXTURES.glob("*.26[45]"))
    containers = sorted((p.name, p.read_bytes()) for p in (FIXTURES / "Containers").iterdir()
                        if p.suffix in (".mp4", ".ts", ".mkv", ".flv", ".webm"))
    good = dict(fixtures)
    victims = [f"hostile-{seed}-victim{i}" for i in range(len(VICTIM_FIXTURES))]
    container_victims = [f"hostile-{seed}-container-victim{i}" for i in range(len(CONTAINER_VICTIM_FIXTURES))]
    scratch = [f"hostile-{seed}-scratch{i}" for i in range(4)]
    # Annex B bodies first, then containers; each push's bodies come from its own seed.
    rounds = [("", pushes, fixtures, victims, hostile_body),
              ("container ", container_pushes, containers, container_victims,
               lambda rng, chosen: hostile_container(rng, chosen, fixtures))]
    last_seq, outcomes, pending, idle = {}, {}, [], None
    checks = 0
    in_edge_checks = False
    started = time.monotonic()
    number = 0
    try:
        for session, name in zip(victims, VICTIM_FIXTURES):
            last_seq[session] = feed_victim(args.base, session, good[name])
        for session, name in zip(container_victims, CONTAINER_VICTIM_FIXTURES):
            last_seq[session] = feed_victim(args.base, session, (FIXTURES / "Containers" / name).read_bytes())
        print(f"victims fed: {last_seq}", flush=True)
        every_victim = victims + container_victims
        for kind, count, bodies, targets, make_body in rounds:
            for number in range(1, count + 1):
                rng = random.Random(f"{seed}/{kind}{number}")   # each push is reproducible on its own
                plan = plan_push(rng, bodies, targets, scratch, make_body)
                plan["kind"] = kind
                pending.append((number, plan))
                push_started = time.monotonic()
                outcome, idle = do_push(args.base, plan, idle)
                key = f"{kind}{plan['transport']}: {re.sub(r' [0-9]+ parts', '', outcome)}"
                outcomes[key] = outcomes.get(key, 0) + 1
                if os.environ.get("HOSTILE_VERBOSE"):
                    print(f"  {kind}#{number} {plan['session']} {plan['transport']} {len(plan['body'])} B "
                          f"({plan['what']}) -> {outcome} ({(time.monotonic() - push_started) * 1000:.0f} ms)", flush=True)
                if rng.random() < 0.05:   # scratch sessions come and go
                    delete_session(args.base, rng.choice(scratch))
                if number % CHECK_EVERY == 0 or number == count:
                    took = check_health(args.base, args.pid, every_victim, last_seq)
                    checks += 1
                    pending = []
                    print(f"  after {kind}push {number}: healthy (/healthz {took * 1000:.0f} ms), victims at "
                          f"{' '.join(str(last_seq[v]) for v in every_victim)}", flush=True)
        # A client that vanished must free its session's upload slot at once (else the next push
        # is 409 session_busy).
        time.sleep(2)
        stale = stale_uploads(args.base, every_victim + scratch)
        if stale:
            raise Failure(f"sessions still uploading 2 s after the last push: {' '.join(stale)}")
        pending, in_edge_checks = [], True
        edge_checks(args.base, args.pid, good)
        if args.log:
            log_checks(args.base, args.log, seed)
    except (Failure, OSError) as error:
        gone = "" if not args.pid or alive(args.pid) else " (the server is gone)"
        if in_edge_checks:
            print(f"FAIL hostile edge check: {error}{gone}")
            print(f"{pushes + container_pushes} passed, 1 failed")
            return 1
        kind = pending[-1][1]["kind"] if pending else ""
        print(f"FAIL hostile {kind}push {number} (seed {seed}): {error}{gone}")
        save_failure(args.out, seed, number, pending, error)
        print(f"reproduce: HOSTILE_SEED={seed} smoke/hostile.sh")
        print(f"{(pushes if kind else 0) + number - len(pending)} passed, 1 failed")
        return 1
    finally:
        if idle:
            idle.close()
    print(f"hostile: {pushes + container_pushes} pushes, {checks} health checks, {time.monotonic() - started:.0f} s, outcomes:")
    for key in sorted(outcomes):
        print(f"  {outcomes[key]:4d}  {key}")
    print(f"{pushes + container_pushes} passed, 0 failed")
    return 0


def save_failure(out, seed, number, pending, error):
    """Every push since the last passed check: its body, what it was, and the answer if any."""
    folder = Path(out) / f"seed-{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    for n, plan in pending:
        (folder / f"{plan['kind'].strip() or 'annexb'}-push-{n}.bin").write_bytes(plan["body"])
        answer = plan.get("answer")
        meta = {k: plan[k] for k in ("what", "transport", "session", "query", "cut_at", "reuse", "rst", "pause")}
        meta["chunk_sizes"] = [len(c) for c in plan["chunks"]]
        meta["answer"] = answer.describe() if answer else None
        (folder / f"{plan['kind'].strip() or 'annexb'}-push-{n}.json").write_text(json.dumps(meta, indent=1) + "\n")
    (folder / "failure.txt").write_text(f"push {number}: {error}\n")
    print(f"saved {len(pending)} push(es) to {folder}")


if __name__ == "__main__":
    sys.exit(main())
