"""B4: freshness of a real-time 1080p Annex B push (the last byte of a picture to the picture
served by a long poll); B4c: the same for a fragmented-MP4 push."""
import json
import os
import subprocess
import threading
import time

from harness.annexb import Stream
from harness.metrics import histogram, histogram_delta, histogram_quantile, metric_value
from harness.rawhttp import ChunkedPush
from harness.stats import fmt, percentile

from .common import (DETAILS, F1080, FPS, ROOT, STREAMS, BenchFailure, check_frames, command, frametap, long_poll,
                     realtime_push, row)


def watch_served(port, session, served, done):
    """Long-polls the session's newest picture until `done` is set, noting in `served` when each
    picture number was first served (perf_counter seconds); returns the started thread."""
    observer = threading.Thread(target=long_poll, args=(port, session, 1000, done, served.setdefault))
    observer.start()
    return observer


def bench_freshness(runs):
    stream = Stream(F1080)
    server = frametap()
    pooled_last, pooled_next = [], []
    per_run = []
    try:
        before = server.metrics()
        for r in range(runs):
            session = "b4-%d" % r
            sent_end = {}
            sent_begin = {}
            served = {}
            done = threading.Event()
            server.json("PUT", "/sessions/%s" % session, body=b"{}")

            observer = watch_served(server.port, session, served, done)

            def sent(i, begin, end):
                sent_begin[i] = begin
                sent_end[i] = end

            summary = realtime_push(server, stream, session, on_sent=sent)
            time.sleep(0.2)
            done.set()
            observer.join()
            check_frames("B4", summary["frames"], len(stream.aus))
            last, nxt = [], []
            # seq k is access unit k-1 (one picture per unit, no reordering in this stream);
            # the last picture is only known complete at the flush, so it is left out.
            for seq, t in served.items():
                i = seq - 1
                if i + 1 in sent_begin:
                    last.append((t - sent_end[i]) * 1000)
                    nxt.append((t - sent_begin[i + 1]) * 1000)
            if len(last) < 0.95 * (len(stream.aus) - 1):
                raise BenchFailure("B4: the long poll saw only %d of %d pictures" % (len(last), len(stream.aus)))
            pooled_last += last
            pooled_next += nxt
            per_run.append((percentile(last, 50), percentile(last, 99), percentile(nxt, 50), percentile(nxt, 99),
                            len(last)))
            server.json("DELETE", "/sessions/%s" % session)
        after = server.metrics()
    finally:
        server.stop()
    dec = histogram_delta(histogram(after, "frametap_decode_latency_seconds"),
                          histogram(before, "frametap_decode_latency_seconds"))
    enc = histogram_delta(histogram(after, "frametap_picture_encode_seconds"),
                          histogram(before, "frametap_picture_encode_seconds"))
    enc_sum = metric_value(after, "frametap_picture_encode_seconds_sum") - metric_value(
        before, "frametap_picture_encode_seconds_sum")
    enc_count = metric_value(after, "frametap_picture_encode_seconds_count") - metric_value(
        before, "frametap_picture_encode_seconds_count")
    dec_sum = metric_value(after, "frametap_decode_latency_seconds_sum") - metric_value(
        before, "frametap_decode_latency_seconds_sum")
    dec_count = metric_value(after, "frametap_decode_latency_seconds_count") - metric_value(
        before, "frametap_decode_latency_seconds_count")
    p50, p99 = percentile(pooled_last, 50), percentile(pooled_last, 99)
    n50, n99 = percentile(pooled_next, 50), percentile(pooled_next, 99)
    row("B4", "freshness, 1080p30 real-time push: last byte of a picture → served by the long poll (ms p50 / p99)",
        "%s / %s" % (fmt(p50), fmt(p99)), "—", "", float("nan"), "p50 ≤ 10, p99 ≤ 25", p50 <= 10 and p99 <= 25,
        "from the first byte of the *next* picture: %s / %s ms" % (fmt(n50), fmt(n99)))
    DETAILS.append(
        "### B4 freshness\n\nA python pusher sends each access unit of the 1080p stream as one HTTP chunk at 30/s "
        "and notes when its last byte was written; a long poll (`latest.jpg?after=N&wait=1000`, keep-alive) notes "
        "when each picture arrives. Pooled over %d runs (%d pictures):\n\n"
        "| measured from | p50 ms | p99 ms |\n|---|---|---|\n"
        "| last byte of the picture's access unit written | %s | %s |\n"
        "| first byte of the next access unit written | %s | %s |\n\n"
        "Per run (p50/p99 from last byte; p50/p99 from next unit; pictures): %s\n\n"
        "Server side (/metrics over these runs): receipt of the completing bytes → picture published: mean %.2f ms, "
        "p50 ≤ %s s, p99 ≤ %s s (bucket bounds); JPEG encode: mean %.2f ms over %d encodes, p50 ≤ %s s, p99 ≤ %s s.\n"
        % (runs, len(pooled_last), fmt(p50, 2), fmt(p99, 2), fmt(n50, 2), fmt(n99, 2),
           "; ".join("%.1f/%.1f; %.1f/%.1f; %d" % x for x in per_run),
           1000 * dec_sum / max(dec_count, 1), histogram_quantile(dec, 0.5), histogram_quantile(dec, 0.99),
           1000 * enc_sum / max(enc_count, 1), enc_count, histogram_quantile(enc, 0.5), histogram_quantile(enc, 0.99)))


def mp4_boxes(data):
    """Top-level MP4 boxes as (type, bytes)."""
    boxes, offset = [], 0
    while offset + 8 <= len(data):
        size = int.from_bytes(data[offset:offset + 4], "big")
        kind = data[offset + 4:offset + 8].decode("latin-1")
        if size == 1:
            size = int.from_bytes(data[offset + 8:offset + 16], "big")
        if size < 8 or offset + size > len(data):
            raise BenchFailure("B4c: a malformed box %r at %d" % (kind, offset))
        boxes.append((kind, data[offset:offset + size]))
        offset += size
    return boxes


def fragmented_1080():
    """cam1080.264 as fragmented MP4, one fragment per picture: (init segment, [fragment per picture])."""
    path = os.path.join(STREAMS, "cam1080_fragmented.mp4")
    if not os.path.exists(path):
        subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-r", "30", "-i", F1080, "-c", "copy",
                        "-movflags", "frag_every_frame+empty_moov+default_base_moof", path + ".tmp.mp4"], check=True)
        os.rename(path + ".tmp.mp4", path)
    command("ffmpeg -r 30 -i %s -c copy -movflags frag_every_frame+empty_moov+default_base_moof %s"
            % (os.path.relpath(F1080, ROOT), os.path.relpath(path, ROOT)))
    with open(path, "rb") as f:
        boxes = mp4_boxes(f.read())
    init = b"".join(body for kind, body in boxes if kind in ("ftyp", "moov"))
    fragments, current = [], b""
    for kind, body in boxes:
        if kind in ("ftyp", "moov"):
            continue
        current += body
        if kind == "mdat":
            fragments.append(current)
            current = b""
    return init, fragments


def bench_freshness_fmp4(runs):
    stream = Stream(F1080)
    init, fragments = fragmented_1080()
    if len(fragments) != len(stream.aus):
        raise BenchFailure("B4c: %d fragments for %d pictures" % (len(fragments), len(stream.aus)))
    server = frametap()
    pooled = []
    per_run = []
    try:
        for r in range(runs):
            session = "b4c-%d" % r
            sent_end, served = {}, {}
            done = threading.Event()
            server.json("PUT", "/sessions/%s" % session, body=b"{}")

            observer = watch_served(server.port, session, served, done)
            push = ChunkedPush(server.port, session, "flush=true", content_type="video/mp4")
            push.sock.sendall(ChunkedPush.chunk(init))
            t0 = time.perf_counter() + 0.05
            for i, fragment in enumerate(fragments):
                delay = t0 + i / FPS - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                push.sock.sendall(ChunkedPush.chunk(fragment))
                sent_end[i] = time.perf_counter()
            status, body = push.finish_and_read()
            if status != 200:
                raise BenchFailure("B4c: push -> %d %s" % (status, body[:300]))
            time.sleep(0.2)
            done.set()
            observer.join()
            check_frames("B4c", json.loads(body)["frames"], len(fragments))
            # seq k is the picture of fragment k-1 (no reordering in this stream). Unlike Annex B, the
            # last picture needs no next one: every fragment counts.
            latencies = [(t - sent_end[seq - 1]) * 1000 for seq, t in served.items() if seq - 1 in sent_end]
            if len(latencies) < 0.95 * len(fragments):
                raise BenchFailure("B4c: the long poll saw only %d of %d pictures" % (len(latencies), len(fragments)))
            pooled += latencies
            per_run.append((percentile(latencies, 50), percentile(latencies, 99), len(latencies)))
            server.json("DELETE", "/sessions/%s" % session)
    finally:
        server.stop()
    p50, p99 = percentile(pooled, 50), percentile(pooled, 99)
    row("B4c", "freshness, 1080p30 fragmented-MP4 push (one fragment per picture, real time): last byte of a "
        "fragment → its picture served by the long poll (ms p50 / p99)",
        "%s / %s" % (fmt(p50), fmt(p99)), "—", "", float("nan"), "p50 ≤ 10, p99 ≤ 25", p50 <= 10 and p99 <= 25)
    DETAILS.append(
        "### B4c freshness of a fragmented-MP4 push\n\nThe 1080p stream remuxed by ffmpeg into fragmented MP4 "
        "(`frag_every_frame+empty_moov+default_base_moof`: an init segment, then one moof+mdat per picture). A python "
        "pusher sends the init segment, then each fragment as one HTTP chunk at 30/s (`Content-Type: video/mp4`), and "
        "notes when its last byte was written; a long poll notes when each picture arrives. The demuxer (libavformat's "
        "mov, on the session's demuxer thread) hands over each sample when its last byte is read, and the decoder "
        "ends the access unit there, so unlike B4 no picture waits for the next one. Pooled over %d runs (%d "
        "pictures): p50 %s ms, p99 %s ms. Per run (p50/p99; pictures): %s.\n"
        % (runs, len(pooled), fmt(p50, 2), fmt(p99, 2), "; ".join("%.1f/%.1f; %d" % x for x in per_run)))
