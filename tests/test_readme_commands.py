#!/usr/bin/env python3
"""tests/test_readme_commands.py: every command README.md shows finishes in about two minutes on 2
cores, or says how long it takes beside it (a README command without --windows once verified on all
666 windows of wiki.test: 1h45m).

Each line of README.md's ```sh blocks is a command (assignments such as C=... aside); the text after
its `#` is what it says beside it. Then:
- a command that scores windows of a text (ppl, sweep, sensitivity, allocate --verify) names them,
  `--windows N` with N <= 16;
- a command of LONG (calibrate, sensitivity, the test and bench targets, anything on TinyLlama, the
  download) carries a duration beside it ("92 s", "7 min", "3m16s"); one of UNTIMED (make test-aarch64:
  no machine here has qemu) says "not timed (why)" instead;
- any other command is one of QUICK, each measured at a few seconds (the list says so), or carries a
  duration: a new command in the README must be added to one list or the other;
- each `make` target of LONG_TARGETS that the README's prose names has a duration in its paragraph;
- the README says where its durations were measured (the machine and its load).
Run from the repo root."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, exit_code  # noqa: E402

DURATION = re.compile(r"\b\d+(\.\d+)?\s*(s|min|h)\b|\b\d+m\d+s\b")
# ./run commands that score windows of a text, and the most windows a quick one may name
WINDOWED = re.compile(r"^\./run (ppl|sweep|sensitivity)\b|^\./run allocate\b.*--verify\b")
MAX_QUICK_WINDOWS = 16
# measured on a loaded 2-core Zen 4 VM (README's "Commands"): each a few seconds
QUICK = [
    r"^make$",                                            # the build: seconds when built, ~1 min fresh
    r"^\./run --validate$",                               # 16 s at load 7 on the bundled model
    r"^\./run generate data/models/\S+ .*-n \d{1,3}\b",   # 2 s for 64 tokens
    r"^\./run schemes$",                                  # prints a table
    r"^\./run kv-extract data/models/",                   # 1 s
    r"^\./run compress ",                                 # 0.1 s
    r"^\./run allocate\b(?!.*--verify)",                  # no forward pass: 2 s
]
LONG = [
    r"^python3 export/export\.py",     # a 2.2 GB download
    r"models/tinyllama",              # TinyLlama: 1.1B parameters
    r"^\./run calibrate\b",
    r"^\./run sensitivity\b",
    r"^make (check|test|fuzz|test-aarch64|bench)\b",
]
# long commands not timed on any machine the README names: the note beside them must say so, and why
UNTIMED = [r"^make test-aarch64$"]
LONG_TARGETS = ["sweep-demo", "sweep-calibrated", "allocate-demo", "probes-demo", "bench"]

text = open("README.md", encoding="utf-8").read()
blocks = re.findall(r"```sh\n(.*?)```", text, re.S)
commands = []
block_notes = []
for block in blocks:
    lines = block.splitlines()
    for i, line in enumerate(lines):
        if not line.strip() or line.lstrip().startswith("#") or re.match(r"^[A-Z_]+=\S+$", line.strip()):
            continue
        command, _, note = line.partition("  #")
        # a note continued on the lines below (comment-only lines) belongs to this command
        j = i + 1
        while j < len(lines) and re.match(r"^\s+#", lines[j]):
            note += " " + lines[j].strip().lstrip("#")
            j += 1
        commands.append((command.strip(), note.strip()))
check(len(commands) >= 15, "README commands: the sh blocks' commands are read (15 or more)", str(len(commands)))

unwindowed, long_silent, unknown = [], [], []
for command, note in commands:
    timed = bool(DURATION.search(note))
    if WINDOWED.search(command):
        m = re.search(r"--windows (\d+)", command)
        if not (m and int(m.group(1)) <= MAX_QUICK_WINDOWS) and not timed:
            unwindowed.append(command)
    if any(re.search(p, command) for p in UNTIMED):
        if not re.search(r"\bnot timed \(\w", note):
            long_silent.append(command)
    elif any(re.search(p, command) for p in LONG) or ("tinyllama" in note.lower() and "validate" in command):
        if not timed:
            long_silent.append(command)
    elif not WINDOWED.search(command) and not any(re.search(p, command) for p in QUICK) and not timed:
        unknown.append(command)
check(not unwindowed, f"README commands: each that scores a text names --windows N <= {MAX_QUICK_WINDOWS} or its time",
      "; ".join(unwindowed))
check(not long_silent, "README commands: each long one (calibrate, sensitivity, TinyLlama, tests, bench) says how long",
      "; ".join(long_silent))
check(not unknown, "README commands: every other command is a measured quick one (QUICK) or says how long",
      "; ".join(unknown))

paragraphs = re.split(r"\n\s*\n", re.sub(r"```.*?```", "", text, flags=re.S))
silent = []
for target in LONG_TARGETS:
    named = [p for p in paragraphs if f"`make {target}`" in p]
    if named and not DURATION.search(named[0]):
        silent.append(target)
check(not silent, "README commands: the paragraph that first names each long make target gives its duration",
      ", ".join(silent))
check(re.search(r"Durations beside the commands[^.]*measured on [^.]*(Zen|EPYC|Xeon)[^.]*load", text, re.S) is not None,
      "README commands: the README says on which machine, under which load, its durations were measured")
sys.exit(exit_code())
