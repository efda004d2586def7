#!/usr/bin/env python3
"""tests/test_cli_frontier.py: ./run frontier on a tiny setup (mini-llama-brown, 2 windows of ctx 128; from
the repo root; prints PASS/FAIL lines).

Four candidates whose order by KL differs between the splits (tq2 / nuq2-g64+had at 2.25 bits, tq3 /
nuq3-g64 at 3.25: the lower KL on wiki.valid is not the lower on wiki.test), plus the allocation at 3 bits
of the model's own allocation.json, under budgets 2 (none within), 2.25 (exactly two candidates' bits), 3
and 3.25. Everything expected is recomputed here from the two sweeps' results.json, not taken from the
C code:
- the chosen candidate per budget is the lowest mean KL on the valid sweep among those of effective bits
  <= budget (the first on a tie); a budget with none says so in frontier.md and is null in frontier.json;
- the reported figures are the test sweep's for that candidate (the same doubles), and frontier.md's cells
  are those figures as printed;
- the row's ./run ppl command measures the same KL again;
- frontier.svg rings the chosen points (two panels each); the sweeps write chart-entropy.svg (x = entropy
  bits); a second run resumes to the same frontier.json;
- bad input (a missing configs file, a bad budget, the other model's allocation.json, an allocation.json
  with an edited member, not JSON, the same text for both splits) -> exit 2, one line on stderr naming the
  file or flag, nothing on stdout, no out dir.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile

from pycheck import check

RUN = "./run"
MODEL = "data/models/mini-llama-brown"
OWN_ALLOC = "data/sensitivity/mini-llama-brown/verify-test/allocation.json"
OTHER_ALLOC = "data/sensitivity/mini-llama-brown-outliers/verify-test/allocation.json"
CONFIGS = "# two pairs at equal bits\ntq2\nnuq2-g64+had\ntq3\nnuq3-g64\n"
BUDGETS = ["2", "2.25", "3", "3.25"]
WINDOW = ["--ctx", "128", "--windows", "2", "--quiet", "--no-layer-error"]


def run(args):
    return subprocess.run([RUN] + args, capture_output=True, text=True, timeout=600)


def frontier(configs, out, extra=()):
    return run(["frontier", MODEL, "--configs", configs, "--budget", ",".join(BUDGETS), "--out-dir", out] + WINDOW +
               list(extra))


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


def check_choices(out, fj, md):
    valid = json.load(open(os.path.join(out, "valid", "results.json")))
    test = json.load(open(os.path.join(out, "test", "results.json")))
    rows = md_rows(md)
    check(len(valid["configs"]) == 5 and len(test["configs"]) == 5, "frontier: 4 configs + 1 allocation candidate",
          "%d / %d" % (len(valid["configs"]), len(test["configs"])))
    check(valid["text_file"].endswith("wiki.valid.raw") and test["text_file"].endswith("wiki.test.raw"),
          "frontier: valid sweep on wiki.valid, test sweep on wiki.test", valid["text_file"] + " " + test["text_file"])
    flips = sum(1 for b in BUDGETS if expected_choice(valid, float(b)) != expected_choice(test, float(b)))
    check(flips >= 1, "frontier: the setup makes the split matter (a budget whose valid and test choices differ)",
          "no budget differs: the choice-on-test mutation would go unseen")
    for k, b in enumerate(BUDGETS):
        want = expected_choice(valid, float(b))
        entry = fj["budgets"][k]
        got = entry["chosen"]
        if want is None:
            check(got is None, "frontier: budget %s has no candidate: chosen is null" % b, str(got))
            check(b in rows and rows[b][1] == "no candidate within %s bits" % b,
                  "frontier: budget %s's row says no candidate within it" % b, str(rows.get(b)))
            continue
        t = test["configs"][want]
        ok = got is not None and got["index"] == want and got["k_scheme"] == t["k_scheme"] and got["v_scheme"] == t["v_scheme"]
        check(ok, "frontier: budget %s chooses the valid split's lowest-KL candidate within it (%s)" % (b, t["k_scheme"]),
              "got %s" % (got and got["k_scheme"]))
        if not ok:
            continue
        within = sum(1 for c in valid["configs"] if c["effective_bits"] <= float(b) + 1e-9)
        check(entry["candidates_within"] == within, "frontier: budget %s counts %d candidates within it" % (b, within),
              str(entry["candidates_within"]))
        same = all(got["test"][key] == t[key] for key in ("delta_percent", "kl_mean", "top1_agreement", "scored_tokens"))
        same = same and got["test"]["kl_stderr"] == t["kl_stderr"] and got["effective_bits"] == t["effective_bits"]
        same = same and got["entropy_bits"] == t["entropy_bits"] and got["codebook_bytes"] == t["codebook_bytes"]
        check(same, "frontier: budget %s reports the test sweep's figures of its choice" % b,
              "%s vs %s" % (got["test"], {k2: t[k2] for k2 in ("delta_percent", "kl_mean")}))
        check(got["valid"]["kl_mean"] == valid["configs"][want]["kl_mean"],
              "frontier: budget %s keeps the valid KL it chose by" % b, str(got["valid"]))
        r = rows.get(b)
        cells_ok = r is not None and r[7] == "%+.3f +/- %.3f" % (t["delta_percent"], t["delta_percent_stderr"]) and \
            r[8] == "%.3g +/- %.2g" % (t["kl_mean"], t["kl_stderr"]) and r[4] == "%.3g" % t["effective_bits"] and \
            r[9] == "%.2f +/- %.2f" % (100 * t["top1_agreement"], 100 * t["top1_stderr"]) and \
            r[10] == "%.3g" % valid["configs"][want]["kl_mean"]
        check(cells_ok, "frontier: budget %s's frontier.md row prints the test figures" % b, str(r))
    return test


def check_command(fj, test):
    entry = next((e for e in fj["budgets"] if e["chosen"] is not None), None)
    if entry is None:
        check(False, "frontier: some budget has a choice to re-measure", "none")
        return
    cmd = entry["command"]
    words = shlex.split(cmd)   # an allocation's schemes are quoted (';' in them)
    ok = words[:3] == ["./run", "ppl", MODEL] and "--windows" in words and "--ctx" in words
    check(ok, "frontier: the row's command is a ./run ppl line with ctx and windows", cmd)
    if not ok:
        return
    p = run(words[1:] + ["--json", "--quiet", "--no-layer-error"])
    kl = json.loads(p.stdout)["kl_mean"] if p.returncode == 0 else None
    want = test["configs"][entry["chosen"]["index"]]["kl_mean"]
    check(kl is not None and abs(kl - want) <= 1e-9 * max(1e-12, abs(want)),
          "frontier: the row's ./run ppl command measures the reported KL again", "%s vs %s" % (kl, want))


def check_chart(out, fj):
    svg = open(os.path.join(out, "frontier.svg")).read()
    chosen = {e["chosen"]["index"] for e in fj["budgets"] if e["chosen"] is not None}
    rings = svg.count('class="ringed"')
    check(rings == 2 * len(chosen) + 1, "frontier: frontier.svg rings each chosen point in both panels (+ the legend)",
          "%d rings for %d chosen" % (rings, len(chosen)))
    check(svg.count('class="front"') >= 1 and "chosen" in svg, "frontier: frontier.svg marks the front and names the ring",
          "")
    ent = os.path.join(out, "test", "chart-entropy.svg")
    text = open(ent).read() if os.path.exists(ent) else ""
    check("entropy-coded bits per value" in text and text.count('class="key"') >= 2 * len(fj["candidates"]),
          "sweep: a sweep that measured entropy bits writes chart-entropy.svg against them", ent)


def own_allocation(tmp):
    """The committed allocation.json (this model's) with one 3-bit allocation alone: the setup's pairs at 2.25
    and 3.25 bits stay what each budget chooses from, whatever other budgets allocate-demo holds. Its schemes
    are set here, without a window: allocate-demo's carry +res16, whose bits depend on ctx (a window of 16 of
    1024 positions is 16 of 128 here) and would not fit 3 bits at this setup's ctx. pcaB stores exactly B
    bits a value, so keys (4 + 2 + 2 + 2) / 4 and values (4 + 3 + 3 + 3) / 4 make 2.875 bits at any ctx."""
    alloc = json.load(open(OWN_ALLOC))
    alloc["allocations"] = [a for a in alloc["allocations"] if a["budget"] == 3]
    check(len(alloc["allocations"]) == 1, "frontier: the committed allocation.json holds a 3-bit allocation", OWN_ALLOC)
    alloc["allocations"][0].update(k_scheme="pca2+prerope+aw;0:pca4+prerope+aw", v_scheme="pca3+aw;0:pca4+aw",
                                   bits=2.875)
    path = os.path.join(tmp, "own-allocation.json")
    json.dump(alloc, open(path, "w"))
    return path


def check_bad_inputs(tmp, configs, own_alloc):
    bad_alloc = os.path.join(tmp, "edited.json")
    text = open(own_alloc).read()
    alloc = json.loads(text)
    alloc["allocations"][0]["k_scheme"] = "q8_0"         # the 3-bit allocation's keys, edited: other bits
    json.dump(alloc, open(bad_alloc, "w"))
    bad_budget = os.path.join(tmp, "budget.json")
    alloc = json.loads(text)
    alloc["allocations"][0]["budget"] = 3.25               # disagrees with its budget_fraction
    json.dump(alloc, open(bad_budget, "w"))
    not_json = os.path.join(tmp, "not.json")
    open(not_json, "w").write("{\"model_sha256\": ")
    cases = [
        ("a missing configs file", ["--configs", os.path.join(tmp, "none.txt")], [], "none.txt"),
        ("a bad budget", ["--configs", configs], ["--budget", "2,abc"], "--budget"),
        ("a negative budget", ["--configs", configs], ["--budget", "-1"], "--budget"),
        ("the other model's allocation.json", ["--configs", configs, "--allocations", OTHER_ALLOC], [], OTHER_ALLOC),
        ("an allocation.json with an edited scheme", ["--configs", configs, "--allocations", bad_alloc], [], bad_alloc),
        ("an allocation.json with an edited budget", ["--configs", configs, "--allocations", bad_budget], [], bad_budget),
        ("an allocation.json that is not JSON", ["--configs", configs, "--allocations", not_json], [], not_json),
        ("the same text for both splits", ["--configs", configs, "--valid-text", "data/wikitext-2-raw/wiki.test.raw"], [],
         "wiki.test.raw"),
    ]
    for name, args, budget, needle in cases:
        out = os.path.join(tmp, "bad")
        shutil.rmtree(out, ignore_errors=True)
        budget = budget or ["--budget", "2,3"]
        p = run(["frontier", MODEL] + args + budget + ["--out-dir", out] + WINDOW)
        lines = p.stderr.strip().splitlines()
        ok = p.returncode == 2 and len(lines) == 1 and needle in lines[0] and p.stdout == "" and not os.path.exists(out)
        check(ok, "frontier: %s -> exit 2, one line naming it, no output" % name,
              "rc %d, stderr %r, out dir %s" % (p.returncode, p.stderr[:300], os.path.exists(out)))


def main():
    tmp = tempfile.mkdtemp(prefix="kvq-frontier-")
    try:
        configs = os.path.join(tmp, "configs.txt")
        open(configs, "w").write(CONFIGS)
        out = os.path.join(tmp, "fr")
        own_alloc = own_allocation(tmp)
        p = frontier(configs, out, ["--allocations", own_alloc])
        check(p.returncode == 0, "frontier: the tiny frontier runs", p.stderr[-400:])
        if p.returncode != 0:
            return
        md = open(os.path.join(out, "frontier.md")).read()
        check(p.stdout == md, "frontier: prints frontier.md", "")
        fj = json.load(open(os.path.join(out, "frontier.json")))
        check("allocation 3 bits" in md, "frontier: the allocation.json's 3-bit allocation is a candidate", "")
        test = check_choices(out, fj, md)
        check_command(fj, test)
        check_chart(out, fj)
        before = open(os.path.join(out, "frontier.json")).read()
        p = frontier(configs, out, ["--allocations", own_alloc])
        check(p.returncode == 0 and open(os.path.join(out, "frontier.json")).read() == before,
              "frontier: a second run resumes both sweeps to the same frontier.json", p.stderr[-300:])
        check_bad_inputs(tmp, configs, own_alloc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
    import pycheck
    raise SystemExit(1 if pycheck.failures else 0)
