#!/usr/bin/env python3
"""README.md's shell examples, run as a reader would run them, so that none can rot.

    smoke/readme.py --binary .build/debug/frametap [--readme README.md] [--keep DIR]

Every fenced block whose info string starts with sh, bash or shell is an example. One marked
```sh runnable``` is run; any other must be listed in EXCLUDED below with the reason it cannot run
here, and a block that is neither fails the run (so a new example is either run or explained).

How a block runs:
  - in its own `bash` with `set -eo pipefail`: the first command that fails fails the example,
    named by its README line; blocks run in README order and share a working folder (files one
    example makes, such as camera.mp4, are there for the next) and the server the last one
    started; each block is bounded (BLOCK_SECONDS);
  - the working folder holds links to the repository's top-level folders, so paths such as
    Tests/Fixtures/... work as they do from a checkout;
  - PATH starts with smoke/readme-shims, stand-ins that keep the examples as a reader types them:
    `frametap` is the binary under test; `make run` is `frametap serve`; `curl` fails on an HTTP
    error status; `ffmpeg -re` (a live push) and `curl -N` (an event stream) are ended after a few
    seconds, which passes; `xdg-open` reads the URL for 2 s instead of opening a browser;
  - a block that starts a server in the background (`make run &`, `frametap serve ... &`) gets the
    port to itself: the server an earlier example started is stopped first (SIGTERM; it must exit
    0), as a reader stops it before starting another, and the block's curl, ffmpeg and xdg-open
    wait for the new one to answer /healthz, as a reader waits;
  - the server listens on a free loopback port (FRAMETAP_HOST, FRAMETAP_PORT), and the cameras
    the examples name are local stand-ins, started here: GStreamer's RTSP server
    (smoke/rtsp-server.py), nginx with its RTMP module fed by ffmpeg, an ffmpeg SRT listener with
    the example's passphrase, and an HTTP file server (plain HTTP: a certificate for the
    example's host name would need a CA the server trusts). SUBSTITUTIONS lists the addresses
    replaced for them; one no block uses fails the run (the list must stay true);
  - after some blocks, EXPECTATIONS check what they should have done (pulls decode, pushes
    that ffmpeg ended early were decoded), through the API with the server's token.

Prints one PASS/FAIL/SKIP line per example and check, and "N passed, N failed, N skipped" last;
exits 1 when anything failed. Each block's script and output are kept in --keep (default
.test-output/readme).
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from harness.checks import Results  # noqa: E402
from harness.ports import free_port  # noqa: E402

SHELLS = {"sh", "bash", "shell"}
# A command line that starts a server in the background.
SERVER_START = re.compile(r"^\s*(?:[A-Z_]+=\S*\s+)*(?:make run|frametap serve)\b[^#]*&\s*(?:#.*)?$", re.M)
BLOCK_SECONDS = 240
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, with python3-gi and python3-jwt

# Examples that do not run here, by the start of their first line, each with why.
EXCLUDED = {
    "make run    # installs": "the two entry points: `make test` runs this very runner, and `make run` is the "
                              "Quick start's first line, which runs",
    "docker build -t frametap .": "builds the container image: `make container-test` builds and runs it with podman "
                                  "(no Docker engine here)",
    "docker run --rm -p 8080:8080 --gpus all": "needs an NVIDIA GPU and its container toolkit "
                                               "(`make gpu-check` runs the GPU checks on a GPU machine)",
    "docker run --rm -p 8080:8080 --device /dev/dri/renderD128": "needs a VA-API render node and a Docker engine",
    "frametap sync --config cameras.yaml": "a synopsis with placeholders ([--token …]) naming a gateway and "
                                           "instances; `make deploy-test` runs sync against three instances "
                                           "behind HAProxy",
    "frametap probe  INPUT": "a synopsis with placeholders (INPUT, [--options]); smoke/cli.sh runs each subcommand",
}

# What the examples name, and what stands in for it here ({port}: the server's; the others:
# the stand-ins'). Longer entries first where one contains another.
SUBSTITUTIONS = [
    ("localhost:8080", "127.0.0.1:{port}"),
    ("rtsp://192.168.1.0/24", "rtsp://127.0.0.1"),
    ("192.168.1.20:554", "127.0.0.1:{rtsp}"),
    ("rtmp://127.0.0.1/", "rtmp://127.0.0.1:{rtmp}/"),
    ("srt://10.0.0.5:9000", "srt://127.0.0.1:{srt}"),
    ("srt://10.0.0.5", "srt://127.0.0.1"),
    ("https://*.cams.example.com", "http://127.0.0.1"),
    ("https://lobby.cams.example.com/", "http://127.0.0.1:{http}/"),
]


# --- README ------------------------------------------------------------------------------------

class Block:
    def __init__(self, line, info, heading, text):
        self.line, self.info, self.heading, self.text = line, info, heading, text
        words = info.split()
        self.language = words[0] if words else ""
        self.runnable = "runnable" in words[1:]
        self.first = next((row for row in text.splitlines() if row.strip()), "")

    @property
    def name(self):
        return f"README.md:{self.line} ({self.heading}): {self.first.strip()[:60]}"


def blocks(path):
    """The fenced blocks of a Markdown file (also indented ones, in lists), each with the line
    its text starts on and its text without the fence's indentation."""
    found, heading, fence = [], "top", None
    with open(path) as readme:
        for number, row in enumerate(readme, 1):
            line = row.rstrip("\n")
            if fence is None:
                opening = re.match(r"^(\s*)```(.*)$", line)
                if opening:
                    fence = (number + 1, opening.group(2).strip(), [], opening.group(1))
                elif row.startswith("#"):
                    heading = row.lstrip("#").strip()
            elif line.strip() == "```":
                found.append(Block(fence[0], fence[1], heading, "".join(fence[2])))
                fence = None
            else:
                indent = fence[3]
                fence[2].append(row[len(indent):] if row.startswith(indent) else row.lstrip())
    return found


def excluded_reason(block):
    for start, reason in EXCLUDED.items():
        if block.first.startswith(start):
            return reason
    return None


# --- the server's API, for the checks after a block -------------------------------------------

class Context:
    def __init__(self, port, state):
        self.port, self.state = port, state

    def token(self):
        try:
            with open(os.path.join(self.state, "server.token")) as file:
                return file.read().strip() or None
        except OSError:
            return None

    def status(self, session):
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/sessions/{session}")
        token = self.token()
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return json.load(answer)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def frames(self, session):
        return ((self.status(session) or {}).get("counters") or {}).get("framesDecoded", 0)

    def decodes(self, session, timeout=20):
        """(whether the session decoded a picture within `timeout`, its status then)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.frames(session) > 0:
                return True, None
            time.sleep(0.25)
        status = self.status(session) or {}
        return False, json.dumps({"source": status.get("source"), "lastError": status.get("lastError"),
                                  "counters": status.get("counters")})[:400]


def pictures_in(*sessions):
    def check(context):
        for session in sessions:
            ok, detail = context.decodes(session)
            yield f"session {session} decoded pictures", ok, detail
    return check


# After a block (by the start of its first line): what it should have done.
EXPECTATIONS = {
    "make run &": pictures_in("cam1", "cam2", "cam3"),
    "# a file in any container": pictures_in("clip", "cam4", "cam5"),
    "# a server that may pull": pictures_in("stage", "relay", "lobby"),
}


# --- stand-ins for the cameras -----------------------------------------------------------------

class StandIns:
    """The sources the pull examples name, on loopback."""

    def __init__(self, folder, log):
        self.folder, self.log = folder, log
        self.processes = []
        self.ports = {name: free_port() for name in ("rtsp", "rtmp", "srt", "http")}

    def spawn(self, name, command, **options):
        output = open(os.path.join(self.folder, f"{name}.log"), "w")
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True, **options)
        self.processes.append((name, process))
        return process

    def start(self):
        """Starts them all; a list of problems (empty when every stand-in is up)."""
        clip_mp4 = os.path.join(self.folder, "clip.mp4")
        served = os.path.join(self.folder, "http")
        os.makedirs(served)
        # 10 s, 320x240, a keyframe a second, no B-frames: a camera-like stream.
        subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
                        "testsrc2=size=320x240:rate=25", "-t", "10", "-c:v", "libx264", "-preset", "ultrafast",
                        "-tune", "zerolatency", "-g", "25", "-pix_fmt", "yuv420p", "-y", clip_mp4], check=True)
        subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-i", clip_mp4, "-c", "copy",
                        "-f", "mpegts", "-y", os.path.join(served, "live.ts")], check=True)
        problems = []
        rtsp = self.spawn("rtsp", [SYSTEM_PYTHON, os.path.join(ROOT, "smoke", "rtsp-server.py"),
                                   "--port", str(self.ports["rtsp"]), "--path", "/stream1"])
        nginx = os.path.join(self.folder, "nginx")
        os.makedirs(nginx)
        with open(os.path.join(nginx, "nginx.conf"), "w") as conf:
            conf.write(f"""load_module /usr/lib/nginx/modules/ngx_rtmp_module.so;
daemon off;
master_process off;
worker_processes 1;
pid {nginx}/nginx.pid;
error_log {nginx}/error.log info;
events {{ worker_connections 64; }}
rtmp {{ server {{ listen 127.0.0.1:{self.ports["rtmp"]}; application live {{ live on; record off; }} }} }}
""")
        self.spawn("nginx", ["nginx", "-c", os.path.join(nginx, "nginx.conf"), "-p", nginx, "-e",
                             os.path.join(nginx, "error.log")])
        self.spawn("http", [sys.executable, "-m", "http.server", str(self.ports["http"]), "--bind", "127.0.0.1"],
                   cwd=served)
        self.spawn("srt", ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-re", "-stream_loop", "-1",
                           "-i", clip_mp4, "-c", "copy", "-f", "mpegts",
                           f"srt://127.0.0.1:{self.ports['srt']}?mode=listener&passphrase=a-long-passphrase"])
        for name, port in (("nginx RTMP", self.ports["rtmp"]), ("HTTP file server", self.ports["http"]),
                           ("RTSP server", self.ports["rtsp"])):
            if not wait_for_port(port, 15):
                problems.append(f"the {name} stand-in did not listen on {port}")
        # Published once nginx listens; looped for the whole run.
        self.spawn("rtmp-publisher", ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-re",
                                      "-stream_loop", "-1", "-i", clip_mp4, "-c", "copy", "-f", "flv",
                                      f"rtmp://127.0.0.1:{self.ports['rtmp']}/live/stage"])
        for name, process in self.processes:
            if process.poll() is not None:
                problems.append(f"the {name} stand-in exited with {process.returncode}")
        return problems

    def stop(self):
        for _, process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for _, process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def wait_for_port(port, seconds):
    import socket
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.1)
    return False


# --- running ------------------------------------------------------------------------------------

def substitute(text, values, used):
    for index, (original, replacement) in enumerate(SUBSTITUTIONS):
        if original in text:
            used.add(index)
            text = text.replace(original, replacement.format(**values))
    return text


def run_block(block, text, index, work, env, keep):
    """(exit status, output) of one block in its own bash, bounded by BLOCK_SECONDS."""
    header = [
        "set -eo pipefail",
        f"trap 'echo \"README.md:$((LINENO - 3 + {block.line})): exit status $? of: $BASH_COMMAND\" >&2' ERR",
    ]
    script = os.path.join(keep, f"block-{index:02d}-line-{block.line}.sh")
    with open(script, "w") as file:
        file.write("\n".join(header) + "\n" + text)
    output_path = script[:-3] + ".out"
    with open(output_path, "w") as output:
        process = subprocess.Popen(["bash", "--noprofile", "--norc", script], cwd=work, env=env,
                                   stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            status = process.wait(timeout=BLOCK_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            status = f"killed after {BLOCK_SECONDS} s"
    with open(output_path, errors="replace") as output:
        return status, output.read()


def stop_last_server(state):
    """SIGTERMs the server the last example started; True when it exited 0 (or none runs)."""
    try:
        with open(os.path.join(state, "server.pid")) as file:
            pid = int(file.read())
        os.unlink(os.path.join(state, "server.pid"))
    except (OSError, ValueError):
        return True, "no server running"
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        for line in server_exits(state):
            if line[0] == pid:
                return line[1] == 0, f"exit {line[1]}"
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return False, "did not exit within 15 s of SIGTERM"


def server_exits(state):
    try:
        with open(os.path.join(state, "server.exits")) as file:
            return [tuple(int(field) for field in line.split()) for line in file if line.strip()]
    except OSError:
        return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    parser.add_argument("--keep", default=os.path.join(ROOT, ".test-output", "readme"))
    arguments = parser.parse_args()
    binary = os.path.abspath(arguments.binary)
    results = Results()
    started = time.monotonic()

    examples = [block for block in blocks(arguments.readme) if block.language in SHELLS]
    runnable = []
    for block in examples:
        reason = excluded_reason(block)
        if block.runnable and reason:
            results.check(f"{block.name}: marked runnable and excluded", False, "mark it or exclude it, not both")
        elif block.runnable:
            runnable.append(block)
        elif reason:
            results.skip(block.name, reason)
        else:
            results.check(f"{block.name}: runnable or explained", False,
                          "mark it ```sh runnable (and make it run) or list it in smoke/readme.py's EXCLUDED with why")
    for start in EXCLUDED:
        if not any(block.first.startswith(start) for block in examples):
            results.check(f"EXCLUDED entry '{start}' names an example", False, "no example starts so: remove the entry")
    for start in EXPECTATIONS:
        if not any(block.first.startswith(start) for block in runnable):
            results.check(f"EXPECTATIONS entry '{start}' names a runnable example", False,
                          "no runnable example starts so: update or remove the entry")

    shutil.rmtree(arguments.keep, ignore_errors=True)
    os.makedirs(arguments.keep)
    scratch = tempfile.mkdtemp(prefix="frametap-readme-")
    work = os.path.join(scratch, "work")
    state = os.path.join(scratch, "state")
    os.makedirs(work)
    os.makedirs(state)
    for entry in os.listdir(ROOT):
        if not entry.startswith("."):
            os.symlink(os.path.join(ROOT, entry), os.path.join(work, entry))
    stand_ins = StandIns(os.path.join(scratch, "stand-ins"), arguments.keep)
    os.makedirs(stand_ins.folder)
    port = free_port()
    values = dict(port=port, **stand_ins.ports)
    env = {
        "PATH": f"{os.path.join(ROOT, 'smoke', 'readme-shims')}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", scratch),
        "LANG": "C.UTF-8",
        "FRAMETAP_HOST": "127.0.0.1",
        "FRAMETAP_PORT": str(port),
        "README_STATE": state,
        "README_FRAMETAP": binary,
        "README_CURL": shutil.which("curl", path="/usr/bin:/bin"),
        "README_FFMPEG": shutil.which("ffmpeg", path="/usr/bin:/bin"),
    }
    used = set()
    try:
        problems = stand_ins.start()
        results.check("the stand-in cameras are up (RTSP, RTMP, SRT, HTTP)", not problems, "; ".join(problems))
        context = Context(port, state)
        for index, block in enumerate(runnable, 1):
            text = substitute(block.text, values, used)
            if SERVER_START.search(text):
                if os.path.exists(os.path.join(state, "server.pid")):
                    stopped, detail = stop_last_server(state)
                    if not results.check(f"README.md:{block.line}: the earlier example's server stops on SIGTERM",
                                         stopped, detail):
                        continue
                open(os.path.join(state, "server.expected"), "w").close()
            began = time.monotonic()
            status, output = run_block(block, text, index, work, env, arguments.keep)
            seconds = time.monotonic() - began
            tail = "\n".join(output.rstrip().splitlines()[-15:])
            if not results.check(f"{block.name} ({seconds:.0f} s)", status == 0, f"exit {status}\n{tail}"):
                continue
            for start, expectation in EXPECTATIONS.items():
                if block.first.startswith(start):
                    for name, ok, detail in expectation(context):
                        results.check(f"README.md:{block.line}: {name}", ok, detail)
        for index, (original, _) in enumerate(SUBSTITUTIONS):
            results.check(f"substitution '{original}' is used by an example", index in used,
                          "no runnable example names it any more: remove it from SUBSTITUTIONS")
        stopped, detail = stop_last_server(state)
        results.check("the last example's server stops on SIGTERM", stopped, detail)
        failed_exits = [f"{pid}: exit {status}" for pid, status in server_exits(state) if status != 0]
        results.check("every server an example started exited 0 on SIGTERM", not failed_exits, ", ".join(failed_exits))
    finally:
        stop_last_server(state)
        stand_ins.stop()
        for name in os.listdir(state):
            if name.endswith(".log"):
                shutil.copy(os.path.join(state, name), arguments.keep)
        for name in os.listdir(stand_ins.folder):
            if name.endswith(".log"):
                shutil.copy(os.path.join(stand_ins.folder, name), os.path.join(arguments.keep, f"stand-in-{name}"))
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"scripts and logs in {arguments.keep} ({time.monotonic() - started:.0f} s)")
    print(f"{results.passed} passed, {results.failed} failed, {results.skipped} skipped")
    return 0 if results.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
