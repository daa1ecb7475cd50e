#!/usr/bin/env python3
"""The table of bench/gpu/exact-cashiers.sh: every `flipscope compare --json` output in a folder
(exact-vs-NAME.json: the exact capture as base; other names as they are), one line each, and
the same as JSON on the last line's file (FOLDER/table.json).

    exact_table.py CMP_FOLDER
"""
import json
import os
import sys


def main():
    folder = sys.argv[1]
    rows = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json") or name == "table.json":
            continue
        with open(os.path.join(folder, name)) as f:
            o = json.load(f)["overall"]
        kl = o["kl_base_cand"]
        rows[name[:-5]] = {"probes": o["probes"], "flips": o["flips"], "flip_rate": o["flip_rate"],
                           "kl_mean": kl["mean"], "kl_median": kl["median"], "kl_p99": kl["p99"], "kl_max": kl["max"]}
    print(f"{'pair':28} {'flips':>13} {'rate':>8} {'KL mean':>10} {'KL p99':>10} {'KL max':>10}")
    for k, r in rows.items():
        print(f"{k:28} {r['flips']:5} / {r['probes']:5} {100 * r['flip_rate']:7.3f}% {r['kl_mean']:10.3g} "
              f"{r['kl_p99']:10.3g} {r['kl_max']:10.3g}")
    with open(os.path.join(folder, "table.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
