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

# check_svg NAME FILE: FILE passes tests/svg_check.h (strict XML, kvq's SVG elements, finite
# geometry; through test_chart --svg-check), and rsvg-convert renders it to a PNG where it is
# installed; where it is not (the README's set-up does not install it), a SKIP line says so.
check_svg() {
    if why=$("${KVQ_TEST_BIN:-build/rel/tests}/test_chart" --svg-check "$2" 2>&1); then
        pass "$1: well-formed XML, kvq's SVG elements, finite geometry (tests/svg_check.h)"
    else
        fail "$1: well-formed XML, kvq's SVG elements, finite geometry (tests/svg_check.h)" "$why"
    fi
    if ! command -v rsvg-convert >/dev/null 2>&1; then
        echo "SKIP $1: rsvg-convert renders it to a PNG: rsvg-convert not installed (Debian librsvg2-bin)"
        return
    fi
    rsvg-convert "$2" -o "$T/rendered.png" 2>"$T/rsvg.err"
    size=$(wc -c <"$T/rendered.png" 2>/dev/null || echo 0)
    if [ "$size" -gt 1000 ] && head -c 8 "$T/rendered.png" | grep -q PNG; then
        pass "$1: rsvg-convert renders it to a PNG ($size bytes)"
    else
        fail "$1: rsvg-convert renders it to a PNG" "$size bytes: $(cat "$T/rsvg.err")"
    fi
}
