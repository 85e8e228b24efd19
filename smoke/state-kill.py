#!/usr/bin/python3
"""--state-dir under kill -9: clients stream PUTs and DELETEs while the server is killed at a
random moment; after each restart every PUT and DELETE that was answered must hold, and a change
whose request was under way when the server died must be either wholly there or wholly absent.

Four clients each own six session ids, so the changes to one id come one after another and its
expected definition is known: the PUTs answered, merged in order as the server merges them
(quality, decode), or nothing after an answered DELETE. A server that cannot start again (a
torn state file, a lock not released) fails the run.

    smoke/state-kill.py --binary .build/debug/frametap [--kills 12] [--seed N] [--output DIR]

Prints one PASS/FAIL line per check, the counts (kills, PUTs and DELETEs answered, requests under
way at a kill and whether they took effect) and "N passed, N failed" last; exits 1 when anything
failed. STATE_KILL_SEED=N (or --seed) repeats a run's choices.
"""

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from harness.checks import Results  # noqa: E402  (tools/ is on the path only now)
from harness.client import request  # noqa: E402
from harness.server import Server  # noqa: E402
from harness.waiting import Failure  # noqa: E402

CLIENTS, IDS_PER_CLIENT = 4, 6
DECODES = ["all", "keyframes", "on-demand"]


def merged(definition, change):
    """The definition after `change` (None: a DELETE), as the server merges PUTs."""
    if change is None:
        return None
    result = dict(definition or {})
    result.update(change)
    return result


def shown(definition):
    """What GET /sessions shows of a definition: (quality, decode), the server's defaults filled in."""
    if definition is None:
        return None
    return definition.get("quality", 85), definition.get("decode", "all")


class Client(threading.Thread):
    """Changes its own ids until a request fails (the server is gone)."""

    def __init__(self, base, ids, model, rng):
        super().__init__(daemon=True)
        self.base, self.ids, self.model, self.rng = base, ids, model, rng
        self.under_way = None  # (id, change) sent and not answered
        self.puts = self.deletes = 0
        self.unexpected = []

    def run(self):
        while True:
            session = self.rng.choice(self.ids)
            if self.rng.random() < 0.35:
                change, method, body = None, "DELETE", None
            else:
                change = {"quality": self.rng.randint(1, 100)}
                if self.rng.random() < 0.5:
                    change["decode"] = self.rng.choice(DECODES)
                method, body = "PUT", json.dumps(change)
            self.under_way = (session, change)
            try:
                status, _, answer = request(self.base, method, f"/sessions/{session}", body=body, timeout=10)
            except OSError:
                return
            if method == "PUT" and status in (200, 201):
                self.model[session] = merged(self.model[session], change)
                self.puts += 1
            elif method == "DELETE" and status in (204, 404):
                if status == 404 and self.model[session] is not None:
                    self.unexpected.append(f"DELETE {session}: 404, but a PUT of it was answered")
                self.model[session] = None
                self.deletes += 1
            else:
                self.unexpected.append(f"{method} {session}: {status} {answer[:200]!r}")
            self.under_way = None


def run(r, binary, kills, seed, output):
    rng = random.Random(seed)
    work = tempfile.mkdtemp(prefix="frametap-state-kill-")
    state = os.path.join(work, "state")
    server = Server(binary, ["--state-dir", state, "--log-level", "warning", "--max-sessions", "64"],
                    log_path=os.path.join(output, "state-kill.log"))
    ids = [[f"k{client}-{index}" for index in range(IDS_PER_CLIENT)] for client in range(CLIENTS)]
    model = {session: None for group in ids for session in group}
    totals = {"puts": 0, "deletes": 0, "under_way": 0, "took_effect": 0, "did_not": 0, "either": 0}
    try:
        for kill in range(1, kills + 1):
            server.start()
            clients = [Client(server.base, group, model, random.Random(rng.random())) for group in ids]
            for client in clients:
                client.start()
            time.sleep(rng.uniform(0.05, 1.0))
            server.kill()
            for client in clients:
                client.join(timeout=15)
            stuck = [client for client in clients if client.is_alive()]
            if stuck:
                raise Failure(f"{len(stuck)} clients still running 15 s after the kill")
            for client in clients:
                totals["puts"] += client.puts
                totals["deletes"] += client.deletes
                for problem in client.unexpected:
                    r.check(f"kill {kill}: every request answered as expected", False, problem)

            server.start()
            status, _, body = request(server.base, "GET", "/sessions", timeout=10)
            held = {entry["id"]: (entry["quality"], entry["decode"]) for entry in json.loads(body)["sessions"]}
            persisted = all(entry["persisted"] for entry in json.loads(body)["sessions"])
            wrong = []
            for client in clients:
                in_flight = client.under_way
                for session in client.ids:
                    answered = shown(model[session])
                    if in_flight and in_flight[0] == session:
                        alternative = shown(merged(model[session], in_flight[1]))
                        if held.get(session) == alternative and alternative != answered:
                            model[session] = merged(model[session], in_flight[1])
                            totals["took_effect"] += 1
                        elif held.get(session) == answered and alternative != answered:
                            totals["did_not"] += 1
                        elif held.get(session) == answered:
                            totals["either"] += 1
                        else:
                            wrong.append(f"{session}: {held.get(session)}, not {answered} or {alternative}")
                        totals["under_way"] += 1
                    elif held.get(session) != answered:
                        wrong.append(f"{session}: {held.get(session)}, answered {answered}")
            r.check(f"kill {kill}: after the restart every answered PUT and DELETE holds "
                    f"({sum(c.puts for c in clients)} PUTs, {sum(c.deletes for c in clients)} DELETEs this round)",
                    not wrong and status == 200 and persisted and set(held) <= set(model), wrong or held)
            server.stop()
        print(f"kills {kills}, PUTs answered {totals['puts']}, DELETEs answered {totals['deletes']}, "
              f"requests under way at a kill {totals['under_way']} (took effect {totals['took_effect']}, "
              f"did not {totals['did_not']}, either way the same {totals['either']}), seed {seed}", flush=True)
        r.check("the clients' changes were many", totals["puts"] + totals["deletes"] >= 20 * kills, totals)
    except Failure as failure:
        r.check("the server started again after each kill", False, failure)
    finally:
        if server.process is not None and server.process.poll() is None:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("STATE_KILL_SEED", time.time_ns() % 1_000_000)))
    parser.add_argument("--output", default=os.path.join(ROOT, ".test-output", "cameras"))
    args = parser.parse_args()
    os.makedirs(args.output, exist_ok=True)
    print(f"seed {args.seed} (STATE_KILL_SEED={args.seed} repeats it)", flush=True)
    r = Results()
    run(r, os.path.abspath(args.binary), args.kills, args.seed, args.output)
    print(f"{r.passed} passed, {r.failed} failed", flush=True)
    sys.exit(1 if r.failed else 0)


if __name__ == "__main__":
    main()
