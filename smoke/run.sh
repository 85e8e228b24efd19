#!/usr/bin/env bash
# Runs every smoke script against a running server: smoke/run.sh http://127.0.0.1:8080
# The last line is "N passed, N failed"; the exit status is non-zero when anything failed.
set -u
BASE=${1:?usage: smoke/run.sh BASE_URL}
BASE=${BASE%/}
SMOKE_DIR=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export BASE TMP
PASSED=0
FAILED=0
for script in "$SMOKE_DIR"/[0-9]*.sh; do
    echo "== $(basename "$script")"
    # Each script runs in this shell (sourced) so the counts add up; a crash counts as a failure.
    before=$FAILED
    if ! source "$script"; then
        if [ "$FAILED" = "$before" ]; then FAILED=$((FAILED + 1)); echo "FAIL $(basename "$script") exited early"; fi
    fi
done
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
