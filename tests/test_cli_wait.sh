#!/bin/sh
# tests/test_cli_wait.sh: ./run's OpenMP threads spin briefly, then sleep, unless the user says otherwise
# (run.c, wait_briefly). libgomp reads GOMP_SPINCOUNT before main, so the variable must be in
# the environment the program was started with: ./run sets it and starts itself again. Here ./run
# is caught blocked reading a FIFO (tokenize --text-file) and its /proc/PID/environ read (the
# environment of its last exec: a setenv without the exec would not show there): started without
# OMP_WAIT_POLICY or GOMP_SPINCOUNT it holds GOMP_SPINCOUNT=10000, under the pid it was started with and as the
# same binary; a user's OMP_WAIT_POLICY=active or GOMP_SPINCOUNT is kept; the output is the
# same as without the FIFO. Needs Linux's /proc; a ./run without OpenMP (make OMP=0) has nothing
# to set: SKIP lines then.
. tests/cli_helpers.sh
MODEL=data/models/mini-llama-brown
if [ ! -r /proc/self/environ ] || ! ldd ./run 2>/dev/null | grep -q 'libgomp\|libomp'; then
    echo "SKIP brief spinning: no /proc, or ./run is built without OpenMP"
    exit 0
fi
mkfifo "$T/fifo"
want=$(timeout 20 ./run tokenize "$MODEL" --text "The jury said")    # timeout: a ./run that starts itself for ever

# started ENV...: runs ./run tokenize on the FIFO under `env ENV...` (its -u options first), and once it is ./run
# blocked on the FIFO, copies its OMP/GOMP environment to $T/env and its exe to $T/exe; then
# feeds the FIFO and leaves the output in $T/out, the exit code in $T/rc.
started() {
    env "$@" ./run tokenize "$MODEL" --text-file "$T/fifo" >"$T/out" 2>&1 &
    pid=$!
    : >"$T/env"
    echo none >"$T/exe"
    for i in $(seq 1 100); do    # up to 10 s: blocked opening the FIFO (or reading it) is past main's start
        case $(cat "/proc/$pid/wchan" 2>/dev/null) in wait_for_partner|fifo_open|pipe_read|pipe_wait) break ;; esac
        sleep 0.1
    done
    readlink "/proc/$pid/exe" >"$T/exe" 2>/dev/null
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep '^OMP_WAIT_POLICY=\|^GOMP_SPINCOUNT=' >"$T/env"
    timeout 10 sh -c 'printf "The jury said" >"$1"' sh "$T/fifo" || kill "$pid" 2>/dev/null    # ./run gone: no hang
    wait "$pid"
    echo $? >"$T/rc"
}

started -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT
[ "$(cat "$T/env")" = "GOMP_SPINCOUNT=10000" ] && [ "$(cat "$T/exe")" = "$(readlink -f ./run)" ] \
    && pass "brief spinning: ./run started without OMP_WAIT_POLICY or GOMP_SPINCOUNT runs (same pid, same binary) with GOMP_SPINCOUNT=10000 from its start" \
    || fail "brief spinning: ./run started without OMP_WAIT_POLICY or GOMP_SPINCOUNT runs (same pid, same binary) with GOMP_SPINCOUNT=10000 from its start" \
            "environment '$(cat "$T/env")', exe $(cat "$T/exe")"
[ "$(cat "$T/rc")" = 0 ] && [ "$(cat "$T/out")" = "$want" ] \
    && pass "brief spinning: the started-again ./run reads its input and prints what a plain run prints" \
    || fail "brief spinning: the started-again ./run reads its input and prints what a plain run prints" \
            "exit $(cat "$T/rc"): $(head -c 200 "$T/out")"

started -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active
[ "$(cat "$T/env")" = "OMP_WAIT_POLICY=active" ] && pass "brief spinning: a user's OMP_WAIT_POLICY=active is kept" \
    || fail "brief spinning: a user's OMP_WAIT_POLICY=active is kept" "environment '$(cat "$T/env")'"

started -u OMP_WAIT_POLICY GOMP_SPINCOUNT=1000
[ "$(cat "$T/env")" = "GOMP_SPINCOUNT=1000" ] && pass "brief spinning: a user's GOMP_SPINCOUNT is kept, no wait policy added" \
    || fail "brief spinning: a user's GOMP_SPINCOUNT is kept, no wait policy added" "environment '$(cat "$T/env")'"
