#!/usr/bin/env python3
"""`make bench`: FrameTap against its peers on camera-like streams; writes BENCHMARKS.md.

Every figure with a peer is the median of RUNS runs that alternate FrameTap and the peer in the same
session of this script. Any frame-count mismatch with what the peer decoded aborts the whole run
(exit 1) instead of reporting a figure. Standard library only; the tools come from Debian
(ffmpeg, wrk, nginx, gstreamer1.0-libav, libjpeg-turbo-progs).

    bench/bench.py [--only B1,B3,H1,D1,...] [--runs N] [--out BENCHMARKS.md]

BENCH_SCRATCH names the SwiftPM scratch path of the builds measured (default .build-bench).
This file is the runner and the report; each suite lives in bench/scenarios/ (one module per
concern), on the shared pieces of tools/harness/. The on-demand suites (D1-D4) push with
bench/loadgen.c, compiled here with cc: a Python sender could not keep hundreds of cameras on
schedule (B5's keyframes figure is capped by it).
"""

import argparse
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))

from harness.annexb import Stream  # noqa: E402  (tools/ is on the path only now)
from harness.proc import cpu_model, load_average, memory_gib  # noqa: E402
from harness.waiting import Failure  # noqa: E402
from scenarios import density, fanout, freshness, hevc, ingest, latest, memory, micro, on_demand, pull  # noqa: E402
from scenarios.common import (BIN, COMMANDS, DETAILS, F720, F1080, FPS, FRAMETAP_BENCH, H1080, H1080M10,  # noqa: E402
                              RESULTS, ROOT, WORK, log)


def machine():
    cpu, mem = cpu_model(), memory_gib()
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


SUITES = [("B1", ingest.bench_ingest), ("B2", ingest.bench_multipart), ("B3", latest.bench_latest),
          ("B4", freshness.bench_freshness), ("B4c", freshness.bench_freshness_fmp4), ("P1", pull.bench_pull_cpu),
          ("B5", density.bench_density), ("B6", memory.bench_memory), ("B7", fanout.bench_fanout),
          ("M", micro.bench_micro), ("H1", hevc.bench_hevc_ingest), ("H2", hevc.bench_hevc_multipart),
          ("H3", memory.bench_hevc_memory), ("D1", on_demand.bench_on_demand_density),
          ("D2", on_demand.bench_first_picture), ("D3", on_demand.bench_idle_memory),
          ("D4", on_demand.bench_past_picture), ("B8", on_demand.bench_unwatched_cpu)]


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
    for p in (BIN, FRAMETAP_BENCH, F1080, F720, H1080, H1080M10):
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
        except Failure as e:
            log("FAILED %s: %s" % (name, e))
            failed.append("%s: %s" % (name, e))
    write_report(args.out, args.runs, started, loads, failed)
    if failed:
        sys.exit("bench: %d suite(s) failed loudly: %s" % (len(failed), "; ".join(failed)))


if __name__ == "__main__":
    main()
