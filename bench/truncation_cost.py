#!/usr/bin/env python3
"""What top-k truncation costs flipscope compare, measured on real captures (docs/engines.md).

    truncation_cost.py --bin build/bin/flipscope --model SmolLM2.gguf -o OUTDIR [--tokens 2000] [--stride 4]
                       [-k 5 20 100] [--cand "-fa on -ctk q4_0 -ctv q4_0"]

Captures a base and a candidate configuration (full vocabulary), truncates the candidate (and
the base itself) to its top-k with flipscope_capture.truncate, and prints a Markdown table of
compare's figures: flips (which must be identical) and KL(base||cand), exact against estimated.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from flipscope_capture import truncate  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--stride", type=int, default=4)
    ap.add_argument("-k", type=int, nargs="+", default=[5, 20, 100])
    ap.add_argument("--cand", default="-fa on -ctk q4_0 -ctv q4_0")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    session = os.path.join(a.out, "session.json")
    subprocess.run([sys.executable, os.path.join(HERE, "..", "examples", "gen_session.py"), "--seed", "7",
                    "--target-tokens", str(a.tokens), "-o", session], check=True)

    def capture(name, knobs):
        path = os.path.join(a.out, name)
        if not os.path.exists(path):
            subprocess.run([a.bin, "capture", "-m", a.model, "-w", session, "-o", path, "--stride", str(a.stride),
                            "-q", *shlex.split(knobs)], check=True)
        return path

    def compare(x, y):
        p = subprocess.run([a.bin, "compare", x, y, "--json", "--no-text", "-q"], check=True, capture_output=True,
                           text=True)
        return json.loads(p.stdout)

    base, cand = capture("base.safetensors", ""), capture("cand.safetensors", a.cand)
    rows = [("full", compare(base, cand))]
    for k in a.k:
        out = os.path.join(a.out, f"cand-top{k}.safetensors")
        truncate.truncate(cand, out, k)
        rows.append((f"top-{k}", compare(base, out)))
    self_rows = []
    for k in a.k:
        out = os.path.join(a.out, f"base-top{k}.safetensors")
        truncate.truncate(base, out, k)
        self_rows.append((k, compare(base, out)))

    exact = rows[0][1]
    flips_exact = [(f["position"], f["base_token"], f["cand_token"]) for f in exact["flips"]]
    print(f"{exact['probes_compared']} probes; candidate: {a.cand}\n")
    print("| candidate rows | flips | same flips as full | KL mean | KL median | KL p99 | KL max | mean / exact |")
    print("|---|---|---|---|---|---|---|---|")
    for name, c in rows:
        o, kl = c["overall"], c["overall"]["kl_base_cand"]
        same = [(f["position"], f["base_token"], f["cand_token"]) for f in c["flips"]] == flips_exact
        ratio = kl["mean"] / exact["overall"]["kl_base_cand"]["mean"]
        print(f"| {name} | {o['flips']} | {'yes' if same else 'NO'} | {kl['mean']:.4g} | {kl['median']:.4g} | "
              f"{kl['p99']:.4g} | {kl['max']:.4g} | {ratio:.3f} |")
    print("\n| base against its own top-k | flips | KL max |")
    print("|---|---|---|")
    for k, c in self_rows:
        print(f"| top-{k} | {c['overall']['flips']} | {c['overall']['kl_base_cand']['max']:.3g} |")


if __name__ == "__main__":
    main()
