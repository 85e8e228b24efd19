"""B3: latest.jpg under wrk during a 1080p30 push, against nginx serving the same picture as a
static file."""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time

from harness.client import wait_for_picture
from harness.ports import free_port
from harness.proc import end
from harness.stats import fmt, median, runs_text

from .common import DETAILS, F1080, TMP_BASE, WORK, BenchFailure, command, frametap, row, row_against_peer


def parse_wrk(text):
    rps = float(re.search(r"Requests/sec:\s*([\d.]+)", text).group(1))
    p99 = None
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", text)
    if m:
        p99 = float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
    bad = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", text)
    errors = re.search(r"Socket errors:.*", text)
    return rps, p99, int(bad.group(1)) if bad else 0, errors.group(0) if errors else ""


def wrk(url, seconds=10):
    p = subprocess.run(["wrk", "-t2", "-c64", "-d%ds" % seconds, "--latency", url], capture_output=True, text=True)
    if p.returncode != 0:
        raise BenchFailure("wrk failed: %s" % p.stderr)
    return parse_wrk(p.stdout), p.stdout


def start_nginx(root):
    port = free_port()
    prefix = tempfile.mkdtemp(prefix="nginx-", dir=os.path.join(WORK, "out"))
    conf = os.path.join(prefix, "nginx.conf")
    with open(conf, "w") as f:
        f.write("""worker_processes auto;
daemon off;
error_log %s/error.log warn;
pid %s/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  types { image/jpeg jpg; }
  client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s; uwsgi_temp_path %s; scgi_temp_path %s;
  server { listen 127.0.0.1:%d; root %s; }
}
""" % ((prefix,) * 7 + (port, root)))
    proc = subprocess.Popen(["nginx", "-c", conf, "-p", prefix], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise BenchFailure("nginx did not start")


def bench_latest(runs, seconds=10):
    server = frametap()
    ft_rps, ft_p99, ng_rps, ng_p99 = [], [], [], []
    ft_frames = []
    command("ffmpeg -re -framerate 30 -stream_loop -1 -i .bench/streams/cam1080.264 -c copy -f h264 -method POST "
            "-chunked_post 1 http://127.0.0.1:PORT/sessions/b3/nalus")
    command("wrk -t2 -c64 -d%ds --latency http://127.0.0.1:PORT/sessions/b3/frame/latest.jpg" % seconds)
    command("wrk -t2 -c64 -d%ds --latency http://127.0.0.1:NGINX_PORT/latest.jpg  (nginx -c bench-generated "
            "conf: worker_processes auto, sendfile on, access_log off)" % seconds)
    # nginx's workers run as nobody: the page lives in a world-readable directory
    www = tempfile.mkdtemp(prefix="frametap-bench-www-", dir=TMP_BASE)
    os.chmod(www, 0o755)
    nginx = None
    try:
        for i in range(runs):
            session = "b3-%d" % i
            push = subprocess.Popen(["ffmpeg", "-nostdin", "-loglevel", "error", "-re", "-framerate", "30",
                                     "-stream_loop", "-1", "-i", F1080, "-c", "copy", "-f", "h264", "-method", "POST",
                                     "-chunked_post", "1", server.url("/sessions/%s/nalus" % session)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                body = wait_for_picture(server.base, session, 10)
                with open(os.path.join(www, "latest.jpg"), "wb") as f:
                    f.write(body)
                os.chmod(os.path.join(www, "latest.jpg"), 0o644)
                before = server.json("GET", "/sessions/%s" % session)["counters"]["framesDecoded"]
                (rps, p99, bad, errs), out = wrk(server.url("/sessions/%s/frame/latest.jpg" % session), seconds)
                after = server.json("GET", "/sessions/%s" % session)["counters"]["framesDecoded"]
                if bad:
                    raise BenchFailure("B3: %d non-2xx answers from FrameTap\n%s" % (bad, out))
                ft_rps.append(rps)
                ft_p99.append(p99)
                ft_frames.append((after - before) / seconds)
            finally:
                end(push)
            server.json("DELETE", "/sessions/%s" % session)
            if nginx is None:
                nginx, nginx_port = start_nginx(www)
            (rps, p99, bad, errs), out = wrk("http://127.0.0.1:%d/latest.jpg" % nginx_port, seconds)
            if bad:
                raise BenchFailure("B3: nginx answered %d non-2xx" % bad)
            ng_rps.append(rps)
            ng_p99.append(p99)
    finally:
        if nginx:
            end(nginx)
        server.stop()
        shutil.rmtree(www, ignore_errors=True)
    row_against_peer("B3", "latest.jpg under wrk -t2 -c64 during a 1080p30 push (req/s)", ft_rps, "nginx static",
                     ng_rps, 0.5, digits=0)
    row("B3", "same, p99 latency (ms)", fmt(median(ft_p99), 2), "nginx static", fmt(median(ng_p99), 2),
        median(ft_p99) / median(ng_p99), "≤ 10 ms", median(ft_p99) <= 10)
    DETAILS.append("### B3 latest.jpg under load\n\nThe push kept decoding at %s pictures/s during the wrk runs "
                   "(every new picture is one shared encode). nginx runs without a push beside it.\n\n"
                   "| runs | req/s | p99 ms |\n|---|---|---|\n| FrameTap | %s | %s |\n| nginx | %s | %s |\n"
                   % (runs_text(ft_frames), runs_text(ft_rps, 0), runs_text(ft_p99, 2), runs_text(ng_rps, 0),
                      runs_text(ng_p99, 2)))
