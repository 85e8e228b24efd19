"""Requests to a FrameTap server over http.client, one connection each."""
import http.client
import json
import os
import re
import time
import urllib.parse

from .waiting import Failure, wait_for


def address(base):
    """(host, port) of a base URL such as http://127.0.0.1:8080."""
    parts = urllib.parse.urlsplit(base)
    return parts.hostname, parts.port


def request(base, method, path, body=None, headers=None, token=None, timeout=60):
    """(status, headers, body) of one request on a connection of its own; an HTTP error status is
    an answer like any other, a connection that fails raises OSError."""
    headers = dict(headers or {})
    if token:
        headers["Authorization"] = f"Bearer {token}"
    host, port = address(base)
    connection = http.client.HTTPConnection(host, port, timeout=timeout, blocksize=1 << 20)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def session_status(base, session, token=None):
    """GET /sessions/ID as JSON, or None when it does not answer 200."""
    status, _, body = request(base, "GET", f"/sessions/{session}", token=token)
    return json.loads(body) if status == 200 else None


def wait_for_picture(base, session, seconds, interval=0.1):
    """The body of the session's first latest.jpg answered 200, asked again every `interval` s."""
    def picture():
        status, _, body = request(base, "GET", f"/sessions/{session}/frame/latest.jpg", timeout=10)
        return body if status == 200 else None
    return wait_for(picture, seconds, f"a picture of session {session} (latest.jpg answered 200)", interval)


def is_jpeg(data):
    return data[:2] == b"\xff\xd8" and data[-2:] == b"\xff\xd9"


def post_file(server, session, path, query, accept=None, content_type="application/octet-stream"):
    """POSTs the whole file (1 MiB writes) to server.port; returns (seconds, status, the JSON
    summary or, with `accept` multipart, the number of parts, None). The time is the whole
    request's, from the connection to the last byte of the answer."""
    headers = {"Content-Type": content_type, "Content-Length": str(os.path.getsize(path))}
    if accept:
        headers["Accept"] = accept
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300, blocksize=1 << 20)
    start = time.perf_counter()
    with open(path, "rb") as f:
        conn.request("POST", "/sessions/%s/nalus?%s" % (session, query), body=f, headers=headers)
        resp = conn.getresponse()
        if accept:
            ctype = resp.getheader("Content-Type", "")
            m = re.search(r'boundary="?([^";]+)"?', ctype)
            if resp.status != 200 or not m:
                raise Failure("multipart POST -> %d %s %s" % (resp.status, ctype, resp.read()[:300]))
            delim = b"--" + m.group(1).encode()
            count, tail, closed = 0, b"", False
            while True:
                chunk = resp.read(1 << 20)
                if not chunk:
                    break
                buf = tail + chunk
                count += buf.count(delim)
                # a delimiter cut between two reads is counted once, in the next buffer
                tail = buf[-(len(delim) + 2):]
                count -= tail.count(delim)
                if (delim + b"--") in buf:
                    closed = True
            count += tail.count(delim)
            elapsed = time.perf_counter() - start
            if not closed:
                raise Failure("multipart answer ended without its closing delimiter")
            conn.close()
            return elapsed, resp.status, count - 1, None
        body = resp.read()
    elapsed = time.perf_counter() - start
    conn.close()
    if resp.status != 200:
        raise Failure("POST -> %d %s" % (resp.status, body[:300]))
    return elapsed, resp.status, json.loads(body), None
