# tests/cli_helpers.sh: shell helpers shared by the tests/test_cli_*.sh scripts that source
# it (`. tests/cli_helpers.sh`, from the repo root): a temporary directory $T removed on
# exit, PASS/FAIL lines for tests/run_tests.sh, and the exit-code check every CLI test makes.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }

# expect_exit NAME CODE CMD...: exit code CODE, and for 2 a one-line message on stderr.
# The command's stdout and stderr are left in $T/out and $T/err.
expect_exit() {
    name=$1; want=$2; shift 2
    "$@" >"$T/out" 2>"$T/err"
    got=$?
    if [ "$got" -ne "$want" ]; then fail "$name" "exit $got, expected $want: $(head -c 300 "$T/err")"; return; fi
    if [ "$want" -eq 2 ] && [ "$(grep -c . "$T/err")" -ne 1 ]; then fail "$name" "expected one line on stderr, got: $(cat "$T/err")"; return; fi
    pass "$name"
}

# no_file NAME PATH: neither PATH nor a temp file of it (PATH.tmp.*) was left behind.
no_file() { if [ -e "$2" ] || ls "$2".tmp.* >/dev/null 2>&1; then fail "$1" "left $2 behind"; else pass "$1"; fi; }
