# Starts and stops a FrameTap server for a test script (sourced, not run). Needs curl, python3.
#
#   source smoke/server.sh
#   server_start path/to/frametap [serve options...] || exit 1   # sets PORT, BASE, SERVER_PID, SERVER_LOG
#   ...
#   server_stop                                                  # SIGTERM; 0 when it exited 0
#
# The server listens on a free loopback port only. One server at a time per shell: stop it before
# starting another. SERVER_START_TIMEOUT (seconds, default 10) bounds the wait for /healthz.

# server_start BINARY [OPTIONS...]: starts `BINARY serve` on 127.0.0.1 and a free port, and waits
# until /healthz answers. On failure it prints the server's log, kills it and returns 1.
server_start() {
    local binary=$1
    shift
    if [ ! -x "$binary" ]; then
        echo "no executable at $binary (build it first)"
        return 1
    fi
    PORT=$(python3 "$(dirname "${BASH_SOURCE[0]}")/../tools/harness/ports.py")
    # SERVER_SCHEME=https with SERVER_CURL_OPTS (e.g. --cacert FILE) for a TLS server.
    BASE="${SERVER_SCHEME:-http}://127.0.0.1:$PORT"
    SERVER_LOG=$(mktemp)
    "$binary" serve --host 127.0.0.1 --port "$PORT" "$@" 2> "$SERVER_LOG" &
    SERVER_PID=$!
    local tries=$((${SERVER_START_TIMEOUT:-10} * 10))
    for _ in $(seq "$tries"); do
        curl -fsS -m 2 ${SERVER_CURL_OPTS:-} -o /dev/null "$BASE/healthz" 2> /dev/null && return 0
        kill -0 "$SERVER_PID" 2> /dev/null || break
        sleep 0.1
    done
    echo "the server did not come up on $BASE; its log:"
    cat "$SERVER_LOG"
    kill -KILL "$SERVER_PID" 2> /dev/null
    wait "$SERVER_PID" 2> /dev/null
    rm -f "$SERVER_LOG"
    SERVER_PID=
    return 1
}

# server_stop: SIGTERM, then waits for the graceful stop (at most the HTTP grace period, 10 s;
# never more than 30 s, then SIGKILL). Sets SERVER_EXIT; returns 0 when the server exited 0,
# otherwise prints why and its log. Removes the log either way.
server_stop() {
    SERVER_EXIT=
    [ -n "${SERVER_PID:-}" ] || return 1
    kill -TERM "$SERVER_PID" 2> /dev/null
    for _ in $(seq 300); do
        kill -0 "$SERVER_PID" 2> /dev/null || break
        sleep 0.1
    done
    if kill -0 "$SERVER_PID" 2> /dev/null; then
        echo "the server did not stop within 30 s of SIGTERM"
        kill -KILL "$SERVER_PID" 2> /dev/null
    fi
    wait "$SERVER_PID"
    SERVER_EXIT=$?
    SERVER_PID=
    local result=0
    if [ "$SERVER_EXIT" != 0 ]; then
        echo "the server exited with $SERVER_EXIT after SIGTERM (want 0); its log:"
        cat "$SERVER_LOG"
        result=1
    fi
    rm -f "$SERVER_LOG"
    return $result
}
