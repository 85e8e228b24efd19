#!/usr/bin/python3
"""Cameras that stay, against a real server and a real RTSP camera (GStreamer's RTSP server,
smoke/rtsp-server.py, asking for a user and password):

  a. a configuration file declares a pull camera (its password from the environment, through
     ${VAR}) and a push session: both exist, shown as declared, and the camera shows pictures;
     a push to the push session decodes; a client's PUT of a pull under --state-dir is kept;
  b. a restart (SIGTERM): the declared sessions and the kept one are back, the pulls pulling;
  c. kill -9 after an answered PUT and DELETE: both hold after the next start, the kept pull
     pulls again;
  d. the idle timeout (2 s, from the file) removes a session a push made, not a declared one
     (nor the kept one); a declared session's DELETE is 409 declared_session;
  e. SIGHUP with one session added, one removed and one unchanged applies exactly that
     (config.applied), and the unchanged camera's counters carry on (same createdAt, its
     pictures counted on from where they were);
  f. a broken file (a typo on a known line), swapped in as a Kubernetes ConfigMap swaps its
     `..data` link: refused whole (config.rejected with its line, /system, the metric, the log);
     nothing changes;
  g. a good file swapped in with no signal: the watcher reads it; the camera's quality changes
     in place, a session goes; an option that needs a restart is named as such;
  h. a torn state file stops the start, naming it and keeping a copy; moved away, the server
     starts without the sessions it held;
  i. a declared camera that connects on demand (`connect: on-demand`) is idle until a picture is
     asked for; a request connects it and gets a picture; a linger (1 s) after, the connection
     is let go (idle again); the next request connects it again.

    smoke/cameras.py --binary .build/debug/frametap [--output DIR]

Prints one PASS/FAIL line per check and "N passed, N failed" last; exits 1 when anything failed.
The servers' logs go to --output (.test-output/cameras by default).
"""

import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from harness.checks import Results  # noqa: E402  (tools/ is on the path only now)
from harness.client import request, session_status  # noqa: E402
from harness.ports import free_port  # noqa: E402
from harness.proc import end  # noqa: E402
from harness.server import Server  # noqa: E402
from harness.waiting import Failure, poll, wait_for  # noqa: E402

WAIT = float(os.environ.get("CAMERAS_WAIT_SECONDS", "20"))
USER, PASSWORD = "viewer", "s3cret:p@ss/w"  # ':', '@' and '/' must reach the camera percent-encoded
FIXTURE = os.path.join(ROOT, "Tests", "Fixtures", "baseline_176x144.264")


class ConfigMap:
    """A folder laid out as Kubernetes mounts a ConfigMap: frametap.yaml -> ..data/frametap.yaml,
    ..data -> ..VERSION; each update writes a new version folder and swaps ..data at once."""

    def __init__(self, folder):
        self.folder, self.version = folder, 0
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, "frametap.yaml")

    def write(self, text):
        self.version += 1
        name = f"..v{self.version}"
        os.makedirs(os.path.join(self.folder, name))
        with open(os.path.join(self.folder, name, "frametap.yaml"), "w") as file:
            file.write(text)
        link = os.path.join(self.folder, "..data_tmp")
        os.symlink(name, link)
        os.rename(link, os.path.join(self.folder, "..data"))
        if not os.path.lexists(self.path):
            os.symlink("..data/frametap.yaml", self.path)
        if self.version > 1:
            shutil.rmtree(os.path.join(self.folder, f"..v{self.version - 1}"))


class Events:
    """GET /events read on a thread of its own: every event as (name, data)."""

    def __init__(self, server):
        self.events, self.lock = [], threading.Lock()
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        self.connection.request("GET", "/events")
        self.response = self.connection.getresponse()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        name, data = None, None
        try:
            for raw in self.response:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                elif not line and name:
                    with self.lock:
                        self.events.append((name, data))
                    name, data = None, None
        except (OSError, ValueError, AttributeError, http.client.HTTPException):
            pass  # the stream ended (closed by close(), or the server stopped)

    def matching(self, name, test=lambda data: True):
        with self.lock:
            return [data for event, data in self.events if event == name and test(data)]

    def wait(self, name, test=lambda data: True, seconds=WAIT):
        return wait_for(lambda: self.matching(name, test), seconds, f"a {name} event")[-1]

    def close(self):
        self.connection.close()


def sessions(server):
    return {entry["id"]: entry for entry in server.json("GET", "/sessions")["sessions"]}


def frames(server, session):
    return ((session_status(server.base, session) or {}).get("counters") or {}).get("framesDecoded") or 0


def pictures_pass(server, session, more_than, seconds=WAIT):
    return poll(lambda: frames(server, session) > more_than, seconds, interval=0.2)


def push_fixture(server, session):
    with open(FIXTURE, "rb") as file:
        return request(server.base, "POST", f"/sessions/{session}/nalus?flush=true", body=file.read())[0]


def configuration(server):
    return server.json("GET", "/system")["configuration"]


def metric(server, line_start):
    for line in server.metrics().splitlines():
        if line.startswith(line_start):
            return float(line.split()[-1])
    return None


def declared_file(rtsp_port, sessions_text, serve_extra=""):
    return ("serve:\n"
            "  session-idle-timeout: 2\n"
            "  max-sessions: 16\n"
            f"{serve_extra}"
            "sessions:\n" + sessions_text.format(port=rtsp_port, user=USER))


DOOR = ("  door:\n"
        "    source:\n"
        "      url: rtsp://127.0.0.1:{port}/cam\n"
        "      transport: tcp\n"
        "      username: {user}\n"
        "      password: ${{DOOR_PASSWORD}}\n"
        "    codec: h264\n")
YARD = "  yard:\n    codec: h264\n"
GATE = "  gate:\n    decode: keyframes\n"
PORCH = ("  porch:\n"
         "    source:\n"
         "      url: rtsp://127.0.0.1:{port}/cam\n"
         "      username: {user}\n"
         "      password: ${{DOOR_PASSWORD}}\n"
         "      connect: on-demand\n"
         "    decode: on-demand\n")


def run(r, binary, output):
    work = tempfile.mkdtemp(prefix="frametap-cameras-")
    rtsp_port = free_port()
    camera = subprocess.Popen(
        ["/usr/bin/python3", os.path.join(ROOT, "smoke", "rtsp-server.py"), "--port", str(rtsp_port), "--credentials",
         f"{USER}:{PASSWORD}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    server = None
    try:
        if not r.check("the RTSP camera (with a user and password) is up", camera.stdout.readline().strip() == "ready"):
            return
        config = ConfigMap(os.path.join(work, "config"))
        config.write(declared_file(rtsp_port, DOOR + YARD))
        state = os.path.join(work, "state")
        env = dict(os.environ, DOOR_PASSWORD=PASSWORD)
        server = Server(binary, ["--config", config.path, "--state-dir", state, "--allow-sources", "rtsp://127.0.0.1"],
                        log_path=os.path.join(output, "server.log"), env=env)

        print("== a. declared sessions at start", flush=True)
        server.start()
        now = sessions(server)
        r.check("a: the file's two sessions exist, shown as declared",
                {k: v["origin"] for k, v in now.items()} == {"door": "declared", "yard": "declared"}, now.keys())
        r.check("a: the declared camera pulls with its credentials and shows pictures", pictures_pass(server, "door", 10),
                session_status(server.base, "door"))
        status, _, body = request(server.base, "GET", "/sessions/door/frame/latest.jpg")
        r.check("a: its latest.jpg is a JPEG", status == 200 and body[:2] == b"\xff\xd8", status)
        door_url = (session_status(server.base, "door") or {}).get("source", {}).get("url", "")
        r.check("a: its URL is shown without the credentials", door_url == f"rtsp://***@127.0.0.1:{rtsp_port}/cam", door_url)
        r.check("a: a push to the declared push session decodes",
                push_fixture(server, "yard") == 200 and frames(server, "yard") == 20, frames(server, "yard"))
        lobby = {"source": {"url": f"rtsp://{USER}:{PASSWORD.replace(':', '%3A').replace('@', '%40').replace('/', '%2F')}"
                                   f"@127.0.0.1:{rtsp_port}/cam"}, "quality": 60}
        status, _, body = request(server.base, "PUT", "/sessions/lobby", body=json.dumps(lobby))
        kept = json.loads(body) if status == 201 else {}
        r.check("a: a client's PUT of a pull under --state-dir is 201, origin api, persisted",
                (kept.get("origin"), kept.get("persisted")) == ("api", True), (status, body[:200]))
        r.check("a: the kept pull shows pictures", pictures_pass(server, "lobby", 5))

        print("== b. a restart", flush=True)
        r.check("b: SIGTERM stops the server (exit 0)", server.stop() == 0)
        server.start()
        now = sessions(server)
        r.check("b: the declared sessions and the kept one are back",
                {k: (v["origin"], v["persisted"]) for k, v in now.items()}
                == {"door": ("declared", False), "yard": ("declared", False), "lobby": ("api", True)}, now)
        r.check("b: the declared camera pulls again", pictures_pass(server, "door", 10))
        r.check("b: the kept pull pulls again, with its quality", pictures_pass(server, "lobby", 5)
                and (session_status(server.base, "lobby") or {}).get("quality") == 60)

        print("== c. kill -9 after an answered PUT and DELETE", flush=True)
        r.check("c: PUT of a push session 'extra' is 201", request(server.base, "PUT", "/sessions/extra",
                                                                   body='{"codec":"h265"}')[0] == 201)
        r.check("c: PUT changes lobby's quality", request(server.base, "PUT", "/sessions/lobby", body='{"quality":45}')[0] == 200)
        r.check("c: PUT then DELETE of 'brief' answer 201 and 204",
                (request(server.base, "PUT", "/sessions/brief")[0], request(server.base, "DELETE", "/sessions/brief")[0])
                == (201, 204))
        server.kill()
        server.start()
        now = sessions(server)
        r.check("c: after kill -9 the answered changes hold",
                sorted(now) == ["door", "extra", "lobby", "yard"] and now["extra"]["codec"] == "h265"
                and now["lobby"]["quality"] == 45, {k: (v["origin"], v["quality"]) for k, v in now.items()})
        r.check("c: the kept pull pulls again after kill -9", pictures_pass(server, "lobby", 5),
                session_status(server.base, "lobby"))

        print("== d. the idle timeout and DELETE", flush=True)
        r.check("d: a push makes session 'scratch'", push_fixture(server, "scratch") == 200)
        gone = poll(lambda: "scratch" not in sessions(server), 10, interval=0.2)
        r.check("d: the idle timeout (2 s) removes the session a push made", gone)
        time.sleep(1)
        now = sessions(server)
        r.check("d: the declared push session, idle as long, stays", "yard" in now and "extra" in now, sorted(now))
        status, headers, body = request(server.base, "DELETE", "/sessions/door")
        problem = json.loads(body) if status == 409 else {}
        r.check("d: DELETE of a declared session is 409 declared_session",
                problem.get("code") == "declared_session" and "edit the file" in problem.get("detail", ""), (status, body[:200]))
        r.check("d: ... and it is still there, pulling", pictures_pass(server, "door", frames(server, "door")))

        print("== e. SIGHUP: one added, one removed, one unchanged", flush=True)
        events = Events(server)
        door_before = session_status(server.base, "door")
        config.write(declared_file(rtsp_port, DOOR + GATE))
        os.kill(server.pid, signal.SIGHUP)
        applied = events.wait("config.applied", lambda data: data.get("reason") == "signal")
        r.check("e: config.applied (SIGHUP) names exactly what changed",
                applied.get("changes") == {"created": ["gate"], "removed": ["yard"]}, applied)
        now = sessions(server)
        r.check("e: the sessions are door, gate and the clients' ones", sorted(now) == ["door", "extra", "gate", "lobby"],
                sorted(now))
        door_after = session_status(server.base, "door")
        r.check("e: the unchanged camera is the same session (createdAt) and its counters carry on",
                door_after["createdAt"] == door_before["createdAt"]
                and door_after["counters"]["framesDecoded"] >= door_before["counters"]["framesDecoded"] > 0,
                (door_before["createdAt"], door_after["createdAt"], door_before["counters"]["framesDecoded"],
                 door_after["counters"]["framesDecoded"]))
        r.check("e: and it goes on decoding", pictures_pass(server, "door", door_after["counters"]["framesDecoded"]))
        r.check("e: session.removed for yard says undeclared",
                bool(events.matching("session.removed", lambda d: d.get("session") == "yard" and d.get("reason") == "undeclared")))
        r.check("e: session.created for gate says declared",
                bool(events.matching("session.created", lambda d: d.get("session") == "gate" and d.get("origin") == "declared")))

        print("== f. a broken file, swapped in as a ConfigMap is", flush=True)
        broken = declared_file(rtsp_port, DOOR + GATE).replace("  max-sessions: 16\n", "  max-sesions: 16\n")
        broken_line = broken.splitlines().index("  max-sesions: 16") + 1
        rejected_before = metric(server, 'frametap_config_reloads_total{result="rejected"}') or 0
        config.write(broken)
        rejected = events.wait("config.rejected")
        r.check(f"f: config.rejected names line {broken_line} and the key",
                rejected.get("line") == broken_line and "max-sesions" in rejected.get("message", "")
                and "did you mean 'max-sessions'" in rejected.get("message", ""), rejected)
        last = configuration(server)["lastReading"]
        r.check("f: /system shows the refused reading with its line",
                last["result"] == "rejected" and last["trigger"] == "file" and last["error"]["line"] == broken_line, last)
        r.check("f: the metric counts it", metric(server, 'frametap_config_reloads_total{result="rejected"}')
                == rejected_before + 1 and metric(server, "frametap_config_last_reload_successful") == 0)
        r.check("f: nothing changed", sorted(sessions(server)) == ["door", "extra", "gate", "lobby"])
        with open(server.log_path, errors="replace") as log:
            logged = [line for line in log if "configuration not reloaded" in line]
        r.check("f: the log says so, with the line", bool(logged) and f"line={broken_line}" in logged[-1], logged[-1:])

        print("== g. a good file, no signal: read when it changes", flush=True)
        events_before = len(events.matching("config.applied"))
        config.write(declared_file(rtsp_port, DOOR.replace("    codec: h264\n", "    codec: h264\n    quality: 40\n"),
                                   serve_extra="  threads: 3\n"))
        applied = wait_for(lambda: events.matching("config.applied")[events_before:], WAIT, "config.applied")[-1]
        r.check("g: the watcher's reading changes door in place and removes gate",
                applied.get("reason") == "file" and applied.get("changes") == {"updated": ["door"], "removed": ["gate"]},
                applied)
        r.check("g: an option that needs a restart is named", applied.get("restartNeeded") == ["threads"], applied)
        door_now = session_status(server.base, "door")
        r.check("g: door is the same session, with quality 40",
                door_now["createdAt"] == door_before["createdAt"] and door_now["quality"] == 40, door_now.get("quality"))
        r.check("g: /system shows the applied reading and a successful metric",
                configuration(server)["lastReading"]["result"] == "applied"
                and metric(server, "frametap_config_last_reload_successful") == 1)
        events.close()
        r.check("server stops with SIGTERM (exit 0)", server.stop() == 0)

        print("== h. a torn state file", flush=True)
        state_file = os.path.join(state, "sessions.state")
        with open(state_file, "rb") as file:
            whole = file.read()
        with open(state_file, "wb") as file:
            file.write(whole[:-9])
        try:
            server.start()
            refused = False
        except Failure:
            refused = server.process.returncode == 1
        with open(server.log_path, errors="replace") as log:
            told = [line for line in log if "cannot start" in line and state_file in line]
        r.check("h: the start is refused (exit 1), naming the file and the copy it kept",
                refused and bool(told) and "A copy is kept as" in told[-1], told[-1:])
        copies = [name for name in os.listdir(state) if name.startswith("sessions.state.unreadable-")]
        r.check("h: the copy holds the torn bytes", len(copies) == 1
                and open(os.path.join(state, copies[0]), "rb").read() == whole[:-9], copies)
        os.rename(state_file, state_file + ".moved")
        server.start()
        now = sessions(server)
        r.check("h: moved away, the server starts without the kept sessions (the declared ones are there)",
                {k: v["origin"] for k, v in now.items()} == {"door": "declared"}, now.keys())
        r.check("server stops with SIGTERM (exit 0) again", server.stop() == 0)

        print("== i. a declared camera that connects on demand", flush=True)
        on_demand = ConfigMap(os.path.join(work, "config-on-demand"))
        on_demand.write(declared_file(rtsp_port, PORCH, serve_extra="  on-demand-linger: 1\n"))
        server = Server(binary, ["--config", on_demand.path, "--allow-sources", "rtsp://127.0.0.1"],
                        log_path=os.path.join(output, "server-on-demand.log"), env=env)
        server.start()
        events = Events(server)

        def porch_source():
            return (session_status(server.base, "porch") or {}).get("source") or {}

        source = porch_source()
        r.check("i: the on-demand camera is idle, not connected",
                (source.get("connect"), source.get("state")) == ("on-demand", "idle") and not events.matching("source.connected"),
                source)
        status, _, body = request(server.base, "GET", "/sessions/porch/frame/latest.jpg")
        r.check("i: a request connects it and is answered with a JPEG of the camera",
                status == 200 and body[:2] == b"\xff\xd8", (status, body[:200]))
        r.check("i: ... and the camera is live", porch_source().get("state") == "live", porch_source())
        released = events.wait("source.released", lambda data: data.get("session") == "porch")
        r.check("i: a linger after the request the connection is let go, and the camera is idle again",
                released.get("reason") == "idle" and poll(lambda: porch_source().get("state") == "idle", WAIT), porch_source())
        status, _, body = request(server.base, "GET", "/sessions/porch/frame/latest.jpg")
        connected = events.matching("source.connected", lambda data: data.get("session") == "porch")
        r.check("i: the next request connects it again and gets a JPEG",
                status == 200 and body[:2] == b"\xff\xd8" and len(connected) == 2, (status, len(connected)))
        r.check("i: no failure on the way", not events.matching("source.lost") and porch_source().get("lastError") is None,
                porch_source())
        events.close()
        r.check("server stops with SIGTERM (exit 0), on demand", server.stop() == 0)
    except Failure as failure:
        r.check("no wait ran out", False, failure)
    finally:
        if server is not None and server.process is not None and server.process.poll() is None:
            server.kill()
        end(camera)
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--output", default=os.path.join(ROOT, ".test-output", "cameras"))
    args = parser.parse_args()
    os.makedirs(args.output, exist_ok=True)
    r = Results()
    run(r, os.path.abspath(args.binary), args.output)
    print(f"{r.passed} passed, {r.failed} failed", flush=True)
    sys.exit(1 if r.failed else 0)


if __name__ == "__main__":
    main()
