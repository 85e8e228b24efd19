"""The parts of a whole multipart/mixed answer (a multipart push's), framing checked."""
import re

from .waiting import Failure


def parts(content_type, body):
    """[(headers with lower-case names, payload)] of the answer; Failure where the framing is
    broken: no boundary, a part without its delimiter, its Content-Length or the CRLF after its
    payload, or bytes after the closing delimiter."""
    match = re.match(r'multipart/mixed;\s*boundary="?([^";]+)"?', content_type)
    if not match:
        raise Failure(f"multipart answer of type {content_type!r}")
    boundary = match.group(1).encode()
    opening, closing = b"--" + boundary + b"\r\n", b"--" + boundary + b"--\r\n"
    pos, found = 0, []
    while not body.startswith(closing, pos):
        number = len(found) + 1
        if not body.startswith(opening, pos):
            raise Failure(f"part {number}: no delimiter at {pos}: {body[pos:pos + 80]!r}")
        end = body.find(b"\r\n\r\n", pos)
        if end < 0:
            raise Failure(f"part {number}: headers never end")
        head = dict((n.strip().lower(), v.strip()) for n, _, v in
                    (line.partition(":") for line in body[pos + len(opening):end].decode("latin-1").split("\r\n")))
        if not head.get("content-length", "").isdigit():
            raise Failure(f"part {number}: no Content-Length: {head}")
        start = end + 4
        stop = start + int(head["content-length"])
        if body[stop:stop + 2] != b"\r\n":
            raise Failure(f"part {number}: payload not followed by CRLF (Content-Length wrong?)")
        found.append((head, body[start:stop]))
        pos = stop + 2
    if pos + len(closing) != len(body):
        raise Failure(f"{len(body) - pos - len(closing)} bytes after the closing delimiter")
    return found
