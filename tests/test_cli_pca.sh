#!/bin/sh
# tests/test_cli_pca.sh: SCHEMES.md §9's refusals through ./run (issue 50): +aw with +had, +aw on a
# base that is not fitted, pcaB with +had or +out, a B x d that is not whole (pca0.3 at d = 64), a
# calibration without the fit (naming the `./run calibrate ... --fit KEY` that makes it), and
# calibrate's --fit of a refused spec: each exits 2 with one stderr line naming the spec, and
# leaves no output file. Run from the repo root after `make`.
. tests/cli_helpers.sh
O=data/models/mini-llama-brown-outliers
CAL8=tests/fixtures/reference/kv-calib-mini-llama-brown-outliers.safetensors   # §8's: no pca, no +aw fits
# a refusal comes before any window runs
W="--text-file data/models/mini-llama-brown/config.json --ctx 64 --stride 64 --windows 1 --quiet"
[ -x ./run ] || { fail "cli pca" "./run not built"; exit 1; }

# refused NAME WANT CMD...: exit 2, one stderr line containing WANT.
refused() {
    check_name=$1 says=$2   # expect_exit sets name and want
    shift 2
    expect_exit "$check_name" 2 "$@"
    grep -qF -- "$says" "$T/err" || fail "$check_name: names it" "no '$says' in: $(cat "$T/err")"
}

refused "cli pca: +aw+had refused" "+aw does not go with +had" ./run ppl $O --k-scheme vq8-d4+aw+had $W
refused "cli pca: +aw on int4 refused" "+aw is for the fitted bases" ./run ppl $O --v-scheme int4-g64+aw $W
refused "cli pca: pca2+had refused" "pca2+had" ./run ppl $O --kv-scheme pca2+had $W
refused "cli pca: pca2+out2 refused" "pca2+out2" ./run ppl $O --kv-scheme pca2+out2 $W
refused "cli pca: pca0.3 refused (B x d not whole)" "pca0.3: B x d = 19.2 bits" ./run ppl $O --kv-scheme pca0.3 --calib $CAL8 $W
refused "cli pca: pca9 refused" "pca9" ./run ppl $O --kv-scheme pca9 $W
refused "cli pca: a calibration without the fit names calibrate --fit" "--fit pca2+prerope+aw" \
    ./run ppl $O --k-scheme pca2+prerope+aw --calib $CAL8 $W
refused "cli pca: vq8-d4+aw without its fit" "--fit vq8-d4+aw" ./run ppl $O --kv-scheme vq8-d4+aw --calib $CAL8 $W
refused "cli pca: calibrate --fit pca2+had refused" "pca2+had" ./run calibrate $O --fit pca2+had --out "$T/c.safetensors"
no_file "cli pca: calibrate's refusal writes nothing" "$T/c.safetensors"
refused "cli pca: calibrate --fit pca0.3 refused" "pca0.3" ./run calibrate $O --fit pca0.3 --out "$T/c.safetensors"
