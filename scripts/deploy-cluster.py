#!/usr/bin/env python3
"""make deploy-test's cluster: three `frametap serve` instances behind a real HAProxy running
deploy/haproxy/haproxy.cfg, pushed sessions, and twelve RTSP cameras that `frametap sync` keeps in
place. Run by scripts/deploy-test.sh:

    scripts/deploy-cluster.py path/to/frametap

1. Pushed sessions: 30 sessions pushed through HAProxy live on exactly one instance each (asked
   directly), spread over all three; each latest.jpg through HAProxy is the owning instance's own
   picture (all 30 differ) and X-FrameTap-Upstream names that instance; MJPEG, a long poll and a
   live chunked push pass through unbuffered. A session id spelt with a percent-encoded letter is
   refused, ?session= of /events spelt so reaches the session's instance, and names that cannot be
   session ids never enter the stick table.
2. Cameras: a GStreamer RTSP server (smoke/rtsp-server.py --cameras 12) and a configuration file
   declaring them; `frametap sync --interval 2` puts each on one instance through HAProxy.
3. One instance is killed (SIGKILL). Every camera is live again through HAProxy within 20 s (a
   picture newer than the kill) and none lives on two instances; the other instances' pushed
   sessions answer from where they were with the same picture; the dead one's answer 404 until
   their client pushes again from an IDR, then serve from one surviving instance.
4. The instance is started again: for several sync passes no camera moves or restarts (the same
   instance, the same createdAt, pictures still coming), no pushed session moves, and the
   returned instance holds nothing; HAProxy's stick table is what keeps them (consistent hashing
   alone would send its former sessions back to it).
5. A camera taken out of the file is deleted by the next pass; the rest stay.

HAProxy and the RTSP server run as plain processes in a scratch folder. Prints PASS/FAIL lines
and "N passed, N failed"; exit status 1 on any failure.
"""
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from harness.checks import Results  # noqa: E402
from harness.client import is_jpeg, request  # noqa: E402
from harness.ports import free_port  # noqa: E402
from harness.proc import end  # noqa: E402
from harness.server import Server  # noqa: E402
from harness.waiting import Failure, poll, wait_for  # noqa: E402

FIXTURES = os.path.join(ROOT, "Tests", "Fixtures")
PUSH_FILES = ["baseline_176x144.264", "high_320x240.264", "main_bframes_176x144.264", "slices4_320x240.264",
              "gray_176x144.264"]
PUSHED = int(os.environ.get("SESSIONS", "30"))
CAMERAS = 12
SYNC_INTERVAL = 2
# The promise: every camera of a lost instance shows pictures again within this.
RECOVERY_LIMIT = 20
# Debian's python3 has the GStreamer bindings; a venv's may not.
SYSTEM_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def sid(i):
    return f"deploy-{i}"


def cam(i):
    return f"cam-{i:02d}"


class Gateway:
    """HAProxy running deploy/haproxy/haproxy.cfg as shipped, but for its bind address, its server
    lines and the stats socket this script reads the servers' states and the stick table from."""

    def __init__(self, folder, instances):
        self.folder = folder
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.socket_path = os.path.join(folder, "haproxy.sock")
        self.config = os.path.join(folder, "haproxy.cfg")
        self.log_path = os.path.join(folder, "haproxy.log")
        with open(os.path.join(ROOT, "deploy", "haproxy", "haproxy.cfg")) as source:
            text = source.read()
        servers = "".join(f"    server frametap-{n + 1} 127.0.0.1:{s.port}\n" for n, s in enumerate(instances))
        text, n1 = re.subn(r"(# BEGIN SERVERS\n).*?(    # END SERVERS)", lambda m: m.group(1) + servers + m.group(2),
                           text, flags=re.S)
        text, n2 = re.subn(r"^(\s*)bind :8080$", rf"\1bind 127.0.0.1:{self.port}", text, flags=re.M)
        text, n3 = re.subn(r"^(\s*)# stats socket \S+", rf"\1stats socket {self.socket_path}", text, flags=re.M)
        if (n1, n2, n3) != (1, 1, 1):
            raise Failure(f"deploy/haproxy/haproxy.cfg lacks its SERVERS markers, bind :8080 or stats socket line ({n1, n2, n3})")
        with open(self.config, "w") as target:
            target.write(text)
        self.process = None

    def check(self):
        run = subprocess.run(["haproxy", "-c", "-f", self.config], capture_output=True, text=True, timeout=30)
        return run.returncode == 0, (run.stdout + run.stderr).strip()

    def start(self):
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(["haproxy", "-db", "-f", self.config], stdout=log, stderr=subprocess.STDOUT)

    def stop(self):
        if self.process:
            end(self.process)

    def command(self, line):
        with socket.socket(socket.AF_UNIX) as client:
            client.settimeout(5)
            client.connect(self.socket_path)
            client.sendall(line.encode() + b"\n")
            answer = b""
            while chunk := client.recv(65536):
                answer += chunk
        return answer.decode()

    def server_states(self):
        """{server name: UP/DOWN/...} of the frametap backend."""
        try:
            lines = self.command("show stat").splitlines()
        except OSError:
            return {}
        header = lines[0].lstrip("# ").split(",")
        states = {}
        for line in lines[1:]:
            row = dict(zip(header, line.split(",")))
            if row.get("pxname") == "frametap" and row.get("svname", "").startswith("frametap-"):
                states[row["svname"]] = row["status"]
        return states

    def stuck(self):
        """{session id: server name} as the stick table holds them."""
        table = {}
        for line in self.command("show table frametap").splitlines():
            match = re.search(r"key=(\S+) .*server_key=(\S+)", line)
            if match:
                table[match.group(1)] = match.group(2)
        return table


class Cluster:
    def __init__(self, binary, folder):
        self.binary, self.folder = binary, folder
        self.instances = [
            Server(binary, ["--threads", "4", "--max-connections-per-ip", "0", "--allow-sources", "rtsp://127.0.0.1"],
                   log_path=os.path.join(folder, f"instance{n}.log"))
            for n in range(3)
        ]
        self.gateway = Gateway(folder, self.instances)
        self.rtsp = self.sync = None
        self.rtsp_port = free_port()
        self.cameras_file = os.path.join(folder, "cameras.yaml")

    def close(self):
        for process in (self.sync, self.rtsp):
            if process:
                end(process)
        self.gateway.stop()
        for instance in self.instances:
            if instance.process and instance.process.poll() is None:
                instance.stop(timeout=10)

    def gw(self, method, path, body=None, headers=None, timeout=30):
        return request(self.gateway.base, method, path, body=body, headers=headers, timeout=timeout)

    def owners(self, alive=None):
        """{session id: [instance numbers]} over the instances given (default: those running)."""
        where = {}
        for n in alive if alive is not None else self.alive():
            status, _, body = self.instances[n].request("GET", "/sessions", timeout=10)
            if status != 200:
                raise Failure(f"GET /sessions on instance {n} answered {status}")
            for entry in json.loads(body)["sessions"]:
                where.setdefault(entry["id"], []).append(n)
        return where

    def listing(self, n):
        """{session id: its status} on instance n."""
        return {e["id"]: e for e in json.loads(self.instances[n].request("GET", "/sessions", timeout=10)[2])["sessions"]}

    def alive(self):
        return [n for n, s in enumerate(self.instances) if s.process and s.process.poll() is None]

    def upstream_instance(self, headers):
        upstream = headers.get("X-FrameTap-Upstream", "")
        for n, s in enumerate(self.instances):
            if upstream == f"frametap-{n + 1}":
                return n
        return None

    def write_cameras(self, numbers):
        with open(self.cameras_file + ".new", "w") as file:
            file.write("# The cameras frametap sync keeps in place (scripts/deploy-cluster.py).\nsessions:\n")
            for i in numbers:
                file.write(f"  {cam(i)}:\n    source:\n      url: rtsp://127.0.0.1:{self.rtsp_port}/cam{i}\n"
                           "      transport: tcp\n    codec: h264\n")
        os.replace(self.cameras_file + ".new", self.cameras_file)


# --- pushed sessions ---------------------------------------------------------------------------

def push(cluster, i):
    """A pushing client's whole start: its options (its own JPEG quality), then the stream from its
    start (SPS, PPS, IDR...); every other session uploads chunked. The pictures decoded."""
    cluster.gw("PUT", f"/sessions/{sid(i)}", body=json.dumps({"quality": 40 + i}),
               headers={"Content-Type": "application/json"})
    with open(os.path.join(FIXTURES, PUSH_FILES[i % len(PUSH_FILES)]), "rb") as fixture:
        data = fixture.read()
    connection = http.client.HTTPConnection("127.0.0.1", cluster.gateway.port, timeout=30)
    try:
        if i % 2:
            connection.request("POST", f"/sessions/{sid(i)}/nalus?flush=true", body=iter([data[:777], data[777:]]),
                               encode_chunked=True, headers={"Transfer-Encoding": "chunked"})
        else:
            connection.request("POST", f"/sessions/{sid(i)}/nalus?flush=true", body=data)
        response = connection.getresponse()
        answer = response.read()
    finally:
        connection.close()
    return json.loads(answer).get("frames", 0) if response.status == 200 else 0


def picture(base, session):
    """(status, md5 of latest.jpg, headers)."""
    status, headers, body = request(base, "GET", f"/sessions/{session}/frame/latest.jpg", timeout=30)
    return status, hashlib.md5(body).hexdigest(), headers


def pushed_sessions(cluster, results):
    bad = sum(1 for i in range(PUSHED) if push(cluster, i) <= 0)
    results.check(f"{PUSHED} sessions pushed through HAProxy decoded pictures", bad == 0, f"{bad} decoded none")
    where = cluster.owners()
    pushed = {s: w for s, w in where.items() if s.startswith("deploy-")}
    results.check("each pushed session lives on exactly one instance",
                  len(pushed) == PUSHED and all(len(w) == 1 for w in pushed.values()), pushed)
    spread = sorted(w[0] for w in pushed.values())
    results.check(f"pushed sessions spread over all 3 instances ({[spread.count(n) for n in range(3)]})",
                  set(spread) == {0, 1, 2})
    owner = {s: w[0] for s, w in pushed.items()}
    pictures, wrong_bytes, wrong_upstream = {}, [], []
    for i in range(PUSHED):
        status, md5, headers = picture(cluster.gateway.base, sid(i))
        direct = picture(cluster.instances[owner[sid(i)]].base, sid(i))
        if (status, md5) != direct[:2] or status != 200:
            wrong_bytes.append(i)
        if cluster.upstream_instance(headers) != owner[sid(i)]:
            wrong_upstream.append(i)
        pictures[i] = md5
    results.check("latest.jpg through HAProxy equals the owning instance's picture", not wrong_bytes, wrong_bytes)
    results.check("HAProxy answered every session from its owner (X-FrameTap-Upstream)", not wrong_upstream, wrong_upstream)
    results.check(f"all {PUSHED} pictures differ (each session its own)", len(set(pictures.values())) == PUSHED)

    # Streams through HAProxy: MJPEG parts arrive at once (no buffering), a long poll waits.
    connection = http.client.HTTPConnection("127.0.0.1", cluster.gateway.port, timeout=3)
    data = b""
    try:
        connection.request("GET", f"/sessions/{sid(0)}/frames.mjpeg")
        response = connection.getresponse()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not (b"\xff\xd8" in data and b"\xff\xd9" in data):
            data += response.read1(65536)
    except (OSError, http.client.HTTPException):
        pass
    finally:
        connection.close()
    results.check("MJPEG through HAProxy delivers a JPEG part within 3 s", b"\xff\xd8" in data and b"\xff\xd9" in data)
    seq = json.loads(cluster.gw("GET", f"/sessions/{sid(0)}")[2])["latestFrame"]["seq"]
    started = time.monotonic()
    status = cluster.gw("GET", f"/sessions/{sid(0)}/frame/latest.jpg?after={seq}&wait=1500")[0]
    waited = time.monotonic() - started
    results.check("a long poll through HAProxy waits and ends with 304", status == 304 and waited >= 1.4,
                  f"{status} after {waited:.2f} s")

    # A live push (ffmpeg -re, one endless chunked POST) reaches its instance while it streams.
    if shutil.which("ffmpeg"):
        live = os.path.join(cluster.folder, "live.264")
        subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=10", "-t", "6",
                        "-c:v", "libx264", "-preset", "ultrafast", "-g", "10", "-f", "h264", live], check=True, timeout=60)
        pusher = subprocess.Popen(["ffmpeg", "-v", "error", "-re", "-i", live, "-c", "copy", "-f", "h264",
                                   "-method", "POST", "-chunked_post", "1",
                                   f"{cluster.gateway.base}/sessions/deploy-live/nalus"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def streaming():
                status, _, body = cluster.gw("GET", "/sessions/deploy-live")
                state = json.loads(body) if status == 200 else {}
                return state.get("uploading") and state["counters"]["framesDecoded"] > 5
            results.check("a live push streams through HAProxy (decoding while the upload runs)", poll(streaming, 5))
        finally:
            pusher.wait(timeout=30)
        cluster.gw("DELETE", "/sessions/deploy-live")
    else:
        results.skip("a live push through HAProxy", "no ffmpeg")
    return owner, pictures


def one_name_one_place(cluster, results, owner):
    """A session has one spelling: a path that percent-encodes a letter of its id is refused (HAProxy
    hashes the raw path, so it would reach another instance), ?session= of /events is decoded as
    FrameTap decodes it and routed to the session's instance, and names that cannot be session ids
    never enter the stick table."""
    session = sid(0)
    spelt = "%64" + session[1:]  # "d" percent-encoded
    status, _, body = cluster.gw("GET", f"/sessions/{spelt}/frame/latest.jpg")
    problem = json.loads(body) if status == 400 else {}
    results.check("a session id with a percent-encoded letter is refused (400 encoded_unreserved) through HAProxy",
                  problem.get("reason") == "encoded_unreserved", f"{status} {body[:200]!r}")
    connection = http.client.HTTPConnection("127.0.0.1", cluster.gateway.port, timeout=10)
    try:
        connection.request("GET", f"/events?session={spelt}")
        response = connection.getresponse()
        routed = response.status, cluster.upstream_instance(response.headers)
    finally:
        connection.close()
    results.check("/events?session= spelt with an escape reaches the session's instance", routed == (200, owner[session]),
                  f"{routed} (the session is on instance {owner[session]})")
    before = set(cluster.gateway.stuck())
    for bogus in ["/sessions/not%20an%20id", "/sessions/" + "x" * 200, "/events?session=a%2Fb"]:
        cluster.gw("GET", bogus)
    added = set(cluster.gateway.stuck()) - before
    results.check("names that cannot be session ids leave HAProxy's stick table alone", not added, added)


# --- cameras -----------------------------------------------------------------------------------

def camera_state(cluster, i):
    """The camera's status through HAProxy, or None."""
    status, _, body = cluster.gw("GET", f"/sessions/{cam(i)}", timeout=10)
    return json.loads(body) if status == 200 else None


def newer_picture(cluster, i, since):
    """latest.jpg through HAProxy, when the camera shows a picture newer than `since` (its
    createdAt and seq then): a new session's, or a later one of the same session."""
    state = camera_state(cluster, i)
    frame = state and state.get("latestFrame")
    if not frame:
        return None
    if since and state["createdAt"] == since[0] and frame["seq"] <= since[1]:
        return None
    status, _, body = cluster.gw("GET", f"/sessions/{cam(i)}/frame/latest.jpg", timeout=10)
    return body if status == 200 and is_jpeg(body) else None


def cameras_placed(cluster, results):
    cluster.rtsp = subprocess.Popen(
        [SYSTEM_PYTHON, os.path.join(ROOT, "smoke", "rtsp-server.py"), "--port", str(cluster.rtsp_port),
         "--cameras", str(CAMERAS), "--size", "160x120", "--fps", "10", "--bitrate", "150"],
        stdout=open(os.path.join(cluster.folder, "rtsp.log"), "wb"), stderr=subprocess.STDOUT)
    ready = poll(lambda: b"ready" in open(os.path.join(cluster.folder, "rtsp.log"), "rb").read()
                 or cluster.rtsp.poll() is not None, 15)
    if not ready or cluster.rtsp.poll() is not None:
        raise Failure("the RTSP server did not start: " + open(os.path.join(cluster.folder, "rtsp.log")).read()[-500:])
    cluster.write_cameras(range(1, CAMERAS + 1))
    instances = ",".join(s.base for s in cluster.instances)
    cluster.sync = subprocess.Popen(
        [cluster.binary, "sync", "--config", cluster.cameras_file, "--url", cluster.gateway.base,
         "--instances", instances, "--interval", str(SYNC_INTERVAL), "--timeout", "3"],
        stdout=open(os.path.join(cluster.folder, "sync.log"), "wb"), stderr=subprocess.STDOUT)
    started = time.monotonic()
    live = poll(lambda: all(newer_picture(cluster, i, None) for i in range(1, CAMERAS + 1)), 30, interval=0.5)
    results.check(f"frametap sync put {CAMERAS} RTSP cameras in place: each shows pictures through HAProxy "
                  f"({time.monotonic() - started:.1f} s)", live)
    where = cluster.owners()
    cameras = {c: w for c, w in where.items() if c.startswith("cam-")}
    results.check("each camera lives on exactly one instance",
                  len(cameras) == CAMERAS and all(len(w) == 1 for w in cameras.values()), cameras)
    spread = [w[0] for w in cameras.values()]
    results.check(f"cameras spread over the instances ({[spread.count(n) for n in range(3)]})", len(set(spread)) >= 2)
    owners = {cluster.listing(w[0])[c].get("owner") for c, w in cameras.items()}
    results.check("every camera carries frametap sync's owner", owners == {"frametap-sync"}, owners)
    jpegs = {i: hashlib.md5(newer_picture(cluster, i, None) or b"").hexdigest() for i in range(1, CAMERAS + 1)}
    results.check(f"all {CAMERAS} cameras' pictures differ (each its own stream)", len(set(jpegs.values())) == CAMERAS)
    return {c: w[0] for c, w in cameras.items()}


def snapshot(cluster, cameras):
    """{camera: (instance, createdAt, seq, source reconnects)} asked directly."""
    state = {}
    listings = {n: cluster.listing(n) for n in cluster.alive()}
    for c in cameras:
        for n, listing in listings.items():
            if c in listing:
                entry = listing[c]
                state[c] = (n, entry["createdAt"], (entry.get("latestFrame") or {}).get("seq", 0),
                            (entry.get("source") or {}).get("reconnects"))
    return state


def lose_one(cluster, results, pushed_owner, pushed_pictures, camera_owner):
    counts = [list(camera_owner.values()).count(n) for n in range(3)]
    victim = max(range(3), key=lambda n: (counts[n], list(pushed_owner.values()).count(n)))
    survivors = [n for n in range(3) if n != victim]
    before = snapshot(cluster, camera_owner)
    cluster.instances[victim].kill()
    killed = time.monotonic()
    lost = [c for c, n in camera_owner.items() if n == victim]

    # Every camera shows a picture newer than the kill, through HAProxy.
    pending = set(range(1, CAMERAS + 1))

    def all_live():
        for i in list(pending):
            c = cam(i)
            if newer_picture(cluster, i, before[c][1:3]):
                pending.discard(i)
        return not pending
    live = poll(all_live, RECOVERY_LIMIT + 10, interval=0.25)
    took = time.monotonic() - killed
    results.check(f"instance {victim} killed (its {len(lost)} cameras): every camera is live again through HAProxy "
                  f"in {took:.1f} s (limit {RECOVERY_LIMIT} s)", live and took <= RECOVERY_LIMIT,
                  f"not live: {sorted(cam(i) for i in pending)}")
    where = cluster.owners(survivors)
    twice = {c: w for c, w in where.items() if c.startswith("cam-") and len(w) != 1}
    results.check("no camera lives on two instances (asked directly)",
                  not twice and sum(1 for c in where if c.startswith("cam-")) == CAMERAS, twice)
    unmoved = [c for c in camera_owner if c not in lost and (where.get(c) != [camera_owner[c]])]
    results.check("the other instances' cameras stayed where they were", not unmoved, unmoved)

    # Pushed sessions: the others answer as before; the lost ones 404 until pushed again.
    stayed, moved = [], []
    for i in range(PUSHED):
        status, md5, headers = picture(cluster.gateway.base, sid(i))
        if pushed_owner[sid(i)] == victim:
            moved.append((i, status))
        elif (status, md5, cluster.upstream_instance(headers)) != (200, pushed_pictures[i], pushed_owner[sid(i)]):
            stayed.append(i)
    results.check("the other instances' pushed sessions answer from the same instance, same picture", not stayed, stayed)
    results.check(f"the lost instance's {len(moved)} pushed sessions answer 404 (session gone) until pushed again",
                  all(status == 404 for _, status in moved), moved)
    bad = [i for i, _ in moved if push(cluster, i) <= 0]
    results.check("the lost sessions decode again after a push from the IDR", not bad, bad)
    where = cluster.owners(survivors)
    pushed = {s: w for s, w in where.items() if s.startswith("deploy-")}
    results.check("every pushed session lives on exactly one surviving instance",
                  len(pushed) == PUSHED and all(len(w) == 1 for w in pushed.values()), pushed)
    wrong = []
    for i, _ in moved:
        status, md5, headers = picture(cluster.gateway.base, sid(i))
        if (status, md5, cluster.upstream_instance(headers)) != (200, pushed_pictures[i], pushed[sid(i)][0]):
            wrong.append(i)
    results.check("the moved sessions serve their own picture again through HAProxy", not wrong, wrong)
    # Until now HAProxy may not have noticed: a refused connection alone moves a request on. A
    # pod that is gone for good is marked DOWN by the health checks, and so comes back from DOWN.
    name = f"frametap-{victim + 1}"
    down = poll(lambda: cluster.gateway.server_states().get(name) == "DOWN", 10)
    results.check(f"HAProxy's health checks mark instance {victim} DOWN", down, cluster.gateway.server_states())
    return victim, {s: w[0] for s, w in pushed.items()}


def come_back(cluster, results, victim, pushed_owner):
    cameras = [cam(i) for i in range(1, CAMERAS + 1)]
    before = snapshot(cluster, cameras)
    cluster.instances[victim].start()
    name = f"frametap-{victim + 1}"
    up = poll(lambda: cluster.gateway.server_states().get(name) == "UP", 15)
    results.check(f"instance {victim} is back and HAProxy sees it UP", up, cluster.gateway.server_states())
    # Several passes of frametap sync, each PUTting every camera through HAProxy.
    time.sleep(3 * SYNC_INTERVAL + 1)
    after = snapshot(cluster, cameras)
    flapped = [c for c in cameras if c not in after or after[c][:2] != before[c][:2] or after[c][3] != before[c][3]]
    results.check(f"after {3} sync passes no camera moved or restarted (same instance, createdAt, no reconnect)",
                  not flapped, {c: (before.get(c), after.get(c)) for c in flapped})
    stalled = [c for c in cameras if c in after and after[c][2] <= before[c][2]]
    results.check("every camera kept decoding", not stalled, stalled)
    listing = cluster.listing(victim)
    results.check(f"the returned instance holds nothing ({len(listing)} sessions)", not listing, sorted(listing))
    table = cluster.gateway.stuck()
    off = [c for c in cameras if table.get(c) != f"frametap-{before[c][0] + 1}"]
    results.check("HAProxy's stick table keeps each camera on the instance that holds it", not off,
                  {c: table.get(c) for c in off})
    wrong = [i for i in range(PUSHED)
             if cluster.upstream_instance(picture(cluster.gateway.base, sid(i))[2]) != pushed_owner[sid(i)]]
    results.check("no pushed session went back to the returned instance", not wrong, wrong)


def undeclared(cluster, results):
    cluster.write_cameras(range(1, CAMERAS))
    gone = poll(lambda: cam(CAMERAS) not in cluster.owners(), 3 * SYNC_INTERVAL + 3, interval=0.25)
    where = cluster.owners()
    results.check(f"{cam(CAMERAS)}, taken out of the file, is deleted by the next pass; the other cameras stay",
                  gone and all(cam(i) in where for i in range(1, CAMERAS)), sorted(c for c in where if c.startswith("cam-")))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = os.path.abspath(sys.argv[1])
    results = Results()
    folder = tempfile.mkdtemp(prefix="frametap-deploy-")
    cluster = Cluster(binary, folder)
    keep = False
    try:
        ok, output = cluster.gateway.check()
        if not results.check("haproxy -c accepts deploy/haproxy/haproxy.cfg", ok, output):
            raise Failure("HAProxy refuses the configuration")
        for instance in cluster.instances:
            instance.start()
        cluster.gateway.start()
        up = poll(lambda: list(cluster.gateway.server_states().values()) == ["UP"] * 3, 15)
        results.check("3 instances and HAProxy are up (HAProxy's health checks see all 3)", up,
                      cluster.gateway.server_states())
        if not up:
            raise Failure("the cluster did not come up")
        pushed_owner, pushed_pictures = pushed_sessions(cluster, results)
        one_name_one_place(cluster, results, pushed_owner)
        camera_owner = cameras_placed(cluster, results)
        victim, pushed_owner = lose_one(cluster, results, pushed_owner, pushed_pictures, camera_owner)
        come_back(cluster, results, victim, pushed_owner)
        undeclared(cluster, results)
        errors = open(cluster.gateway.log_path, errors="replace").read()
        results.check("HAProxy logged the lost instance going DOWN and coming back UP",
                      re.search(r"frametap-\d is DOWN", errors) and re.search(r"frametap-\d is UP", errors))
    except (Failure, OSError, http.client.HTTPException, subprocess.SubprocessError, ValueError, KeyError) as error:
        results.check("the cluster test ran to its end", False, f"{type(error).__name__}: {error}")
    finally:
        cluster.close()
        if results.failed:
            keep = True
            print(f"logs kept in {folder}: instance*.log, haproxy.log, sync.log, rtsp.log")
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"{results.passed} passed, {results.failed} failed")
    sys.exit(1 if results.failed else 0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    main()
