#!/usr/bin/env python3
"""Benchmark of `flipscope compare` against the straightforward numpy FP64 implementation
(tests/ref/compare_ref.py) of the same metrics, on a synthetic capture pair.

usage: compare_bench.py --build BUILD_DIR [--tokens 100000] [--stride 32] [--vocab 151936]
                        [--stores f32,bf16] [--work DIR] [--python PY] [--threads N]
                        [--repeat 3] [--skip-numpy]

For each storage dtype: generates the pair with the C++ capture writer (compare_bench generate;
kept and reused across runs), reads both files once so the page cache holds them, times
`flipscope compare --json` and the numpy script (the fastest of --repeat runs by wall clock; CPU
seconds and peak RSS of that run from wait4), checks that both found the same flips, and prints the ratios beside the machine's memory
bandwidth (compare_bench bandwidth). The last line is the whole result as JSON.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def timed(cmd, env=None):
    """(stdout, wall seconds, peak RSS MiB, CPU seconds) of cmd, from its own wait4 rusage."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    chunks = []
    while True:
        block = p.stdout.read(1 << 16)
        if not block:
            break
        chunks.append(block)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}): {err.decode()[-2000:]}")
    return b"".join(chunks).decode(), secs, usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime


def best_of(n, cmd, env=None):
    """timed() n times; the run with the least wall time (the least disturbed on a shared machine)."""
    return min((timed(cmd, env) for _ in range(n)), key=lambda r: r[1])


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--tokens", type=int, default=100000)
    ap.add_argument("--stride", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--stores", default="f32,bf16")
    ap.add_argument("--work", default="/tmp/flipscope-compare-bench")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--threads", type=int, default=0, help="flipscope compare --threads (0 = all)")
    ap.add_argument("--skip-numpy", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the fastest (wall) counts")
    a = ap.parse_args()
    bench = os.path.join(a.build, "bench", "compare_bench")
    exe = os.path.join(a.build, "bin", "flipscope")
    ref = os.path.join(here, "..", "tests", "ref", "compare_ref.py")
    env = dict(os.environ, FLIPSCOPE_NO_PROGRESS="1")

    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    bw = json.loads(timed([bench, "bandwidth"])[0])
    print(f"memory bandwidth: read {bw['read_gb_per_s_1_thread']:.1f} GB/s (1 thread), "
          f"{bw['read_gb_per_s']:.1f} GB/s ({bw['threads']} threads); memcpy {bw['memcpy_gb_per_s']:.1f} GB/s")
    kern = json.loads(timed([bench, "kernel", "--vocab", str(a.vocab)])[0])
    for isa in ("avx512", "avx2", "baseline"):
        if isa in kern:
            k = kern[isa]
            print(f"row kernels, {isa} (1 thread, thread CPU time, rows in cache): "
                  f"{k['scan_ms_per_row_pair'] + k['divergence_ms_per_row_pair']:.3f} ms per row pair = "
                  f"{k['gb_per_s']:.2f} GB/s of F32 logits")
    results = {"bandwidth": bw, "kernel": kern, "tokens": a.tokens, "stride": a.stride, "vocab": a.vocab, "runs": []}
    for store in a.stores.split(","):
        base = os.path.join(a.work, f"base-{store}.safetensors")
        cand = os.path.join(a.work, f"cand-{store}.safetensors")
        meta = os.path.join(a.work, f"{store}.json")
        want = {"tokens": a.tokens, "stride": a.stride, "vocab": a.vocab}
        if not (os.path.exists(meta) and json.load(open(meta)) == want and os.path.exists(cand)):
            gen = json.loads(timed([bench, "generate", a.work, "--tokens", str(a.tokens), "--stride", str(a.stride),
                                    "--vocab", str(a.vocab), "--store", store])[0])
            print(f"{store}: generated {gen['probes']} probes x {gen['vocab']} in {gen['seconds']:.1f} s")
            json.dump(want, open(meta, "w"))
        for p in (base, cand):
            warm(p)
        out, fs_s, fs_rss, fs_cpu = best_of(a.repeat, [exe, "compare", base, cand, "--json", "-q", "--threads",
                                                        str(a.threads)], env)
        fs = json.loads(out)
        run_ = {"store": store, "file_bytes": os.path.getsize(base) + os.path.getsize(cand),
                "probes": fs["probes_compared"], "flips": fs["overall"]["flips"],
                "flipscope_seconds": fs_s, "flipscope_cpu_seconds": fs_cpu,
                "flipscope_metric_seconds": fs["timing"]["seconds"], "isa": fs["timing"]["isa"],
                "flipscope_threads": fs["timing"]["threads"], "flipscope_gb_per_s": fs["timing"]["gb_per_s"],
                "flipscope_peak_rss_mib": fs_rss}
        line = (f"{store}: flipscope {fs_s:.2f} s wall, {fs_cpu:.2f} s CPU ({fs['timing']['threads']} threads, "
                f"{fs['timing']['isa']}, {fs['timing']['gb_per_s']:.2f} GB/s of logits, peak RSS {fs_rss:.0f} MiB)")
        if not a.skip_numpy:
            out, np_s, np_rss, np_cpu = best_of(a.repeat, [a.python, ref, base, cand], env)
            npj = json.loads(out)
            same = [f["position"] for f in npj["flips"]] == [f["position"] for f in fs["flips"]]
            kl = (fs["overall"]["kl_base_cand"]["mean"], npj["overall"]["kl_base_cand"]["mean"])
            run_.update({"numpy_seconds": np_s, "numpy_cpu_seconds": np_cpu, "numpy_peak_rss_mib": np_rss,
                         "speedup_wall": np_s / fs_s, "speedup_cpu": np_cpu / fs_cpu, "same_flips": same,
                         "kl_mean_rel_diff": abs(kl[0] - kl[1]) / abs(kl[1])})
            line += (f"\n{store}: numpy {np_s:.1f} s wall, {np_cpu:.1f} s CPU (peak RSS {np_rss:.0f} MiB)"
                     f"\n{store}: speedup {np_s / fs_s:.1f}x wall, {np_cpu / fs_cpu:.1f}x CPU; same flips: {same}; "
                     f"mean KL relative difference {run_['kl_mean_rel_diff']:.1e}")
        print(line)
        results["runs"].append(run_)
    results["load_average_after"] = os.getloadavg()[0]
    print(f"load average after: {results['load_average_after']:.2f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
