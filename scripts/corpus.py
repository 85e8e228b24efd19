#!/usr/bin/env python3
"""What the conformance checks (scripts/conformance.sh, scripts/conformance-http.sh) read of a
corpus, whatever shape its manifest has. Python stdlib only.

    scripts/corpus.py rows CORPUS_DIR
        One line per stream of CORPUS_DIR/MANIFEST.tsv, fields separated by 0x1F:
        file, width, height, frames, pix_fmt, whole-output MD5, per-picture NV12 MD5 file.
        Fields a manifest does not have are empty. Two layouts are read, by their header row:
          * file source notes width height frames pix_fmt field_order yuv_md5 md5_source
            decode_flags (Tests/Fixtures, ../shared/testdata/h264);
          * file bytes frames size pix_fmt md5_whole_yuv420p frame_md5s_nv12 notes
            (../shared/testdata/h265: size is WxH).
        The per-picture file is the frame_md5s_nv12 column, else <file>.md5 when it exists: one
        MD5 per picture in output order, over the picture as NV12 (how the references were made:
        `ffmpeg -i F -pix_fmt nv12 -f framehash -hash md5`).

    scripts/corpus.py digest [RAW_COPY]
        Standard input (raw pictures back to back) -> "MD5 BYTE_COUNT", in one pass; with
        RAW_COPY the bytes are also written there (for the per-picture check).

    scripts/corpus.py nv12 RAW WIDTH HEIGHT PIX_FMT REFERENCE
        Converts each picture of RAW (WIDTHxHEIGHT, PIX_FMT, back to back) to NV12 with the
        ffmpeg CLI, as the references were made, and compares the MD5 of each with REFERENCE.
        Prints "N pictures match" (exit 0) or what differs (exit 1).
"""
import hashlib
import os
import subprocess
import sys


def rows(corpus):
    path = os.path.join(corpus, "MANIFEST.tsv")
    with open(path, encoding="utf-8") as manifest:
        lines = [line.rstrip("\r\n") for line in manifest]
    header = lines[0].split("\t")
    column = {name.strip(): index for index, name in enumerate(header)}

    def field(row, *names):
        for name in names:
            if name in column and column[name] < len(row):
                return row[column[name]].strip()
        return ""

    for line in lines[1:]:
        row = line.split("\t")
        name = field(row, "file")
        if not name or name.startswith("#"):
            continue
        width, height = field(row, "width"), field(row, "height")
        size = field(row, "size")
        if not width and "x" in size:
            width, height = size.split("x", 1)
        per_picture = field(row, "frame_md5s_nv12")
        if not per_picture and os.path.isfile(os.path.join(corpus, name + ".md5")):
            per_picture = name + ".md5"
        fields = [name, width, height, field(row, "frames"), field(row, "pix_fmt"),
                  field(row, "yuv_md5", "md5_whole_yuv420p"), per_picture]
        print("\x1f".join(fields))


def digest(copy_path):
    md5, count = hashlib.md5(), 0
    copy = open(copy_path, "wb") if copy_path else None
    while chunk := sys.stdin.buffer.read(1 << 20):
        md5.update(chunk)
        count += len(chunk)
        if copy:
            copy.write(chunk)
    if copy:
        copy.close()
    print(md5.hexdigest(), count)


def nv12(raw, width, height, pix_fmt, reference):
    with open(reference, encoding="utf-8") as lines:
        expected = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    hashes = subprocess.run(
        ["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", pix_fmt,
         "-s", f"{width}x{height}", "-i", raw, "-pix_fmt", "nv12", "-f", "framehash", "-hash", "md5", "-"],
        check=True, capture_output=True, text=True).stdout
    # framehash lines: stream, dts, pts, duration, size, hash.
    got = [line.split(",")[-1].strip() for line in hashes.splitlines() if line and not line.startswith("#")]
    for index, (mine, theirs) in enumerate(zip(got, expected)):
        if mine != theirs:
            print(f"picture {index + 1} of {len(expected)}: NV12 md5 {mine} != {theirs}")
            return 1
    if len(got) != len(expected):
        print(f"{len(got)} pictures, the per-picture reference has {len(expected)}")
        return 1
    print(f"{len(got)} pictures match")
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "rows":
        rows(argv[2])
        return 0
    if len(argv) in (2, 3) and argv[1] == "digest":
        digest(argv[2] if len(argv) == 3 else None)
        return 0
    if len(argv) == 7 and argv[1] == "nv12":
        return nv12(*argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
