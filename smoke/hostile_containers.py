"""Hostile containers for smoke/hostile.py: MP4, MPEG-TS, Matroska and FLV fixtures whose
structure lies (box, element and tag sizes far past the body or zero, sample tables with huge
counts, avcC/hvcC records with impossible lengths, TS packets without their sync byte or with
huge adaptation fields, PMTs naming other stream types), plus the codec-neutral mutations of hostile_bodies and splices of two
containers or of a container and Annex B. Each mutation takes (rng, body) and returns (new body,
a short description). The server must answer each with a picture summary or a problem+json with
a code (`invalid_container`, `no_video_track`, `container_needs_seeking`, ...), whatever
libavformat makes of it."""
import struct

from hostile_bodies import bit_flips, byte_run, truncate

HUGE32 = [0, 1, 7, 8, 0x7FFFFFFF, 0xFFFFFFFF, 0xFFFFFFF0]
# MP4 boxes whose children start right after their 8-byte head.
MP4_PARENTS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"moof", b"traf", b"mvex", b"edts", b"dinf"}
# Full boxes whose 32-bit entry count follows version and flags: a huge count over a few bytes.
MP4_COUNTED = [b"stsz", b"stco", b"co64", b"stts", b"stsc", b"ctts", b"stss", b"stsd", b"elst", b"trun"]


def mp4_boxes(data, start=0, end=None, depth=0):
    """(offset, size, type) of every box reachable through the usual parents."""
    end = len(data) if end is None else end
    found, at = [], start
    while at + 8 <= end and depth < 8:
        size, kind = struct.unpack(">I4s", data[at:at + 8])
        if size < 8 or at + size > end:
            break
        found.append((at, size, kind))
        if kind in MP4_PARENTS:
            found += mp4_boxes(data, at + 8, at + size, depth + 1)
        at += size
    return found


def mp4_box_sizes(rng, data):
    boxes = mp4_boxes(data)
    if not boxes:
        return data, "no MP4 boxes to lie about"
    data = bytearray(data)
    chosen = rng.sample(boxes, min(len(boxes), rng.randint(1, 3)))
    told = []
    for offset, _, kind in chosen:
        if rng.random() < 0.25:   # size 1: a 64-bit largesize follows the type, here far past the body
            data[offset:offset + 4] = struct.pack(">I", 1)
            data[offset + 8:offset + 16] = struct.pack(">Q", rng.choice([1 << 40, (1 << 64) - 1, 9]))
            told.append(f"{kind.decode('latin-1')}=largesize")
        else:
            size = rng.choice(HUGE32)
            data[offset:offset + 4] = struct.pack(">I", size)
            told.append(f"{kind.decode('latin-1')}={size}")
    return bytes(data), "MP4 box sizes " + " ".join(told)


def mp4_huge_counts(rng, data):
    data, told = bytearray(data), []
    for kind in rng.sample(MP4_COUNTED, rng.randint(1, 4)):
        at = data.find(kind)
        if at >= 4 and at + 12 <= len(data):
            count = rng.choice([0xFFFFFFFF, 0x40000000, 0x10000, 0])
            data[at + 8:at + 12] = struct.pack(">I", count)
            told.append(f"{kind.decode()}={count}")
    return bytes(data), "MP4 entry counts " + (" ".join(told) or "(none found)")


def decoder_configuration(rng, data):
    """avcC / hvcC (in MP4, Matroska's CodecPrivate and FLV's sequence header alike) with a
    length-size of 1 or 2 bytes, dozens of parameter sets announced, or their lengths huge."""
    data = bytearray(data)
    for name in (b"avcC", b"hvcC"):
        at = data.find(name)
        if at < 0:
            continue
        record = at + 4
        if name == b"avcC" and record + 8 <= len(data):
            choice = rng.randrange(3)
            if choice == 0:
                data[record + 4] = 0xFC | rng.choice([0, 1, 2])            # NAL length size 1, 2 or 3
            elif choice == 1:
                data[record + 5] = 0xE0 | 31                              # 31 SPSs announced
            else:
                data[record + 6:record + 8] = struct.pack(">H", rng.choice([0, 0xFFFF, 0x8000]))
            return bytes(data), f"avcC field {choice} lies"
        if name == b"hvcC" and record + 26 <= len(data):
            choice = rng.randrange(3)
            if choice == 0:
                data[record + 21] = (data[record + 21] & 0xFC) | rng.choice([0, 1, 2])
            elif choice == 1:
                data[record + 22] = 255                                   # 255 arrays
            else:
                data[record + 24:record + 26] = struct.pack(">H", 0xFFFF)  # the first array's count
            return bytes(data), f"hvcC field {choice} lies"
    # FLV and Matroska carry the record without a box name: lie in the first AVC sequence header.
    at = data.find(b"\x17\x00\x00\x00\x00\x01")
    if at >= 0 and at + 12 <= len(data):
        data[at + 10] = 0xE0 | 31
        return bytes(data), "FLV AVC sequence header announces 31 SPSs"
    return bytes(data), "no decoder configuration found"


def ts_packets(rng, data):
    data, told = bytearray(data), []
    packets = len(data) // 188
    if not packets:
        return bytes(data), "no TS packets"
    for _ in range(rng.randint(1, 12)):
        at = rng.randrange(packets) * 188
        choice = rng.randrange(4)
        if choice == 0:
            data[at] = rng.choice([0x00, 0x48, 0xFF])                     # sync byte gone
        elif choice == 1:
            data[at + 3] = (data[at + 3] & 0xCF) | 0x30                   # adaptation field...
            data[at + 4] = rng.choice([183, 184, 255])                   # ...as long as the packet, or longer
        elif choice == 2:
            pid = rng.choice([0x0000, 0x1FFF, 0x0100, 0x1000, rng.randrange(0x2000)])
            data[at + 1] = (data[at + 1] & 0xE0) | (pid >> 8)
            data[at + 2] = pid & 0xFF
        else:
            data[at + 3] ^= 0x0F                                         # continuity counter jumps
        told.append("sync adaptation pid continuity".split()[choice])
    return bytes(data), "TS packets: " + ",".join(told)


def ts_stream_types(rng, data):
    """PMTs whose elementary streams claim other stream types (reserved, private, another codec)
    or a huge program_info_length."""
    data, told, at = bytearray(data), [], 0
    while True:
        at = data.find(b"\x00\x02\xb0", at)   # pointer field 0, table_id 2 (PMT), section syntax
        if at < 0 or at + 16 > len(data):
            break
        info_length = ((data[at + 11] & 0x0F) << 8) | data[at + 12]
        if rng.random() < 0.2:
            data[at + 11] = (data[at + 11] & 0xF0) | 0x0F
            data[at + 12] = 0xFF
            told.append("program_info_length=4095")
        elif at + 13 + info_length < len(data):
            kind = rng.choice([0x00, 0x05, 0x06, 0x0F, 0x1B, 0x24, 0x7F, 0x80, 0xFF])
            data[at + 13 + info_length] = kind
            told.append(f"stream_type={kind:#04x}")
        at += 3
    return bytes(data), "TS PMTs: " + (",".join(told) or "(none found)")


def ebml_sizes(rng, data):
    """Matroska elements (EBML header, Segment, Cluster, SimpleBlock, CodecPrivate, Tracks) whose
    size says unknown, huge or zero."""
    data, told = bytearray(data), []
    ids = {b"\x1a\x45\xdf\xa3": "EBML", b"\x18\x53\x80\x67": "Segment", b"\x1f\x43\xb6\x75": "Cluster",
           b"\x16\x54\xae\x6b": "Tracks", b"\x63\xa2": "CodecPrivate", b"\xa3": "SimpleBlock"}
    for element in rng.sample(list(ids), rng.randint(1, 3)):
        at = data.find(element, rng.randrange(max(1, len(data) // 2)) if element == b"\xa3" else 0)
        if at < 0:
            continue
        size_at = at + len(element)
        size = rng.choice([b"\x01\xff\xff\xff\xff\xff\xff\xff", b"\x01\x00\xff\xff\xff\xff\xff\xff", b"\x80",
                           b"\xff", b"\x08\xff\xff\xff\xff\xff\xff"])
        data[size_at:size_at + len(size)] = size
        told.append(f"{ids[element]}={size.hex()}")
    return bytes(data), "EBML sizes " + (" ".join(told) or "(none found)")


def flv_tags(rng, data):
    """FLV tags (after the 9-byte header and the first PreviousTagSize) with lying sizes."""
    data, told, at = bytearray(data), [], 13
    tags = []
    while at + 11 <= len(data):
        size = int.from_bytes(data[at + 1:at + 4], "big")
        tags.append(at)
        at += 11 + size + 4
    for tag in rng.sample(tags, min(len(tags), rng.randint(1, 4))) if tags else []:
        choice = rng.randrange(3)
        if choice == 0:
            data[tag + 1:tag + 4] = rng.choice([b"\xff\xff\xff", b"\x00\x00\x00", b"\x10\x00\x00"])
        elif choice == 1:
            data[tag] = rng.choice([0, 9, 18, 31, 255])                  # tag type
        else:
            data[tag + 11] = rng.choice([0x17, 0x27, 0x1C, 0xFF])        # frame type and codec id
        told.append("size type codec".split()[choice])
    return bytes(data), "FLV tags: " + (",".join(told) or "(none)")


def container_splice(rng, data, others):
    """The start of this container and the rest of another (or of an Annex B stream)."""
    name, other = rng.choice(others)
    cut_a, cut_b = rng.randint(0, len(data)), rng.randint(0, len(other))
    return data[:cut_a] + other[cut_b:], f"spliced at {cut_a} with {name} from {cut_b}"


# Mutations by container (a fixture's suffix tells it), then the codec-neutral ones every container
# gets.
BY_SUFFIX = {".mp4": [(mp4_box_sizes, 5), (mp4_huge_counts, 4), (decoder_configuration, 3)],
             ".ts": [(ts_packets, 8), (ts_stream_types, 4)],
             ".mkv": [(ebml_sizes, 6), (decoder_configuration, 2)],
             ".webm": [(ebml_sizes, 6)],
             ".flv": [(flv_tags, 6), (decoder_configuration, 3)]}
NEUTRAL = [(bit_flips, 3), (byte_run, 2), (truncate, 3)]


def hostile_container(rng, containers, annexb):
    """A container fixture (sometimes spliced with another or with Annex B), with one to three
    mutations of its own structure or codec-neutral ones."""
    name, data = rng.choice(containers)
    steps = [name]
    if rng.random() < 0.15:
        data, what = container_splice(rng, data, containers + annexb)
        steps.append(what)
    suffix = name[name.rindex("."):]
    mutations, weights = zip(*(BY_SUFFIX.get(suffix, []) + NEUTRAL))
    for mutation in rng.choices(mutations, weights, k=rng.choice([1, 1, 2, 3])):
        data, what = mutation(rng, data)
        steps.append(what)
    return data, "; ".join(steps)
