"""P1: CPU of one pulled RTSP session (GStreamer's RTSP server playing a 30 s file) against ffmpeg
pulling and decoding the same URL."""
import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time

from harness.ports import free_port
from harness.stats import fmt, median, runs_text

from .common import DETAILS, F720, FPS, ROOT, STREAMS, BenchFailure, check_frames, command, described, frametap, row


RTSP_SERVER = os.path.join(ROOT, "smoke", "rtsp-server.py")


def p1_stream():
    """cam720b.264 three times over (30 s) in Matroska, for the RTSP server to play with timestamps."""
    path = os.path.join(STREAMS, "cam720b_30s.mkv")
    command("ffmpeg -r 30 -i %s -c copy once.mp4 && ffmpeg -stream_loop 2 -i once.mp4 -c copy %s"
            % (os.path.relpath(F720, ROOT), os.path.relpath(path, ROOT)))
    if not os.path.exists(path):
        once = path + ".once.mp4"
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-r", "30", "-i", F720, "-c", "copy", once],
                       check=True)
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-stream_loop", "2", "-i", once, "-c", "copy",
                        path + ".tmp.mkv"], check=True)
        os.rename(path + ".tmp.mkv", path)
        os.remove(once)
    return path


def start_rtsp_file_server(path):
    port = free_port()
    args = ["/usr/bin/python3", RTSP_SERVER, "--port", str(port), "--file", path]
    command(described(args))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise BenchFailure("P1: the RTSP server did not start")
    return proc, "rtsp://127.0.0.1:%d/cam" % port


def wait_for_event(server, session, kind, ready, timeout=120):
    """Blocks until GET /events?session= sends `kind` (`ready` is set once the stream is open)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    conn.request("GET", "/events?session=%s" % session)
    resp = conn.getresponse()
    ready.set()
    try:
        while True:
            line = resp.fp.readline()
            if not line:
                raise BenchFailure("P1: the event stream ended before %s" % kind)
            if line.decode().strip() == "event: %s" % kind:
                return
    finally:
        conn.close()


def bench_pull_cpu(runs):
    path = p1_stream()
    expected = int(subprocess.run(
        ["ffprobe", "-v", "error", "-count_packets", "-select_streams", "v:0", "-show_entries", "stream=nb_read_packets",
         "-of", "csv=p=0", path], capture_output=True, text=True, check=True).stdout.strip())
    rtsp, url = start_rtsp_file_server(path)
    gross, marginal, idle_rates, ff, ft_frames, ff_frames = [], [], [], [], [], []
    try:
        for r in range(runs):
            # FrameTap: one pull session. Its server's CPU from the PUT until the stream ended (the
            # event source.lost, read from an open event stream: no polling), less what the same
            # server costs idle over as long (measured just before).
            server = frametap("--allow-sources", "rtsp://127.0.0.1", "--source-retry-max", "30")
            try:
                session = "p1-%d" % r
                time.sleep(1)
                idle0, i0 = server.cpu_seconds(), time.time()
                time.sleep(10)
                idle_rate = (server.cpu_seconds() - idle0) / (time.time() - i0)
                ready = threading.Event()
                ended = threading.Thread(target=wait_for_event, args=(server, session, "source.lost", ready))
                ended.start()
                ready.wait(10)
                cpu0, t0 = server.cpu_seconds(), time.time()
                server.json("PUT", "/sessions/%s" % session,
                            body=json.dumps({"source": {"url": url, "transport": "tcp"}}).encode())
                ended.join(120)
                cpu, wall = server.cpu_seconds() - cpu0, time.time() - t0
                # The stream's end flushes the decoder's delayed pictures right after: count them too.
                decoded = -1
                for _ in range(20):
                    settled = server.json("GET", "/sessions/%s" % session)["counters"]["framesDecoded"]
                    if settled == decoded:
                        break
                    decoded = settled
                    time.sleep(0.1)
                server.json("DELETE", "/sessions/%s" % session)
                gross.append(cpu)
                idle_rates.append(idle_rate)
                marginal.append(cpu - idle_rate * wall)
                ft_frames.append(decoded)
            finally:
                server.stop()
            # ffmpeg pulling and decoding the same stream, one decoder thread like FrameTap's default.
            args = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-stats", "-threads", "1",
                    "-rtsp_transport", "tcp", "-i", url, "-fps_mode", "passthrough", "-f", "null", "-"]
            command(" ".join(args))
            before = os.times()
            proc = subprocess.run(args, capture_output=True, text=True)
            after = os.times()
            ff.append((after.children_user - before.children_user) + (after.children_system - before.children_system))
            frames = re.findall(r"frame=\s*(\d+)", proc.stderr)
            ff_frames.append(int(frames[-1]) if frames else 0)
    finally:
        rtsp.send_signal(signal.SIGTERM)
        rtsp.wait()
    for got in ft_frames + ff_frames:
        check_frames("P1", got, expected)
    ratio = median(marginal) / median(ff)
    seconds = expected / FPS
    row("P1", "CPU of one pulled 720p30 RTSP session (H.264 Main with B-frames, ~3 Mbit/s): cores over the 30 s "
        "stream (the session's CPU seconds / 30)", fmt(median(marginal) / seconds, 3),
        "ffmpeg -threads 1 -rtsp_transport tcp -i URL -f null -", fmt(median(ff) / seconds, 3), ratio,
        "≤ 1.0×", ratio <= 1.0, "the whole server process, idle cost included: %s"
        % fmt(median(gross) / seconds, 3))
    DETAILS.append(
        "### P1 CPU of a pulled RTSP session\n\nGStreamer's RTSP server (`smoke/rtsp-server.py --file`) plays "
        "`cam720b.264` three times over from Matroska (30 s, %d pictures, paced by the server's clock), a new "
        "pipeline per client so each starts at the first picture. FrameTap: a fresh server per run with one pull "
        "session (`PUT` with the `rtsp://` source, TCP); its process's CPU time (user + system) from the PUT until "
        "the stream ended (the `source.lost` event on an event stream opened before, so nothing polls), every "
        "picture decoded. The session's share is that less what the same server costs idle over as long (HTTP "
        "threads, timers; measured over the 10 s before the PUT). ffmpeg: the same URL pulled and decoded to "
        "`-f null` with one decoder thread (FrameTap's default, `--decoder-threads 1`); the CPU time of its whole "
        "run, start-up included. Both are CPU seconds for the same %d pictures (so the ratio is CPU per picture); "
        "the table shows them over the stream's 30 s.\n\n"
        "| runs (CPU s) | values |\n|---|---|\n| FrameTap, the session | %s |\n| FrameTap, the whole process | %s |\n"
        "| FrameTap idle (cores) | %s |\n| ffmpeg | %s |\n\nPictures: FrameTap %s; ffmpeg %s.\n"
        % (expected, expected, runs_text(marginal, 3), runs_text(gross, 3), runs_text(idle_rates, 4),
           runs_text(ff, 3), ft_frames, ff_frames))
