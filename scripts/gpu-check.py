#!/usr/bin/env python3
"""The GPU check in one run: conformance on `--backend cuda` and the GPU benchmarks, one results
file. Started by scripts/gpu-check.sh (which unpacks the release build `make gpu-pack` made),
on the GPU machine of ../shared/notes/gpu.md (python3, no ffmpeg, no network) or here.

    scripts/gpu-check.py --binary BIN --device-dir .device --results DIR [--budget SECONDS]

Steps, in this order, each bounded so the whole run stays inside --budget (default 450 s; the
machine gives 10 minutes a command):
  1. what the machine has: `frametap probe --hardware`, nvidia-smi; CUDA usable or why not;
  2. conformance (scripts/conformance.sh) of Tests/Fixtures, the carried H.265 corpus (and the
     H.264 one when packed) and the carried 1080p streams, on BACKEND=cuda (the script's rule:
     exact, or a hardware refusal decoded again by auto's software fallback and then exact), or on
     software when there is no CUDA;
  3. G1x: 16 1080p H.264 streams decoding at once inside one server (per-decoder CUDA streams,
     one shared stream, four contexts) against 16 separate `frametap decode` processes, and
     software in one server;
  4. JPEG on the GPU: the nvJPEG encoder's pictures against TurboJPEG's (PSNR), and B7-GPU: 100
     viewers of one 1080p30 cuda session, server CPU with --encoder nvjpeg against turbojpeg, and
     the frame downloads while viewers ask only for JPEG;
  5. G5: pictures decoded on demand from the compressed history (`--default-decode on-demand`,
     at.yuv by number): the catch-up runs on the session's back end (hardware pictures are
     downloaded to be read: frametap_frame_downloads_total), its pictures equal software's, and
     how long one takes;
  6. G2 and G4: 1080p30 real-time sessions kept up (bench.py's B5 trial and search,
     harness.density) with `--backend auto` (placed by capacity) against software alone;
     latest.jpg p99 during a trial at the number found, and /system's engines then;
  7. G1 and H1: ingest of the 1080p H.264 / H.265 stream, one session, cuda against software
     (`--decoder-threads 1`), as bench.py's B1/H1 measure it (the whole request);
  8. G3: CPU per idle session holding its latest picture.
Without CUDA the cuda half is reported as not run, with the reason, and the software half runs.
The results file is rewritten after every step, so a run cut short still leaves what it measured.
Standard library only (and tools/harness/, which bench/bench.py measures with too).
"""

import argparse
import http.client
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from harness.annexb import Stream  # noqa: E402  (tools/ is on the path only now)
from harness.client import post_file  # noqa: E402
from harness.density import density_trial, search  # noqa: E402
from harness.metrics import metric_value  # noqa: E402
from harness.proc import cpu_model, load_average, memory_gib  # noqa: E402
from harness.report import Commands, described, logger  # noqa: E402
from harness.server import benchmark_server  # noqa: E402
from harness.stats import fmt, median, percentile  # noqa: E402
from harness.waiting import Failure  # noqa: E402

WORK = None   # the servers' logs and scratch files, set by main()
COMMANDS = Commands()   # the servers' and clients' exact commands, for the results file
command = COMMANDS.add
log = logger("gpu-check")

TARGETS = {"G1": 5.0, "G2": 1.5, "G3": 0.02, "G4": 10.0}


def frametap(binary, *extra, name):
    """A started `frametap serve` configured as bench.py's are (harness.server.benchmark_server),
    its log in WORK/out/NAME-PORT.log."""
    server = benchmark_server(binary, *extra, log_dir=os.path.join(WORK, "out"), name=name)
    command(described(server.command, ROOT))
    return server


class Check:
    def __init__(self, args):
        self.args = args
        self.started = time.monotonic()
        self.budget = args.budget
        self.results_path = os.path.join(args.results, "gpu-check.md")
        self.rows = []          # (id, measure, cuda, software, ratio, target, met)
        self.conformance = []   # (corpus, backend, summary, skipped, rc)
        self.sections = []      # markdown details
        self.notes = []
        self.machine = []
        self.cuda_ok = False
        self.cuda_reason = ""
        self.commands = []

    def remaining(self):
        return self.budget - (time.monotonic() - self.started)

    def enough(self, seconds, step):
        if self.remaining() >= seconds:
            return True
        self.notes.append("%s skipped: %.0f s of the %d s budget left, it needs about %d s"
                          % (step, max(0, self.remaining()), self.budget, seconds))
        self.write()
        return False

    def row(self, rid, measure, cuda, software, ratio, target, met):
        self.rows.append((rid, measure, cuda, software, ratio, target, met))
        log("%s: cuda %s | software %s | ratio %s | %s" % (rid, cuda, software, ratio, met))
        self.write()

    def write(self):
        out = ["# FrameTap GPU check", "",
               "Written by `scripts/gpu-check.sh` (scripts/gpu-check.py) on %s, %.0f s into a %d s budget."
               % (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), time.monotonic() - self.started, self.budget),
               "", "## Machine", ""] + self.machine + [""]
        out += ["**CUDA: %s**" % ("available: " + self.cuda_reason if self.cuda_ok else
                                  "not available (%s): only the software half ran" % self.cuda_reason), ""]
        out += ["## Conformance", "", "| corpus | backend | result | skipped rows | exit |", "|---|---|---|---|---|"]
        for corpus, backend, summary, skipped, rc in self.conformance:
            out.append("| %s | %s | %s | %d | %s |" % (corpus, backend, summary, skipped, rc))
        out += ["", "## Benchmarks", "",
                "| id | measure | cuda | software | ratio | target | met |", "|---|---|---|---|---|---|---|"]
        for rid, measure, cuda, software, ratio, target, met in self.rows:
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (rid, measure, cuda, software, ratio, target, met))
        if self.notes:
            out += ["", "## Notes", ""] + ["- " + note for note in self.notes]
        out += ["", "## Details", ""] + self.sections
        out += ["## Commands", "", "```"] + self.commands + COMMANDS + ["```", ""]
        os.makedirs(os.path.dirname(self.results_path), exist_ok=True)
        with open(self.results_path + ".tmp", "w") as f:
            f.write("\n".join(out))
        os.replace(self.results_path + ".tmp", self.results_path)


def run(command, timeout, env=None):
    try:
        p = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return 124, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), \
            "timed out after %d s" % timeout
    except OSError as e:
        return 127, "", str(e)


# --- 1. the machine ------------------------------------------------------------------------------

def survey(check):
    args = check.args
    mem, cpu = memory_gib(), cpu_model()
    check.machine.append("- %s, %d cores, %d GiB; %s %s; Python %s" % (cpu, os.cpu_count(), mem, platform.system(),
                                                                    platform.release(), platform.python_version()))
    check.machine.append("- load average before the run: %s" % load_average())
    if shutil.which("nvidia-smi"):
        rc, out, err = run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"], 30)
        check.machine.append("- nvidia-smi: %s" % (out.strip().replace("\n", "; ") if rc == 0 else "exit %d %s" % (rc, err.strip())))
    else:
        check.machine.append("- nvidia-smi: not installed")
    rc, out, err = run([args.binary, "--version"], 10)
    check.machine.append("- frametap %s (%s)" % (out.strip() or "?", args.binary))
    check.commands.append("%s probe --hardware" % args.binary)
    rc, out, err = run([args.binary, "probe", "--hardware"], 60)
    try:
        report = json.loads(out)
    except ValueError:
        check.cuda_ok, check.cuda_reason = False, "frametap probe --hardware failed: exit %d %s" % (rc, err.strip()[-300:])
        return
    hardware = report.get("hardware", report)
    cuda = hardware.get("cuda", {})
    usable = [d for d in cuda.get("devices", []) if d.get("usable")]
    check.machine.append("- libavcodec %s; NVDEC hwaccel in libavcodec: %s; CUDA driver %s; devices: %s"
                         % (hardware.get("libavcodecVersion"), cuda.get("libavcodecNVDEC"), cuda.get("driverVersion"),
                            ", ".join("%s %s (%s)" % (d.get("device"), d.get("name"),
                                                      "usable" if d.get("usable") else d.get("error"))
                                      for d in cuda.get("devices", [])) or "none"))
    for device in usable:
        codecs = ", ".join("%s up to %d-bit %s" % (c["codec"], c["maxBitDepth"], "/".join(c["chromaFormats"]))
                           for c in device.get("codecs", []))
        check.machine.append("- %s decodes (as FrameTap checks streams): %s" % (device.get("device"), codecs or "nothing"))
    if not cuda.get("libavcodecNVDEC"):
        check.cuda_reason = "this libavcodec has no NVDEC hwaccel"
    elif not usable:
        check.cuda_reason = cuda.get("error") or "the driver lists no usable device"
    else:
        check.cuda_ok = True
        check.cuda_reason = ", ".join("%s %s" % (d["device"], d.get("name")) for d in usable)
    check.sections.append("### frametap probe --hardware\n\n```json\n%s\n```\n" % json.dumps(hardware, indent=2)[:6000])
    check.write()


# --- 2. conformance ------------------------------------------------------------------------------

def conformance(check):
    args = check.args
    backend = "cuda" if check.cuda_ok else "software"
    corpora = [("Tests/Fixtures", os.path.join(ROOT, "Tests", "Fixtures")),
               ("H.264 conformance (../shared/testdata/h264)", os.path.join(args.device_dir, "testdata", "h264")),
               ("H.265 conformance (../shared/testdata/h265)", os.path.join(args.device_dir, "testdata", "h265")),
               ("1080p streams (.device/streams)", os.path.join(args.device_dir, "streams"))]
    for name, directory in corpora:
        if not os.path.exists(os.path.join(directory, "MANIFEST.tsv")):
            check.conformance.append((name, backend, "not carried", 0, "—"))
            continue
        if not check.enough(30, "conformance of %s" % name):
            continue
        env = dict(os.environ, BACKEND=backend, DECODE_TIMEOUT="60")
        command = ["bash", os.path.join(ROOT, "scripts", "conformance.sh"), directory, args.binary]
        check.commands.append("BACKEND=%s scripts/conformance.sh %s %s" % (backend, os.path.relpath(directory, ROOT),
                                                                             args.binary))
        log("conformance %s on %s" % (name, backend))
        rc, out, err = run(command, min(240, max(30, check.remaining() - 60)), env=env)
        lines = [line for line in out.splitlines() if line.strip()]
        summary = lines[-1] if lines else (err.strip()[-200:] or "no output")
        skips = [line.split(None, 2) for line in lines if line.startswith("SKIP")]
        skipped = len(skips)
        for reason in sorted({parts[2] if len(parts) > 2 else "no reason given" for parts in skips}):
            check.notes.append("%s: conformance.sh skipped %d row(s): %s"
                               % (name, sum(1 for parts in skips if (parts[2] if len(parts) > 2 else "no reason given") == reason),
                                  reason))
        check.conformance.append((name, backend, summary, skipped, rc))
        check.sections.append("### Conformance: %s (BACKEND=%s, exit %d)\n\n```\n%s\n%s```\n"
                              % (name, backend, rc, out[-12000:], ("stderr: " + err[-2000:] + "\n") if err.strip() else ""))
        check.write()


# --- 3. G1 / H1 ingest ---------------------------------------------------------------------------

def manifest_frames(device_dir):
    frames = {}
    path = os.path.join(device_dir, "streams", "MANIFEST.tsv")
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            row = line.rstrip("\n").split("\t")
            frames[row[header.index("file")]] = int(row[header.index("frames")])
    return frames


def ingest(check, backend, path, runs, frames):
    server = frametap(check.args.binary, "--backend", backend, "--decoder-threads", "1", name="ingest-%s" % backend)
    fps = []
    try:
        for i in range(runs):
            content = "video/H265" if path.endswith(".265") else "video/H264"
            t, _, summary, _ = post_file(server, "g1-%d" % i, path, "flush=true", content_type=content)
            if summary["frames"] != frames:
                raise Failure("%s on %s: %d pictures, the reference has %d"
                                         % (os.path.basename(path), backend, summary["frames"], frames))
            status = server.json("GET", "/sessions/g1-%d" % i)
            if status["backend"] != backend:
                raise Failure("%s asked for %s but decoded on %s (%s)"
                                         % (os.path.basename(path), backend, status["backend"], status["backendReason"]))
            fps.append(frames / t)
            server.json("DELETE", "/sessions/g1-%d" % i)
    finally:
        server.stop()
    return fps


def ingest_rows(check):
    frames = manifest_frames(check.args.device_dir)
    streams = check.args.device_dir + "/streams"
    for rid, name, measure, target in (("G1", "gpu1080.264", "ingest 1080p30 H.264 High, 1 session (fps)", "≥ 5×"),
                                       ("H1", "gpu1080.265", "ingest 1080p30 HEVC Main, 1 session (fps)",
                                        "≥ 1.0× ffmpeg (software, BENCHMARKS.md)")):
        path = os.path.join(streams, name)
        if not os.path.exists(path):
            check.notes.append("%s not run: %s was not packed (GPU_PACK_STREAMS)" % (rid, name))
            continue
        if not check.enough(40, rid):
            continue
        command("curl -H 'Content-Type: video/%s' --data-binary @.device/streams/%s "
                      "'http://127.0.0.1:PORT/sessions/ID/nalus?flush=true'   (3 runs per back end)"
                      % ("H265" if name.endswith("265") else "H264", name))
        results = {}
        try:
            for backend in (["cuda"] if check.cuda_ok else []) + ["software"]:
                results[backend] = median(ingest(check, backend, path, 3, frames[name]))
                check.sections.append("### %s on %s\n\n%s: %.1f fps (median of 3 whole requests, %d pictures)\n"
                                      % (rid, backend, name, results[backend], frames[name]))
        except Failure as e:
            check.notes.append("%s failed: %s" % (rid, e))
        cuda = results.get("cuda")
        software = results.get("software")
        ratio = cuda / software if cuda and software else None
        met = ("yes" if ratio >= TARGETS["G1"] else "**no**") if rid == "G1" and ratio else "—"
        check.row(rid, measure, fmt(cuda) if cuda else "not run", fmt(software) if software else "not run",
                  "%.2f" % ratio if ratio else "", target, met)


def thread_cpu(pid):
    """{thread name: CPU seconds} of a process's threads, summed by name (/proc/PID/task)."""
    tick = os.sysconf("SC_CLK_TCK")
    totals = {}
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return totals
    for task in tasks:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, task)) as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        totals[name] = totals.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return totals


PROFILES = []   # (trial, [(thread name, CPU seconds)]) of the in-server G1x trials


def concurrent_ingest(binary, backend, path, sessions, frames, extra=()):
    """Aggregate fps of `sessions` whole-file pushes at once, each its own session (one thread each);
    the server's CPU by thread name over the trial goes to PROFILES."""
    server = frametap(binary, "--backend", backend, "--decoder-threads", "1", *extra,
                      name="ingest-x%d-%s%s" % (sessions, backend, "".join(extra).replace("-", "")))
    failures = []
    try:
        before = thread_cpu(server.pid)
        def push(k):
            try:
                content = "video/H265" if path.endswith(".265") else "video/H264"
                _, _, summary, _ = post_file(server, "gx-%d" % k, path, "flush=true", content_type=content)
                if summary["frames"] != frames:
                    failures.append("session %d: %d pictures" % (k, summary["frames"]))
            except Exception as e:  # reported with the row
                failures.append("session %d: %s" % (k, e))
        threads = [threading.Thread(target=push, args=(k,)) for k in range(sessions)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
        after = thread_cpu(server.pid)
        spent = sorted(((name, after[name] - before.get(name, 0.0)) for name in after), key=lambda x: -x[1])
        PROFILES.append(("%d × %s %s, %.1f s" % (sessions, backend, " ".join(extra), wall), spent[:8]))
    finally:
        server.stop()
    if failures:
        raise Failure("; ".join(failures[:3]))
    return sessions * frames / wall


def separate_processes(binary, path, processes, frames):
    """Aggregate fps of `processes` `frametap decode --backend cuda --threads 1` runs at once, one
    stream each (one picture encoded each: --every): the engines' capacity with a CUDA context per
    process, what one server's shared context is measured against."""
    out = os.path.join(WORK, "decode-out")
    os.makedirs(out, exist_ok=True)
    commands = [[binary, "decode", path, "--backend", "cuda", "--threads", "1", "--every", "1000000",
                 "--output", os.path.join(out, "p%d" % k)] for k in range(processes)]
    start = time.perf_counter()
    running = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    failures = []
    for k, p in enumerate(running):
        try:
            _, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            failures.append("process %d: still running after 120 s" % k)
            continue
        if p.returncode != 0 or ("decoded %d frames" % frames) not in err:
            failures.append("process %d: exit %d: %s" % (k, p.returncode, err.strip()[-300:]))
    wall = time.perf_counter() - start
    if failures:
        raise Failure("; ".join(failures[:3]))
    return processes * frames / wall


def repeated_stream(device_dir, name, times):
    """The carried stream `times` over (each copy starts at its IDR with its parameter sets), so one
    ingest lasts long enough to measure the engines rather than the opening of decoders."""
    path = os.path.join(WORK, "%s-x%d%s" % (os.path.splitext(name)[0], times, os.path.splitext(name)[1]))
    if not os.path.exists(path):
        with open(os.path.join(device_dir, "streams", name), "rb") as f:
            data = f.read()
        with open(path + ".tmp", "wb") as f:
            f.write(data * times)
        os.replace(path + ".tmp", path)
    return path


G1X_REPEAT = 10   # 450 pictures per stream (480 in the process-level measure of 2026-11-25)


def concurrent_rows(check):
    """G1x: 16 streams decoding at once in one server against 16 separate `frametap decode`
    processes (each its own CUDA context), and the in-server figure with each decoder on a CUDA
    stream of its own (`--cuda-streams per-decoder`, the default) and all on the context's default
    stream (`shared`); software in one server beside them."""
    frames = manifest_frames(check.args.device_dir)["gpu1080.264"] * G1X_REPEAT
    path = repeated_stream(check.args.device_dir, "gpu1080.264", G1X_REPEAT)
    command("G1x: .device/streams/gpu1080.264 %d times over (%d pictures); N sessions at once, each: curl "
            "--data-binary @that 'http://127.0.0.1:PORT/sessions/gx-K/nalus?flush=true' (--decoder-threads 1, "
            "--cuda-streams per-decoder|shared); N processes at once: frametap decode that --backend cuda "
            "--threads 1 --every 1000000" % (G1X_REPEAT, frames))
    trials = []
    if check.cuda_ok:
        trials += [("separate processes, cuda", 16, lambda: separate_processes(check.args.binary, path, 16, frames)),
                   ("one server, cuda, per-decoder streams", 16,
                    lambda: concurrent_ingest(check.args.binary, "cuda", path, 16, frames, ("--cuda-streams", "per-decoder"))),
                   ("one server, cuda, shared stream", 16,
                    lambda: concurrent_ingest(check.args.binary, "cuda", path, 16, frames, ("--cuda-streams", "shared"))),
                   ("one server, cuda, 4 contexts, per-decoder streams", 16,
                    lambda: concurrent_ingest(check.args.binary, "cuda", path, 16, frames, ("--cuda-contexts", "4"))),
                   ("separate processes, cuda", 1, lambda: separate_processes(check.args.binary, path, 1, frames)),
                   ("one server, cuda, per-decoder streams", 1,
                    lambda: concurrent_ingest(check.args.binary, "cuda", path, 1, frames, ("--cuda-streams", "per-decoder")))]
    trials += [("one server, software", 16, lambda: concurrent_ingest(check.args.binary, "software", path, 16, frames))]
    results, lines = {}, []
    for name, n, measure in trials:
        if not check.enough(25, "G1x (%s, %d)" % (name, n)):
            break
        try:
            results[(name, n)] = measure()
        except Failure as e:
            check.notes.append("G1x (%s, %d streams) failed: %s" % (name, n, e))
            continue
        lines.append("%2d streams, %s: %.0f fps together" % (n, name, results[(name, n)]))
        log(lines[-1])
    profile = ["%s: %s" % (trial, ", ".join("%s %.2f s" % (name, cpu) for name, cpu in spent)) for trial, spent in PROFILES]
    check.sections.append("### G1x: 1080p H.264 streams decoding at once (%d pictures each)\n\n```\n%s\n```\n\n"
                          "The server's CPU by thread name in each trial (/proc/PID/task; the machine has neither "
                          "nsys nor perf):\n\n```\n%s\n```\n" % (frames, "\n".join(lines), "\n".join(profile)))
    separate = results.get(("separate processes, cuda", 16))
    for name in ("one server, cuda, per-decoder streams", "one server, cuda, shared stream",
                 "one server, cuda, 4 contexts, per-decoder streams"):
        inside = results.get((name, 16))
        share = inside / separate if inside and separate else None
        check.row("G1x", "16 concurrent 1080p H.264 ingests, %s (fps; ratio: of 16 separate processes' %s)"
                  % (name, fmt(separate) if separate else "?"),
                  fmt(inside) if inside else "not run",
                  fmt(results[("one server, software", 16)]) if ("one server, software", 16) in results else "not run",
                  "%.2f" % share if share else "", "≥ 0.90 of separate processes",
                  ("yes" if share >= 0.9 else "**no**") if share else "—")


# --- 4. G2 / G4 real-time sessions, latest.jpg latency ---------------------------------------------

def latency_trial(server, stream, n, latencies):
    """bench.py's density trial at n sessions, with a latest.jpg reader on the first session."""
    stop = threading.Event()
    session = "b5-all-%d-0" % n

    def reader():
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        while not stop.is_set():
            start = time.perf_counter()
            try:
                conn.request("GET", "/sessions/%s/frame/latest.jpg" % session)
                resp = conn.getresponse()
                resp.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
                time.sleep(0.01)
                continue
            if resp.status == 200:
                latencies.append((time.perf_counter() - start) * 1000)
            else:
                time.sleep(0.01)
            time.sleep(0.005)
        conn.close()
    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        return density_trial(server, stream, n, "all", loops=G2_LOOPS)
    finally:
        stop.set()
        thread.join(timeout=15)


G2_LOOPS = 4   # 6 s of the 1.5 s stream: the steady state, not the opening of N decoders at once


def density_rows(check):
    """G2 and G4: the real-time 1080p30 sessions one server keeps up with `--backend auto` (sessions
    placed by capacity on NVDEC and the cores together) against software alone, and latest.jpg's p99
    during a trial at the number found (with the default encoder: nvJPEG where it loads)."""
    stream = Stream(os.path.join(check.args.device_dir, "streams", "gpu1080.264"))
    cores = os.cpu_count() or 2
    caps = {"auto": 256, "software": max(2, 8 * cores)}
    found, p99, engines = {}, {}, {}
    command("N × real-time chunked POST /sessions/ID/nalus?flush=true of .device/streams/gpu1080.264 from "
                  "bench.py's density trial (one selector loop; %d pictures %d times over), sessions PUT {\"decode\": \"all\"}, "
                  "frametap serve --backend auto|software; latest.jpg of the first session read in a loop during a "
                  "trial at the number found; GET /system after it" % (len(stream.aus), G2_LOOPS))
    for backend in (["auto"] if check.cuda_ok else []) + ["software"]:
        if not check.enough(90, "G2/G4 on %s" % backend):
            continue
        server = frametap(check.args.binary, "--backend", backend, "--decoder-threads", "1", name="density-%s" % backend)
        lines = []
        try:
            deadline = time.monotonic() + min(150, check.remaining() - 60)

            def trial(n):
                if time.monotonic() > deadline:
                    return False, "n=%d not tried: the step's time ran out" % n
                return density_trial(server, stream, n, "all", loops=G2_LOOPS)
            n, capped = search(trial, max(4, cores * 2), caps[backend], lines, log)
            found[backend] = (n, capped)
            latencies = []
            if n > 0 and check.remaining() > 30:
                kept, info = latency_trial(server, stream, n, latencies)
                lines.append("latency trial: " + ("ok   " if kept else "FAIL ") + info)
                if latencies:
                    p99[backend] = (percentile(latencies, 99), percentile(latencies, 50), len(latencies))
                try:
                    engines[backend] = server.json("GET", "/system")
                except Exception as e:  # the figures above stand without it
                    lines.append("GET /system failed: %s" % e)
        except Failure as e:
            check.notes.append("G2 on %s failed: %s" % (backend, e))
        finally:
            server.stop()
        check.sections.append("### G2 on %s\n\n```\n%s\n```\n" % (backend, "\n".join(lines)))
        if backend in engines:
            check.sections.append("### /system after G2's latency trial on %s\n\n```json\n%s\n```\n"
                                  % (backend, json.dumps(engines[backend], indent=1)[:8000]))
        check.write()
    auto, software = found.get("auto"), found.get("software")

    def shown(value):
        return ("≥ %d" if value[1] else "%d") % value[0] if value else "not run"
    ratio = auto[0] / software[0] if auto and software and software[0] else None
    check.row("G2", "1080p30 real-time H.264 sessions kept up, auto (placed by capacity) against software alone",
              shown(auto), shown(software), "%.2f" % ratio if ratio else "", "≥ 1.5×",
              ("yes" if ratio >= TARGETS["G2"] else "**no**") if ratio else "—")

    def latency(value):
        return "%.2f (p50 %.2f, %d answers)" % value if value else "not run"
    met = ("yes" if p99["auto"][0] <= TARGETS["G4"] else "**no**") if "auto" in p99 else "—"
    check.row("G4", "latest.jpg p99 during G2 at the number of sessions found (ms)", latency(p99.get("auto")),
              latency(p99.get("software")), "", "≤ %d ms (auto)" % TARGETS["G4"], met)


# --- 8. JPEG on the GPU ------------------------------------------------------------------------------

def mjpeg_viewer(port, session, stop):
    """Reads the session's MJPEG stream until `stop` is set (a viewer as slow as Python reads)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/sessions/%s/frames.mjpeg" % session)
        resp = conn.getresponse()
        while not stop.is_set() and resp.read1(1 << 16):
            pass
    except (OSError, http.client.HTTPException):
        pass
    finally:
        conn.close()


def viewer_trial(check, encoder, stream, viewers=100, seconds=10, backend="cuda"):
    """B7 on the GPU: one 1080p30 session decoded on cuda, pushed in real time, watched by
    `viewers` (half MJPEG streams, half latest.jpg long polls); the server's CPU, JPEG encodes,
    pictures and downloads over `seconds`, with `--encoder ENCODER`."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    from scenarios.common import long_poll, realtime_push
    server = frametap(check.args.binary, "--backend", backend, "--encoder", encoder, name="viewers-%s" % encoder)
    session = "b7gpu"
    stop = threading.Event()
    try:
        server.json("PUT", "/sessions/%s" % session, body=b"{}")
        pusher = threading.Thread(target=lambda: realtime_push(server, stream, session, query="", loops=1000, stop=stop),
                                  daemon=True)
        pusher.start()
        deadline = time.monotonic() + 15
        while server.get("/sessions/%s/frame/latest.jpg" % session)[0] != 200:
            if time.monotonic() > deadline:
                raise Failure("B7-GPU (%s): no picture from the session within 15 s" % encoder)
            time.sleep(0.05)
        half = viewers // 2
        threads = [threading.Thread(target=mjpeg_viewer, args=(server.port, session, stop), daemon=True)
                   for _ in range(half)]
        threads += [threading.Thread(target=long_poll, args=(server.port, session, 2000, stop, lambda seq, t: None),
                                     daemon=True) for _ in range(viewers - half)]
        [t.start() for t in threads]
        time.sleep(1.5)
        m0, c0, s0 = server.metrics(), server.cpu_seconds(), server.json("GET", "/sessions/%s" % session)
        t0 = time.perf_counter()
        time.sleep(seconds)
        m1, c1, s1 = server.metrics(), server.cpu_seconds(), server.json("GET", "/sessions/%s" % session)
        wall = time.perf_counter() - t0
    finally:
        stop.set()
        server.stop()
    delta = lambda name: metric_value(m1, name) - metric_value(m0, name)
    return dict(cpu=(c1 - c0) / wall, encodes=delta("frametap_picture_encodes_total") / wall,
                downloads=delta("frametap_frame_downloads_total"),
                pictures=(s1["counters"]["framesDecoded"] - s0["counters"]["framesDecoded"]) / wall,
                encoder=s1.get("encoder"), backend=s1.get("backend"))


JPEG_QUALITY_STREAMS = [("1080p H.264, limited range", ".device/streams/gpu1080.264"),
                        ("H.264, full range", "Tests/Fixtures/fullrange_176x144.264"),
                        ("H.265 BT.709, full range", "Tests/Fixtures/fullrange_bt709_176x144.265"),
                        ("H.264, odd crop 322x242", "Tests/Fixtures/odd_crop_322x242.264"),
                        ("H.265 with B-frames", "Tests/Fixtures/main_bframes_176x144.265")]


def psnr_rows(check):
    """Each picture of a few streams encoded by nvJPEG from the device surface and by TurboJPEG
    at the same quality, both decoded back by TurboJPEG: the PSNR between them
    (`frametap decode --compare-encoders`)."""
    results, lines = [], []
    for label, relative in JPEG_QUALITY_STREAMS:
        path = os.path.join(check.args.device_dir, relative[len(".device/"):]) if relative.startswith(".device/") \
            else os.path.join(ROOT, relative)
        if not check.enough(15, "nvJPEG PSNR (%s)" % label):
            break
        out = os.path.join(WORK, "compare-%d" % len(results))
        argv = [check.args.binary, "decode", path, "--backend", "cuda", "--encoder", "nvjpeg", "--quality", "85",
                "--compare-encoders", "--output", out]
        check.commands.append(" ".join(argv[1:]).replace(ROOT + "/", ""))
        rc, stdout, stderr = run(argv, 60)
        found = [line for line in (stdout + "\n" + stderr).splitlines() if line.startswith('{"encoderComparison"')]
        if rc != 0 or not found:
            lines.append("%s: exit %d, no comparison: %s" % (label, rc, stderr.strip()[-300:]))
            results.append((label, None))
            continue
        comparison = json.loads(found[-1])["encoderComparison"]
        results.append((label, comparison))
        lines.append("%s: %s" % (label, json.dumps(comparison)))
        log(lines[-1])
    check.sections.append("### nvJPEG against TurboJPEG, quality 85 (PSNR of the decoded JPEGs)\n\n%s\n"
                          % "\n".join("- " + line for line in lines))
    measured = [c for _, c in results if c]
    on_gpu = all(c.get("encoder") == "nvjpeg" and c.get("deviceEncodes") == c.get("pictures") for c in measured)
    worst = min((c["psnrMinDB"] if c.get("psnrMinDB") is not None else float("inf")) for c in measured) \
        if measured else None
    shown = "not run" if worst is None else ("identical" if worst == float("inf") else "%.2f" % worst)
    check.row("JPEG-Q", "nvJPEG against TurboJPEG at quality 85, lowest PSNR of any picture over %d streams (dB)"
              % len(measured), shown + ("" if on_gpu else " (not all on the GPU)"), "reference", "", "≥ 45 dB",
              ("yes" if on_gpu and worst >= 45 else "**no**") if worst is not None else "—")


def gpu_jpeg_rows(check):
    """nvJPEG against TurboJPEG: the pictures' PSNR at the same quality, downloads while viewers
    ask only for JPEG, and B7's 100 viewers' server CPU with each encoder."""
    if not check.cuda_ok:
        check.row("B7-GPU", "100 viewers of a 1080p30 session on cuda, server CPU (cores)", "not run", "not run", "",
                  "≤ 0.5× turbojpeg", "—")
        return
    psnr_rows(check)
    stream = Stream(os.path.join(check.args.device_dir, "streams", "gpu1080.264"))
    command("B7-GPU: frametap serve --backend cuda --encoder nvjpeg|turbojpeg; one real-time push of "
            ".device/streams/gpu1080.264 (looped); 50 MJPEG viewers (frames.mjpeg) and 50 long polls "
            "(latest.jpg?after=SEQ&wait=2000), Python threads; 10 s of /proc/PID/stat CPU and /metrics")
    results = {}
    for encoder in ("nvjpeg", "turbojpeg"):
        if not check.enough(35, "B7-GPU with %s" % encoder):
            return
        try:
            results[encoder] = viewer_trial(check, encoder, stream)
        except Failure as e:
            check.notes.append("B7-GPU with %s failed: %s" % (encoder, e))
    lines = ["%s: %.3f cores, %.1f encodes/s, %.1f pictures/s, %d downloads, session encoder %s, backend %s"
             % (encoder, r["cpu"], r["encodes"], r["pictures"], r["downloads"], json.dumps(r["encoder"]), r["backend"])
             for encoder, r in results.items()]
    check.sections.append("### B7-GPU: 100 viewers of one 1080p30 session on cuda\n\n%s\n"
                          % "\n".join("- " + line for line in lines))
    gpu, cpu = results.get("nvjpeg"), results.get("turbojpeg")
    ratio = gpu["cpu"] / cpu["cpu"] if gpu and cpu and cpu["cpu"] else None
    check.row("B7-GPU", "100 viewers of a 1080p30 session on cuda, server CPU (cores): nvjpeg | turbojpeg",
              "%.3f" % gpu["cpu"] if gpu else "not run", "%.3f" % cpu["cpu"] if cpu else "not run",
              "%.2f" % ratio if ratio else "", "≤ 0.5×", ("yes" if ratio <= 0.5 else "**no**") if ratio else "—")
    check.row("JPEG-D", "frame downloads during B7-GPU with nvjpeg (JPEG viewers only)",
              "%d" % gpu["downloads"] if gpu else "not run", "%d" % cpu["downloads"] if cpu else "not run", "",
              "0 (nvjpeg)", ("yes" if gpu["downloads"] == 0 else "**no**") if gpu else "—")


# --- 6. G5 pictures on demand ----------------------------------------------------------------------

def planar(body, pix_fmt, width, height):
    """A 4:2:0 8-bit picture as planar bytes (NV12's interleaved chroma split), to compare back ends."""
    luma = width * height
    if pix_fmt == "nv12":
        chroma = body[luma:]
        return body[:luma] + chroma[0::2] + chroma[1::2]
    return body


WARM = {}   # backend: (warm decoder hits, misses) of the last G5 server
CATCHUP = {}   # backend: (mean catch-up decode ms, access units fed per catch-up) of the last G5 server


def on_demand_pictures(check, backend, path, picks):
    """Pushes the stream to an on-demand session (no decoder runs) and asks for pictures by number,
    each a catch-up from its GOP's keyframe; returns {seq: (pix_fmt, md5 of the planar picture)},
    the times (ms) and how many hardware pictures were downloaded (0 in software)."""
    import hashlib
    server = frametap(check.args.binary, "--backend", backend, "--default-decode", "on-demand", "--on-demand-linger", "0",
                          "--history-seconds", "60", name="on-demand-%s" % backend)
    pictures, times = {}, []
    try:
        content = "video/H265" if path.endswith(".265") else "video/H264"
        t, _, summary, _ = post_file(server, "g5", path, "flush=true", content_type=content)
        history = server.json("GET", "/sessions/g5/history")
        first, last = history["firstSeq"], history["lastSeq"]
        if first is None or last is None:
            raise Failure("G5 on %s: the history holds no pictures: %s" % (backend, history))
        for seq in picks(first, last):
            start = time.perf_counter()
            status, headers, body = server.request("GET", "/sessions/g5/frame/at.yuv?seq=%d" % seq)
            times.append((time.perf_counter() - start) * 1000)
            if status != 200:
                raise Failure("G5 on %s: at.yuv?seq=%d -> %d %s" % (backend, seq, status, body[:200]))
            pix_fmt = headers.get("X-Frame-Pix-Fmt", "?")
            width, height = int(headers.get("X-Frame-Width", "0")), int(headers.get("X-Frame-Height", "0"))
            pictures[seq] = (pix_fmt, hashlib.md5(planar(body, pix_fmt, width, height)).hexdigest())
        metrics = server.metrics()
        reported = int(metric_value(metrics, "frametap_frame_downloads_total"))
        WARM[backend] = (metric_value(metrics, "frametap_warm_decoder_hits_total"), metric_value(metrics, "frametap_warm_decoder_misses_total"))
        # How much of a request is the catch-up's decode (the slot's time: opening or lending the
        # decoder, feeding its GOP, the picture out), the rest being the answer's download/encode.
        count = metric_value(metrics, "frametap_catchup_seconds_count", {"kind": "history"})
        total = metric_value(metrics, "frametap_catchup_seconds_sum", {"kind": "history"})
        units = metric_value(metrics, "frametap_catchup_access_units_total", {"kind": "history"})
        CATCHUP[backend] = (1000 * total / count if count else None, units / count if count else None)
    finally:
        server.stop()
    return pictures, times, reported


def on_demand_rows(check):
    streams = check.args.device_dir + "/streams"
    # Spread over the GOPs and over places inside them (the catch-up decodes from the keyframe).
    picks = lambda first, last: sorted({first + (k * 37) % (last - first + 1) for k in range(12)})
    command("frametap serve --backend B --default-decode on-demand --on-demand-linger 0 --history-seconds 60; "
                  "POST .device/streams/gpu1080.26x (flush); GET /sessions/g5/frame/at.yuv?seq=N for 12 numbers")
    for name in ("gpu1080.264", "gpu1080.265"):
        path = os.path.join(streams, name)
        if not os.path.exists(path):
            check.notes.append("G5 (%s) not run: not packed (GPU_PACK_STREAMS)" % name)
            continue
        if not check.enough(40, "G5 (%s)" % name):
            continue
        results = {}
        try:
            for backend in (["cuda"] if check.cuda_ok else []) + ["software"]:
                results[backend] = on_demand_pictures(check, backend, path, picks)
        except Failure as e:
            check.notes.append("G5 (%s) failed: %s" % (name, e))
            continue
        lines = []
        for backend, (pictures, times, reported) in results.items():
            formats = sorted({fmt for fmt, _ in pictures.values()})
            hits, misses = WARM.get(backend, (None, None))
            lines.append("%s: %d hardware pictures downloaded, pixel formats %s, at.yuv request to answer ms: median %.1f, "
                         "max %.1f, first %.1f; warm decoders: %s hits, %s misses; the catch-ups' own decode: mean %s ms, "
                         "%s access units each"
                         % (backend, reported, "/".join(formats), median(times), max(times), times[0], hits, misses,
                            *(("%.1f" % v if v is not None else "?") for v in CATCHUP.get(backend, (None, None)))))
        same = "—"
        if "cuda" in results:
            cuda_pictures, software_pictures = results["cuda"][0], results["software"][0]
            equal = [seq for seq in cuda_pictures if cuda_pictures[seq][1] == software_pictures.get(seq, (None, None))[1]]
            same = "%d/%d" % (len(equal), len(cuda_pictures))
            on_gpu = results["cuda"][2] >= len(cuda_pictures)
            lines.append("cuda pictures equal to software's (planar 4:2:0, MD5): %s; decoded on the GPU: %s" % (same, on_gpu))
            if not on_gpu:
                check.notes.append("G5 (%s): the cuda session's catch-ups did not run on the GPU: %s" % (name, lines[0]))
        check.sections.append("### G5 on demand, %s\n\n%s\n" % (name, "\n".join("- " + l for l in lines)))
        cuda_ms = median(results["cuda"][1]) if "cuda" in results else None
        software_ms = median(results["software"][1])
        check.row("G5", "picture from the history, %s (at.yuv by number, a catch-up from its keyframe; ms median)"
                  % ("H.265" if name.endswith("265") else "H.264"),
                  "%.1f (%s equal)" % (cuda_ms, same) if cuda_ms else "not run", "%.1f" % software_ms,
                  "%.2f" % (software_ms / cuda_ms) if cuda_ms else "", "equal pictures, on the GPU, ≤ software's time",
                  ("yes" if same.split("/")[0] == same.split("/")[-1] and cuda_ms <= software_ms else "**no**")
                  if cuda_ms else "—")


# --- 5. G3 idle sessions ---------------------------------------------------------------------------

def idle_rows(check, sessions=8, seconds=10):
    stream = Stream(os.path.join(check.args.device_dir, "streams", "gpu1080.264"))
    first_second = b"".join(stream.aus[:30])
    command("%d sessions each pushed the first 30 pictures of .device/streams/gpu1080.264 (flush) and read "
                  "once (latest.jpg), then %d s idle; CPU from /proc/PID/stat" % (sessions, seconds))
    cpu = {}
    for backend in (["cuda"] if check.cuda_ok else []) + ["software"]:
        if not check.enough(seconds + 20, "G3 on %s" % backend):
            continue
        server = frametap(check.args.binary, "--backend", backend, name="idle-%s" % backend)
        try:
            for k in range(sessions):
                status, _, body = server.request("POST", "/sessions/g3-%d/nalus?flush=true" % k, body=first_second,
                                                 headers={"Content-Type": "video/H264"})
                if status != 200:
                    raise Failure("G3: push -> %d %s" % (status, body[:200]))
                if server.get("/sessions/g3-%d/frame/latest.jpg" % k)[0] != 200:
                    raise Failure("G3: no picture")
            time.sleep(1)
            c0 = server.cpu_seconds()
            time.sleep(seconds)
            cpu[backend] = (server.cpu_seconds() - c0) / seconds / sessions
        except Failure as e:
            check.notes.append("G3 on %s failed: %s" % (backend, e))
        finally:
            server.stop()
    met = ("yes" if cpu["cuda"] <= TARGETS["G3"] else "**no**") if "cuda" in cpu else "—"
    check.row("G3", "CPU per idle session holding its latest picture (cores)",
              "%.4f" % cpu["cuda"] if "cuda" in cpu else "not run",
              "%.4f" % cpu["software"] if "software" in cpu else "not run", "", "≤ 0.02 (cuda)", met)


STEPS = {"conformance": conformance, "g1x": concurrent_rows, "jpeg": gpu_jpeg_rows, "g5": on_demand_rows,
         "g2": density_rows, "g1": ingest_rows, "g3": idle_rows}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--device-dir", default=os.path.join(ROOT, ".device"))
    parser.add_argument("--results", default=os.path.join(ROOT, ".test-output", "gpu-check"))
    parser.add_argument("--budget", type=int, default=int(os.environ.get("GPU_CHECK_BUDGET", "450")))
    parser.add_argument("--steps", default=os.environ.get("GPU_CHECK_STEPS", ",".join(STEPS)),
                        help="a comma-separated subset of %s (for a rerun of what failed)" % ", ".join(STEPS))
    args = parser.parse_args()
    args.binary = os.path.abspath(args.binary)
    args.device_dir = os.path.abspath(args.device_dir)
    os.makedirs(args.results, exist_ok=True)
    global WORK
    # The servers' logs, decoded pictures and long streams stay out of the results folder (the GPU
    # machine sends back only a few files); the logs come back as one archive.
    WORK = os.path.join(tempfile.gettempdir(), "gpu-check-work")
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(os.path.join(WORK, "out"), exist_ok=True)
    check = Check(args)
    if not os.path.exists(os.path.join(args.device_dir, "streams", "MANIFEST.tsv")):
        sys.exit("gpu-check: %s/streams is missing: run `make gpu-pack` here and carry .device" % args.device_dir)
    survey(check)
    log("CUDA: %s (%s)" % ("available" if check.cuda_ok else "not available", check.cuda_reason))
    chosen = [name.strip() for name in args.steps.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in STEPS]
    if unknown:
        sys.exit("gpu-check: unknown steps %s; the steps are %s" % (", ".join(unknown), ", ".join(STEPS)))
    for step in (STEPS[name] for name in STEPS if name in chosen):
        try:
            step(check)
        except Exception as e:  # one step's failure must not cost the others' results
            check.notes.append("%s stopped: %s: %s" % (step.__name__, type(e).__name__, e))
            check.write()
    check.write()
    with tarfile.open(os.path.join(args.results, "gpu-check-logs.tar.gz"), "w:gz") as logs:
        logs.add(os.path.join(WORK, "out"), arcname="logs")
    print(check.results_path)
    failed = [c for c in check.conformance if c[4] not in (0, "—")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
