#!/usr/bin/env python3
"""tests/test_readme.py: the numbers README.md shows are the ones ./run prints today.

Four places in the README quote program output: the sample `./run --validate` report, the table
"What int4 does to the bundled model", the sweep demo's table (data/sweeps/, `make sweep-demo`) and the
calibrated sweep's (data/sweeps/calibrated-*, `make sweep-calibrated`, with the bundled calibrations).
They are re-run here and compared digit for digit (the run time is the one field left out), so a
change that moves a number makes this test fail until the README is regenerated from the program.
Run from the repo root after `make`.

Digit for digit holds on the kernel path the README names ("produced by the `avx512` kernels"). The
other SIMD paths (AVX2, NEON, plain C) add some f32 sums in another order; a quantized cache then
rounds a few values the other way, which moves a quantized perplexity in its 5th significant digit
(int4-g64 in the sample report: 307.3250 on avx512, 307.3157 on avx2; the independent reference
itself is 0.003% away). On those paths the text must still be the same apart from its numbers,
and each number within a stated tolerance: 0.05 absolute for numbers of 10 or more (a perplexity of
300-400 within ~1.5e-4 relative, a delta in perplexity units within 0.05, a top-1 % within 4 of the
sweep's 8703 tokens; counts are integers and must be equal), and for smaller ones (deltas, KL,
percentages: differences whose relative change is larger) 5% relative or 1e-3 absolute; to each is
added half a unit of the last digit each side printed (tests/pycheck.py's Printed), since a
figure printed to 2 significant digits (a standard error, 0.12) moves by a whole unit (0.13, 8%)
when a path rounds its value the other way.

`make check` (KVQ_QUICK=1) re-runs one configuration in QUICK_STEP of each sweep (same windows) and
compares those rows of results.md, but for the front column, which depends on all of them."""
import json
import re
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import Printed, quick  # noqa: E402

MODEL = "data/models/mini-llama-brown"
QUICK_STEP = 8
README = open("README.md", encoding="utf-8").read()


def report(name, ok, why=""):
    print(f"PASS {name}" if ok else f"FAIL {name}: {why}")


def run(args):
    return subprocess.run(["./run"] + args, capture_output=True, text=True)


def readme_kernel():
    m = re.search(r"produced by the `(\w[\w-]*)` kernels", README)
    return m.group(1) if m else None


def current_kernel():
    got = run(["bench", MODEL, "-p", "8", "-n", "2", "--ctx", "0", "--repeat", "1", "--no-probe", "--json"])
    try:
        return json.loads(got.stdout)["kernel"]
    except (ValueError, KeyError):
        return None


SAME_PATH = readme_kernel() is not None and readme_kernel() == current_kernel()
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def figure(text):
    """A number of the README or of ./run's output; an integer (a count) is exact."""
    x = Printed(text)
    if "." not in text and "e" not in text:
        x.half = 0.0
    return x


def agree(want, got):
    """want == got on the README's kernel path; elsewhere the same text with numbers within
    the tolerances of the module docstring. Returns (ok, worst excess over the tolerance)."""
    if SAME_PATH or want == got:
        return want == got, 0.0
    if NUMBER.sub("#", want) != NUMBER.sub("#", got):
        return False, float("inf")
    worst = 0.0
    for a, b in zip(map(figure, NUMBER.findall(want)), map(figure, NUMBER.findall(got))):
        big = max(abs(a), abs(b))
        tolerance = (0.05 if big >= 10 else max(0.05 * big, 1e-3)) + a.half + b.half
        worst = max(worst, abs(a - b) / tolerance if tolerance > 0 else 0.0)
    return worst <= 1.0, worst


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
    diff = [f"README: {a!r}\n  ./run: {b!r}" for a, b in zip(map(without_time, lines), out) if not agree(a, b)[0]]
    if len(lines) != len(out):
        diff.append(f"{len(lines)} lines in README, {len(out)} printed")
    report("README: the --validate sample report equals ./run --validate (all but the run time)" + PATH_NOTE,
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
        report(f"README: table row {scheme} equals ./run ppl" + PATH_NOTE, agree(" ".join(have), " ".join(want))[0],
               f"README {have}, ./run {want}")
        if i == 0:
            report("README: table row fp32 equals ./run ppl's baseline" + PATH_NOTE, agree(fp32[0], f"{base:.3f}")[0],
                   f"README {fp32[0]}, ./run {base:.3f}")


def results_rows(demo):
    """A committed results.md's table as {configuration: {column: cell}}."""
    # the main table: the block after the heading paragraph (the views by position and layer follow it)
    lines = open(f"{demo}/results.md", encoding="utf-8").read().split("\n\n")[1].strip("\n").splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return {cells[0]: dict(zip(head, cells)) for cells in
            ([c.strip() for c in l.strip("|").split("|")] for l in lines[2:])}


def readme_rows(marker, text=README):
    """The cells of each row of the table under `<!-- marker ... -->` in text, the README by default (header
    lines left out)."""
    m = re.search(rf"<!-- {marker}.*?-->\n(.*?)\n\n", text, re.S)
    return [[c.strip() for c in line.strip("|").split("|")] for line in m.group(1).splitlines()[2:]] if m else []


def check_calibrated_table():
    """The README's calibrated table: each row's cells are the committed results.md cells of both
    models (bits effective, codebooks KiB, delta %, KL mean)."""
    brown = results_rows("data/sweeps/calibrated-mini-llama-brown")
    outliers = results_rows("data/sweeps/calibrated-mini-llama-brown-outliers")
    rows = readme_rows("calibrated table")
    bad = []
    for cells in rows:
        name = cells[0]
        if name not in brown or name not in outliers:
            bad.append(f"{name}: not in both sweeps")
            continue
        want = [name, brown[name]["bits effective"], brown[name]["codebooks KiB"], brown[name]["delta %"],
                brown[name]["KL mean"], outliers[name]["delta %"], outliers[name]["KL mean"]]
        if cells != want:
            bad.append(f"README {cells} != results {want}")
    report("README: the calibrated table's rows are the calibrated sweeps' results.md cells", rows and not bad,
           "; ".join(bad[:3]) or "table not found")


def check_sweep(name, demo, make_target, args_variable, quoted_whole):
    """A fresh run of the outlier model's sweep (the Makefile's arguments) writes the committed
    results.md (up to its per-layer view); with quoted_whole, the README quotes that table whole."""
    committed = open(f"{demo}/results.md", encoding="utf-8").read()
    table = committed.split("\n\n")[1].strip("\n")   # the main table (the position and layer views follow)
    if quoted_whole:
        report(f"README: the {name} table is {demo}/results.md's", table in README,
               f"regenerate the README's table from results.md (make {make_target})")
    args = re.search(rf"^{args_variable} := (.*)$", open("Makefile", encoding="utf-8").read(), re.M).group(1).split()
    # without the per-layer error (about a sixth of a sweep's time): everything before that view is
    # compared; the layer error itself is checked by tests/test_views.c
    committed = committed.split("\n## Per-layer attention error")[0]
    sample = None
    if quick():
        args, sample = quick_sweep_args(args)
        print(f"{name}: configurations {', '.join(str(i + 1) for i in sample)} re-run (KVQ_QUICK)")
    with tempfile.TemporaryDirectory() as out:
        got = run(["sweep", "data/models/mini-llama-brown-outliers"] + args + ["--out-dir", out, "--no-layer-error"])
        fresh = open(os.path.join(out, "results.md"), encoding="utf-8").read() if got.returncode == 0 else got.stderr
    if sample is not None and got.returncode == 0:
        committed, fresh = sampled_rows(committed, sample), sampled_rows(fresh, range(len(sample)))
    ok, worst = agree(committed, fresh)
    report(f"README: a fresh run of the {name} writes the committed results.md" + PATH_NOTE, ok,
           f"worst number at {worst:.3g}x its tolerance; first lines {fresh[:300]!r}")
    if not SAME_PATH:
        print(f"     {name}: worst number at {worst:.3g}x its tolerance")


def quick_sweep_args(args):
    """The sweep's arguments with its --configs FILE replaced by every QUICK_STEP-th configuration
    of the file as --config flags; and the indices of those configurations (= their table rows)."""
    i = args.index("--configs")
    lines = [l.split("#")[0].strip() for l in open(args[i + 1], encoding="utf-8")]
    configs = [l for l in lines if l]
    sample = list(range(0, len(configs), QUICK_STEP))
    flags = [x for k in sample for x in ("--config", configs[k])]
    return args[:i] + flags + args[i + 2:], sample


def sampled_rows(results_md, rows):
    """results.md's first paragraph and the given rows of its table, each without its last cell
    (the front mark: it depends on every configuration of the sweep)."""
    head, table = results_md.split("\n\n", 1)
    lines = table.strip("\n").splitlines()
    body = [lines[2 + k].rstrip().rstrip("|").rsplit("|", 1)[0] for k in rows if 2 + k < len(lines)]
    return "\n".join([head] + body)


def check_sweep_demo():
    check_sweep("sweep demo", "data/sweeps/mini-llama-brown-outliers", "sweep-demo", "SWEEP_DEMO_ARGS", True)
    # the calibrated sweep's README table is a digest of both models' tables (check_calibrated_table)
    check_sweep("calibrated sweep", "data/sweeps/calibrated-mini-llama-brown-outliers", "sweep-calibrated",
                "SWEEP_CALIBRATED_ARGS", False)
    check_calibrated_table()


def probe_rows(path):
    """A probe report's table rows (probe-diverge.md) as {cache: cells}."""
    rows = {}
    for line in open(path, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and cells[0] != "cache":
            rows[cells[0]] = cells
    return rows


def check_diverge_table():
    """The greedy-divergence figures: eval/README.md's table rows are both models' probe-diverge.md cells,
    and the README's summary quotes them rounded to one decimal."""
    brown = probe_rows("data/sweeps/mini-llama-brown/probe-diverge.md")
    outliers = probe_rows("data/sweeps/mini-llama-brown-outliers/probe-diverge.md")
    rows = readme_rows("diverge table", open("eval/README.md", encoding="utf-8").read())
    bad = []
    for cells in rows:
        name = cells[0]
        if name not in brown or name not in outliers:
            bad.append(f"{name}: not in both reports")
        elif cells != [name, brown[name][1], brown[name][2], outliers[name][1], outliers[name][2]]:
            bad.append(f"eval/README.md {cells} != the reports' {brown[name][1:3]} {outliers[name][1:3]}")
    report("eval/README.md: the greedy-divergence table has every row of both models' probe-diverge.md, cell for cell",
           rows and len(rows) == len(brown) == len(outliers) and not bad, "; ".join(bad[:3]) or f"{len(rows)} rows")
    m = re.search(r"<!-- diverge summary.*?-->\n(.*?)\n\n", README, re.S)
    quoted = re.findall(r"(\S+) (\d+\.\d) / (\d+\.\d)", m.group(1)) if m else []
    bad = []
    for name, b, o in quoted:
        mean = lambda rep: "%.1f" % float(rep[name][1].split()[0]) if name in rep else None
        if (b, o) != (mean(brown), mean(outliers)):
            bad.append(f"{name}: README {b} / {o}, reports {mean(brown)} / {mean(outliers)}")
    report("README: the greedy-divergence summary quotes both models' probe-diverge.md", len(quoted) >= 4 and not bad,
           "; ".join(bad) or f"{len(quoted)} figures found")


PATH_NOTE = "" if SAME_PATH else f" (on {current_kernel()}, not {readme_kernel()}: within the stated tolerances)"
check_validate_sample()
check_scheme_table()
check_sweep_demo()
check_diverge_table()
