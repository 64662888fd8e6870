#!/usr/bin/python3
"""Checks the ranges docs/reference/pipeline.md states against the op checks.

The reference takes each argument's meaning from stoker.proto's comments
(docs/gen_reference.py); a range written there ("1..8192", "0..1") could
drift from the check that enforces it. For every single-field numeric
argument whose meaning states a numeric range lo..hi (the last one stated),
this asks the op registry (tools/stoker-pipeline-reference --check) whether
the op is accepted with the argument at lo and at hi, and refused just below
lo and just above hi, starting from a form of the op its check accepts.

Usage: docs/check_ranges.py BUILD_DIR   (exit 1 naming each disagreement)
"""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_reference  # noqa: E402  (proto_comments)

NUMBER = r"-?\d+(?:\.\d+)?"
RANGE = re.compile(rf"(?<![\w.])({NUMBER})\.\.({NUMBER})(?![\w.]| ?[-+*/] ?\w)")


# Arguments whose range depends on another's value: the others' values that
# make the whole stated range valid.
BASE = {"rand_augment": ["magnitude=0"]}


def numeric_args(op, fields):
    """[(argument, kind, lo, hi, zero_is_default)] for the op's single-field numeric arguments with a stated
    range; zero_is_default where the meaning says "0 means" (0 then stands for the default, not a value)."""
    out = []
    for a in op["arguments"]:
        if len(a["fields"]) != 1 or a["kind"].split()[0] not in ("int", "float"):
            continue
        meaning = fields.get(a["fields"][0], "")
        ranges = RANGE.findall(meaning)
        if ranges:
            lo, hi = ranges[-1]
            out.append((a["name"], a["kind"].split()[0], float(lo), float(hi), "0 means" in meaning))
    return out


def text(value, kind):
    return str(int(value)) if kind == "int" else repr(round(value, 6))


def main():
    build = os.path.abspath(sys.argv[1])
    tool = os.path.join(build, "tools/stoker-pipeline-reference")
    ops = [json.loads(l) for l in subprocess.run([tool], capture_output=True, text=True, check=True,
                                                 timeout=60).stdout.splitlines()]
    comments = gen_reference.proto_comments(os.path.join(HERE, "..", "proto", "stoker", "v1", "stoker.proto"))

    def check(lines):
        out = subprocess.run([tool, "--check"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                             check=True, timeout=60).stdout.splitlines()
        assert len(out) == len(lines), (lines, out)
        return out

    problems, probed, skipped = [], 0, []
    for op in ops:
        args = numeric_args(op, comments.get(op["message"], ("", {}))[1])
        if not args:
            continue
        # A form of the op its check accepts: as it is, or with every ranged argument at its lower or upper bound.
        extra = BASE.get(op["name"], [])
        candidates = [extra, extra + [f"{n}={text(lo, k)}" for n, k, lo, hi, _ in args],
                      extra + [f"{n}={text(hi, k)}" for n, k, lo, hi, _ in args]]
        forms = [f"{op['name']}({', '.join(c)})" for c in candidates]
        verdicts = check(forms)
        base = next((c for c, v in zip(candidates, verdicts) if v == "ok"), None)
        if base is None:
            skipped.append(f"{op['name']} ({verdicts[0]})")
            continue
        for name, kind, lo, hi, zero_is_default in args:
            step = 1 if kind == "int" else max(1e-3 * (hi - lo), 1e-4)
            rest = [b for b in base if not b.startswith(name + "=")]
            probes = [(lo, "ok"), (hi, "ok"), (lo - step, "refused"), (hi + step, "refused")]
            probes = [(v, want) for v, want in probes if not (zero_is_default and v == 0)]
            lines = [f"{op['name']}({', '.join(rest + [f'{name}={text(v, kind)}'])})" for v, _ in probes]
            for line, (value, want), got in zip(lines, probes, check(lines)):
                probed += 1
                if not got.startswith(want):
                    problems.append(f"{line}: the reference says {name} is {text(lo, kind)}..{text(hi, kind)}, "
                                    f"so expected {want}; the check says {got}")
    print(f"{probed} probes of the stated ranges")
    if skipped:
        print("ops no form of which the check accepts on its own (checked with their pipeline):", ", ".join(skipped))
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
