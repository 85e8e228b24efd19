"""Attackers of the HTTP edge, for smoke/hostile.py and scripts/soak.py.

`SlowClients` holds connections from 127.0.0.2 and up (binding a client socket to any 127.x
address works on Linux without set-up) and keeps them as slow as it can: each sends a request
head or a PUT's head and then trickles one byte per connection every `interval` seconds,
forever; a connection the server closes is opened again (at once, or after `reconnect_delay`),
as a reconnecting attacker does. One thread drives them all with a selector, so a few thousand
cost little.

`probe()` is the client that behaves, from another address: one GET and its answer, timed.
`FLOODS` are requests that pile up what a server parses (query parameters, headers, long
targets), each with the status it must get; `flood_answered()` says whether it got it.
"""
import selectors
import socket
import threading
import time

from .rawhttp import request
from .waiting import Failure

# What each kind of attacker sends first; then one byte after another of `TRICKLE`.
HEADS = {
    # A head that never ends.
    "head": b"GET /healthz HTTP/1.1\r\nHost: frametap\r\nX-Slow: ",
    # A complete head, then a body of 60000 bytes that never comes.
    "body": b"PUT /sessions/slow-body HTTP/1.1\r\nHost: frametap\r\nContent-Type: application/json\r\n"
            b"Content-Length: 60000\r\n\r\n",
}
TRICKLE = b"x"


class SlowClients:
    """`per_address` connections of `kind` ("head", "body", or "mixed": half each) from each of
    `addresses` (e.g. ["127.0.0.2", ...]) to 127.0.0.1:`port`, trickling a byte every `interval`;
    each one the server closes is opened again after `reconnect_delay` seconds."""

    def __init__(self, port, addresses, per_address, kind="mixed", interval=1.0, reconnect_delay=0.0):
        self.port, self.addresses, self.per_address = port, addresses, per_address
        self.kind, self.interval, self.reconnect_delay = kind, interval, reconnect_delay
        self.reopen = []   # (when, address, index)
        self.selector = selectors.DefaultSelector()
        self.running = threading.Event()
        self.lock = threading.Lock()
        self.opened = self.closed_by_server = self.refused = 0
        self.thread = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        self.running.set()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def stop(self):
        self.running.clear()
        if self.thread:
            self.thread.join(timeout=10)
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()
        self.selector.close()

    def open_count(self):
        return len(self.selector.get_map())

    def _kind_for(self, index):
        if self.kind != "mixed":
            return self.kind
        return "head" if index % 2 == 0 else "body"

    def _open(self, address, index):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, 0))
        sock.setblocking(False)
        try:
            sock.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        except OSError:
            sock.close()
            return
        state = {"address": address, "index": index, "head": HEADS[self._kind_for(index)], "sent_head": False}
        self.selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, state)
        with self.lock:
            self.opened += 1

    def _close(self, sock):
        self.selector.unregister(sock)
        sock.close()

    def _run(self):
        for address in self.addresses:
            for index in range(self.per_address):
                self._open(address, index)
        next_trickle = time.monotonic() + self.interval
        while self.running.is_set():
            for key, events in self.selector.select(timeout=0.05):
                sock, state = key.fileobj, key.data
                if events & selectors.EVENT_READ:
                    try:
                        data = sock.recv(65536)
                    except (ConnectionResetError, OSError):
                        data = b""
                    if not data:         # closed (refused at once, cut at a deadline, evicted): again
                        with self.lock:
                            if not state["sent_head"]:
                                self.refused += 1
                            else:
                                self.closed_by_server += 1
                        self._close(sock)
                        if self.reconnect_delay > 0:
                            self.reopen.append((time.monotonic() + self.reconnect_delay, state["address"], state["index"]))
                        else:
                            self._open(state["address"], state["index"])
                        continue
                if events & selectors.EVENT_WRITE and not state["sent_head"]:
                    try:
                        sock.send(state["head"])
                        state["sent_head"] = True
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        continue
                    self.selector.modify(sock, selectors.EVENT_READ, state)
            if self.reopen and self.reopen[0][0] <= time.monotonic():
                due = [entry for entry in self.reopen if entry[0] <= time.monotonic()]
                self.reopen = self.reopen[len(due):]
                for _, address, index in due:
                    self._open(address, index)
            if time.monotonic() >= next_trickle:
                next_trickle += self.interval
                for key in list(self.selector.get_map().values()):
                    if key.data["sent_head"]:
                        try:
                            key.fileobj.send(TRICKLE)
                        except OSError:
                            pass


def probe(port, source, timeout, path="/healthz"):
    """One GET from the address `source`: (status or None, seconds taken)."""
    started = time.monotonic()
    try:
        status = request(f"http://127.0.0.1:{port}", "GET", path, timeout, source=source, connect_timeout=timeout).status
    except (OSError, Failure):
        status = None
    return status, time.monotonic() - started


FLOODS = [
    # (what, raw, the status line it must get)
    ("1900 query parameters",
     b"GET /healthz?" + b"a=1&" * 1900 + b" HTTP/1.1\r\nHost: frametap\r\nConnection: close\r\n\r\n", 200),
    ("3000 headers", b"GET /healthz HTTP/1.1\r\nHost: frametap\r\n" + b"X-A: 1\r\n" * 3000 + b"\r\n", 431),
    ("a 9000-byte target", b"GET /healthz?" + b"a" * 9000 + b" HTTP/1.1\r\nHost: frametap\r\n\r\n", 414),
    ("a 100 KB target", b"GET /healthz?" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: frametap\r\n\r\n", 414),
]


def flood_answered(data, closed, status):
    """Whether a flood got its status line. libmicrohttpd's own 414/431 may reach a client that is
    still sending as a reset: closed with nothing read counts too."""
    return data.startswith(b"HTTP/1.1 %d" % status) or (status in (414, 431) and not data and closed)
