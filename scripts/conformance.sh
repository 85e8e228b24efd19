#!/usr/bin/env bash
# Decodes every stream listed in CORPUS_DIR/MANIFEST.tsv with `frametap decode` (H.264 or H.265,
# detected from the stream) and compares the MD5 of the raw pictures (native pixel format,
# cropped, output order) with the manifest; where the corpus has one MD5 per picture over NV12
# (<file>.md5, as ../shared/testdata/h265 has), each picture is converted to NV12 and checked too.
# Rows without an MD5 are negative cases: the decode must fail with a message, not crash.
#
# Works on any directory with a manifest in either of these formats (tab-separated, header row
# first; scripts/corpus.py reads both):
#   file source notes width height frames pix_fmt field_order yuv_md5 md5_source decode_flags
#   file bytes frames size pix_fmt md5_whole_yuv420p frame_md5s_nv12 notes
# e.g. the third-party corpora, Tests/Fixtures, or a user's own copy of the conformance suite.
#
# Usage: scripts/conformance.sh CORPUS_DIR FRAMETAP_BIN
# Environment: DECODE_TIMEOUT (seconds per stream, default 120);
#   BACKEND=auto|cuda|vaapi|software passes --backend (default: the CLI's own, auto);
#   HW_DEVICES=LIST passes --hw-devices (e.g. cuda:0).
# Each PASS line names the back end that decoded the stream. With BACKEND=cuda or vaapi (the
# hardware is required), a stream the hardware refuses (decode fails naming unsupported_profile,
# unsupported_chroma, too_large, no_hw_format or hwaccel_init_failed, or the summary's fallbacks
# naming decoded_in_software) is decoded again with
# --backend auto and must then match through its software fallback, which the line names; any
# other failure on the hardware (no device, wrong bytes) is a FAIL.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 CORPUS_DIR FRAMETAP_BIN" >&2
  exit 2
fi
corpus=$1
frametap=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
timeout_s=${DECODE_TIMEOUT:-120}
backend=${BACKEND:-}
hw_devices=${HW_DEVICES:-}
manifest="$corpus/MANIFEST.tsv"
case $backend in
  '' | auto | cuda | vaapi | software) ;;
  *) echo "conformance: BACKEND must be auto, cuda, vaapi or software, not '$backend'" >&2; exit 2 ;;
esac
hw_args=()
[ -n "$hw_devices" ] && hw_args=(--hw-devices "$hw_devices")

if [ ! -f "$manifest" ]; then
  echo "conformance: $manifest not found" >&2
  exit 2
fi
if [ ! -x "$frametap" ]; then
  echo "conformance: $frametap is not an executable (build it first)" >&2
  exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
on_hardware=0
fell_back=0

report() {  # report PASS|FAIL|SKIP NAME DETAILS
  printf '%-4s  %s  %s\n' "$1" "$2" "$3"
  case $1 in
    PASS) passed=$((passed + 1)) ;;
    FAIL) failed=$((failed + 1)) ;;
  esac
}

last_stderr_line() {
  grep -v '^[[:space:]]*$' "$work/stderr" | tail -n1 | cut -c1-200 || true
}

# Describes an exit status that is not a plain failure; empty when it is one.
abnormal_exit() {
  local rc=$1
  if [ "$rc" -eq 124 ]; then
    echo "timed out after ${timeout_s}s"
  elif [ "$rc" -ge 128 ]; then
    echo "crashed (exit $rc, signal $((rc - 128)))"
  fi
}

digest_and_count() {  # stdin -> "md5 byte_count", in one pass over output that can be large; [COPY]
  python3 "$ROOT/scripts/corpus.py" digest "$@"
}

# The CLI's summary on stderr: "frametap: decoded N frames ..."; the last one counts.
decoded_frame_count() {
  grep -oE 'decoded [0-9]+ frames?' "$work/stderr" | tail -n1 | grep -oE '[0-9]+' || true
}

# The summary ends with "; backend NAME (REASON)": prints "NAME REASON".
backend_used() {
  grep -E 'frametap: decoded [0-9]+ frames?' "$work/stderr" | tail -n1 |
    sed -nE 's/.*; backend ([a-z]+) \((.*)\)$/\1 \2/p' || true
}

# A required back end's refusal of the stream itself (not of the device): its reason code. Either
# a refused picture's error names it, or the summary's fallbacks do: libavcodec may go on in
# software inside the hardware decoder without refusing anything ("-> software
# decoded_in_software after N picture(s)"), and its pictures then did not come from the hardware.
hardware_refusal() {
  {
    grep -oE '\((unsupported_profile|unsupported_chroma|too_large|no_hw_format|hwaccel_init_failed)\)' "$work/stderr" || true
    grep -oE -- '-> software decoded_in_software after' "$work/stderr" | grep -oE 'decoded_in_software' || true
  } | head -n1 | tr -d '()'
}

run_decode() {  # run_decode PATH BACKEND [COPY] -> $work/stderr, $work/digest; returns the exit status
  local path=$1 choice=$2 copy=${3:-} rc
  local args=() copy_args=()
  [ -n "$choice" ] && args=(--backend "$choice")
  [ -n "$copy" ] && copy_args=("$copy")
  set +e
  timeout --kill-after=10 "$timeout_s" "$frametap" decode "$path" --format yuv --output - \
    ${args[@]+"${args[@]}"} ${hw_args[@]+"${hw_args[@]}"} 2>"$work/stderr" </dev/null |
    digest_and_count ${copy_args[@]+"${copy_args[@]}"} >"$work/digest"
  rc=${PIPESTATUS[0]}
  set -e
  return "$rc"
}

check_stream() {
  local file=$1 expected_frames=$2 expected_md5=$3 width=$4 height=$5 pix_fmt=$6 per_picture=$7
  local path="$corpus/$file" rc md5 bytes frames problem message used refusal="" where copy="" pictures=""
  [ -n "$per_picture" ] && copy="$work/raw"
  rc=0
  run_decode "$path" "$backend" "$copy" || rc=$?
  # A refusal may come after the first picture was sent (libavcodec's frame threads report it
  # with the next packet), so the decode can still end 0 with fewer pictures: the refusal
  # named on stderr decides, whatever the exit status.
  if [ "$backend" = cuda ] || [ "$backend" = vaapi ]; then
    refusal=$(hardware_refusal)
    if [ -n "$refusal" ]; then
      rc=0
      run_decode "$path" auto "$copy" || rc=$?
    fi
  fi
  if [ "$rc" -eq 0 ] && [ -n "$per_picture" ]; then
    if [ ! -f "$corpus/$per_picture" ]; then
      pictures="per-picture reference $per_picture is missing"
    elif pictures=$(python3 "$ROOT/scripts/corpus.py" nv12 "$copy" "$width" "$height" "$pix_fmt" \
      "$corpus/$per_picture" 2>&1); then
      pictures=ok:$pictures
    fi
    rm -f "$copy"
  fi
  read -r md5 bytes <"$work/digest"
  frames=$(decoded_frame_count)
  message=$(last_stderr_line)
  used=$(backend_used)
  if [ -z "$used" ]; then
    where="back end not named"
  elif [ -n "$refusal" ]; then
    where="$backend refused it ($refusal); auto decoded it on ${used%% *} (${used#* })"
  elif [ -n "$backend" ]; then
    where="on ${used%% *} (${used#* })"
  else
    where="on ${used%% *}"
  fi

  problem=$(abnormal_exit "$rc")
  if [ -n "$problem" ]; then
    report FAIL "$file" "$problem${message:+; $message}"
  elif [ "$rc" -ne 0 ]; then
    report FAIL "$file" "exit $rc${message:+: $message}"
  elif [ "$md5" != "$expected_md5" ]; then
    report FAIL "$file" "md5 $md5 != $expected_md5 (${bytes} bytes, ${frames:-?} frames decoded, expected $expected_frames)"
  elif [ -n "$frames" ] && [ -n "$expected_frames" ] && [ "$frames" != "$expected_frames" ]; then
    report FAIL "$file" "md5 ok but summary says $frames frames, expected $expected_frames"
  elif [ -n "$per_picture" ] && [ "${pictures#ok:}" = "$pictures" ]; then
    report FAIL "$file" "md5 ok but per-picture NV12: $pictures"
  elif [ -n "$frames" ]; then
    report PASS "$file" "$frames frames, md5 $md5${per_picture:+, NV12 per picture: ${pictures#ok:}}, $where"
  else
    report PASS "$file" "md5 $md5 (frame count not checked: no 'decoded N frames' summary on stderr)"
  fi
  if [ "$rc" -eq 0 ] && [ "$md5" = "$expected_md5" ]; then
    case $used in
      *" software inside "*) fell_back=$((fell_back + 1)) ;;  # libavcodec's own software decode
      cuda\ * | vaapi\ *) on_hardware=$((on_hardware + 1)) ;;
      "software software: "*) fell_back=$((fell_back + 1)) ;;  # auto's reason for leaving hardware
    esac
  fi
}

check_negative() {
  local file=$1
  local path="$corpus/$file" rc problem message
  rc=0
  run_decode "$path" "$backend" || rc=$?
  message=$(last_stderr_line)
  problem=$(abnormal_exit "$rc")
  if [ -n "$problem" ]; then
    report FAIL "$file" "$problem${message:+; $message}"
  elif [ "$rc" -eq 0 ]; then
    report FAIL "$file" "negative case: decode exited 0, expected a failure"
  elif [ -z "$message" ]; then
    report FAIL "$file" "negative case: exit $rc but no message on stderr"
  else
    report PASS "$file" "rejected as expected (exit $rc: $message)"
  fi
}

# Fields separated by 0x1F (scripts/corpus.py): with IFS=$'\t', read would merge empty columns.
while IFS=$'\x1f' read -r -u 3 file width height frames pix_fmt yuv_md5 per_picture; do
  if [ ! -f "$corpus/$file" ]; then
    report FAIL "$file" "listed in the manifest but missing from $corpus"
  elif [ -n "$yuv_md5" ]; then
    check_stream "$file" "$frames" "$yuv_md5" "$width" "$height" "$pix_fmt" "$per_picture"
  elif [ -z "$frames" ] || [ "$frames" = 0 ]; then
    check_negative "$file"
  else
    report SKIP "$file" "no md5 for $frames expected frames"
  fi
done 3< <(python3 "$ROOT/scripts/corpus.py" rows "$corpus")

if [ -n "$backend" ]; then
  echo "$passed passed, $failed failed ($on_hardware decoded on hardware, $fell_back by a software fallback; BACKEND=$backend)"
else
  echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
