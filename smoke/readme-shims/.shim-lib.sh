# Shared by the README runner's stand-ins (sourced). The runner sets README_STATE (its state
# folder), FRAMETAP_PORT, and README_CURL, README_FFMPEG, README_FRAMETAP (the real programs).
# The server an example started is recorded in README_STATE: server.pid, server.logpath (its
# log's path), server.token (its admin token, for the runner's own checks), and each stopped
# server's "PID EXIT-STATUS" line in server.exits.

# Waits, as a reader does, until the server the example started answers (at most 30 s). The
# runner writes server.expected before a block that starts a server in the background, whose
# next commands may run before that server's process does.
wait_for_server() {
    [ -f "$README_STATE/server.expected" ] || return 0
    local pid=""
    for _ in $(seq 150); do
        [ -f "$README_STATE/server.pid" ] && pid=$(cat "$README_STATE/server.pid")
        if [ -n "$pid" ]; then
            if "$README_CURL" -s -o /dev/null -m 1 "http://127.0.0.1:$FRAMETAP_PORT/healthz"; then
                rm -f "$README_STATE/server.expected"
                return 0
            fi
            if ! kill -0 "$pid" 2> /dev/null; then
                echo "README runner: the server the example started ($pid) exited before it answered /healthz:" >&2
                tail -5 "$(cat "$README_STATE/server.logpath")" >&2
                return 1
            fi
        fi
        sleep 0.2
    done
    echo "README runner: the server the example started did not answer /healthz within 30 s" >&2
    return 1
}

# Stops the server an earlier example started (SIGTERM), as a reader would before starting
# another on the same port; at most 15 s.
stop_server() {
    [ -f "$README_STATE/server.pid" ] || return 0
    local pid
    pid=$(cat "$README_STATE/server.pid")
    rm -f "$README_STATE/server.pid"
    kill -TERM "$pid" 2> /dev/null || return 0
    for _ in $(seq 150); do
        grep -q "^$pid " "$README_STATE/server.exits" 2> /dev/null && return 0
        sleep 0.1
    done
    echo "README runner: the server $pid did not stop within 15 s of SIGTERM" >&2
    kill -KILL "$pid" 2> /dev/null
    return 1
}
