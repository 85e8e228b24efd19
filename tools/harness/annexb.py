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


def _pieces(data, bounds):
    edges = bounds + [len(data)]
    return [data[edges[k]:edges[k + 1]] for k in range(len(bounds))]


def split_access_units(data):
    """Cuts an H.264 Annex B stream before the first NAL unit of each access unit (AUD/SPS/PPS/SEI
    after a picture, or a slice with first_mb_in_slice == 0 after a picture). Each piece starts
    with its own start code, as a camera sends it. Returns (pieces, whether each holds an IDR)."""
    bounds, idr = [], []
    has_picture = False
    for begin, nal in _unit_starts(data, 1):
        t, nxt = data[nal] & 0x1F, data[nal + 1] if nal + 1 < len(data) else 0
        vcl = t in (1, 5)
        if not bounds or (has_picture and (t in (6, 7, 8, 9) or (14 <= t <= 18) or (vcl and nxt & 0x80))):
            bounds.append(begin)
            idr.append(False)
            has_picture = False
        if vcl:
            has_picture = True
            idr[-1] = idr[-1] or t == 5
    return _pieces(data, bounds), idr


def split_access_units_hevc(data):
    """The same for H.265 (base layer): a new access unit at an AUD, VPS/SPS/PPS or prefix SEI
    after a picture, or at a slice segment with first_slice_segment_in_pic_flag; keyframes are
    IRAP pictures (types 16-23)."""
    bounds, irap = [], []
    has_picture = False
    for begin, nal in _unit_starts(data, 2):
        t, first_byte = (data[nal] >> 1) & 0x3F, data[nal + 2] if nal + 2 < len(data) else 0
        vcl = t < 32
        if not bounds or (has_picture and (t in (32, 33, 34, 35, 39) or (41 <= t <= 44) or (vcl and first_byte & 0x80))):
            bounds.append(begin)
            irap.append(False)
            has_picture = False
        if vcl:
            has_picture = True
            irap[-1] = irap[-1] or 16 <= t <= 23
    return _pieces(data, bounds), irap


class Stream:
    """A whole .264 or .265 file and its access units in decode order."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            self.data = f.read()
        split = split_access_units_hevc if path.endswith(".265") else split_access_units
        self.aus, self.idr = split(self.data)
        self.keyframes = sum(self.idr)
