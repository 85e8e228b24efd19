"""The pushes of smoke/hostile.py and what a well-formed answer to one is: a mutated body sent
whole, chunked (some cut mid-body), or answered as multipart, some on reused keep-alive
connections; the victims (sessions fed a good fixture first) and the server's health between
pushes."""
import json
import os
import socket
import time

from harness.client import is_jpeg
from harness.multipart import parts
from harness.proc import alive
from harness import rawhttp
from harness.rawhttp import connect, read_answer, send_all
from harness.waiting import Failure

from hostile_bodies import hostile_body

ANSWER_TIMEOUT = float(os.environ.get("HOSTILE_ANSWER_TIMEOUT", "30"))  # seconds for one answer
HEALTH_TIMEOUT = float(os.environ.get("HOSTILE_HEALTH_TIMEOUT", "2"))   # "/healthz answers quickly"
# The good streams the victim sessions are fed first, H.264 and H.265.
VICTIM_FIXTURES = ["high_320x240.264", "baseline_176x144.264", "main_bframes_176x144.264", "main_bframes_176x144.265"]
# The good containers (Tests/Fixtures/Containers) the container pushes' victims are fed first.
CONTAINER_VICTIM_FIXTURES = ["h264_320x240_fragmented.mp4", "h265_176x144.mkv", "h264_320x240_aac.ts"]


# --------------------------------------------------------------------------------------------
# What a well-formed answer to a push is.

def check_problem(status, content_type, body, where):
    if not (content_type or "").startswith("application/problem+json"):
        raise Failure(f"{where}: status {status} is not application/problem+json but {content_type!r}")
    try:
        problem = json.loads(body)
    except ValueError:
        raise Failure(f"{where}: problem body is not JSON: {body[:200]!r}")
    if not isinstance(problem.get("code"), str) or not problem["code"]:
        raise Failure(f"{where}: problem without a code: {problem}")
    if problem.get("status") != status:
        raise Failure(f"{where}: problem status {problem.get('status')} differs from {status}")
    return problem["code"]


def check_push_answer(answer, sent_bytes, complete, multipart):
    """Returns a short outcome ("200", "200 multipart 3 parts", "422 invalid_data", ...)."""
    content_type = answer.header("content-type") or ""
    if 400 <= answer.status <= 599:
        return f"{answer.status} {check_problem(answer.status, content_type, answer.body, 'answer')}"
    if answer.status != 200:
        raise Failure(f"status {answer.status} (want 200 or a problem)")
    if multipart:
        return check_multipart(content_type, answer.body)
    if not content_type.startswith("application/json"):
        raise Failure(f"200 answer of type {content_type!r}")
    try:
        summary = json.loads(answer.body)
    except ValueError:
        raise Failure(f"200 answer is not JSON: {answer.body[:200]!r}")
    if complete and summary.get("bytes") != sent_bytes:
        raise Failure(f"the summary counts {summary.get('bytes')} body bytes, {sent_bytes} were sent")
    error = summary.get("error")
    return "200" + (f" ({error.get('code')})" if isinstance(error, dict) else "")


def check_multipart(content_type, body):
    """Parts well framed, each a JPEG or another typed picture, at most one problem part, last."""
    found, problem = parts(content_type, body), None
    for number, (head, payload) in enumerate(found, 1):
        if problem:
            raise Failure("a part follows the problem part")
        kind = head.get("content-type", "")
        if kind.startswith("application/problem+json"):
            status = head.get("x-problem-status", "")
            if not status.isdigit():
                raise Failure(f"problem part without X-Problem-Status: {head}")
            problem = check_problem(int(status), kind, payload, "problem part")
        elif kind == "image/jpeg":
            if not is_jpeg(payload):
                raise Failure(f"part {number}: not a JPEG")
        elif not kind:
            raise Failure(f"part {number}: no Content-Type")
    return f"200 multipart {len(found)} parts" + (f" ending in {problem}" if problem else "")


# --------------------------------------------------------------------------------------------
# One push: a mutated body over one of the transports.

def plan_push(rng, fixtures, victims, scratch, make_body=hostile_body):
    body, what = make_body(rng, fixtures)
    transport = rng.choices(["whole", "chunked", "chunked-cut", "whole-cut", "multipart", "multipart-chunked"],
                            [30, 20, 12, 4, 22, 12])[0]
    session = rng.choice(victims) if rng.random() < 0.5 else rng.choice(scratch)
    query = []
    if rng.random() < 0.3:
        query.append("flush=true")
    if transport.startswith("multipart") and rng.random() < 0.4:
        query += rng.sample(["format=" + rng.choice(["jpeg", "yuv", "rgb"]), "width=" + str(rng.choice([1, 64, 97])),
                             "quality=" + str(rng.choice([1, 50, 100]))], rng.randint(1, 2))
    chunks, cut_at = [], None
    if "chunked" in transport:
        pos = 0
        while pos < len(body):
            size = rng.choice([1, 2, 7, 100, 1000, 4096, 65536, rng.randint(1, 20000)])
            chunks.append(body[pos:pos + size])
            pos += size
        if transport == "chunked-cut":
            cut_at = rng.randint(0, len(chunks))
    elif transport == "whole-cut":
        cut_at = rng.randint(0, len(body))
    return dict(body=body, what=what, transport=transport, session=session, query="&".join(query), chunks=chunks,
                cut_at=cut_at, reuse=rng.random() < 0.3, rst=rng.random() < 0.5, pause=rng.choice([0, 0, 0.05]))


def do_push(base, plan, idle):
    """Sends one push; returns (outcome, keep-alive socket or None). idle: a reusable socket."""
    multipart = plan["transport"].startswith("multipart")
    path = f"/sessions/{plan['session']}/nalus" + (f"?{plan['query']}" if plan["query"] else "")
    headers = [f"POST {path} HTTP/1.1", "Host: frametap", "Content-Type: application/octet-stream"]
    if multipart:
        headers.append("Accept: multipart/mixed")
    body, chunks, cut_at = plan["body"], plan["chunks"], plan["cut_at"]
    if "chunked" in plan["transport"]:
        headers.append("Transfer-Encoding: chunked")
        wire = [b"%x\r\n%s\r\n" % (len(c), c) for c in (chunks if cut_at is None else chunks[:cut_at])]
        if cut_at is None:
            wire.append(b"0\r\n\r\n")
        payload = b"".join(wire)
    else:
        headers.append(f"Content-Length: {len(body)}")
        payload = body if cut_at is None else body[:cut_at]
    request = ("\r\n".join(headers) + "\r\n\r\n").encode() + payload
    sock = idle if (idle is not None and plan["reuse"]) else connect(base)
    if sock is not idle and idle is not None:
        idle.close()
    deadline = time.monotonic() + ANSWER_TIMEOUT
    try:
        complete = send_all(sock, request, deadline)
        if cut_at is not None:   # a client that vanishes mid-body (at once or a moment later): nothing to read
            time.sleep(plan["pause"])
            if plan["rst"]:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            sock.close()
            return "cut", None
        try:
            answer = read_answer(sock, deadline)
        except ConnectionResetError:
            raise Failure("connection reset with no answer" + ("" if complete else " (the body was not all sent)"))
        plan["answer"] = answer
        outcome = check_push_answer(answer, len(body), complete, multipart and answer.status == 200)
        keep = complete and (answer.header("connection") or "").lower() != "close"
        if not keep:
            sock.close()
        return outcome, (sock if keep else None)
    except BaseException:
        sock.close()
        raise


# --------------------------------------------------------------------------------------------
# The server's health and the victims' last good pictures.

def latest_picture(base, session):
    answer = rawhttp.request(base, "GET", f"/sessions/{session}/frame/latest.jpg", ANSWER_TIMEOUT)
    if answer.status != 200:
        raise Failure(f"victim {session}: latest.jpg answered {answer.describe()}")
    if not (answer.header("content-type") or "").startswith("image/jpeg") or not is_jpeg(answer.body):
        raise Failure(f"victim {session}: latest.jpg is not a JPEG: {answer.describe()}")
    seq = answer.header("x-frame-seq")
    if not (seq or "").isdigit():
        raise Failure(f"victim {session}: latest.jpg has no X-Frame-Seq")
    return int(seq)


def check_health(base, pid, victims, last_seq):
    if pid and not alive(pid):
        raise Failure(f"the server (pid {pid}) is gone")
    started = time.monotonic()
    answer = rawhttp.request(base, "GET", "/healthz", HEALTH_TIMEOUT)
    if answer.status != 200:
        raise Failure(f"/healthz answered {answer.describe()}")
    took = time.monotonic() - started
    for session in victims:
        seq = latest_picture(base, session)
        if seq < last_seq[session]:
            raise Failure(f"victim {session}: X-Frame-Seq went back from {last_seq[session]} to {seq}")
        last_seq[session] = seq
    return took


def stale_uploads(base, sessions):
    """Sessions that still say `uploading` although none of our clients is pushing any more."""
    stale = []
    for session in sessions:
        answer = rawhttp.request(base, "GET", f"/sessions/{session}", ANSWER_TIMEOUT)
        if answer.status == 200 and json.loads(answer.body).get("uploading"):
            stale.append(session)
    return stale


def delete_session(base, session):
    answer = rawhttp.request(base, "DELETE", f"/sessions/{session}", ANSWER_TIMEOUT)
    if answer.status not in (204, 404):
        raise Failure(f"DELETE {session}: {answer.describe()}")


def feed_victim(base, session, fixture):
    """A good fixture, flushed: the victim's last good picture."""
    plan = dict(body=fixture, what="good fixture", transport="whole", session=session, query="flush=true",
                chunks=[], cut_at=None, reuse=False, rst=False, pause=0)
    outcome, sock = do_push(base, plan, None)
    if sock:
        sock.close()
    if not outcome.startswith("200"):
        raise Failure(f"victim {session}: the good fixture was refused: {outcome}")
    return latest_picture(base, session)
