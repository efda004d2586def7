#!/usr/bin/env python3
"""tests/test_cli_help.py: `./run COMMAND --help` for every command of run.c's COMMANDS table.

The flags each command's parser accepts are read from the source, not from the help: the
flag(a, "name", ...) calls in the body of its cmd_* function in run.c, the strcmp'd spellings of one
that parses by hand (ppl-merge), and the shared flags of the TAKES_* bits in its table row
(eval/cli.c's shared_flag(), its `(t & TAKES_X) && flag(a, "name"` lines; the bits in eval/cli.h).
Each must be named in its help (as -name or --name); a flag added to a parser without a line of help
fails here. A value the help shows (a flag line's "e.g. 2.5,3 or 3.25", the overview's "[-n 64]") must
be one its parser takes. Each help also has its synopsis ("usage: ./run
CMD"), 2-3 examples that call the command with flags it accepts, and its exit codes, and exits 0 on
stdout; `./run help CMD` and `./run --help CMD` print the same; `./run --help` stays the overview
(every command's name, and no command's flag table). Run from the repo root after `make`."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import check, exit_code  # noqa: E402

SRC = open("run.c", encoding="utf-8").read()
CLI_SRC = open("eval/cli.c", encoding="utf-8").read() + open("eval/cli.h", encoding="utf-8").read()


def body(function):
    """The text of `static int function(Args *a) { ... }` (up to the first line that is "}")."""
    m = re.search(r"^static int " + function + r"\(Args \*a\) \{\n(.*?)^\}\n", SRC, re.M | re.S)
    return m.group(1) if m else None


def shared_flags():
    """{TAKES_BIT: [flag names]} from shared_flag()'s body."""
    text = re.search(r"^static int shared_flag\(Args \*a\) \{\n(.*?)^\}\n", CLI_SRC, re.M | re.S).group(1)
    out = {}
    for bit, name in re.findall(r"\(t & (TAKES_\w+)\) && flag\(a, \"([^\"]+)\"", text):
        out.setdefault(bit, []).append(name)
    return out


def takes_bits(expr):
    """TAKES_EVAL_RUN | TAKES_CALIB -> its TAKES_* bits, composites expanded from the enum."""
    bits = set()
    for word in re.findall(r"TAKES_\w+", expr):
        m = re.search(r"^\s*" + word + r" = ([^,]*?),", CLI_SRC, re.M)
        if m and "|" in m.group(1):
            bits |= takes_bits(m.group(1))
        else:
            bits.add(word)
    return bits


def commands():
    """[(names, function, accepted flags)] from the COMMANDS table."""
    table = SRC[SRC.index("static const Command COMMANDS[] = {"):]
    shared = shared_flags()
    out = []
    for names, function, takes in re.findall(r"\{\{((?:\"[^\"]+\"(?:, )?)+)\}, (cmd_\w+),\s*([^,]+),", table):
        names = re.findall(r"\"([^\"]+)\"", names)
        text = body(function) or ""
        flags = set(re.findall(r"\bflag\(a, \"([^\"]+)\"", text))
        flags |= {f.lstrip("-") for f in re.findall(r"strcmp\(a->argv\[a->i\], \"(-[^\"]+)\"\)", text)}
        for bit in takes_bits(takes):
            flags |= set(shared.get(bit, []))
        out.append((names, function, bool(body(function)), sorted(flags)))
    return out


def run(args):
    return subprocess.run(["./run"] + args, capture_output=True, text=True)


def named(flag, text):
    return re.search(r"(?<![\w-])--?" + re.escape(flag) + r"(?![\w-])", text) is not None


table = commands()
shared = shared_flags()
check(len(table) >= 19 and len(shared.get("TAKES_EVAL", [])) >= 6 and len(shared.get("TAKES_WINDOW", [])) == 3,
      "help: run.c's COMMANDS table and shared flags are read (19 commands or more)",
      f"{len(table)} commands, shared {shared}")
overview = run(["--help"])
values_shown = 0
for names, function, found, flags in table:
    cmd = names[0]
    check(found, f"help {cmd}: its parser {function} is found in run.c", "no body")
    got = run([cmd, "--help"])
    text = got.stdout
    check(got.returncode == 0 and text and not got.stderr, f"help {cmd}: ./run {cmd} --help exits 0 on stdout",
          f"exit {got.returncode}, stderr {got.stderr[:200]!r}")
    missing = [f for f in flags if not named(f, text)]
    check(not missing, f"help {cmd}: names every flag its parser takes ({len(flags)})",
          "not in the help: " + ", ".join("--" + f for f in missing))
    usage = re.search(r"^usage: ./run " + re.escape(cmd) + r"\b", text, re.M)
    examples = re.search(r"^examples:\n((?:  .*\n)+)", text, re.M)
    lines = [l for l in examples.group(1).splitlines() if l.startswith("  ./run ")] if examples else []
    exits = re.search(r"^exit codes: 0", text, re.M)
    check(usage and 2 <= len(lines) <= 3 and exits, f"help {cmd}: synopsis, 2-3 examples and exit codes",
          f"usage {bool(usage)}, {len(lines)} examples, exit codes {bool(exits)}")
    # an example's flags are flags the command takes (one that a parser dropped would fail here)
    bad = []
    for line in lines:
        words = line.split()[1:]
        is_help = "help" in names    # its examples ask other commands for their help
        if not any(w in names for w in (words if is_help else words[:1])):
            bad.append(f"{line.strip()!r} does not run {cmd}")
        bad += [f"{w} in {line.strip()!r}" for w in words[1:]
                if re.match(r"^--?[a-z]", w) and w.lstrip("-").split("=")[0] not in flags and not is_help]
    check(not bad, f"help {cmd}: its examples use only its flags", "; ".join(bad[:3]))
    # a value the help shows (a flag line's "e.g.", the overview's "[-n 64]") is one the parser takes
    # as it reads the flags: followed by an unknown flag, the error is that flag's, never this one's
    # (nothing runs; a scheme or --fit is checked later, against the model, and not here)
    shown = [(f, v) for f, values in re.findall(r"^  (?:-\w, )?(--?[\w-]+)\s.*?\be\.g\. (.+?)(?: \(|;|$)", text, re.M)
             for part in values.split(" or ") for v in part.split(", ")]
    block = re.search(r"^  " + re.escape(cmd) + r"\b.*\n(?: {11}.*\n)*", overview.stdout, re.M)
    shown += [(f, v) for f, v in re.findall(r"(?<![\w-])(--?[a-z][\w-]*) ([^\s\[\]|]*\d[^\s\[\]|]*)",
                                            block.group(0) if block else "")]
    refused = []
    for flag_name, value in shown:
        values_shown += 1
        got_value = subprocess.run(["./run", cmd, flag_name, value, "--no-such-flag"], capture_output=True, text=True,
                                   timeout=60)
        if "unknown argument '--no-such-flag'" not in got_value.stderr:
            refused.append(f"{flag_name} {value}: {got_value.stderr.strip()[:150]}")
    if shown:
        check(not refused, f"help {cmd}: the values its help shows are accepted ({len(shown)})", "; ".join(refused))
    for other in (["help", cmd], ["--help", cmd]):
        again = run(other)
        check(again.returncode == 0 and again.stdout == text, f"help {cmd}: ./run {' '.join(other)} prints the same",
              again.stdout[:200])
    check(re.search(r"^  " + re.escape(cmd) + r"\b", overview.stdout, re.M) is not None,
          f"help {cmd}: listed in ./run --help", "not listed")
check(values_shown >= 20, "help: the values the help shows are found (20 or more)", f"{values_shown}")
check(overview.returncode == 0 and "flags (default):" not in overview.stdout and "./run COMMAND --help" in overview.stdout,
      "help: ./run --help is the overview (and says where a command's flags are)", overview.stdout[:300])
unknown = run(["ppl", "--bogus"])
check(unknown.returncode == 2 and "see ./run ppl --help" in unknown.stderr,
      "help: a usage error points at the command's own help", unknown.stderr)
sys.exit(exit_code())
