"""Hostile H.264 for smoke/hostile.py: start codes duplicated or removed, NAL headers corrupted,
and SPS/PPS written bit by bit (exp-Golomb) with sizes, counts and ids far out of range. Each
mutation takes (rng, body) and returns (new body, a short description)."""
from harness.annexb import START_CODE, nal_units, start_code_offsets
from harness.rbsp import BitWriter


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
