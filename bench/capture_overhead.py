#!/usr/bin/env python3
"""A capture against a bare prefill that computes and copies out the same rows (docs/performance.md,
"On the H200"): what the capture's row work costs beyond the output rows themselves.

For each length, the network-operations session (examples/gen_session.py, seed 2), then ROUNDS
rounds, each one capture per store (stride 32 plus every tool-call position, full vocabulary) and
one `bare_prefill --outputs` over the capture's tokens and probe positions with the same knobs,
alternating, so that load and clocks fall on both alike. Compares the capture's own prefill time
(its manifest's timings.prefill_s) with bare_prefill's, fastest against fastest, and prints one
JSON line per length, store and build (also OUT/overhead.jsonl). With --before BIN, another
flipscope build (the one before a change) captures too, in the same rounds, alternating with
--flipscope.

  bench/capture_overhead.py --flipscope BIN --bare BIN -m MODEL --lengths 15000,30000 --out DIR
      [--chat-template gemma] [--knobs "-ngl 99 -fa on -t 16"] [--rounds 3] [--stores f32,bf16]
      [--before BIN]
"""
import argparse
import json
import shlex
import subprocess

from scale import bare_knobs, capture_tokens, manifest, run_lengths, session_for


def bare_seconds(cmd):
    """bare_prefill's own prefill seconds (its last line: tokens, seconds, tok/s, "load", seconds)."""
    last = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    return float(last.split()[1])


def one_length(a, length, out):
    if not a.bare:
        raise SystemExit("capture_overhead.py: --bare BIN (bench/bare_prefill) is needed")
    d, session, ctx = session_for(out, length)
    knobs = shlex.split(a.knobs) + ctx
    tmpl = ["--chat-template", a.chat_template] if a.chat_template else []
    builds = {"flipscope": a.flipscope}
    if a.before:
        builds["before"] = a.before
    stores = a.stores.split(",")
    runs = {(b, s): [] for b in builds for s in stores}
    bare, sizes = [], {}
    for _ in range(a.rounds):
        for (build, store), times in runs.items():
            path = d / f"{store}.safetensors"
            subprocess.run([builds[build], "capture", "-m", a.model, "-w", str(session), "--stride", "32", "--full",
                            "tool_calls", "-q", "--store", store, "-o", str(path)] + tmpl + knobs, check=True)
            times.append(manifest(path)["timings"]["prefill_s"])
            if not (d / "tokens.txt").exists():
                (d / "tokens.txt").write_text(" ".join(map(str, capture_tokens(path))))
                (d / "probes.txt").write_text(" ".join(map(str, capture_tokens(path, "positions"))))
            sizes[store] = path.stat().st_size
            path.unlink()
        bare.append(bare_seconds([a.bare, a.model, str(d / "tokens.txt")] + bare_knobs(knobs) +
                                 ["--outputs", str(d / "probes.txt")]))
    for (build, store), times in runs.items():
        r = {"tokens": len((d / "tokens.txt").read_text().split()),
             "rows": len((d / "probes.txt").read_text().split()), "build": build, "store": store,
             "file_bytes": sizes[store], "capture_prefill_s": times, "bare_outputs_s": bare,
             "ratio_fastest": round(min(times) / min(bare), 3)}
        line = json.dumps(r)
        print(line, flush=True)
        with open(out / "overhead.jsonl", "a") as f:
            f.write(line + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--stores", default="f32,bf16")
    p.add_argument("--before", default="")
    run_lengths(p, one_length)


if __name__ == "__main__":
    main()
