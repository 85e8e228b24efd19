"""D1-D4: sessions decoded on demand and their compressed history, pushed by bench/loadgen.c (a
Python sender could not keep hundreds of cameras on schedule): D1 density with 1 in 20 watched,
D2 the first picture of an idle session, D3 memory of idle sessions, D4 a picture 30 s back."""
import http.client
import json
import os
import statistics
import subprocess
import time

from harness.annexb import Stream
from harness.density import search
from harness.metrics import histogram, histogram_delta, histogram_quantile, metric_value
from harness.stats import percentile, runs_text

from .common import DETAILS, F720, F1080, LOADGEN, ROOT, WORK, BenchFailure, command, described, frametap, log, row
from .density import FFMPEG_DENSITY, ffmpeg_density_trial


def timed_get(conn, path, what):
    """Milliseconds from the request to the last byte of its answer on a kept-alive connection;
    BenchFailure unless the answer is 200."""
    start = time.perf_counter()
    conn.request("GET", path)
    resp = conn.getresponse()
    resp.read()
    elapsed = time.perf_counter() - start
    if resp.status != 200:
        raise BenchFailure("%s -> %d" % (what, resp.status))
    return elapsed * 1000


def build_loadgen():
    source = os.path.join(ROOT, "bench", "loadgen.c")
    if not os.path.exists(LOADGEN) or os.path.getmtime(LOADGEN) < os.path.getmtime(source):
        subprocess.run(["cc", "-O2", "-Wall", "-o", LOADGEN, source, "-lpthread", "-lm"], check=True)
    command("cc -O2 -Wall -o %s bench/loadgen.c -lpthread -lm" % os.path.relpath(LOADGEN, ROOT))


def units_file(stream):
    """The stream's access units as loadgen reads them: a 4-byte big-endian length, then the bytes."""
    path = os.path.join(WORK, "out", os.path.basename(stream.path) + ".units")
    if not os.path.exists(path):
        with open(path, "wb") as f:
            for au in stream.aus:
                f.write(len(au).to_bytes(4, "big") + au)
    return path


class LoadGen:
    """bench/loadgen.c pushing `sessions` cameras in real time (and long-polling every k-th)."""

    def __init__(self, server, stream, sessions, prefix, loops=1, watch_every=0, watch_after=2.0, wait_ms=2000,
                 query="flush=true"):
        self.args = [LOADGEN, "--port", str(server.port), "--units", units_file(stream), "--sessions", str(sessions),
                     "--prefix", prefix, "--loops", str(loops), "--watch-every", str(watch_every),
                     "--watch-after", str(watch_after), "--wait-ms", str(wait_ms), "--query", query]
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def described(self):
        return described(self.args)

    def wait_for(self, word):
        """Reads stdout up to a line starting with `word` (returns it), or None at the end."""
        for line in self.proc.stdout:
            if line.startswith(word):
                return line.strip()
        return None

    def result(self):
        line = self.wait_for("RESULT")
        _, err = self.proc.communicate(timeout=300)
        if line is None or self.proc.returncode != 0:
            raise BenchFailure("loadgen failed (%s): %s" % (self.proc.returncode, err[-500:]))
        return json.loads(line.split(" ", 1)[1])


def density_on_demand_trial(server, stream, n, empty_kb, loops=2, watch_every=20):
    """n real-time 720p30 pushes to on-demand sessions, every 20th watched by one long poll. Kept up:
    every push answered 200 within 0.3 s of its last unit (every access unit ingested in time), the
    ingest lag at the middle at most 3 access units, the sender on schedule, every reader answered
    with pictures whose age (receipt of the picture's access unit to its answer) stays under 0.5 s at
    p99, and the server's memory within 2 MB per session plus the history it holds plus 40 MB per
    watched session."""
    prefix = "d1-%d" % n
    gen = LoadGen(server, stream, n, prefix, loops=loops, watch_every=watch_every, watch_after=3.0)
    mid = gen.wait_for("MID")
    lag = None
    rss_mid = server.rss_kb()
    if mid:
        sent = len(stream.aus) * loops // 2
        sessions = [s for s in server.json("GET", "/sessions")["sessions"] if s["id"].startswith(prefix + "-")]
        lag = max(sent - s["counters"]["accessUnits"] for s in sessions) if sessions else None
    result = gen.result()
    rss_end = server.rss_kb()
    history_bytes = metric_value(server.metrics(), "frametap_history_bytes")
    decoding_peak = sum(1 for s in server.json("GET", "/sessions")["sessions"]
                        if s["id"].startswith(prefix + "-") and s["decoding"])
    for k in range(n):
        server.json("DELETE", "/sessions/%s-%d" % (prefix, k))
    watched = result["readers"]
    memory_bound_kb = empty_kb + n * 2048 + history_bytes / 1024 + watched * 40 * 1024
    fresh = result["ageP99Seconds"] <= 0.5 and result["readerFailures"] == 0 and result["readerAnswers"] >= watched
    kept = (result["answeredOK"] == n and result["maxAnswerDelaySeconds"] <= 0.3 and lag is not None and lag <= 3
            and fresh and rss_end <= memory_bound_kb and result["senderLateSeconds"] <= 0.25)
    info = ("n=%d answers %d/%d, max answer delay %.3f s, ingest lag at mid %s units, %d watched (%d answers, "
            "picture age p50/p99/max %.0f/%.0f/%.0f ms, first wait ≤ %.0f ms, %d failures), %d decoding at the end, "
            "RSS mid/end %.0f/%.0f MB (bound %.0f MB, history %.0f MB), sender late ≤ %.3f s, loadgen CPU %.1f s "
            "of %.1f s") % (
        n, result["answeredOK"], n, result["maxAnswerDelaySeconds"], lag, watched, result["readerAnswers"],
        result["ageP50Seconds"] * 1000, result["ageP99Seconds"] * 1000, result["ageMaxSeconds"] * 1000,
        result["maxFirstWaitSeconds"] * 1000, result["readerFailures"], decoding_peak, rss_mid / 1024,
        rss_end / 1024, memory_bound_kb / 1024, history_bytes / 2 ** 20, result["senderLateSeconds"],
        result["cpuSeconds"], result["wallSeconds"])
    if result["senderLateSeconds"] > 0.25:
        info += " (sender could not keep its schedule: result capped by the load generator)"
    return kept, info


def bench_on_demand_density(runs, cap=2048):
    build_loadgen()
    stream = Stream(F720)
    lines_ff, lines = FFMPEG_DENSITY.get("lines", []), []
    ff_n = FFMPEG_DENSITY.get("n")
    if ff_n is None:
        command("N × ffmpeg -re -framerate 30 -i .bench/streams/cam720b.264 -f null -   (all at once)")
        ff_n, _ = search(lambda n: ffmpeg_density_trial(n, F720), 4, 96, lines_ff, log)
    server = frametap("--default-decode", "on-demand")
    try:
        time.sleep(0.5)
        empty_kb = server.rss_kb()
        command("%s --port PORT --units .bench/out/cam720b.264.units --sessions N --prefix d1-N --loops 2 "
                "--watch-every 20 --watch-after 3 --wait-ms 2000 --query flush=true" % os.path.relpath(LOADGEN, ROOT))
        found, capped = search(lambda n: density_on_demand_trial(server, stream, n, empty_kb),
                               max(16, 8 * ff_n), cap, lines, log)
    finally:
        server.stop()
    ratio = found / ff_n if ff_n else float("nan")
    row("D1", "density: 720p30 real-time pushes kept up, decode=on-demand, 1 in 20 watched by a long poll "
        "(sessions)", ("≥ %d" % found) if capped else str(found), "ffmpeg -re processes", str(ff_n), ratio, "≥ 10",
        ratio >= 10)
    DETAILS.append("### D1 on-demand density\n\nThe same stream and search as B5 (doubling, then bisection to "
                   "within 1/16), each trial 20 s (the stream twice), pushed by `bench/loadgen` (C, one thread for "
                   "every push, one thread per reader; its own CPU is in each line). Sessions are on demand "
                   "(`--default-decode on-demand`, history 10 s); every 20th has one reader long-polling "
                   "`latest.jpg?after=SEQ&wait=2000` from 3 s in, which wakes it (a catch-up) and keeps it "
                   "decoding. Kept up: every push answered 200 within 0.3 s of its last access unit, ingest lag "
                   "at the middle ≤ 3 access units, the sender on schedule, every reader served with a picture "
                   "age (its access unit's receipt to the answer) ≤ 0.5 s at p99 and no failure, and RSS within "
                   "2 MB per session + the history held + 40 MB per watched session.\n\n```\nffmpeg:\n%s\n"
                   "FrameTap decode=on-demand:\n%s\n```\n" % ("\n".join(lines_ff), "\n".join(lines)))


def bench_first_picture(runs, sessions=8, samples=100):
    """D2: idle on-demand 1080p30 sessions (2 s GOP) pushed in real time; each request for
    latest.jpg finds its session idle (`--on-demand-linger 0`) and is timed from request to answer."""
    build_loadgen()
    stream = Stream(F1080)
    server = frametap("--default-decode", "on-demand", "--on-demand-linger", "0")
    times = []
    skipped = 0
    try:
        gen = LoadGen(server, stream, sessions, "d2", loops=12, query="")
        command(gen.described().replace(str(server.port), "PORT"))
        time.sleep(3)
        before = server.metrics()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        j = 0
        while len(times) < samples and gen.proc.poll() is None:
            sid = "d2-%d" % (j % sessions)
            j += 1
            status = server.json("GET", "/sessions/%s" % sid)
            if status["decoder"] != "idle":
                skipped += 1
                time.sleep(0.05)
                continue
            # A random point in the GOP: the catch-up decodes from the keyframe to there.
            time.sleep(0.1 + (j * 0.37) % 0.5)
            times.append(timed_get(conn, "/sessions/%s/frame/latest.jpg" % sid, "D2: latest.jpg"))
        conn.close()
        after = server.metrics()
        gen.proc.kill()
        gen.proc.communicate()
    finally:
        server.stop()
    if len(times) < samples // 2:
        raise BenchFailure("D2: only %d samples" % len(times))
    catch_up = histogram_delta(histogram(after, "frametap_catchup_seconds"), histogram(before, "frametap_catchup_seconds"))
    units = (metric_value(after, "frametap_catchup_access_units_total", {"kind": "wake"})
             - metric_value(before, "frametap_catchup_access_units_total", {"kind": "wake"}))
    wakes = (metric_value(after, "frametap_catchup_decodes_total", {"kind": "wake", "result": "ok"})
             - metric_value(before, "frametap_catchup_decodes_total", {"kind": "wake", "result": "ok"}))
    p50, p99 = percentile(times, 50), percentile(times, 99)
    row("D2", "first picture of an idle 1080p30 on-demand session (2 s GOP), request to answer (ms p50 / p99)",
        "%.1f / %.1f" % (p50, p99), "—", "", float("nan"), "p99 ≤ 150 ms", p99 <= 150)
    DETAILS.append("### D2 first picture on demand\n\n%d sessions of the 1080p stream (IP only, IDR every 2 s) pushed "
                   "in real time by `bench/loadgen`; `--on-demand-linger 0`, so each session is idle again a "
                   "moment after it answered. Every request (one keep-alive connection, sessions in turn, %d "
                   "timed, %d skipped because a session was not idle yet) found its session idle and was timed "
                   "from the request to the last byte of the JPEG. Request to answer (ms): p50 %.1f, p90 %.1f, "
                   "p99 %.1f, max %.1f. Server side over these requests: %d catch-ups decoding %.1f access units "
                   "each on average (the keyframe to the newest unit, or the GOP before too when the last GOP is "
                   "too short to have output a picture), catch-up time p50 ≤ %s s, p99 ≤ %s s (bucket bounds); "
                   "`--catchup-decoder-threads 2`.\n"
                   % (sessions, len(times), skipped, p50, percentile(times, 90), p99, max(times), wakes,
                      units / wakes if wakes else float("nan"), histogram_quantile(catch_up, 0.5),
                      histogram_quantile(catch_up, 0.99)))


def bench_idle_memory(runs, sessions=16):
    """D3: RSS per idle on-demand 1080p session holding 2 s of history."""
    build_loadgen()
    stream = Stream(F1080)
    server = frametap("--default-decode", "on-demand", "--history-seconds", "2")
    try:
        time.sleep(0.5)
        empty = server.rss_kb()
        gen = LoadGen(server, stream, sessions, "d3", loops=1)
        command(gen.described().replace(str(server.port), "PORT"))
        result = gen.result()
        if result["answeredOK"] != sessions:
            raise BenchFailure("D3: %d of %d pushes answered" % (result["answeredOK"], sessions))
        time.sleep(1)
        held = server.rss_kb()
        histories = [server.json("GET", "/sessions/d3-%d/history" % k) for k in range(sessions)]
        statuses = [server.json("GET", "/sessions/d3-%d" % k) for k in range(sessions)]
        decoder_memory = metric_value(server.metrics(), "frametap_decoder_memory_used_bytes")
    finally:
        server.stop()
    per_session_mb = (held - empty) / sessions / 1024
    history_mb = sum(h["bytes"] for h in histories) / sessions / 2 ** 20
    decoding = sum(1 for s in statuses if s["decoding"])
    gop_mb = len(stream.data) / stream.keyframes / 2 ** 20
    met = per_session_mb <= 2 * 1.048576 + history_mb and decoding == 0 and decoder_memory == 0
    row("D3", "RSS per idle on-demand 1080p session holding 2 s of history (MB; its history's bytes in brackets)",
        "%.2f (%.2f)" % (per_session_mb, history_mb), "—", "", float("nan"), "≤ 2 MB + the GOP's bytes", met)
    DETAILS.append("### D3 memory of idle on-demand sessions\n\nVmRSS of a server with `--history-seconds 2`: "
                   "empty %d kB; after %d sessions of the 1080p stream (10 s each, pushed in real time by "
                   "`bench/loadgen`, flushed) %d kB: %.2f MB per session. Each holds %.2f MB of history on "
                   "average (%.1f GOPs; a GOP of this stream is %.2f MB), no decoder (%d decoding, decoder memory "
                   "in use %d bytes). RSS counts what glibc keeps of freed upload buffers too.\n"
                   % (empty, sessions, held, per_session_mb, history_mb,
                      sum(h["gops"] for h in histories) / sessions, gop_mb, decoding, decoder_memory))


def bench_past_picture(runs, requests=20):
    """D4: at.jpg of a picture 30 s back, while the stream goes on."""
    build_loadgen()
    stream = Stream(F1080)
    server = frametap("--default-decode", "on-demand", "--history-seconds", "35")
    times, units = [], []
    try:
        gen = LoadGen(server, stream, 1, "d4", loops=5, query="")
        command(gen.described().replace(str(server.port), "PORT"))
        time.sleep(33)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        for j in range(requests):
            before = metric_value(server.metrics(), "frametap_catchup_access_units_total", {"kind": "history"})
            # 30 s back, at different places in the GOP.
            t = int((time.time() - 30 + (j % 10) * 0.2) * 1000)
            times.append(timed_get(conn, "/sessions/d4-0/frame/at.jpg?t=%d" % t, "D4: at.jpg"))
            units.append(metric_value(server.metrics(), "frametap_catchup_access_units_total", {"kind": "history"}) - before)
            time.sleep(0.2)
        command("GET /sessions/d4-0/frame/at.jpg?t=<now - 30 s, in ms>  (%d times, one keep-alive connection)" % requests)
        conn.close()
        gen.proc.kill()
        gen.proc.communicate()
    finally:
        server.stop()
    p50, p99 = percentile(times, 50), percentile(times, 99)
    row("D4", "at.jpg of a 1080p picture 30 s back (ms p50 / p99)", "%.1f / %.1f" % (p50, p99), "—", "",
        float("nan"), "—", True)
    DETAILS.append("### D4 a picture from the past\n\nOne 1080p30 session pushed in real time (`--history-seconds "
                   "35`), %d requests of `at.jpg?t=` 30 s back (sequential, 0.2 s apart), each decoded from its "
                   "GOP's keyframe by a catch-up decoder while the push goes on. Request to answer (ms): p50 %.1f, "
                   "p99 %.1f, max %.1f; access units decoded per request: %s (mean %.1f).\n"
                   % (requests, p50, p99, max(times), runs_text(units, 0), statistics.mean(units)))


def bench_unwatched_cpu(runs, sessions=64, peers=8, seconds=50):
    """B8: CPU of an unwatched on-demand 720p30 session (receiving, splitting, history, counting)
    against ffmpeg receiving the same push over HTTP and parsing it without decoding."""
    build_loadgen()
    stream = Stream(F720)
    loops = int((seconds + 12) * 30 / len(stream.aus)) + 1
    ours, theirs = [], []
    for run in range(min(runs, 3)):
        # ffmpeg: each listens on a port of its own for one push; its CPU over the window.
        ports = [free_port() for _ in range(peers)]
        listeners = [subprocess.Popen(
            ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-re", "-f", "h264", "-listen", "1",
             "-i", "http://127.0.0.1:%d/sessions/b8/nalus" % port, "-c", "copy", "-f", "null", "-"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for port in ports]
        if run == 0:
            command("ffmpeg -re -f h264 -listen 1 -i http://127.0.0.1:PORT/sessions/b8/nalus -c copy -f null -   "
                    "(%d at once, each pushed by its own loadgen)" % peers)
        time.sleep(1.0)
        senders = [LoadGen(_Port(port), stream, 1, "b8", loops=loops, query="") for port in ports]
        theirs.append(_window_cpu([p.pid for p in listeners], seconds) / peers)
        for sender in senders:
            sender.proc.kill()
            sender.proc.communicate()
        for listener in listeners:
            listener.kill()
            listener.communicate()

        server = frametap("--default-decode", "on-demand", name="b8")
        try:
            gen = LoadGen(server, stream, sessions, "b8", loops=loops, query="")
            if run == 0:
                command(gen.described().replace(str(server.port), "PORT"))
            ours.append(_window_cpu([server.pid], seconds) / sessions)
            decoding = sum(1 for s in server.json("GET", "/sessions")["sessions"] if s["decoding"])
            if decoding:
                raise BenchFailure("B8: %d unwatched on-demand sessions were decoding" % decoding)
            gen.proc.kill()
            gen.proc.communicate()
        finally:
            server.stop()
    ratio = statistics.median(ours) / statistics.median(theirs)
    row("B8", "CPU of one unwatched on-demand 720p30 session (cores; %d sessions, %d s)" % (sessions, seconds),
        "%.4f" % statistics.median(ours), "ffmpeg -re -listen 1 -i URL -c copy -f null - (per stream)",
        "%.4f" % statistics.median(theirs), ratio, "≤ 1.0", ratio <= 1.0)
    DETAILS.append("### B8 unwatched on-demand session\n\n%d sessions of the 720p30 stream pushed in real time by "
                   "`bench/loadgen` into `--default-decode on-demand` sessions nobody watches (none decodes: "
                   "checked); the server's CPU (user + system, `/proc/PID/stat`) over %d s from 5 s in, divided "
                   "by %d. The peer is the cheapest program that receives and parses the same push: %d ffmpeg "
                   "processes, each listening for one chunked HTTP POST (its own loadgen) and copying the stream "
                   "to a null muxer; their CPU over the same window, divided by %d. Cores per stream, runs: "
                   "FrameTap %s; ffmpeg %s.\n" % (sessions, seconds, sessions, peers, peers,
                                                   runs_text(ours, 4), runs_text(theirs, 4)))


class _Port:
    """What LoadGen needs of a server: its port."""

    def __init__(self, port):
        self.port = port


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _window_cpu(pids, seconds, warmup=5.0):
    """Cores the processes used together over `seconds`, from `warmup` seconds on."""
    from harness.proc import cpu_seconds
    time.sleep(warmup)
    before = sum(cpu_seconds(pid) for pid in pids)
    start = time.monotonic()
    time.sleep(seconds)
    return (sum(cpu_seconds(pid) for pid in pids) - before) / (time.monotonic() - start)
