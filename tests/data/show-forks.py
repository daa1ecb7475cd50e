#!/usr/bin/env python3
"""Prints the forks of a `flipscope branch` output for labelling by hand, without the judge's reading.

For each record: the position, the transcript's text before the point (its last PREFIX bytes), the
transcript's continuation and both futures' text with how each stopped. Nothing the judge wrote
(verdict, outcome, kind, grades, reasons) is printed, so that a reader labels blind; run `flipscope
branch` with its output sent to a file that is not read, since it prints verdicts too.

    ~/.cache/flipscope/venv/bin/python tests/data/show-forks.py BASE.safetensors BRANCHES.json [POSITION ...]

(PREFIX=1500 by default; the set-up's venv has the safetensors package it reads captures with.)
"""
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The rendered transcript and its token offsets, read as make-fork-labels.py reads them.
spec = importlib.util.spec_from_file_location("make_fork_labels", os.path.join(HERE, "make-fork-labels.py"))
mfl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mfl)

SIDE_KEYS = ("ended", "stop", "call_cap_hit")  # how a future stopped: no judgement in them


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    capture, branches = sys.argv[1], sys.argv[2]
    only = {int(x) for x in sys.argv[3:]}
    keep = int(os.environ.get("PREFIX", "1500"))
    with open(branches) as f:
        br = json.load(f)
    _, offsets, text = mfl.source_entry(capture, br)
    for r in br["records"]:
        p = r["position"]
        if only and p not in only:
            continue
        print("=" * 100)
        print(f"POSITION {p}  base token {r['base_text']!r}  cand token {r['cand_text']!r}")
        print("----- the transcript before the point -----")
        print(text[: offsets[p + 1]].decode("utf-8", "replace")[-keep:])
        print("----- the transcript goes on -----")
        print(repr(r["reference"]["text"]))
        for side in ("base", "cand"):
            stopped = {k: r[side].get(k) for k in SIDE_KEYS}
            print(f"----- {side} future {stopped} -----")
            print(repr(r[f"{side}_future"]["text"]))


if __name__ == "__main__":
    main()
