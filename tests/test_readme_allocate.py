#!/usr/bin/env python3
"""tests/test_readme_allocate.py: the README's allocation figures ("Bits where they matter") are the
committed files' (data/sensitivity/, `make allocate-demo`), and today's ./run allocate makes the same
choices from the committed sensitivities. Cheap: no forward pass runs (the held-out sweeps took minutes).

- each table after an `<!-- allocate-demo table: FILE -->` marker is, line for line, the first table of FILE
  (allocate --verify's allocation.md): the outlier model's in the README, mini-llama-brown's in eval/README.md;
- the ratios after `<!-- allocate-demo ratios -->` are the allocations' measured / predicted KL in the
  verify-test and verify-valid allocation.json files, to the two decimals shown, in the order named;
- `./run allocate MODEL --from data/sensitivity/MODEL --budget B,... --json` (the budgets of the committed
  allocation.json, those of `make allocate-demo`) gives its schemes, bits and predicted KL exactly (the
  knapsack on the committed sensitivity.json);
- the README's commands are the Makefile's: its candidate lists are ALLOC_K_CANDIDATES / ALLOC_V_CANDIDATES,
  its --budget the demo's;
- the heatmap the README shows exists and is an SVG. Run from the repo root after `make`."""
import json
import os
import re
import subprocess

README = open("README.md", encoding="utf-8").read()
DOCS = {"README.md": README, "eval/README.md": open("eval/README.md", encoding="utf-8").read()}
MODELS = ["mini-llama-brown-outliers", "mini-llama-brown"]


def report(name, ok, why=""):
    print(f"PASS {name}" if ok else f"FAIL {name}: {why}")


def first_table(text):
    lines, started = [], False
    for line in text.splitlines():
        if line.startswith("| budget | configuration"):
            started = True
        if started and not line.startswith("|"):
            break
        if started:
            lines.append(line)
    return lines


def tables():
    marks = [(doc, m) for doc, text in DOCS.items()
             for m in re.finditer(r"<!-- allocate-demo table: (\S+) -->\n", text)]
    shown_files = sorted(m.group(1) for _, m in marks)
    want_files = sorted(f"data/sensitivity/{model}/verify-test/allocation.md" for model in MODELS)
    report("README and eval/README.md: an allocate-demo table for each bundled model", shown_files == want_files,
           f"markers for {shown_files}")
    report("README: the outlier model's allocate-demo table is in the README itself",
           any(doc == "README.md" and "outliers" in m.group(1) for doc, m in marks), "not found")
    for doc, m in marks:
        path = m.group(1)
        shown = []
        for line in DOCS[doc][m.end():].splitlines():
            if not line.startswith("|"):
                break
            shown.append(line)
        want = first_table(open(path, encoding="utf-8").read()) if os.path.exists(path) else None
        budgets = len(demo_budgets())
        report(f"{doc}: the allocation table of {path} is the file's, line for line ({budgets} budgets)",
               shown == want and len(shown) == 2 + 2 * budgets,
               f"{doc} {len(shown)} lines, file {None if want is None else len(want)}: "
               f"{next((a for a, b in zip(shown, want or []) if a != b), '')}")


def ratios():
    m = re.search(r"<!-- allocate-demo ratios -->\n(.*?)\n\n", README, re.S)
    if not m:
        report("README: the additivity ratios are the files'", False, "no <!-- allocate-demo ratios --> paragraph")
        return
    text = m.group(1)
    held, own = text.split("On the", 1)
    bad = []
    for part, check in [(held, "verify-test"), (own, "verify-valid")]:
        for model in MODELS:
            got = re.search(re.escape(model) + r" (\d+\.\d+(?:, \d+\.\d+)*)", part.replace("\n", " "))
            j = json.load(open(f"data/sensitivity/{model}/{check}/allocation.json"))
            want = ["%.2f" % r["measured_over_predicted"] for b in j["verify"]["budgets"] for r in b["rows"]
                    if r["kind"] == "allocation"]
            shown = got.group(1).split(", ") if got else None
            if shown != want:
                bad.append(f"{model} {check}: README {shown}, file {want}")
    report("README: the additivity ratios (measured / predicted KL, held out and on the sensitivity's windows) are "
           "the verify files'", not bad, "; ".join(bad))


def makefile_value(name):
    m = re.search(r"^" + name + r" := (.*?)(?<!\\)$", open("Makefile", encoding="utf-8").read(), re.M | re.S)
    return m.group(1).replace("\\\n", " ") if m else ""


def demo_budgets():
    return re.search(r"--budget (\S+)", makefile_value("ALLOC_ARGS")).group(1).split(",")


def commands():
    k, v, budgets = makefile_value("ALLOC_K_CANDIDATES"), makefile_value("ALLOC_V_CANDIDATES"), demo_budgets()
    ok = bool(k and v) and re.search(r"^K=" + re.escape(k) + "$", README, re.M) is not None
    ok = ok and re.search(r"^V=" + re.escape(v) + "$", README, re.M) is not None
    ok = ok and re.search(r"^\./run allocate .*--budget " + re.escape(",".join(budgets)) + " ", README, re.M) is not None
    report("README: the allocation's commands use the Makefile's candidate lists (K=, V=) and budgets "
           f"({','.join(budgets)})", ok, "README's K=/V= lines or --budget differ from ALLOC_K/V_CANDIDATES, ALLOC_ARGS")


def rerun():
    budgets = ",".join(demo_budgets())
    for model in MODELS:
        got = subprocess.run(["./run", "allocate", f"data/models/{model}", "--from", f"data/sensitivity/{model}",
                              "--budget", budgets, "--json"], capture_output=True, text=True)
        want = json.load(open(f"data/sensitivity/{model}/verify-test/allocation.json"))
        ok, why = got.returncode == 0, got.stderr.strip()
        if ok:
            now = json.loads(got.stdout)["allocations"]
            keys = ["budget", "bits", "predicted_kl", "k_scheme", "v_scheme", "k_choice", "v_choice"]
            for a, b in zip(now, want["allocations"]):
                for k in keys:
                    if a[k] != b[k]:
                        ok, why = False, f"budget {a['budget']}: {k} {a[k]} now, {b[k]} in the file"
            ok = ok and len(now) == len(want["allocations"]) == len(demo_budgets())
        report(f"README: ./run allocate on the committed sensitivity of {model} makes the committed choices "
               "(schemes, bits, predicted KL exactly)", ok, why)


def heatmap():
    m = re.search(r"!\[per-layer sensitivity[^\]]*\]\((\S+\.svg)\)", README)
    ok = bool(m) and os.path.exists(m.group(1)) and "<svg" in open(m.group(1), encoding="utf-8").read(400)
    report("README: the sensitivity heatmap it shows exists and is an SVG", ok, m.group(1) if m else "no image")


tables()
commands()
ratios()
rerun()
heatmap()
