#!/usr/bin/env python3
"""tests/test_readme_frontier.py: the README's low-bit frontier ("The low-bit frontier") is the committed
files' (data/frontier/, `make frontier`), and those files say what their sweeps measured. Cheap: no forward
pass runs.

- each table after a `<!-- frontier table: FILE -->` marker is, line for line, the table of FILE (one marker
  for each bundled model);
- in each model's frontier.json, recomputed here from the two sweeps' results.json and not from the C code:
  the chosen candidate of each budget is the lowest mean KL on the valid sweep (wiki.valid) among those of
  effective bits <= the budget (the first on a tie), null when there is none; its reported figures are the
  test sweep's (wiki.test) for it, the same doubles; frontier.md's row prints them; the two sweeps are of
  one model, ctx, stride and number of windows, on different texts;
- the sentence after `<!-- frontier goal -->` says for each goal of issue 50 (on the outlier model, within 2
  bits: delta ppl <= +0.1% and KL <= 0.001; within 1 bit: +0.3% / 0.003; within 0.5 bit: +1% / 0.01)
  "met" or "not met" as the committed frontier.json has it;
- the chart the README shows exists and is an SVG. Run from the repo root."""
import json
import os
import re

README = open("README.md", encoding="utf-8").read()
MODELS = ["mini-llama-brown-outliers", "mini-llama-brown"]
GOALS = [("2", 0.1, 0.001), ("1", 0.3, 0.003), ("0.5", 1.0, 0.01)]


def report(name, ok, why=""):
    print(f"PASS {name}" if ok else f"FAIL {name}: {why}")


def table_after(text, start):
    lines = []
    for line in text[start:].splitlines():
        if not line.startswith("|"):
            if lines:
                break
            continue
        lines.append(line)
    return lines


def check_tables():
    marks = list(re.finditer(r"<!-- frontier table: (\S+) -->\n", README))
    files = sorted(m.group(1) for m in marks)
    want = sorted(f"data/frontier/{m}/frontier.md" for m in MODELS)
    report("README: a frontier table for each bundled model", files == want, f"markers for {files}")
    for m in marks:
        path = m.group(1)
        shown = []
        for line in README[m.end():].splitlines():
            if not line.startswith("|"):
                break
            shown.append(line)
        file_table = table_after(open(path, encoding="utf-8").read(), 0) if os.path.exists(path) else None
        report(f"README: the frontier table of {path} is the file's, line for line",
               file_table is not None and shown == file_table and len(shown) >= 3,
               f"README {len(shown)} lines, file {None if file_table is None else len(file_table)}")


def expected_choice(valid, budget):
    best = None
    for i, c in enumerate(valid["configs"]):
        if c["effective_bits"] <= budget + 1e-9 and (best is None or c["kl_mean"] < valid["configs"][best]["kl_mean"]):
            best = i
    return best


def md_rows(text):
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 12 and re.fullmatch(r"[0-9.]+", cells[0]):
            rows[cells[0]] = cells
    return rows


def check_model(model):
    d = f"data/frontier/{model}"
    try:
        fj = json.load(open(f"{d}/frontier.json"))
        valid = json.load(open(f"{d}/valid/results.json"))
        test = json.load(open(f"{d}/test/results.json"))
        md = open(f"{d}/frontier.md", encoding="utf-8").read()
    except (OSError, ValueError) as e:
        report(f"{model}: the frontier's files are there", False, str(e))
        return None
    same = all(valid[k] == test[k] for k in ("model_id", "ctx", "stride", "windows", "calib_sha256"))
    report(f"{model}: the valid and test sweeps are of one model, calibration, ctx, stride and window count", same,
           str({k: (valid[k], test[k]) for k in ("ctx", "stride", "windows")}))
    report(f"{model}: the choice is made on wiki.valid and reported on wiki.test (held out)",
           valid["text_file"].endswith("wiki.valid.raw") and test["text_file"].endswith("wiki.test.raw") and
           fj["valid"]["text_file"] == valid["text_file"] and fj["test"]["text_file"] == test["text_file"],
           valid["text_file"] + " / " + test["text_file"])
    report(f"{model}: 16 windows of ctx 1024, stride 512", (test["ctx"], test["stride"], test["windows"]) == (1024, 512, 16),
           str((test["ctx"], test["stride"], test["windows"])))
    labels = [(c["k_scheme"], c["v_scheme"]) for c in valid["configs"]]
    report(f"{model}: both sweeps hold the same candidates", labels == [(c["k_scheme"], c["v_scheme"]) for c in test["configs"]])
    rows = md_rows(md)
    bad = []
    for entry in fj["budgets"]:
        b = entry["budget"]
        want = expected_choice(valid, b)
        got = entry["chosen"]
        text = entry["budget_text"]
        if want is None:
            if got is not None or not rows.get(text, ["", ""])[1].startswith("no candidate"):
                bad.append(f"{text}: none within it, frontier has {got and got['k_scheme']}")
            continue
        t = test["configs"][want]
        if got is None or got["index"] != want or (got["k_scheme"], got["v_scheme"]) != (t["k_scheme"], t["v_scheme"]):
            bad.append(f"{text}: want {t['k_scheme']}:{t['v_scheme']}, got {got and got['k_scheme']}")
            continue
        figures = all(got["test"][k] == t[k] for k in ("delta_percent", "delta_percent_stderr", "kl_mean", "kl_stderr",
                                                        "top1_agreement", "top1_stderr"))
        figures = figures and all(got[k] == t[k] for k in ("effective_bits", "entropy_bits", "codebook_bytes"))
        if not figures:
            bad.append(f"{text}: reported figures are not the test sweep's")
        r = rows.get(text)
        cells = [text, None, None, "%.3g" % (0.5 * (t["k_stored_bits"] + t["v_stored_bits"])), "%.3g" % t["effective_bits"],
                 "%.3g" % t["entropy_bits"], "%.1f" % (t["codebook_bytes"] / 1024),
                 "%+.3f +/- %.3f" % (t["delta_percent"], t["delta_percent_stderr"]),
                 "%.3g +/- %.2g" % (t["kl_mean"], t["kl_stderr"]),
                 "%.2f +/- %.2f" % (100 * t["top1_agreement"], 100 * t["top1_stderr"]),
                 "%.3g" % valid["configs"][want]["kl_mean"]]
        if r is None or any(w is not None and r[k] != w for k, w in enumerate(cells)):
            bad.append(f"{text}: frontier.md row {r} against {cells}")
        elif "--k-scheme" not in r[11] or "--windows 16" not in r[11] or "--ctx 1024" not in r[11]:
            bad.append(f"{text}: the command {r[11]}")
    report(f"{model}: each budget's row is the valid split's lowest-KL candidate within it, with its test figures "
           f"(recomputed from the sweeps' results.json)", not bad, "; ".join(bad))
    return fj


def check_goal(fj):
    m = re.search(r"<!-- frontier goal -->\n(.*?)\n\n", README, re.S)
    if not m or fj is None:
        report("README: the goal sentence says what the outlier model's frontier.json has", False,
               "no <!-- frontier goal --> paragraph" if not m else "no frontier.json")
        return
    text = m.group(1).replace("\n", " ")
    bad = []
    for budget, dppl, kl in GOALS:
        entry = next((e for e in fj["budgets"] if e["budget_text"] == budget), None)
        c = entry and entry["chosen"]
        met = bool(c) and c["test"]["delta_percent"] <= dppl and c["test"]["kl_mean"] <= kl
        said = re.search(r"within %s bits?[^;]*?: (not met|met)" % re.escape(budget), text)
        if not said or (said.group(1) == "met") != met:
            bad.append(f"{budget} bits: README says {said and said.group(1)}, frontier.json: {'met' if met else 'not met'}")
    report("README: the goal sentence says, per budget, what the outlier model's frontier.json has", not bad,
           "; ".join(bad))


def main():
    check_tables()
    fjs = {m: check_model(m) for m in MODELS}
    check_goal(fjs["mini-llama-brown-outliers"])
    for model in MODELS:
        svg = f"data/frontier/{model}/frontier.svg"
        shown = f"]({svg})" in README or model != "mini-llama-brown-outliers"
        ok = os.path.exists(svg) and open(svg, encoding="utf-8").read(200).lstrip().startswith("<?xml")
        report(f"README: the frontier chart of {model} exists (and the outlier model's is shown)", ok and shown, svg)


if __name__ == "__main__":
    main()
