"""`frametap serve` for a script: started on loopback and a free port, healthy before use, stopped
with SIGTERM (SIGKILL after a deadline), its output kept in a log."""
import functools
import http.client
import json
import os
import signal
import subprocess
import time

from . import client, proc
from .ports import free_port
from .waiting import Failure

# How long a start may take to answer /healthz (the variable smoke/server.sh reads too).
START_TIMEOUT = float(os.environ.get("SERVER_START_TIMEOUT", "10"))
# A process that does not die of SIGKILL within this is stuck in the kernel: the script says so.
KILL_TIMEOUT = 10


class Server:
    """`binary serve --host 127.0.0.1 --port PORT *args`, its stdout and stderr in `log_path`
    (written anew at the first start, appended to at the next). It can be started again on the
    same port after a stop, as a restart under open clients is."""

    def __init__(self, binary, args=(), *, log_path, port=None, env=None, start_timeout=START_TIMEOUT,
                 stop_timeout=30.0):
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.command = [binary, "serve", "--host", "127.0.0.1", "--port", str(self.port), *args]
        self.log_path, self.env = log_path, env
        self.start_timeout, self.stop_timeout = start_timeout, stop_timeout
        self.process = None
        self.starts = 0

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def pid(self):
        return self.process.pid

    def url(self, path):
        return self.base + path

    def start(self):
        """Starts the process and returns once GET /healthz answers 200; raises Failure (the
        process killed, the end of its log in the message) when it did not within start_timeout
        seconds or exited first."""
        with open(self.log_path, "ab" if self.starts else "wb") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        self.starts += 1
        deadline = time.monotonic() + self.start_timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            if self._healthy():
                return self
            time.sleep(0.05)
        exited = self.process.poll()
        if exited is None:
            self.kill()
            why = f"GET /healthz did not answer 200 within {self.start_timeout:g} s (killed)"
        else:
            why = f"it exited with {exited} before GET /healthz answered 200"
        raise Failure(f"{os.path.basename(self.command[0])} serve on {self.base}: {why}; "
                      f"the end of its log ({self.log_path}):\n{self.log_tail()}")

    def _healthy(self):
        try:
            return self.request("GET", "/healthz", timeout=2)[0] == 200
        except (OSError, http.client.HTTPException):
            return False

    def stop(self, timeout=None):
        """SIGTERM, then the exit status; SIGKILL when it has not exited within `timeout` seconds
        (stop_timeout by default). None when it never started."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=self.stop_timeout if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode

    def kill(self):
        self.process.kill()
        self.process.wait(timeout=KILL_TIMEOUT)

    def log_tail(self, lines=40):
        try:
            with open(self.log_path, errors="replace") as log:
                return "".join(log.readlines()[-lines:])
        except OSError as error:
            return f"(unreadable: {error})"

    # --- requests ----------------------------------------------------------------------------

    def request(self, method, path, body=None, headers=None, timeout=60, token=None):
        """(status, headers, body), as client.request."""
        return client.request(self.base, method, path, body=body, headers=headers, token=token, timeout=timeout)

    def get(self, path):
        """(status, body) of a GET."""
        status, _, body = self.request("GET", path, timeout=10)
        return status, body

    def json(self, method, path, body=None):
        """The JSON answer of a request that must succeed (Failure on a status of 300 or more)."""
        status, _, data = self.request(method, path, body=body)
        if status >= 300:
            raise Failure("%s %s -> %d %s" % (method, path, status, data[:300]))
        return json.loads(data) if data else None

    def metrics(self):
        return self.get("/metrics")[1].decode()

    # --- the process -------------------------------------------------------------------------

    def rss_kb(self):
        return proc.rss_kb(self.pid)

    def minor_faults(self):
        return proc.minor_faults(self.pid)

    def cpu_seconds(self):
        return proc.cpu_seconds(self.pid)


@functools.lru_cache(maxsize=None)
def _per_address_unlimited(binary):
    """`--max-connections-per-ip 0` when the binary has it (older builds, compared in the same run, do not)."""
    help_text = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True, timeout=60).stdout
    return ("--max-connections-per-ip", "0") if "--max-connections-per-ip" in help_text else ()


def benchmark_server(binary, *extra, log_dir, name="frametap"):
    """A started server configured as the benchmarks run it (bench/bench.py, scripts/gpu-check.py):
    warnings only, room for 2048 sessions and no per-address cap, since every camera and reader of
    a benchmark comes from 127.0.0.1, as from a proxy. Its log: LOG_DIR/NAME-PORT.log."""
    port = free_port()
    server = Server(binary, ["--log-level", "warning", "--max-sessions", "2048", *_per_address_unlimited(binary), *extra],
                    port=port, log_path=os.path.join(log_dir, "%s-%d.log" % (name, port)), start_timeout=20,
                    stop_timeout=15)
    return server.start()
