"""Hostile heads and connections for smoke/hostile.py, each a raw-socket client:

  * heads libmicrohttpd would read another way (obs-fold, whitespace before a colon, a NUL or
    another control character in a value, `Transfer-Encoding: chunked ` with a trailing space or
    tab, a Content-Length of 2^63 or more, `Expect: foo`, a target over 8 KiB, a chunk size that
    is not hexadecimal, a chunk not ended by CRLF), each followed by
    a smuggled request: one problem answer with its code, the connection closed, nothing else run;
  * floods of query parameters, of headers and of long targets: each answered (or closed by
    libmicrohttpd's own 414/431), and the server's RSS does not grow with their number;
  * pushes whose client closes right after the head or a piece of body: the upload ends at once
    (counted in uploadsAborted) and the session takes the next push; a trickled body is 408;
  * slow bodies from five more loopback addresses, more of them than the server has slots: a
    sixth address is served every time;
  * a multipart answer left unread while hostile.sh stops the server.
"""
import json
import os
import re
import socket
import time

from harness import rawhttp
from harness.attackers import FLOODS, SlowClients, flood_answered, probe
from harness.client import address
from harness.metrics import metric_value
from harness.proc import rss_kb
from harness.rawhttp import connect, raw_exchange
from harness.waiting import Failure

from hostile_pushes import ANSWER_TIMEOUT, HEALTH_TIMEOUT, delete_session, do_push

SMUGGLED = b"GET /sessions/hostile-smuggled HTTP/1.1\r\nHost: frametap\r\n\r\n"
EDGE_CASES = [
    # (what, expected status, expected code, raw request); a smuggled GET follows where it could hide.
    ("obs-fold hides Transfer-Encoding", 400, "invalid_header",
     b"POST /sessions/hostile-edge/nalus HTTP/1.1\r\nHost: frametap\r\nTransfer-Encoding:\r\n chunked\r\n"
     b"Content-Length: 4\r\n\r\n0\r\n\r\n" + SMUGGLED),
    ("whitespace before the colon", 400, "invalid_header",
     b"POST /sessions/hostile-edge/nalus HTTP/1.1\r\nHost: frametap\r\nTransfer-Encoding : chunked\r\n"
     b"Content-Length: 4\r\n\r\n0\r\n\r\n" + SMUGGLED),
    ("a NUL in a value", 400, "invalid_header",
     b"GET /sessions HTTP/1.1\r\nHost: frametap\r\nAuthorization: Bearer token\x00junk\r\n\r\n"),
    ("a control character in a value", 400, "invalid_header",
     b"GET /healthz HTTP/1.1\r\nHost: frametap\r\nX-Note: a\x01b\r\n\r\n"),
    ("Transfer-Encoding with a trailing space", 501, "unsupported_transfer_encoding",
     b"POST /sessions/hostile-edge/nalus HTTP/1.1\r\nHost: frametap\r\nTransfer-Encoding: chunked \r\n\r\n"
     b"4\r\nabcd\r\n0\r\n\r\n" + SMUGGLED),
    ("Transfer-Encoding with a trailing tab", 501, "unsupported_transfer_encoding",
     b"POST /sessions/hostile-edge/nalus HTTP/1.1\r\nHost: frametap\r\nTransfer-Encoding: chunked\t\r\n\r\n"
     b"4\r\nabcd\r\n0\r\n\r\n" + SMUGGLED),
    ("a push announcing 2^63 bytes", 413, "body_too_large",
     b"POST /sessions/hostile-edge/nalus HTTP/1.1\r\nHost: frametap\r\nContent-Length: 9223372036854775808\r\n\r\n"
     + b"\x00" * 1000),
    ("a push announcing 2^64-1 bytes", 413, "body_too_large",
     b"POST /sessions/hostile-edge/nalus HTTP/1.1\r\nHost: frametap\r\nContent-Length: 18446744073709551615\r\n\r\n"
     + b"\x00" * 1000),
    ("a PUT announcing 2^63 bytes", 413, "body_too_large",
     b"PUT /sessions/hostile-edge HTTP/1.1\r\nHost: frametap\r\nContent-Length: 9223372036854775809\r\n\r\n{}"),
    ("an unknown expectation", 417, "expectation_failed",
     b"POST /sessions/hostile-edge/nalus HTTP/1.1\r\nHost: frametap\r\nExpect: foo\r\nContent-Length: 4\r\n\r\nabcd"),
    ("a push whose chunk size is not hexadecimal", 400, "invalid_chunked_encoding",
     b"POST /sessions/hostile-edge/nalus HTTP/1.1\r\nHost: frametap\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"4\r\n\x00\x00\x00\x01\r\nzz\r\nabcd\r\n0\r\n\r\n" + SMUGGLED),
    ("a PUT whose chunk is not ended by CRLF", 400, "invalid_chunked_encoding",
     b"PUT /sessions/hostile-edge HTTP/1.1\r\nHost: frametap\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"2\r\n{}xx\r\n0\r\n\r\n" + SMUGGLED),
    ("a 9000-byte target", 414, "request_target_too_long",
     b"GET /healthz?" + b"a" * 9000 + b" HTTP/1.1\r\nHost: frametap\r\n\r\n"),
]


def check_edge_answers(base):
    """Each case: exactly one answer, the problem with its code, the connection closed."""
    for what, status, code, raw in EDGE_CASES:
        data, closed = raw_exchange(base, raw)
        lines = re.findall(rb"HTTP/1\.[01] \d{3}[^\r\n]*", data)
        if len(lines) != 1 or not lines[0].startswith(b"HTTP/1.1 %d " % status):
            raise Failure(f"{what}: answered {[l.decode('latin-1') for l in lines]}, want one {status}")
        head, _, body = data.partition(b"\r\n\r\n")
        if b"application/problem+json" not in head:
            raise Failure(f"{what}: not a problem answer: {head[:200]!r}")
        try:
            got = json.loads(body).get("code")
        except ValueError:
            raise Failure(f"{what}: problem body is not JSON: {body[:200]!r}")
        if got != code:
            raise Failure(f"{what}: code {got!r}, want {code!r}")
        if not closed:
            raise Failure(f"{what}: the connection stayed open after the answer")
    # Expect: 100-continue still works: the interim answer, then the push's own.
    data, _ = raw_exchange(
        base, b"POST /sessions/hostile-edge/nalus HTTP/1.1\r\nHost: frametap\r\nExpect: 100-continue\r\n"
        b"Content-Length: 4\r\nConnection: close\r\n\r\n\x00\x00\x00\x01")
    lines = [l.decode("latin-1") for l in re.findall(rb"HTTP/1\.[01] \d{3}[^\r\n]*", data)]
    if len(lines) != 2 or not lines[0].startswith("HTTP/1.1 100") or not lines[1].startswith("HTTP/1.1 200"):
        raise Failure(f"Expect: 100-continue: answered {lines}")
    delete_session(base, "hostile-edge")
    print(f"  edge: {len(EDGE_CASES)} hostile heads refused once with their code and closed; 100-continue served", flush=True)


def check_floods(base, pid, rounds=int(os.environ.get("HOSTILE_FLOODS", "600"))):
    """N2: every flood answered (or closed by libmicrohttpd's own refusal), the RSS flat."""
    def flood_once(what, raw, status):
        data, closed = raw_exchange(base, raw, wait=2.0)
        if not flood_answered(data, closed, status):
            raise Failure(f"flood of {what}: answered {data[:80]!r}, want {status}")

    for _ in range(50):               # warm-up: pools and caches reach their size
        for flood in FLOODS:
            flood_once(*flood)
    before = rss_kb(pid) if pid else None
    started = time.monotonic()
    for _ in range(rounds):
        for flood in FLOODS:
            flood_once(*flood)
    # Parameters behind a NUL: libmicrohttpd still parses them, runs out of pool memory and
    # neither answers nor reports the request completed; the header deadline closes them.
    for _ in range(20):
        raw_exchange(base, b"GET /healthz\x00?" + b"a=1&" * 1900 + b" HTTP/1.1\r\nHost: frametap\r\n\r\n", wait=0.05)
    took = time.monotonic() - started
    if pid and os.environ.get("HOSTILE_RSS_BOUND") == "off":
        print(f"  floods: {rounds * len(FLOODS) + 20} in {took:.1f} s, each answered; RSS not bounded here "
              "(HOSTILE_RSS_BOUND=off: an AddressSanitizer build, whose leak check runs at the server's exit)", flush=True)
    elif pid:
        after = rss_kb(pid)
        # A leaked request held its 8 KiB target and more: 1000 of them grew the RSS by ~8 MB.
        if after - before > 4096:
            raise Failure(f"RSS grew from {before} to {after} kB over {rounds * len(FLOODS)} floods")
        print(f"  floods: {rounds * len(FLOODS) + 20} in {took:.1f} s, each answered; RSS {before} -> {after} kB", flush=True)


def session_status(base, session):
    answer = rawhttp.request(base, "GET", f"/sessions/{session}", ANSWER_TIMEOUT)
    return json.loads(answer.body) if answer.status == 200 else None


def check_uploads_end_on_close(base, fixture):
    """N7: a client that closes mid-upload frees its session at once; a trickled body is 408."""
    session = "hostile-vanish"
    for attempt in range(1, 11):
        sock = connect(base)
        body = b"" if attempt % 2 else b"\x00" * 100_000
        sock.sendall(f"POST /sessions/{session}/nalus HTTP/1.1\r\nHost: frametap\r\nContent-Length: 1000000\r\n\r\n"
                     .encode() + body)
        sock.close()
        deadline = time.monotonic() + 5
        while True:
            status = session_status(base, session)
            if status and not status.get("uploading") and status["counters"]["uploadsAborted"] == attempt:
                break
            if time.monotonic() > deadline:
                raise Failure(f"a push closed mid-body (attempt {attempt}) was still running 5 s later: {status}")
            time.sleep(0.05)
    outcome, sock = do_push(base, dict(body=fixture, what="after the vanished pushes", transport="whole",
                                       session=session, query="flush=true", chunks=[], cut_at=None, reuse=False,
                                       rst=False, pause=0), None)
    if sock:
        sock.close()
    if not outcome.startswith("200"):
        raise Failure(f"the push after the vanished ones: {outcome}")
    delete_session(base, session)
    # A body trickled a byte at a time is answered 408 once the body timeout passed (2 s here).
    sock = connect(base)
    try:
        sock.sendall(b"PUT /sessions/hostile-trickle HTTP/1.1\r\nHost: frametap\r\nContent-Length: 60000\r\n\r\n")
        deadline, answer = time.monotonic() + 15, b""
        sock.settimeout(0.5)
        while b"\r\n\r\n" not in answer and time.monotonic() < deadline:
            try:
                sock.send(b"{")
                answer += sock.recv(4096)
            except socket.timeout:
                pass
            except OSError:
                break
        sock.settimeout(5)
        try:
            while chunk := sock.recv(4096):
                answer += chunk
        except OSError:
            pass
        if not answer.startswith(b"HTTP/1.1 408") or b'"body_timeout"' not in answer:
            raise Failure(f"a trickled body: answered {answer[:160]!r}, want 408 body_timeout")
    finally:
        sock.close()
    print("  uploads: 10 pushes closed mid-body ended at once, the next push served; a trickled body got 408", flush=True)


def check_slow_clients(base):
    """N6: PUT bodies trickled a byte at a time from five addresses, 80 of them for the server's
    64 slots (every byte resets libmicrohttpd's own idle timeout; SlowClients reconnects each one
    the server closes)."""
    port = address(base)[1]
    addresses = [f"127.0.0.{n}" for n in range(2, 7)]
    answered, slowest = 0, 0.0
    with SlowClients(port, addresses, per_address=16, kind="body", interval=0.5) as attackers:
        time.sleep(2)
        for _ in range(12):
            status, took = probe(port, "127.0.0.7", timeout=5)
            if status != 200:
                raise Failure(f"a client that behaves got {status} after {took:.1f} s while "
                              f"{attackers.open_count()} slow connections were open")
            answered, slowest = answered + 1, max(slowest, took)
            time.sleep(0.25)
        opened = attackers.opened
    metrics = rawhttp.request(base, "GET", "/metrics", ANSWER_TIMEOUT).body.decode()
    evicted = int(metric_value(metrics, "frametap_http_connections_closed_total", {"reason": "evicted"}))
    if evicted == 0:
        raise Failure("no slow connection was evicted")
    print(f"  slow clients: {opened} slow connections from 5 addresses; the sixth got {answered} of 12 answers "
          f"(slowest {slowest * 1000:.0f} ms); {evicted} evicted", flush=True)


def edge_checks(base, pid, fixtures):
    check_edge_answers(base)
    check_floods(base, pid)
    check_uploads_end_on_close(base, fixtures["baseline_176x144.264"])
    check_slow_clients(base)
    # The server is still well: /healthz at once.
    if rawhttp.request(base, "GET", "/healthz", HEALTH_TIMEOUT).status != 200:
        raise Failure("/healthz after the edge checks")


def hold_unread_answer(base, fixture):
    """For hostile.sh, right before its SIGTERM: a push (the fixture 20 times) answered as
    multipart that is never read, held open until this process is killed (the stop must not wait
    the grace period for it)."""
    body = fixture * 20
    sock = connect(base)
    sock.sendall(f"POST /sessions/hostile-unread/nalus?flush=true&format=rgb HTTP/1.1\r\nHost: frametap\r\n"
                 f"Accept: multipart/mixed\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    time.sleep(2)   # the answer fills the socket buffers
    print("holding an unread multipart answer", flush=True)
    while True:
        time.sleep(60)
