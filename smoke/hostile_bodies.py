"""The bodies of smoke/hostile.py's pushes: a fixture (or two spliced) with one to three
mutations, codec-neutral ones here (bit flips, byte runs, truncation, garbage, empty, repeated),
the Annex B and parameter-set ones of hostile_h264 and hostile_h265. Each mutation takes (rng,
body) and returns (new body, a short description)."""
from harness.annexb import START_CODE

from hostile_h264 import corrupt_nal_headers, duplicate_start_codes, huge_parameter_sets, remove_start_codes
from hostile_h265 import hevc_layers, hevc_parameter_sets, hevc_truncate_units


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


# Each mutation and its weight, in the order the seeds were drawn with: a new order makes other
# bodies of the same HOSTILE_SEED.
MUTATIONS = [(bit_flips, 6), (byte_run, 4), (truncate, 4), (duplicate_start_codes, 3), (remove_start_codes, 3),
             (corrupt_nal_headers, 4), (huge_parameter_sets, 4), (garbage, 2), (zero_length, 1), (repeat, 2),
             # H.265's own (on an H.264 body they add another codec's units).
             (hevc_parameter_sets, 5), (hevc_layers, 3), (hevc_truncate_units, 3)]


def hostile_body(rng, fixtures):
    """A fixture (or two spliced), with one to three mutations."""
    name, data = rng.choice(fixtures)
    steps = [name]
    if rng.random() < 0.2:
        other, tail = rng.choice(fixtures)
        cut_a, cut_b = rng.randint(0, len(data)), rng.randint(0, len(tail))
        data = data[:cut_a] + tail[cut_b:]
        steps.append(f"spliced at {cut_a} with {other} from {cut_b}")
    mutations, weights = zip(*MUTATIONS)
    for mutation in rng.choices(mutations, weights, k=rng.choice([1, 1, 2, 3])):
        data, what = mutation(rng, data)
        steps.append(what)
    return data, "; ".join(steps)
