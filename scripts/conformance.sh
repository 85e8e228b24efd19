#!/usr/bin/env bash
# Decodes every stream listed in CORPUS_DIR/MANIFEST.tsv with `frametap decode` and compares the
# MD5 of the raw pictures (native pixel format, cropped, output order) with the manifest.
# Rows without an MD5 are negative cases: the decode must fail with a message, not crash.
#
# Works on any directory with a manifest in this format (tab-separated, header row first):
#   file source notes width height frames pix_fmt field_order yuv_md5 md5_source decode_flags
# e.g. the third-party corpus, Tests/Fixtures, or a user's own copy of the conformance suite.
#
# Usage: scripts/conformance.sh CORPUS_DIR FRAMETAP_BIN
# Environment: DECODE_TIMEOUT (seconds per stream, default 120);
#   BACKEND=auto|cuda|vaapi|software passes --backend (default: the CLI's own, auto);
#   HW_DEVICES=LIST passes --hw-devices (e.g. cuda:0).
# Each PASS line names the back end that decoded the stream. With BACKEND=cuda or vaapi (the
# hardware is required), a stream the hardware refuses (decode fails naming unsupported_profile,
# unsupported_chroma, too_large, no_hw_format or hwaccel_init_failed) is decoded again with
# --backend auto and must then match through its software fallback, which the line names; any
# other failure on the hardware (no device, wrong bytes) is a FAIL.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 CORPUS_DIR FRAMETAP_BIN" >&2
  exit 2
fi
corpus=$1
frametap=$2
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

digest_and_count() {  # stdin -> "md5 byte_count", in one pass over output that can be large
  python3 -c '
import hashlib, sys
digest, count = hashlib.md5(), 0
while chunk := sys.stdin.buffer.read(1 << 20):
    digest.update(chunk)
    count += len(chunk)
print(digest.hexdigest(), count)
'
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

# A required back end's refusal of the stream itself (not of the device): its reason code.
hardware_refusal() {
  grep -oE '\((unsupported_profile|unsupported_chroma|too_large|no_hw_format|hwaccel_init_failed)\)' \
    "$work/stderr" | head -n1 | tr -d '()' || true
}

run_decode() {  # run_decode PATH BACKEND -> $work/stderr, $work/digest; returns the exit status
  local path=$1 choice=$2 rc
  local args=()
  [ -n "$choice" ] && args=(--backend "$choice")
  set +e
  timeout --kill-after=10 "$timeout_s" "$frametap" decode "$path" --format yuv --output - \
    ${args[@]+"${args[@]}"} ${hw_args[@]+"${hw_args[@]}"} 2>"$work/stderr" </dev/null |
    digest_and_count >"$work/digest"
  rc=${PIPESTATUS[0]}
  set -e
  return "$rc"
}

check_stream() {
  local file=$1 expected_frames=$2 expected_md5=$3
  local path="$corpus/$file" rc md5 bytes frames problem message used refusal="" where
  rc=0
  run_decode "$path" "$backend" || rc=$?
  if [ "$rc" -ne 0 ] && { [ "$backend" = cuda ] || [ "$backend" = vaapi ]; }; then
    refusal=$(hardware_refusal)
    if [ -n "$refusal" ]; then
      rc=0
      run_decode "$path" auto || rc=$?
    fi
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
  elif [ -n "$frames" ]; then
    report PASS "$file" "$frames frames, md5 $md5, $where"
  else
    report PASS "$file" "md5 $md5 (frame count not checked: no 'decoded N frames' summary on stderr)"
  fi
  if [ "$rc" -eq 0 ] && [ "$md5" = "$expected_md5" ]; then
    case $used in
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

# Read through a non-whitespace separator: with IFS=$'\t', read would merge empty columns.
while IFS=$'\x1f' read -r -u 3 file _source _notes _width _height frames _pix_fmt _field_order yuv_md5 _rest ||
  [ -n "${file:-}" ]; do  # a last line without a newline still counts
  file=${file%$'\r'}
  [ -z "$file" ] && continue
  case $file in file | '#'*) continue ;; esac
  frames=${frames//[[:space:]]/}
  yuv_md5=${yuv_md5//[[:space:]]/}
  if [ ! -f "$corpus/$file" ]; then
    report FAIL "$file" "listed in the manifest but missing from $corpus"
  elif [ "${file##*.}" = 265 ]; then
    report SKIP "$file" "H.265: frametap decode takes H.264 only so far"
  elif [ -n "$yuv_md5" ]; then
    check_stream "$file" "$frames" "$yuv_md5"
  elif [ -z "$frames" ] || [ "$frames" = 0 ]; then
    check_negative "$file"
  else
    report SKIP "$file" "no md5 for $frames expected frames"
  fi
done 3< <(tr '\t' '\037' <"$manifest")

if [ -n "$backend" ]; then
  echo "$passed passed, $failed failed ($on_hardware decoded on hardware, $fell_back by a software fallback; BACKEND=$backend)"
else
  echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
