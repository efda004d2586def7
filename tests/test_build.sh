#!/bin/sh
# tests/test_build.sh: `make` replaces ./run atomically. In a scratch directory with the
# repository's Makefile, ./run is a running program (a copy of sleep) and $(BUILD)/run a new one
# (a copy of cat); `make run` (-o: the binary is taken as built, nothing is compiled) must
# succeed, leave the running program untouched and put the new binary at ./run, with no temp
# file left. A plain cp onto the running binary fails here ("Text file busy").
. tests/cli_helpers.sh
ROOT=$(pwd)
mkdir -p "$T/build/rel"
cp "$(command -v sleep)" "$T/run"
cp "$(command -v cat)" "$T/build/rel/run"
"$T/run" 30 &
pid=$!
sleep 0.2
make -s -C "$T" -f "$ROOT/Makefile" -o build/rel/run run BUILD=build/rel >"$T/make.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] && pass "make run while ./run runs: exit 0" || fail "make run while ./run runs: exit 0" "exit $rc: $(cat "$T/make.out")"
cmp -s "$T/run" "$T/build/rel/run" && pass "make run while ./run runs: ./run is the new binary" \
    || fail "make run while ./run runs: ./run is the new binary" "./run unchanged"
kill -0 "$pid" 2>/dev/null && pass "make run while ./run runs: the running ./run goes on" \
    || fail "make run while ./run runs: the running ./run goes on" "it stopped"
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
leftover=$(ls "$T" | grep '^run\.tmp' || true)
[ -z "$leftover" ] && pass "make run: no temp file left" || fail "make run: no temp file left" "$leftover"
