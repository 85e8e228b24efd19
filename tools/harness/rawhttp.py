"""HTTP/1.1 over raw sockets, for clients that cut bodies, reuse connections, send heads no
library would and check the framing of every answer."""
import re
import select
import socket
import struct
import time

from .client import address
from .waiting import Failure


class Answer:
    def __init__(self, status, reason, headers, body):
        self.status, self.reason, self.headers, self.body = status, reason, headers, body

    def header(self, name):
        values = [v for n, v in self.headers if n == name.lower()]
        return values[-1] if values else None

    def describe(self):
        return f"{self.status} {self.header('content-type')} {self.body[:300]!r}"


class Reader:
    """Reads an answer off a socket before a deadline, checking the framing as it goes. The
    buffer is a bytearray read from an offset: multipart answers can be hundreds of MB."""

    def __init__(self, sock, deadline):
        self.sock, self.deadline, self.buffer, self.pos = sock, deadline, bytearray(), 0
        self.allowed = max(0.0, deadline - time.monotonic())

    def available(self):
        return len(self.buffer) - self.pos

    def fill(self):
        remaining = self.deadline - time.monotonic()
        if remaining > 0:
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                remaining = 0
        if remaining <= 0:
            raise Failure(f"no complete answer within {self.allowed:.0f} s")
        if self.pos > (1 << 20) and self.pos > len(self.buffer) // 2:
            del self.buffer[:self.pos]
            self.pos = 0
        self.buffer += chunk
        return bool(chunk)

    def until(self, marker, what):
        while (found := self.buffer.find(marker, self.pos)) < 0:
            if not self.fill():
                raise Failure(f"connection closed inside the {what} (have {bytes(self.buffer[self.pos:self.pos + 200])!r})")
        data = bytes(self.buffer[self.pos:found])
        self.pos = found + len(marker)
        return data

    def exactly(self, n, what):
        while self.available() < n:
            if not self.fill():
                raise Failure(f"connection closed inside the {what}: {self.available()} of {n} bytes")
        data = self.buffer[self.pos:self.pos + n]
        self.pos += n
        return data

    def rest(self):
        while self.fill():
            pass
        return bytes(self.buffer[self.pos:])


def read_answer(sock, deadline, method="POST"):
    """One HTTP/1.1 answer, read before `deadline` (time.monotonic()); raises Failure when it is
    not well-formed or not complete by then."""
    reader = Reader(sock, deadline)
    head = reader.until(b"\r\n\r\n", "status line and headers").decode("latin-1")
    lines = head.split("\r\n")
    match = re.fullmatch(r"HTTP/1\.[01] (\d{3}) ?(.*)", lines[0])
    if not match:
        raise Failure(f"not an HTTP status line: {lines[0]!r}")
    headers = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
            raise Failure(f"malformed header line {line!r}")
        headers.append((name.lower(), value.strip()))
    answer = Answer(int(match.group(1)), match.group(2), headers, b"")
    encoding, length = answer.header("transfer-encoding"), answer.header("content-length")
    if encoding and length:
        raise Failure("both Transfer-Encoding and Content-Length")
    if method == "HEAD" or answer.status in (204, 304):
        return answer
    if encoding:
        if encoding.lower() != "chunked":
            raise Failure(f"Transfer-Encoding {encoding!r}")
        body = bytearray()
        while True:
            size_line = reader.until(b"\r\n", "chunk size").decode("latin-1")
            if not re.fullmatch(r"[0-9a-fA-F]+(;.*)?", size_line):
                raise Failure(f"bad chunk size line {size_line!r}")
            size = int(size_line.split(";")[0], 16)
            if size == 0:
                while reader.until(b"\r\n", "trailer"):
                    pass
                break
            body += reader.exactly(size, "chunk")
            if reader.exactly(2, "chunk end") != b"\r\n":
                raise Failure("a chunk does not end with CRLF")
        answer.body = bytes(body)
    elif length is not None:
        if not length.isdigit():
            raise Failure(f"Content-Length {length!r}")
        answer.body = bytes(reader.exactly(int(length), "body"))
    else:  # close-delimited
        answer.body = reader.rest()
    return answer


CONNECT_TIMEOUT = 10


def connect(base, timeout=10, source=None):
    """A TCP connection to the server of `base` (Nagle off), from the address `source` if given,
    with `timeout` for its operations (None: a blocking socket); connecting itself takes at most
    CONNECT_TIMEOUT seconds."""
    sock = socket.create_connection(address(base), timeout=CONNECT_TIMEOUT if timeout is None else timeout,
                                    source_address=(source, 0) if source else None)
    sock.settimeout(timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def send_all(sock, data, deadline):
    """Sends until done, or until the server answers early (413 mid-body, ...): then False."""
    view = memoryview(data)
    sock.setblocking(False)
    try:
        while view:
            readable, writable, _ = select.select([sock], [sock], [], max(0.0, deadline - time.monotonic()))
            if readable:
                return False
            if not writable:
                raise Failure("the server stopped reading the body and sent no answer")
            try:
                view = view[sock.send(view[:65536]):]
            except (BlockingIOError, InterruptedError):
                pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return False   # the answer, if one came, is read next
    finally:
        sock.setblocking(True)


def request(base, method, path, timeout, source=None, connect_timeout=CONNECT_TIMEOUT):
    """One bodiless request on a connection of its own (Connection: close) from the address
    `source` if given, its answer read strictly within `timeout` seconds."""
    sock = connect(base, timeout=connect_timeout, source=source)
    try:
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: frametap\r\nConnection: close\r\n\r\n".encode())
        return read_answer(sock, time.monotonic() + timeout, method)
    finally:
        sock.close()


def raw_exchange(base, raw, wait=5.0):
    """Sends raw bytes; returns (everything read until the close or `wait`, closed)."""
    sock = connect(base)
    data, closed = b"", False
    try:
        try:
            sock.sendall(raw)
        except OSError:
            pass
        sock.settimeout(wait)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            except OSError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            data += chunk
    finally:
        sock.close()
    return data, closed


class ChunkedPush:
    """One POST of /sessions/ID/nalus with a chunked body over a raw socket: the caller writes each
    piece as one HTTP chunk (chunk()) when it chooses, then ends the body and reads the answer.

    The socket blocks, as a camera's does, so that a timed send is one send(2) and nothing else;
    its deadline is the kernel's (SO_SNDTIMEO): a send that makes no progress for STALL_SECONDS
    raises BlockingIOError."""

    STALL_SECONDS = 60

    def __init__(self, port, session, query="", content_type="application/octet-stream"):
        self.sock = connect(f"http://127.0.0.1:{port}", timeout=None)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", self.STALL_SECONDS, 0))
        head = ("POST /sessions/%s/nalus%s HTTP/1.1\r\nHost: bench\r\nContent-Type: %s\r\n"
                "Transfer-Encoding: chunked\r\n\r\n" % (session, "?" + query if query else "", content_type)).encode()
        self.sock.sendall(head)
        self.outbox = bytearray()

    @staticmethod
    def chunk(data):
        return b"%x\r\n" % len(data) + data + b"\r\n"

    def finish_and_read(self, timeout=60):
        """Sends what the outbox holds and the last chunk; (status, body) of the answer."""
        self.sock.setblocking(True)
        self.sock.settimeout(timeout)
        self.sock.sendall(bytes(self.outbox) + b"0\r\n\r\n")
        self.outbox.clear()
        return self.read_answer(timeout)

    def read_answer(self, timeout=60):
        """(status, body) of the answer, read within `timeout` seconds; the socket is closed."""
        try:
            answer = read_answer(self.sock, time.monotonic() + timeout)
        finally:
            self.sock.close()
        return answer.status, answer.body
