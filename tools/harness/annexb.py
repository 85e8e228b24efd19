"""Annex B byte streams: start codes, NAL units, and access units as a camera sends them."""

START_CODE = b"\x00\x00\x01"


def start_code_offsets(data):
    """Offsets of every 00 00 01 (a 4-byte start code is a zero byte before one)."""
    offsets, i = [], data.find(START_CODE)
    while i >= 0:
        offsets.append(i)
        i = data.find(START_CODE, i + 3)
    return offsets


def nal_units(data):
    """(start, end) of each NAL unit's bytes after its start code; a unit ends where the next
    start code's 00 00 01 begins (so a 4-byte start code's first zero stays with the unit)."""
    starts = [o + 3 for o in start_code_offsets(data)]
    return [(s, (starts[k + 1] - 3) if k + 1 < len(starts) else len(data)) for k, s in enumerate(starts)]


def nal_unit_bytes(data):
    """The NAL units' bytes, trailing zero bytes cut, empty ones left out."""
    units = (data[s:e].rstrip(b"\x00") for s, e in nal_units(data))
    return [unit for unit in units if unit]


def _unit_starts(data, header_bytes):
    """(begin, NAL offset) of each unit with at least `header_bytes` bytes after its start code;
    begin includes a 4-byte start code's leading zero. Stops at the first unit that has fewer."""
    i, n = 0, len(data)
    while True:
        j = data.find(START_CODE, i)
        if j < 0 or j + 2 + header_bytes >= n:
            return
        yield (j - 1 if j > 0 and data[j - 1] == 0 else j), j + 3
        i = j + 3


def _h264_unit(data, nal):
    """(a slice of a picture, a unit that opens a new access unit after a picture, a keyframe's
    slice) for the H.264 unit at `nal`: AUD/SPS/PPS/SEI and types 14-18 open one, and so does a
    slice with first_mb_in_slice == 0 (its first bit set)."""
    t, nxt = data[nal] & 0x1F, data[nal + 1] if nal + 1 < len(data) else 0
    vcl = t in (1, 5)
    return vcl, t in (6, 7, 8, 9) or 14 <= t <= 18 or (vcl and bool(nxt & 0x80)), t == 5


def _hevc_unit(data, nal):
    """The same for H.265 (base layer): an AUD, VPS/SPS/PPS or prefix SEI (and types 41-44) opens
    one, and so does a slice segment with first_slice_segment_in_pic_flag; keyframes are IRAP
    pictures (types 16-23)."""
    t, first_byte = (data[nal] >> 1) & 0x3F, data[nal + 2] if nal + 2 < len(data) else 0
    vcl = t < 32
    return vcl, t in (32, 33, 34, 35, 39) or 41 <= t <= 44 or (vcl and bool(first_byte & 0x80)), 16 <= t <= 23


def _access_units(data, header_bytes, classify):
    """Cuts the stream before the first NAL unit of each access unit: the first unit, and each
    unit that classify() says opens one after a picture. Each piece starts with its own start
    code, as a camera sends it. Returns (pieces, whether each holds a keyframe)."""
    bounds, keys = [], []
    has_picture = False
    for begin, nal in _unit_starts(data, header_bytes):
        vcl, opens, key = classify(data, nal)
        if not bounds or (has_picture and opens):
            bounds.append(begin)
            keys.append(False)
            has_picture = False
        if vcl:
            has_picture = True
            keys[-1] = keys[-1] or key
    edges = bounds + [len(data)]
    return [data[edges[k]:edges[k + 1]] for k in range(len(bounds))], keys


def split_access_units(data):
    """An H.264 Annex B stream's access units in decode order, and whether each holds an IDR."""
    return _access_units(data, 1, _h264_unit)


def split_access_units_hevc(data):
    """An H.265 Annex B stream's access units (base layer), and whether each is an IRAP picture."""
    return _access_units(data, 2, _hevc_unit)


class Stream:
    """A whole .264 or .265 file and its access units in decode order."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.data = f.read()
        split = split_access_units_hevc if path.endswith(".265") else split_access_units
        self.aus, self.idr = split(self.data)
        self.keyframes = sum(self.idr)
