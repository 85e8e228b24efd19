#!/usr/bin/env python3
"""Hostile clients against a live FrameTap server (part of `make test`, via smoke/hostile.sh).

About 150 seeded pushes of mutated H.264 and H.265 (bit flips, byte runs, truncation, duplicated or removed
start codes, corrupt NAL headers, SPS/PPS with huge sizes, garbage, empty bodies, two fixtures
spliced) sent whole, chunked (random chunk sizes, some cut mid-body by closing the socket) or
answered as multipart/mixed, some on reused keep-alive connections. It checks what a hostile
client must never achieve:

  * every answer is well-formed HTTP: 200 (a JSON summary, or a well-framed multipart answer that
    may end with one application/problem+json part), or a problem+json 4xx/5xx with a `code`;
  * after every few pushes and at the end the server still runs, /healthz answers 200 quickly,
    and the victim sessions (fed a good fixture first, then garbage) still serve a JPEG as their
    latest picture, with the same X-Frame-Seq or a newer one.

Then hostile heads and connections (`edge_checks`), each a raw-socket client:

  * heads libmicrohttpd would read another way (obs-fold, whitespace before a colon, a NUL or
    another control character in a value, `Transfer-Encoding: chunked ` with a trailing space or
    tab, a Content-Length of 2^63 or more, `Expect: foo`, a target over 8 KiB), each followed by
    a smuggled request: one problem answer with its code, the connection closed, nothing else run;
  * floods of query parameters, of headers and of long targets: each answered (or closed by
    libmicrohttpd's own 414/431), and the server's RSS does not grow with their number;
  * pushes whose client closes right after the head or a piece of body: the upload ends at once
    (counted in uploadsAborted) and the session takes the next push; a trickled body is 408;
  * slow bodies from five more loopback addresses, more of them than the server has slots: a
    sixth address is served every time.

The server must run with the limits hostile.sh gives it (64 connections, 16 per address, short
header and body timeouts). The seed is printed; HOSTILE_SEED=N reproduces the same bodies and
transports (HOSTILE_PUSHES changes the count). On a failure it prints the seed and push number and saves the offending
bodies (every push since the last passed check) and answers under --out. Python stdlib only; it
speaks HTTP over raw sockets so that it can cut bodies, reuse connections and check the framing.
"""
import argparse
import json
import os
import random
import re
import select
import socket
import sys
import time
from pathlib import Path

from slow_clients import SlowClients, probe

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "Tests" / "Fixtures"
ANSWER_TIMEOUT = float(os.environ.get("HOSTILE_ANSWER_TIMEOUT", "30"))  # seconds for one answer
HEALTH_TIMEOUT = float(os.environ.get("HOSTILE_HEALTH_TIMEOUT", "2"))   # "/healthz answers quickly"
CHECK_EVERY = 10                                                           # pushes between health checks
START_CODE = b"\x00\x00\x01"


class Failure(Exception):
    """A broken promise of the server: the run stops and reports it."""


# --------------------------------------------------------------------------------------------
# H.264 pieces: start codes, and SPS/PPS bit writing (exp-Golomb) for the "huge sizes" mutations.

def start_code_offsets(data):
    """Offsets of every 00 00 01 (a 4-byte start code is a zero byte before one)."""
    offsets, i = [], data.find(START_CODE)
    while i >= 0:
        offsets.append(i)
        i = data.find(START_CODE, i + 3)
    return offsets


def nal_units(data):
    """(start, end) of each NAL unit's bytes after its start code."""
    starts = [o + 3 for o in start_code_offsets(data)]
    return [(s, (starts[k + 1] - 3) if k + 1 < len(starts) else len(data)) for k, s in enumerate(starts)]


class BitWriter:
    def __init__(self):
        self.bits = []

    def u(self, n, value):
        self.bits.extend((value >> i) & 1 for i in reversed(range(n)))

    def ue(self, value):
        value += 1
        self.u(value.bit_length() - 1, 0)
        self.u(value.bit_length(), value)

    def se(self, value):
        self.ue(2 * value - 1 if value > 0 else -2 * value)

    def nal(self, header):
        """The NAL unit (start code, header, RBSP with trailing bits and emulation prevention)."""
        bits = self.bits + [1]
        bits += [0] * (-len(bits) % 8)
        rbsp = bytes(int("".join(map(str, bits[i:i + 8])), 2) for i in range(0, len(bits), 8))
        out, zeros = bytearray(), 0
        for b in rbsp:
            if zeros >= 2 and b <= 3:
                out.append(3)
                zeros = 0
            out.append(b)
            zeros = zeros + 1 if b == 0 else 0
        return b"\x00\x00\x00\x01" + bytes([header]) + bytes(out)


HUGE = [1023, 4095, 65535, 1 << 20, (1 << 31) - 2, (1 << 32) - 2]


def hostile_sps(rng):
    """An SPS (id 0, so it replaces the fixtures' own) with one or more fields far out of range."""
    f = dict(profile=rng.choice([66, 77, 100, 110, 122, 244]), level=rng.choice([30, 51, 255]), chroma=1, depth=0,
             frame_num=0, poc_type=rng.choice([0, 1, 2]), poc_lsb=2, poc_cycle=1, refs=1, width=10, height=8,
             crop=None, vui=False, reorder=0, dpb=1, time_scale=50)
    for field in rng.sample(["chroma", "depth", "frame_num", "poc_lsb", "poc_cycle", "refs", "width", "height",
                             "crop", "reorder", "dpb", "time_scale", "overlong"], rng.randint(1, 3)):
        if field == "crop":
            f["crop"] = [rng.choice(HUGE) for _ in range(4)]
        elif field in ("reorder", "dpb", "time_scale"):
            f["vui"], f[field] = True, rng.choice(HUGE)
        elif field == "overlong":
            f["overlong"] = True
        else:
            f[field] = rng.choice(HUGE)
    if f["poc_type"] != 1:
        f["poc_cycle"] = 0
    w = BitWriter()
    w.u(8, f["profile"]); w.u(8, 0); w.u(8, f["level"]); w.ue(0)
    if f["profile"] in (100, 110, 122, 244):
        w.ue(f["chroma"])
        if f["chroma"] == 3:
            w.u(1, 0)
        w.ue(f["depth"]); w.ue(f["depth"]); w.u(1, 0); w.u(1, 0)
    if f.get("overlong"):          # an exp-Golomb code with more leading zeros than 32 bits hold
        w.u(40, 0); w.u(41, (1 << 41) - 1)
    w.ue(f["frame_num"]); w.ue(f["poc_type"])
    if f["poc_type"] == 0:
        w.ue(f["poc_lsb"])
    elif f["poc_type"] == 1:
        w.u(1, 0); w.se(0); w.se(0); w.ue(f["poc_cycle"])
        for _ in range(min(f["poc_cycle"], 4)):  # far fewer offsets than announced: the reader runs out
            w.se(1)
    w.ue(f["refs"]); w.u(1, 0); w.ue(f["width"]); w.ue(f["height"]); w.u(1, 1); w.u(1, 1)
    w.u(1, f["crop"] is not None)
    for value in f["crop"] or []:
        w.ue(value)
    w.u(1, f["vui"])
    if f["vui"]:
        w.u(1, 0); w.u(1, 0); w.u(1, 0); w.u(1, 0)                 # aspect, overscan, signal, chroma loc
        w.u(1, 1); w.u(32, 1); w.u(32, min(f["time_scale"], (1 << 32) - 1)); w.u(1, 0)   # timing
        w.u(1, 0); w.u(1, 0); w.u(1, 0)                            # HRDs, pic_struct
        w.u(1, 1); w.u(1, 1); w.ue(0); w.ue(0); w.ue(16); w.ue(16); w.ue(f["reorder"]); w.ue(f["dpb"])
    return w.nal(0x67), sorted(k for k in f if f[k] in HUGE or (k == "crop" and f[k]) or k == "overlong")


def hostile_pps(rng):
    """A PPS with huge ids or a huge slice-group map (type 6 lists one id per map unit)."""
    w = BitWriter()
    w.ue(rng.choice([0, 0] + HUGE)); w.ue(rng.choice([0, 0] + HUGE)); w.u(1, 0); w.u(1, 0)
    groups = rng.choice([0, 7, 8] + HUGE)
    w.ue(groups)
    if groups > 0:
        w.ue(6); w.ue(rng.choice(HUGE))
        for _ in range(8):
            w.u(3, 7)
    w.ue(rng.choice([0] + HUGE)); w.ue(0); w.u(1, 0); w.u(2, 0); w.se(rng.choice([0, 1000, -1000])); w.se(0); w.se(0)
    w.u(1, 1); w.u(1, 0); w.u(1, 0)
    return w.nal(0x68)


# --------------------------------------------------------------------------------------------
# Mutations: each takes (rng, body) and returns (new body, a short description).

def bit_flips(rng, data):
    data = bytearray(data)
    n = rng.randint(1, 64)
    for _ in range(n if data else 0):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data), f"flip {n} bits"


def byte_run(rng, data):
    value = rng.choice([0x00, 0xFF, 0x01, 0x03, rng.randrange(256)])
    length, at = rng.randint(1, 4000), rng.randint(0, len(data))
    return data[:at] + bytes([value]) * length + data[at + length:], f"run of {length}x{value:02x} at {at}"


def truncate(rng, data):
    at = rng.randint(0, len(data))
    return data[:at], f"truncate to {at}"


def duplicate_start_codes(rng, data):
    offsets, out = start_code_offsets(data), data
    for at in sorted(rng.sample(offsets, min(len(offsets), rng.randint(1, 8))), reverse=True):
        out = out[:at] + rng.choice([START_CODE, b"\x00" + START_CODE, START_CODE * 3]) + out[at:]
    for _ in range(rng.randint(0, 4)):   # and some start codes where none belonged
        at = rng.randint(0, len(out))
        out = out[:at] + START_CODE + out[at:]
    return out, "duplicate start codes"


def remove_start_codes(rng, data):
    offsets, out = start_code_offsets(data), data
    chosen = sorted(rng.sample(offsets, min(len(offsets), rng.randint(1, 8))), reverse=True)
    for at in chosen:
        out = out[:at] + out[at + 3:]
    return out, f"remove {len(chosen)} start codes"


def corrupt_nal_headers(rng, data):
    data, units = bytearray(data), nal_units(data)
    chosen = rng.sample(units, min(len(units), rng.randint(1, 6)))
    for start, end in chosen:
        if start < len(data):
            data[start] = rng.choice([data[start] | 0x80, rng.randrange(256), (data[start] & 0xE0) | rng.randrange(32)])
    return bytes(data), f"corrupt {len(chosen)} NAL headers"


def huge_parameter_sets(rng, data):
    sps, fields = hostile_sps(rng)
    pps = hostile_pps(rng) if rng.random() < 0.3 else b""
    units = [(s, e) for s, e in nal_units(data) if s < len(data)]
    real_sps = [s - 3 for s, e in units if data[s] & 0x1F == 7]
    if real_sps and rng.random() < 0.5:      # instead of every real SPS
        out = b"".join(sps + pps if data[s] & 0x1F == 7 else START_CODE + data[s:e] for s, e in units)
    elif real_sps:                           # just before the first real one (which then wins)
        out = data[:real_sps[0]] + sps + pps + data[real_sps[0]:]
    else:
        out = sps + pps + data
    return out, f"SPS with huge {'/'.join(fields) or 'nothing'}{' + PPS' if pps else ''}"


# --------------------------------------------------------------------------------------------
# H.265 pieces and mutations: two-byte NAL headers; the SPS rewritten with sizes, bit depths and
# chroma formats far out of range (the rest kept, so its slices still parse); made-up VPS and PPS
# with huge counts; units on layers above the base; parameter sets cut short.

HEVC_VPS, HEVC_SPS, HEVC_PPS = 32, 33, 34


def hevc_type(data, start):
    return (data[start] >> 1) & 0x3F


def hevc_header(nal_type, layer=0, temporal_id_plus1=1):
    return bytes([(nal_type << 1) | (layer >> 5), ((layer & 31) << 3) | temporal_id_plus1])


def hevc_nal(header, writer):
    """A unit with a two-byte header from a BitWriter's RBSP (BitWriter.nal writes one byte)."""
    return b"\x00\x00\x00\x01" + header + writer.nal(0)[5:]


class BitReader:
    """u(n) and ue(v) over an RBSP (emulation prevention removed); past the end it reads zeros."""

    def __init__(self, payload):
        rbsp, zeros = bytearray(), 0
        for b in payload:
            if zeros >= 2 and b == 3:
                zeros = 0
                continue
            rbsp.append(b)
            zeros = zeros + 1 if b == 0 else 0
        self.bits = [(byte >> (7 - i)) & 1 for byte in rbsp for i in range(8)]
        self.pos = 0

    def u(self, n):
        value = 0
        for _ in range(n):
            value = (value << 1) | (self.bits[self.pos] if self.pos < len(self.bits) else 0)
            self.pos += 1
        return value

    def ue(self):
        zeros = 0
        while self.pos < len(self.bits) and self.bits[self.pos] == 0 and zeros < 32:
            zeros += 1
            self.pos += 1
        self.pos += 1
        return (1 << zeros) - 1 + self.u(zeros)

    def rest(self):
        """The bits left before the rbsp_stop_one_bit (the last one bit)."""
        bits = self.bits[self.pos:]
        while bits and bits[-1] == 0:
            bits.pop()
        return bits[:-1]


def rewrite_hevc_sps(unit, change):
    """A real SPS (header + escaped payload) with chroma_format_idc, width, height or bit depths
    replaced and the rest kept bit for bit."""
    r, w = BitReader(unit[2:]), BitWriter()
    w.u(4, r.u(4))
    sub_layers = r.u(3)
    w.u(3, sub_layers)
    w.u(1, r.u(1))
    w.u(96, r.u(96))                       # general profile_tier_level
    flags = [(r.u(1), r.u(1)) for _ in range(sub_layers)]
    for profile, level in flags:
        w.u(1, profile)
        w.u(1, level)
    if sub_layers:
        w.u(2 * (8 - sub_layers), r.u(2 * (8 - sub_layers)))
    for profile, level in flags:
        if profile:
            w.u(88, r.u(88))
        if level:
            w.u(8, r.u(8))
    w.ue(r.ue())                           # sps_seq_parameter_set_id
    chroma = r.ue()
    new_chroma = change.get("chroma", chroma)
    w.ue(new_chroma)
    separate = r.u(1) if chroma == 3 else 0
    if new_chroma == 3:
        w.u(1, separate)
    width, height = r.ue(), r.ue()
    w.ue(change.get("width", width))
    w.ue(change.get("height", height))
    window = r.u(1)
    w.u(1, window)
    for _ in range(4 * window):
        w.ue(r.ue())
    luma, chroma_depth = r.ue() + 8, r.ue() + 8
    w.ue(change.get("depth", luma) - 8)
    w.ue(change.get("depth_chroma", change.get("depth", chroma_depth)) - 8)
    w.bits.extend(r.rest())
    return hevc_nal(unit[:2], w)[4:]


def made_up_hevc_vps(rng):
    """A VPS (id 0) with huge layer, sub-layer, layer-set and timing values."""
    w = BitWriter()
    w.u(4, 0); w.u(1, 1); w.u(1, 1); w.u(6, rng.choice([0, 62, 63])); w.u(3, rng.choice([0, 6, 7])); w.u(1, 1)
    w.u(16, 0xFFFF)
    w.u(2, 0); w.u(1, 0); w.u(5, 1); w.u(32, 0x60000000); w.u(48, 0); w.u(8, rng.choice([60, 255]))
    w.u(1, 1)
    w.ue(rng.choice([0, 15, 16] + HUGE[:3])); w.ue(rng.choice([0, 15])); w.ue(rng.choice([0] + HUGE))
    w.u(6, rng.choice([0, 63])); w.ue(rng.choice([0, 1023, 1024] + HUGE))
    w.u(1, 1); w.u(32, rng.choice([0, 1, (1 << 32) - 1])); w.u(32, rng.choice([0, 25, (1 << 32) - 1]))
    return hevc_nal(hevc_header(HEVC_VPS), w)


def made_up_hevc_pps(rng):
    """A PPS with huge ids, tile counts and offsets."""
    w = BitWriter()
    w.ue(rng.choice([0, 0, 63, 64] + HUGE)); w.ue(rng.choice([0, 0, 15, 16] + HUGE))
    w.u(1, 0); w.u(1, 0); w.u(3, 7); w.u(1, 0); w.u(1, 0)
    w.ue(rng.choice([0, 14, 15] + HUGE)); w.ue(0); w.se(rng.choice([0, 25, -74, 1000]))
    w.u(1, 0); w.u(1, 0); w.u(1, 0); w.se(0); w.se(0); w.u(1, 0); w.u(1, 0); w.u(1, 0); w.u(1, 0)
    w.u(1, 1); w.u(1, 0)                   # tiles_enabled_flag, entropy_coding_sync_enabled_flag
    w.ue(rng.choice([0, 1023, 1024] + HUGE)); w.ue(rng.choice([0, 1023] + HUGE)); w.u(1, rng.choice([0, 1]))
    for _ in range(8):
        w.ue(rng.choice([0, 4095, 4096] + HUGE))
    return hevc_nal(hevc_header(HEVC_PPS), w)


HEVC_SPS_CHANGES = [
    ("width", lambda rng: rng.choice([8192 + 8, 16384, 65536, 65544] + HUGE)),
    ("height", lambda rng: rng.choice([8192 + 8, 16384, 65536] + HUGE)),
    ("depth", lambda rng: rng.choice([9, 11, 12, 13, 14, 16, 17, 24, 1000])),   # past 16 cannot be read
    ("depth_chroma", lambda rng: rng.choice([8, 10, 17])),
    ("chroma", lambda rng: rng.choice([0, 2, 3, 4, 5, 255])),                   # 4 and up cannot be read
]


def hevc_parameter_sets(rng, data):
    """Every H.265 SPS rewritten (huge sizes, a bit depth past 16, chroma_format_idc 4...),
    sometimes made-up VPS/PPS after the PPS; an H.264 body gets the made-up ones in front
    (another codec's parameter sets)."""
    change = {name: pick(rng) for name, pick in rng.sample(HEVC_SPS_CHANGES, rng.randint(1, 2))}
    made_up = [make(rng) for make in (made_up_hevc_vps, made_up_hevc_pps) if rng.random() < 0.3]
    if not any(len(u) > 2 and hevc_type(u, 0) == HEVC_SPS for u in (data[s:e] for s, e in nal_units(data))):
        made_up = made_up or [made_up_hevc_vps(rng), made_up_hevc_pps(rng)]
    out, rewrote = [], False
    for s, e in nal_units(data):
        unit = data[s:e].rstrip(b"\x00")
        if len(unit) > 14 and hevc_type(unit, 0) == HEVC_SPS and unit[1] == 0x01:
            unit = rewrite_hevc_sps(unit, change)
            rewrote = True
        out.append(b"\x00\x00\x00\x01" + unit)
        if len(unit) >= 2 and hevc_type(unit, 0) == HEVC_PPS and unit[1] == 0x01:
            out += made_up
    body = b"".join(out) if rewrote else b"".join(made_up) + data
    what = ", ".join(f"{k}={v}" for k, v in change.items()) if rewrote else "no SPS to rewrite"
    return body, f"H.265 SPS {what}" + (f" + {len(made_up)} made-up VPS/PPS" if made_up else "")


def hevc_layers(rng, data):
    """Units moved to or copied onto layers above the base (nuh_layer_id 1...63), some with the
    forbidden temporal id plus 1 of 0."""
    data, units = bytearray(data), [(s, e) for s, e in nal_units(data) if e - s >= 2]
    chosen = rng.sample(units, min(len(units), rng.randint(1, 12)))
    copies = []
    for s, e in chosen:
        header = hevc_header(hevc_type(data, s), rng.choice([1, 1, 2, 63]), rng.choice([data[s + 1] & 7, 0]))
        if rng.random() < 0.5:
            data[s:s + 2] = header
        else:
            copies.append((e, START_CODE + header + bytes(data[s + 2:e])))
    out = bytes(data)
    for at, copy in sorted(copies, reverse=True):
        out = out[:at] + copy + out[at:]
    return out, f"{len(chosen)} units on other layers"


def hevc_truncate_units(rng, data):
    """Parameter sets (or, without any, other units) cut short inside the stream."""
    units = [(s, e) for s, e in nal_units(data) if e - s >= 3]
    sets = [u for u in units if hevc_type(data, u[0]) in (HEVC_VPS, HEVC_SPS, HEVC_PPS)]
    chosen = sorted(rng.sample(sets or units, min(len(sets or units), rng.randint(1, 4))), reverse=True)
    out = data
    for s, e in chosen:
        out = out[:s + rng.randint(1, e - s - 1)] + out[e:]
    return out, f"{len(chosen)} units cut short"


def garbage(rng, data):
    length = rng.choice([1, 3, 4, 100, 1000, 65536, rng.randint(0, 200_000)])
    junk = rng.randbytes(length)
    if rng.random() < 0.5:
        junk = START_CODE + junk
    return junk, f"{length} random bytes"


def zero_length(rng, data):
    return b"", "empty body"


def repeat(rng, data):
    times = rng.choice([3, 10, 50, 400])   # 400 x a fixture passes the server's 4 MB body limit
    return data * times, f"repeated {times}x"


MUTATIONS = [bit_flips, byte_run, truncate, duplicate_start_codes, remove_start_codes, corrupt_nal_headers,
             huge_parameter_sets, garbage, zero_length, repeat]
MUTATION_WEIGHTS = [6, 4, 4, 3, 3, 4, 4, 2, 1, 2]
# H.265's own (on an H.264 body they add another codec's units).
MUTATIONS += [hevc_parameter_sets, hevc_layers, hevc_truncate_units]
MUTATION_WEIGHTS += [5, 3, 3]


def hostile_body(rng, fixtures):
    """A fixture (or two spliced), with one to three mutations."""
    name, data = rng.choice(fixtures)
    steps = [name]
    if rng.random() < 0.2:
        other, tail = rng.choice(fixtures)
        cut_a, cut_b = rng.randint(0, len(data)), rng.randint(0, len(tail))
        data = data[:cut_a] + tail[cut_b:]
        steps.append(f"spliced at {cut_a} with {other} from {cut_b}")
    for mutation in rng.choices(MUTATIONS, MUTATION_WEIGHTS, k=rng.choice([1, 1, 2, 3])):
        data, what = mutation(rng, data)
        steps.append(what)
    return data, "; ".join(steps)


# --------------------------------------------------------------------------------------------
# HTTP over raw sockets.

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
            raise Failure(f"no complete answer within {ANSWER_TIMEOUT:.0f} s")
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
    """One HTTP/1.1 answer; raises Failure when it is not well-formed."""
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


def connect(base):
    host, port = re.fullmatch(r"http://([^:/]+):(\d+)", base).groups()
    sock = socket.create_connection((host, int(port)), timeout=10)
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


def simple_get(base, path, timeout):
    sock = connect(base)
    try:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: frametap\r\nConnection: close\r\n\r\n".encode())
        return read_answer(sock, time.monotonic() + timeout, "GET")
    finally:
        sock.close()


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
    match = re.match(r'multipart/mixed;\s*boundary="?([^";]+)"?', content_type)
    if not match:
        raise Failure(f"multipart answer of type {content_type!r}")
    boundary = match.group(1).encode()
    opening, closing = b"--" + boundary + b"\r\n", b"--" + boundary + b"--\r\n"
    pos, parts, problem = 0, 0, None
    while not body.startswith(closing, pos):
        if problem:
            raise Failure("a part follows the problem part")
        if not body.startswith(opening, pos):
            raise Failure(f"part {parts + 1}: no delimiter at {pos}: {body[pos:pos + 80]!r}")
        end = body.find(b"\r\n\r\n", pos)
        if end < 0:
            raise Failure(f"part {parts + 1}: headers never end")
        head = dict((n.strip().lower(), v.strip()) for n, _, v in
                    (line.partition(":") for line in body[pos + len(opening):end].decode("latin-1").split("\r\n")))
        if not head.get("content-length", "").isdigit():
            raise Failure(f"part {parts + 1}: no Content-Length: {head}")
        start = end + 4
        stop = start + int(head["content-length"])
        if body[stop:stop + 2] != b"\r\n":
            raise Failure(f"part {parts + 1}: payload not followed by CRLF (Content-Length wrong?)")
        payload, kind = body[start:stop], head.get("content-type", "")
        if kind.startswith("application/problem+json"):
            status = head.get("x-problem-status", "")
            if not status.isdigit():
                raise Failure(f"problem part without X-Problem-Status: {head}")
            problem = check_problem(int(status), kind, payload, "problem part")
        elif kind == "image/jpeg":
            if payload[:2] != b"\xff\xd8" or payload[-2:] != b"\xff\xd9":
                raise Failure(f"part {parts + 1}: not a JPEG")
        elif not kind:
            raise Failure(f"part {parts + 1}: no Content-Type")
        parts += 1
        pos = stop + 2
    if pos + len(closing) != len(body):
        raise Failure(f"{len(body) - pos - len(closing)} bytes after the closing delimiter")
    return f"200 multipart {parts} parts" + (f" ending in {problem}" if problem else "")


# --------------------------------------------------------------------------------------------
# One push: a mutated body over one of the transports.

def plan_push(rng, fixtures, victims, scratch):
    body, what = hostile_body(rng, fixtures)
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

def server_alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def latest_picture(base, session):
    answer = simple_get(base, f"/sessions/{session}/frame/latest.jpg", ANSWER_TIMEOUT)
    if answer.status != 200:
        raise Failure(f"victim {session}: latest.jpg answered {answer.describe()}")
    if not (answer.header("content-type") or "").startswith("image/jpeg") or answer.body[:2] != b"\xff\xd8" \
            or answer.body[-2:] != b"\xff\xd9":
        raise Failure(f"victim {session}: latest.jpg is not a JPEG: {answer.describe()}")
    seq = answer.header("x-frame-seq")
    if not (seq or "").isdigit():
        raise Failure(f"victim {session}: latest.jpg has no X-Frame-Seq")
    return int(seq)


def check_health(base, pid, victims, last_seq):
    if pid and not server_alive(pid):
        raise Failure(f"the server (pid {pid}) is gone")
    started = time.monotonic()
    answer = simple_get(base, "/healthz", HEALTH_TIMEOUT)
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
        answer = simple_get(base, f"/sessions/{session}", ANSWER_TIMEOUT)
        if answer.status == 200 and json.loads(answer.body).get("uploading"):
            stale.append(session)
    return stale


def delete_session(base, session):
    sock = connect(base)
    try:
        sock.sendall(f"DELETE /sessions/{session} HTTP/1.1\r\nHost: frametap\r\nConnection: close\r\n\r\n".encode())
        answer = read_answer(sock, time.monotonic() + ANSWER_TIMEOUT, "DELETE")
    finally:
        sock.close()
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


# The good streams the victim sessions are fed first, H.264 and H.265.
VICTIM_FIXTURES = ["high_320x240.264", "baseline_176x144.264", "main_bframes_176x144.264", "main_bframes_176x144.265"]

# --------------------------------------------------------------------------------------------
# Hostile heads and connections.

def port_of(base):
    return int(re.fullmatch(r"http://[^:/]+:(\d+)", base).group(1))


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


FLOODS = [
    # (what, raw, the status line it must get)
    ("1900 query parameters",
     b"GET /healthz?" + b"a=1&" * 1900 + b" HTTP/1.1\r\nHost: frametap\r\nConnection: close\r\n\r\n", 200),
    ("3000 headers", b"GET /healthz HTTP/1.1\r\nHost: frametap\r\n" + b"X-A: 1\r\n" * 3000 + b"\r\n", 431),
    ("a 9000-byte target", b"GET /healthz?" + b"a" * 9000 + b" HTTP/1.1\r\nHost: frametap\r\n\r\n", 414),
    ("a 100 KB target", b"GET /healthz?" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: frametap\r\n\r\n", 414),
]


def rss_kb(pid):
    return int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text()).group(1))


def check_floods(base, pid, rounds=int(os.environ.get("HOSTILE_FLOODS", "600"))):
    """N2: every flood answered (or closed by libmicrohttpd's own refusal), the RSS flat."""
    def flood_once(what, raw, status):
        data, closed = raw_exchange(base, raw, wait=2.0)
        if not data.startswith(b"HTTP/1.1 %d" % status):
            if status in (414, 431) and not data and closed:
                return   # libmicrohttpd's own refusal may reach a client that is still sending as a reset
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
    if pid:
        after = rss_kb(pid)
        # A leaked request held its 8 KiB target and more: 1000 of them grew the RSS by ~8 MB.
        if after - before > 4096:
            raise Failure(f"RSS grew from {before} to {after} kB over {rounds * len(FLOODS)} floods")
        print(f"  floods: {rounds * len(FLOODS) + 20} in {took:.1f} s, each answered; RSS {before} -> {after} kB", flush=True)


def session_status(base, session):
    answer = simple_get(base, f"/sessions/{session}", ANSWER_TIMEOUT)
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


def metric(base, name, label):
    text = simple_get(base, "/metrics", ANSWER_TIMEOUT).body.decode()
    match = re.search(rf'^{name}{{[^}}]*"{label}"[^}}]*}} (\d+)', text, re.M)
    return int(match.group(1)) if match else 0


def check_slow_clients(base):
    """N6: PUT bodies trickled a byte at a time from five addresses, 80 of them for the server's
    64 slots (every byte resets libmicrohttpd's own idle timeout; SlowClients reconnects each one
    the server closes)."""
    port = port_of(base)
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
    evicted = metric(base, "frametap_http_connections_closed_total", "evicted")
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
    if simple_get(base, "/healthz", HEALTH_TIMEOUT).status != 200:
        raise Failure("/healthz after the edge checks")


def hold_unread_answer(base):
    """For hostile.sh, right before its SIGTERM: a push answered as multipart that is never read,
    held open until this process is killed (the stop must not wait the grace period for it)."""
    body = (FIXTURES / "high_320x240.264").read_bytes() * 20
    sock = connect(base)
    sock.sendall(f"POST /sessions/hostile-unread/nalus?flush=true&format=rgb HTTP/1.1\r\nHost: frametap\r\n"
                 f"Accept: multipart/mixed\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    time.sleep(2)   # the answer fills the socket buffers
    print("holding an unread multipart answer", flush=True)
    while True:
        time.sleep(60)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the server, http://127.0.0.1:PORT")
    parser.add_argument("--pid", type=int, help="the server's pid (checked to be alive)")
    parser.add_argument("--out", default=str(ROOT / ".test-output" / "hostile"), help="where failures are saved")
    parser.add_argument("--hold-unread-answer", action="store_true", help="hold a multipart answer unread, for ever")
    args = parser.parse_args()
    if args.hold_unread_answer:
        return hold_unread_answer(args.base)
    seed = int(os.environ.get("HOSTILE_SEED") or random.SystemRandom().randrange(1, 1 << 31))
    pushes = int(os.environ.get("HOSTILE_PUSHES", "150"))
    print(f"hostile: seed {seed} (HOSTILE_SEED={seed} reproduces), {pushes} pushes against {args.base}", flush=True)

    fixtures = sorted((p.name, p.read_bytes()) for p in FIXTURES.glob("*.26[45]"))
    good = dict(fixtures)
    victims = [f"hostile-{seed}-victim{i}" for i in range(len(VICTIM_FIXTURES))]
    scratch = [f"hostile-{seed}-scratch{i}" for i in range(4)]
    last_seq, outcomes, pending, idle = {}, {}, [], None
    checks = 0
    in_edge_checks = False
    started = time.monotonic()
    number = 0
    try:
        for session, name in zip(victims, VICTIM_FIXTURES):
            last_seq[session] = feed_victim(args.base, session, good[name])
        print(f"victims fed: {last_seq}", flush=True)
        for number in range(1, pushes + 1):
            rng = random.Random(f"{seed}/{number}")   # each push is reproducible on its own
            plan = plan_push(rng, fixtures, victims, scratch)
            pending.append((number, plan))
            push_started = time.monotonic()
            outcome, idle = do_push(args.base, plan, idle)
            key = f"{plan['transport']}: {re.sub(r' [0-9]+ parts', '', outcome)}"
            outcomes[key] = outcomes.get(key, 0) + 1
            if os.environ.get("HOSTILE_VERBOSE"):
                print(f"  #{number} {plan['session']} {plan['transport']} {len(plan['body'])} B ({plan['what']}) -> {outcome} "
                      f"({(time.monotonic() - push_started) * 1000:.0f} ms)", flush=True)
            if rng.random() < 0.05:   # scratch sessions come and go
                delete_session(args.base, rng.choice(scratch))
            if number % CHECK_EVERY == 0 or number == pushes:
                took = check_health(args.base, args.pid, victims, last_seq)
                checks += 1
                pending = []
                print(f"  after push {number}: healthy (/healthz {took * 1000:.0f} ms), victims at "
                      f"{' '.join(str(last_seq[v]) for v in victims)}", flush=True)
        # A client that vanished must free its session's upload slot at once (else the next push
        # is 409 session_busy).
        time.sleep(2)
        stale = stale_uploads(args.base, victims + scratch)
        if stale:
            raise Failure(f"sessions still uploading 2 s after the last push: {' '.join(stale)}")
        pending, in_edge_checks = [], True
        edge_checks(args.base, args.pid, good)
    except (Failure, OSError) as error:
        gone = "" if not args.pid or server_alive(args.pid) else " (the server is gone)"
        if in_edge_checks:
            print(f"FAIL hostile edge check: {error}{gone}")
            print(f"{pushes} passed, 1 failed")
            return 1
        print(f"FAIL hostile push {number} (seed {seed}): {error}{gone}")
        save_failure(args.out, seed, number, pending, error)
        print(f"reproduce: HOSTILE_SEED={seed} smoke/hostile.sh")
        print(f"{number - len(pending)} passed, 1 failed")
        return 1
    finally:
        if idle:
            idle.close()
    print(f"hostile: {pushes} pushes, {checks} health checks, {time.monotonic() - started:.0f} s, outcomes:")
    for key in sorted(outcomes):
        print(f"  {outcomes[key]:4d}  {key}")
    print(f"{pushes} passed, 0 failed")
    return 0


def save_failure(out, seed, number, pending, error):
    """Every push since the last passed check: its body, what it was, and the answer if any."""
    folder = Path(out) / f"seed-{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    for n, plan in pending:
        (folder / f"push-{n}.264").write_bytes(plan["body"])
        answer = plan.get("answer")
        meta = {k: plan[k] for k in ("what", "transport", "session", "query", "cut_at", "reuse", "rst", "pause")}
        meta["chunk_sizes"] = [len(c) for c in plan["chunks"]]
        meta["answer"] = answer.describe() if answer else None
        (folder / f"push-{n}.json").write_text(json.dumps(meta, indent=1) + "\n")
    (folder / "failure.txt").write_text(f"push {number}: {error}\n")
    print(f"saved {len(pending)} push(es) to {folder}")


if __name__ == "__main__":
    sys.exit(main())
