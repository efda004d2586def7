#!/usr/bin/env python3
"""tests/test_readme.py: the numbers README.md shows are the ones ./run prints today.

Three places in the README quote program output: the sample `./run --validate` report, the table
"What int4 does to the bundled model" and the sweep demo's table (data/sweeps/, `make sweep-demo`).
They are re-run here and compared digit for digit (the run time is the one field left out), so a
change that moves a number makes this test fail until the README is regenerated from the program.
Run from the repo root after `make`."""
import json
import re
import os
import subprocess
import sys
import tempfile

MODEL = "data/models/mini-llama-brown"
README = open("README.md", encoding="utf-8").read()


def report(name, ok, why=""):
    print(f"PASS {name}" if ok else f"FAIL {name}: {why}")


def run(args):
    return subprocess.run(["./run"] + args, capture_output=True, text=True)


def validate_block():
    """The README's sample report: from the rule line after 'Using the bundled model' to [OK]."""
    m = re.search(r"```\n(Using the bundled model.*?\n(=+\n.*?\[OK\][^\n]*)\n)```", README, re.S)
    return m.group(2) if m else None


def without_time(text):
    # Only the run time may differ; the model label says how it was chosen ("bundled" when no
    # --model is given, which is what the README shows).
    text = re.sub(r"\(\d+\.\d s\)", "(TIME s)", text)
    return text.replace(f"{MODEL} (--model)", f"{MODEL} (bundled)")


def check_validate_sample():
    want = validate_block()
    if want is None:
        report("README: the --validate sample report is where this test looks for it", False, "not found")
        return
    # --model explicitly: with models/tinyllama exported, a bare --validate would use TinyLlama.
    got = run(["--validate", "--model", MODEL])
    lines = [l for l in want.splitlines()]
    out = without_time(got.stdout).strip("\n").splitlines()
    diff = [f"README: {a!r}\n  ./run: {b!r}" for a, b in zip(map(without_time, lines), out) if a != b]
    if len(lines) != len(out):
        diff.append(f"{len(lines)} lines in README, {len(out)} printed")
    report("README: the --validate sample report equals ./run --validate (all but the run time)",
           got.returncode == 0 and not diff, "exit %d; %s" % (got.returncode, "\n".join(diff[:4])))


def delta_text(delta):
    return f"{delta:+.3f}" if abs(delta) < 10 else f"{delta:+.2f}"


def check_scheme_table():
    rows = re.findall(r"^\| (int\S+) \| ([\d.]+) \| ([^|]*) \| ([^|]*) \|$", README, re.M)
    fp32 = re.findall(r"^\| fp32 \| ([\d.]+) \|", README, re.M)
    if len(rows) < 3 or len(fp32) != 1:
        report("README: the int4 table has its rows", False, f"found {len(rows)} and {len(fp32)} fp32")
        return
    for i, (scheme, ppl, delta, percent) in enumerate(rows):
        got = run(["ppl", MODEL, "--windows", "4", "--kv-scheme", scheme, "--json", "--quiet"])
        try:
            j = json.loads(got.stdout)
        except ValueError:
            report(f"README: table row {scheme}", False, f"./run ppl printed no JSON: {got.stderr[:200]}")
            continue
        base, quant = j["baseline_ppl"], j["ppl"]
        want = (f"{quant:.3f}", delta_text(quant - base), f"{100 * (quant - base) / base:+.3f}%")
        have = (ppl, delta.strip(), percent.strip())
        report(f"README: table row {scheme} equals ./run ppl", have == want, f"README {have}, ./run {want}")
        if i == 0:
            report("README: table row fp32 equals ./run ppl's baseline", fp32[0] == f"{base:.3f}",
                   f"README {fp32[0]}, ./run {base:.3f}")


def check_sweep_demo():
    """The README's demo table is the committed results.md's, and a fresh run of the demo's
    outlier-model sweep (Makefile SWEEP_DEMO_ARGS) writes the same results.md."""
    demo = "data/sweeps/mini-llama-brown-outliers"
    committed = open(f"{demo}/results.md", encoding="utf-8").read()
    table = committed.split("\n\n", 1)[1].strip("\n")
    report("README: the sweep demo table is data/sweeps/mini-llama-brown-outliers/results.md's", table in README,
           "regenerate the README's table from results.md (make sweep-demo)")
    args = re.search(r"^SWEEP_DEMO_ARGS := (.*)$", open("Makefile", encoding="utf-8").read(), re.M).group(1).split()
    with tempfile.TemporaryDirectory() as out:
        got = run(["sweep", "data/models/mini-llama-brown-outliers"] + args + ["--out-dir", out])
        fresh = open(os.path.join(out, "results.md"), encoding="utf-8").read() if got.returncode == 0 else got.stderr
    report("README: a fresh run of the demo sweep writes the committed results.md", fresh == committed,
           f"differs: first lines {fresh[:300]!r}")


check_validate_sample()
check_scheme_table()
check_sweep_demo()
