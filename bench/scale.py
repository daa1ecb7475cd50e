#!/usr/bin/env python3
"""How every stage's cost grows with the session (docs/performance.md, "Scale").

For each length, generates the network-operations session (examples/gen_session.py, seed 2),
then runs each stage as the CLI runs it, one process at a time, and records its wall time and
peak resident memory (from wait4) and the sizes of what it wrote:

  capture   the baseline (-ctk/-ctv f16) and a q4_0-KV candidate, stride 32 + every tool-call
            position, full vocabulary stored as BF16
  bare      bench's bare_prefill over the same tokens with the same knobs (capture's peer)
  compare   baseline against candidate
  branch    the first --forks flips followed, wherever they are (--fork-where all: the cost of a
            fork does not depend on who wrote the token); per fork = wall / forks followed
  layers    the first --flips flips recomputed layer by layer (per flip = wall / flips)
  exact     the FP64 exact engine with the same probes, at lengths <= --exact-max, and both
            captures compared with it

Each result is one JSON line on stdout and in OUT/scale.jsonl; bench/scale_plot.py draws them.

  bench/scale.py --flipscope BIN --bare BIN -m MODEL --lengths 4000,8000 --out DIR
      [--chat-template gemma] [--knobs "-ngl 99 -fa on -t 16"] [--forks 8] [--flips 4]
      [--exact-max 32000] [--exact-threads 16] [--keep]
"""
import argparse
import json
import os
import pathlib
import shlex
import struct
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def timed(cmd, log, stdout=None):
    """Runs cmd; returns (wall seconds, peak RSS in MiB, exit status). Output goes to log, or its
    stdout to the file stdout when given."""
    t0 = time.monotonic()
    with open(log, "ab") as f, open(stdout or os.devnull, "wb") as so:
        f.write(("$ " + shlex.join(cmd) + "\n").encode())
        f.flush()
        proc = subprocess.Popen(cmd, stdout=so if stdout else f, stderr=f)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    return wall, usage.ru_maxrss / 1024.0, os.waitstatus_to_exitcode(status)


def capture_tokens(path, name="tokens"):
    """The capture's token ids (its `tokens` tensor, I32; or another I32 tensor, e.g. positions),
    read from the safetensors header."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        t = header[name]
        a, b = t["data_offsets"]
        f.seek(8 + n + a)
        raw = f.read(b - a)
    return list(struct.unpack(f"<{len(raw) // 4}i", raw))


def record(out, row):
    print(json.dumps(row), flush=True)
    with open(out / "scale.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")


def stage(out, length, name, cmd, log, stdout=None, **extra):
    wall, rss, rc = timed(cmd, log, stdout)
    row = {"length": length, "stage": name, "wall_s": round(wall, 3), "peak_rss_mib": round(rss, 1), "rc": rc}
    row.update(extra)
    record(out, row)
    return row


def count(path, key):
    """How many entries a branch or layers JSON holds under key, found at any depth (a list's
    length or a number; 0 if the file is missing)."""
    def find(node):
        if isinstance(node, dict):
            if key in node and isinstance(node[key], (list, int)):
                return len(node[key]) if isinstance(node[key], list) else node[key]
            for v in node.values():
                n = find(v)
                if n is not None:
                    return n
        return None
    try:
        return find(json.loads(pathlib.Path(path).read_text())) or 0
    except (OSError, ValueError):
        return 0


def manifest(path):
    """The capture's manifest (JSON in the safetensors header's __metadata__)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        meta = json.loads(f.read(n))["__metadata__"]
    return json.loads(next(iter(meta.values())))


def compared(out, length, name, cmd, log, n_tokens):
    """A compare stage: its cost, then its overall figures (flips, probes, mean KL)."""
    js = log.parent / f"{name}.json"
    r = stage(out, length, name, cmd, log, stdout=js, tokens=n_tokens)
    try:
        doc = json.loads(js.read_text())
        o = doc["overall"]
        figures = {"probes": o["probes"], "flips": o["flips"], "kl_mean": o["kl_base_cand"]["mean"],
                   "bit_identical": doc["bit_identical"], "timing": doc["timing"],
                   "windows": [[w["begin"], w["end"], w["probes"], w["flips"]] for w in doc["windows"]]}
        record(out, dict(r, stage=name + "-figures", figures=figures))
    except (OSError, ValueError, KeyError, IndexError):
        pass


def session_for(out, length):
    """OUT/L<length> holding the network-operations session of about `length` tokens (seed 2), and
    the context that fits it: (folder, session path, ["-c", N])."""
    d = out / f"L{length}"
    d.mkdir(parents=True, exist_ok=True)
    session = d / "session.json"
    subprocess.run([sys.executable, str(ROOT / "examples/gen_session.py"), "--seed", "2", "--target-tokens",
                    str(length), "-o", str(session)], check=True)
    return d, session, ["-c", str(int(length * 1.25) + 2048)]


def bare_knobs(knobs):
    """The capture's llama.cpp flags that bare_prefill takes (it runs where llama.cpp puts it)."""
    return [k for k in knobs if k not in ("-ngl", "99", "-sm", "none")]


def run_lengths(p, one_length):
    """Adds the arguments every sweep over session lengths takes to the parser p, parses them and
    runs one_length(args, length, out) for each length, in order."""
    p.add_argument("--flipscope", required=True)
    p.add_argument("--bare", default="")
    p.add_argument("-m", "--model", required=True)
    p.add_argument("--lengths", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--chat-template", default="")
    p.add_argument("--knobs", default="")
    a = p.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for length in map(int, a.lengths.split(",")):
        one_length(a, length, out)


def one_length(a, length, out):
    d, session, ctx = session_for(out, length)
    log = d / "log.txt"
    knobs = shlex.split(a.knobs)
    tmpl = ["--chat-template", a.chat_template] if a.chat_template else []
    probes = ["--stride", "32", "--full", "tool_calls", "--store", "bf16", "-q"]
    common = ["-m", a.model, "-w", str(session)] + tmpl + probes
    base, cand = d / "base.safetensors", d / "cand.safetensors"
    r = stage(out, length, "capture", [a.flipscope, "capture"] + common + ctx + knobs + ["-o", str(base)], log)
    if r["rc"] != 0:
        return
    tokens = capture_tokens(base)
    r["tokens"] = len(tokens)
    r["file_mib"] = round(base.stat().st_size / 2**20, 1)
    r["timings"] = manifest(base).get("timings", {})
    record(out, dict(r, stage="capture-size"))
    (d / "tokens.txt").write_text(" ".join(map(str, tokens)))
    if a.bare:
        r = stage(out, length, "bare", [a.bare, a.model, str(d / "tokens.txt")] + bare_knobs(knobs) + ctx, log,
                  tokens=len(tokens))
        # bare_prefill's last line: tokens, prefill seconds, tok/s, "load", load seconds.
        last = log.read_text().strip().splitlines()[-1].split()
        if r["rc"] == 0 and len(last) == 5:
            record(out, dict(r, stage="bare-inner", prefill_s=float(last[1]), load_s=float(last[4])))
    q4 = ["-ctk", "q4_0", "-ctv", "q4_0"]
    stage(out, length, "capture-q4", [a.flipscope, "capture"] + common + ctx + knobs + q4 + ["-o", str(cand)], log,
          tokens=len(tokens))
    compared(out, length, "compare", [a.flipscope, "compare", str(base), str(cand), "--json"], log, len(tokens))
    br = d / "branch.json"
    r = stage(out, length, "branch", [a.flipscope, "branch", str(base), str(cand), "-o", str(br), "--max-branches",
                                       str(a.forks), "--max-tokens", "32", "--fork-where", "all", "-q"], log, tokens=len(tokens))
    r["forks"] = count(br, "records")
    record(out, dict(r, stage="branch-count"))
    ly = d / "layers.json"
    r = stage(out, length, "layers", [a.flipscope, "layers", str(base), str(cand), "-o", str(ly), "--max-flips",
                                       str(a.flips), "-q"], log, tokens=len(tokens))
    r["flips"] = count(ly, "flips")
    record(out, dict(r, stage="layers-count"))
    if length <= a.exact_max:
        ex = d / "exact.safetensors"
        stage(out, length, "exact", [a.flipscope, "capture", "--engine", "exact"] + common +
              ["-t", str(a.exact_threads), "-o", str(ex)], log, tokens=len(tokens))
        for name, side in (("base-vs-exact", base), ("cand-vs-exact", cand)):
            compared(out, length, name, [a.flipscope, "compare", str(ex), str(side), "--json"], log, len(tokens))
        ex.unlink(missing_ok=True)
    if not a.keep:
        for f in (base, cand):
            f.unlink(missing_ok=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--forks", type=int, default=8)
    p.add_argument("--flips", type=int, default=4)
    p.add_argument("--exact-max", type=int, default=32000)
    p.add_argument("--exact-threads", type=int, default=16)
    p.add_argument("--keep", action="store_true")
    run_lengths(p, one_length)


if __name__ == "__main__":
    main()
