#!/usr/bin/env python3
"""tests/test_readme_paths.py: every repository path a README names exists (a README that sends a
newcomer to tests/test_codec_nf4.c when the file is tests/test_codec_fp8_nf4.c fails here).

Each tracked README.md is read for
- links, [text](path): the path, relative to the README's folder, must exist;
- paths in backticks: `data/sweeps/configs.txt`, `tests/test_codec_*.c` (a glob must match),
  `eval/stats.c:111` (the line number is dropped), `json.h/.c` (both files), relative to the repository
  root when the first part is one of its top-level entries or to the README's folder when the first part
  is there, and which git does not ignore (data/sweeps/*/journal.jsonl is written, not committed);
- bare file names of source in backticks (`forward.c`, `random_gguf.py`): a tracked file of that name.
And tests/README.md names every tests/test_*.c/.sh/.py file.
Anything else in backticks (flags, MODEL_DIR/..., placeholders) is not taken as a path. Run from the
repo root."""
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, exit_code  # noqa: E402

TRACKED = subprocess.run(["git", "ls-files"], capture_output=True, text=True).stdout.split()
TOP = {p.split("/")[0] for p in TRACKED}
BASENAMES = {os.path.basename(p) for p in TRACKED}
SOURCE = re.compile(r"^[\w.+-]+\.(c|h|py|sh)$")
PLACEHOLDER = re.compile(r"[<>$*?]|\b[A-Z][A-Z_]{2,}\b")    # <target>, $TMPDIR, MODEL_DIR (a glob is kept apart)


def ignored(path):
    return subprocess.run(["git", "check-ignore", "-q", path]).returncode == 0


def exists(path):
    return bool(glob.glob(path)) if "*" in path else os.path.exists(path)


def expand(text):
    """`json.h/.c` -> json.h, json.c; `eval/stats.c:111` -> eval/stats.c."""
    text = re.sub(r":\d+$", "", text)
    m = re.match(r"^(.*)\.(\w+)/\.(\w+)$", text)
    return [f"{m.group(1)}.{m.group(2)}", f"{m.group(1)}.{m.group(3)}"] if m else [text]


def backtick_paths(readme, text):
    """(as written, path to test) for each backtick span taken as a path."""
    base = os.path.dirname(readme)
    for m in re.finditer(r"`([^`\s]+)`", text):
        for c in expand(m.group(1)):
            c = c[2:] if c.startswith("./") else c
            if c.startswith(("-", "http", "/", "~")) or PLACEHOLDER.search(c.replace("*", "")):
                continue
            if "/" not in c:
                if SOURCE.match(c):
                    yield c, None       # a bare source name: some tracked file
                continue
            first = c.split("/")[0]
            if first in TOP and not ignored(c.rstrip("/")):
                yield c, c.rstrip("/")
            elif base and os.path.isdir(os.path.join(base, first)):
                yield c, os.path.join(base, c.rstrip("/"))


def link_paths(readme, text):
    base = os.path.dirname(readme)
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = m.group(1).split("#")[0]
        if target and not re.match(r"^[a-z]+:", target):
            yield target, os.path.normpath(os.path.join(base, target))


readmes = [p for p in TRACKED if os.path.basename(p) == "README.md"]
check(len(readmes) >= 5 and "README.md" in readmes and "quant/README.md" in readmes,
      "README paths: the READMEs are found (README.md, quant/README.md, ...)", str(readmes))
for readme in readmes:
    text = open(readme, encoding="utf-8").read()
    missing, n = [], 0
    for written, path in list(link_paths(readme, text)) + list(backtick_paths(readme, text)):
        n += 1
        ok = written in BASENAMES if path is None else exists(path)
        if not ok:
            missing.append(written)
    check(not missing, f"README paths: every path {readme} names exists ({n} named)",
          "missing: " + ", ".join(sorted(set(missing))))

# tests/README.md names every test program (a new test file without a line there fails here)
tests_readme = open("tests/README.md", encoding="utf-8").read()
test_files = [os.path.basename(p) for p in TRACKED
              if re.match(r"^tests/test_[\w]+\.(c|sh|py)$", p) and os.path.exists(p)]
unnamed = [f for f in test_files if not re.search(r"(?<![\w/])(tests/)?" + re.escape(f) + r"(?![\w])", tests_readme)]
check(len(test_files) >= 50 and not unnamed,
      f"README paths: tests/README.md names every tests/test_* file ({len(test_files)})", "not named: " + ", ".join(unnamed))
sys.exit(exit_code())
