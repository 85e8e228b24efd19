#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets from the project's fixtures.

    Fuzz/make-corpus.py Tests/Fixtures .fuzz/seeds

One folder per target (annexb-assembly, parameter-sets, avcc, hevc-annexb-assembly,
hevc-parameter-sets, stream-front, request-target, container-samples, source-url): the H.264 ones from the .264
fixtures, the H.265 ones from the .265 fixtures, stream-front from both (and both codecs in one
stream), container-samples from the container fixtures (Containers/) and the .264 fixtures' avcC
records. The seeds are
derived data, regenerated on every `make fuzz`, and never committed: the fixtures they come
from are. libFuzzer only reads these folders; what it learns goes to .fuzz/corpus/<target>.
"""

import hashlib
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from harness.annexb import nal_unit_bytes  # noqa: E402  (tools/ is on the path only now)

START_CODE = b"\x00\x00\x00\x01"
SPS, PPS, SEI, IDR, SLICE = 7, 8, 6, 5, 1
# H.265 nal_unit_type values: VPS, SPS, PPS, prefix SEI; slice segments are 0...9 and 16...21.
HEVC_VPS, HEVC_SPS, HEVC_PPS, HEVC_PREFIX_SEI = 32, 33, 34, 39
# Enough of a slice for its header (the parser unescapes at most 128 bytes of it).
SLICE_HEADER_BYTES = 64
PROFILES_WITH_AVCC_EXTENSION = {100, 110, 122, 144}


def small_units(units):
    """The first units, each cut to a slice header's worth: small seeds run fast."""
    return [unit[:SLICE_HEADER_BYTES] for unit in units[:8]]


def annex_b(units):
    return b"".join(START_CODE + unit for unit in units)


def length_prefixed(units, size):
    return b"".join(len(unit).to_bytes(size, "big") + unit for unit in units)


def avcc_record(sps, pps):
    record = bytes([1, sps[1], sps[2], sps[3], 0xFF, 0xE1]) + len(sps).to_bytes(2, "big") + sps
    record += bytes([1]) + len(pps).to_bytes(2, "big") + pps
    if sps[1] in PROFILES_WITH_AVCC_EXTENSION:
        record += bytes([0xFC | 1, 0xF8, 0xF8, 0])  # 4:2:0, 8 bits: a plausible seed, mutated anyway
    return record


class Corpus:
    def __init__(self, root, target):
        self.folder = os.path.join(root, target)
        shutil.rmtree(self.folder, ignore_errors=True)
        os.makedirs(self.folder)
        self.seen = set()

    def add(self, name, data):
        digest = hashlib.sha1(data).hexdigest()
        if not data or digest in self.seen:
            return
        self.seen.add(digest)
        with open(os.path.join(self.folder, f"{name}-{digest[:10]}"), "wb") as seed:
            seed.write(data)

    def __len__(self):
        return len(self.seen)


# Targets a client of the API sends (openapi.yaml), plus the hostile ones the parser exists for.
REQUEST_TARGETS = [
    "/", "/healthz", "/metrics", "/system", "/sessions", "/sessions/cam1",
    "/sessions/cam1/nalus", "/sessions/cam1/nalus?flush=true",
    "/sessions/cam1/nalus?format=jpeg&width=320&height=180&quality=80",
    "/sessions/cam1/frame/latest.jpg", "/sessions/cam1/frame/latest.jpg?width=160",
    "/sessions/cam%201/frame/latest.jpg?width=160&wait=5000",
    "/sessions/cam1/frame/latest.yuv?after=12&wait=5000", "/sessions/cam1/frame/latest.rgb?height=90",
    "/sessions/cam1/frames.mjpeg?fps=5&width=640&quality=70",
    "/sessions/cam1/frame/latest.jpg?access_token=s3cr3t%2Btoken&width=64",
    "/sessions/caf%C3%A9/frame/latest.jpg", "/sessions/%E6%9D%B1%E4%BA%AC/frames.mjpeg",
    "/sessions/a.b_c~d-e", "/sessions/x?label=a+b&label=c%2Bd&flag&&=v",
    "/sessions/victim%00/frames.mjpeg", "/sessions/base%2Fframe%2Flatest.jpg",
    "/sessions/../system", "/sessions/%2e%2e/x", "/sessions//frames.mjpeg", "/sessions/",
    "/sessions/%zz", "/sessions/%4", "/sessions/%C0%AF", "/a#fragment", "*", "http://host/sessions",
]


def add_hevc_seeds(corpora, path):
    """The H.265 targets' seeds from one .265 fixture, as (a) and (b) below do for H.264."""
    stem = os.path.basename(path)[:-4]
    with open(path, "rb") as fixture:
        stream = fixture.read()
    units = nal_unit_bytes(stream)
    corpora["hevc-annexb-assembly"].add(stem, stream)
    corpora["hevc-annexb-assembly"].add(stem + "-head", stream[:3000])
    kind = lambda unit: unit[0] >> 1 & 0x3F
    by_type = lambda wanted: [unit for unit in units if kind(unit) == wanted]
    for wanted, name in [(HEVC_VPS, "vps"), (HEVC_SPS, "sps"), (HEVC_PPS, "pps"), (HEVC_PREFIX_SEI, "sei")]:
        for unit in by_type(wanted):
            corpora["hevc-parameter-sets"].add(f"{stem}-{name}", annex_b([unit]))
    sets = by_type(HEVC_VPS)[:1] + by_type(HEVC_SPS)[:1] + by_type(HEVC_PPS)[:1]
    first_slices = {}
    for unit in units:
        if kind(unit) <= 9 or 16 <= kind(unit) <= 21:
            first_slices.setdefault((kind(unit), unit[2] >> 7 if len(unit) > 2 else 0), unit)
    for (slice_kind, first), unit in sorted(first_slices.items()):
        corpora["hevc-parameter-sets"].add(
            f"{stem}-slice{slice_kind}-{first}", annex_b(sets + [unit[:SLICE_HEADER_BYTES]]))


def add_front_seeds(corpus, fixtures):
    """The codec-neutral path's seeds: each fixture's start (parameter sets and the first
    pictures), its slices without the parameter sets (no codec to detect), and an H.264 start
    followed by an H.265 one (another codec's parameter sets in a stream)."""
    heads = {}
    for file_name in sorted(os.listdir(fixtures)):
        if not file_name.endswith((".264", ".265")):
            continue
        with open(os.path.join(fixtures, file_name), "rb") as fixture:
            stream = fixture.read()
        stem = file_name.replace(".", "-")
        heads[file_name[-3:]] = heads.get(file_name[-3:]) or stream[:3000]
        corpus.add(stem + "-head", stream[:3000])
        if file_name.endswith(".265"):
            slices = [unit for unit in nal_unit_bytes(stream) if unit[0] >> 1 & 0x3F < 32]
        else:
            slices = [unit for unit in nal_unit_bytes(stream) if unit[0] & 0x1F in (IDR, SLICE)]
        corpus.add(stem + "-slices", annex_b([unit[:SLICE_HEADER_BYTES] for unit in slices[:6]]))
    if "264" in heads and "265" in heads:
        corpus.add("h264-then-h265", heads["264"] + heads["265"])
        corpus.add("h265-then-h264", heads["265"] + heads["264"])


# container-samples' first byte: the container (bits 0-1) and the piece size (bits 3-7, an index
# into the target's list); bit 2 set makes the rest a sample description and a sample.
CONTAINER_MODES = {"mpegts": 0, "mp4": 1, "matroska": 2, "flv": 3}


def add_container_seeds(corpus, fixtures):
    """Each container fixture, prefixed with its container and two piece sizes (1000, 4096 bytes)."""
    folder = os.path.join(fixtures, "Containers")
    if not os.path.isdir(folder):
        return
    with open(os.path.join(folder, "MANIFEST.tsv")) as manifest:
        rows = [line.rstrip("\n").split("\t") for line in manifest][1:]
    for row in rows:
        name, container = row[0], row[1]
        with open(os.path.join(folder, name), "rb") as fixture:
            data = fixture.read()
        for piece in (6, 7):
            corpus.add(f"{name}-{piece}", bytes([CONTAINER_MODES[container] | piece << 3]) + data)


# source-url: URLs of every scheme and the forms parsers read differently (extra colons, '@'
# and '#' tricks, brackets, ports with signs or leading zeros, secrets in paths).
SOURCE_URLS = [
    "rtsp://admin:pass@192.168.1.64:554/Streaming/Channels/101",
    "rtsp://127.0.0.3:19403:cam.example.com:554/x",
    "rtsp://cam.example.com:554:19403/x",
    "rtsp://a@b@127.0.0.2:8554/x?y=1#frag:1@evil",
    "rtsp://127.0.0.2#@127.0.0.3:554/",
    "rtsp://[fd00::1]:8554/cam",
    "rtsp://[::ffff:127.0.0.3]/x",
    "rtsp://[127.0.0.1]:1/x",
    "rtsp://h:0554/x",
    "rtsp://h:+554/x",
    "rtsp://10.0.0.67:554/user=admin_password=tlJwpbo6_channel=1_stream=0.sdp?real_stream",
    "rtmp://h.example/live/cam?token=abc",
    "rtmp://user:pw@h:1936/app/stream",
    "srt://127.0.0.2:9000?mode=caller&passphrase=0123456789&streamid=%23!::r=live",
    "srt://[::1]:9000",
    "http://u:p@h:8080/a/b.ts?x=1&sig=2",
    "https://cdn.example/live.m3u8?X-Amz-Signature=abc",
    "HTTPS://Host.Example.COM?q",
]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make-corpus.py FIXTURES_DIR OUT_DIR")
    fixtures, out = sys.argv[1], sys.argv[2]
    corpora = {
        name: Corpus(out, name)
        for name in ["annexb-assembly", "parameter-sets", "avcc", "hevc-annexb-assembly", "hevc-parameter-sets",
                     "stream-front", "request-target", "container-samples", "source-url"]
    }
    add_front_seeds(corpora["stream-front"], fixtures)
    add_container_seeds(corpora["container-samples"], fixtures)

    for file_name in sorted(os.listdir(fixtures)):
        if file_name.endswith(".265"):
            add_hevc_seeds(corpora, os.path.join(fixtures, file_name))
        if not file_name.endswith(".264"):
            continue
        stem = file_name[:-4]
        with open(os.path.join(fixtures, file_name), "rb") as fixture:
            stream = fixture.read()
        units = nal_unit_bytes(stream)

        # (a) The whole stream, and its start (parameter sets and the first pictures) for speed.
        corpora["annexb-assembly"].add(stem, stream)
        corpora["annexb-assembly"].add(stem + "-head", stream[:3000])

        # (b) Every distinct parameter set and SEI alone, and SPS + PPS + each kind of slice
        # header, so slice headers are read against the sets they refer to.
        by_type = lambda kind: [unit for unit in units if unit[0] & 0x1F == kind]
        for kind, name in [(SPS, "sps"), (PPS, "pps"), (SEI, "sei")]:
            for unit in by_type(kind):
                corpora["parameter-sets"].add(f"{stem}-{name}", annex_b([unit]))
        sets = by_type(SPS)[:1] + by_type(PPS)[:1]
        first_slices = {}
        for unit in units:
            if unit[0] & 0x1F in (IDR, SLICE):
                first_slices.setdefault((unit[0] & 0x1F, unit[1] if len(unit) > 1 else 0), unit)
        for (kind, _), unit in sorted(first_slices.items()):
            corpora["parameter-sets"].add(f"{stem}-slice{kind}", annex_b(sets + [unit[:SLICE_HEADER_BYTES]]))

        # (b) avcC records and length-prefixed units (4-, 2- and 1-byte lengths).
        if by_type(SPS) and by_type(PPS):
            corpora["avcc"].add(f"{stem}-avcC", avcc_record(by_type(SPS)[0], by_type(PPS)[0]))
            # container-samples, direct mode (H.264, whole access units): the record and a sample.
            record = avcc_record(by_type(SPS)[0], by_type(PPS)[0])
            corpora["container-samples"].add(
                f"{stem}-sample", bytes([4]) + len(record).to_bytes(2, "big") + record + length_prefixed(small_units(units), 4))
        small = [unit[:SLICE_HEADER_BYTES] for unit in units[:8]]
        corpora["avcc"].add(f"{stem}-length4", length_prefixed(small, 4))
        corpora["avcc"].add(f"{stem}-length2", length_prefixed(small, 2))
        corpora["avcc"].add(f"{stem}-length1", length_prefixed(small, 1))

    for number, target in enumerate(REQUEST_TARGETS):
        corpora["request-target"].add(f"target{number:02d}", target.encode())

    for number, url in enumerate(SOURCE_URLS):
        corpora["source-url"].add(f"url{number:02d}", url.encode())

    for name, corpus in corpora.items():
        print(f"seeds: {len(corpus):4d} in {corpus.folder}")


if __name__ == "__main__":
    main()
