"""Hostile H.265 for smoke/hostile.py: two-byte NAL headers; the SPS rewritten with sizes, bit
depths and chroma formats far out of range (the rest kept, so its slices still parse); made-up
VPS and PPS with huge counts; units on layers above the base; parameter sets cut short. Each
mutation takes (rng, body) and returns (new body, a short description)."""
from harness.annexb import START_CODE, nal_units
from harness.rbsp import BitReader, BitWriter

from hostile_h264 import HUGE

HEVC_VPS, HEVC_SPS, HEVC_PPS = 32, 33, 34


def hevc_type(data, start):
    return (data[start] >> 1) & 0x3F


def hevc_header(nal_type, layer=0, temporal_id_plus1=1):
    return bytes([(nal_type << 1) | (layer >> 5), ((layer & 31) << 3) | temporal_id_plus1])


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
    return w.nal(unit[:2])[4:]


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
    return w.nal(hevc_header(HEVC_VPS))


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
    return w.nal(hevc_header(HEVC_PPS))


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
