#!/usr/bin/env python3
"""Writes tests/data/results-sample.json: a realistic experiment result for the report tests.

A hand-shaped scenario (Qwen3-8B Q4_K_M on one GPU, a 40,000-token agent session), with
internally consistent numbers: window counts add up to the overall counts, flip rates and
Wilson intervals follow from them, the summary is the median over repeats. Text deliberately
holds </script>, quotes, ampersands, angle brackets, backticks, pipes and non-ASCII.
Deterministic (fixed seed); run it again to regenerate the file.
"""
import json
import math
import os
import random
import zlib

rng = random.Random(20260514)
WINDOW = 8192
N_TOKENS = 40000
FULL_PER_WINDOW = [120, 85, 60, 140, 40]  # probes added by 100% ranges around tool calls


def wilson(k, n, z=1.959963984540054):
    if n == 0:
        return [0.0, 0.0]
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return [max(0.0, c - h), min(1.0, c + h)]


def windows_layout():
    out = []
    for i, begin in enumerate(range(0, N_TOKENS, WINDOW)):
        end = min(N_TOKENS, begin + WINDOW)
        out.append((i, begin, end, (end - begin) // 32 + FULL_PER_WINDOW[i]))
    return out


LAYOUT = windows_layout()
N_PROBES = sum(w[3] for w in LAYOUT)

# Flip texts: (span kind, context, base_text, cand_text, class).
SNIPPETS = [
    ("tool call", '<tool_call>{"name": "bash", "arguments": {"command": "psql -h db.internal -p 543',
     "2", "ql", "confident"),
    ("tool result", 'page.html:\n<script src="app.js"></script>\n<p class="x">Tom &amp; Jerry</p>\n',
     "</", "<", "uncertain"),
    ("assistant message", "The loop exits when i < n && j > 0, so the \"edge\" case is", " fine", " safe",
     "uncertain"),
    ("tool call", '{"name": "write_file", "arguments": {"path": "notes.md", "content": "a | b | `c`',
     "`", "'", "uncertain"),
    ("user message", "It's the café's naïve parser — it chokes on </script><script>alert(1)</script>",
     " again", " too", "uncertain"),
    ("tool call", '{"name": "curl", "arguments": {"url": "http://localhost:8080/api?a=1&b=2',
     "&", "&&", "confident"),
    ("assistant message", "Restart the service with `systemctl restart nginx` and check", " the", " its",
     "moderate"),
    ("tool result", "ERROR: relation \"users\" does not exist\nLINE 1: SELECT * FROM users WHERE id <> 0",
     ";", " AND", "moderate"),
]


def make_flips(rate, windows_probes, kl_scale, confident_ok):
    flips, counts = [], []
    n_call = 0
    for (i, begin, end, probes) in windows_probes:
        k = sum(1 for _ in range(probes) if rng.random() < rate)
        counts.append(k)
        for _ in range(k):
            s = rng.choice(SNIPPETS if confident_ok else [x for x in SNIPPETS if x[4] != "confident"])
            kind, ctx, bt, ct, cls = s
            n_call += 1
            base_prob = {"confident": rng.uniform(0.9, 0.99), "moderate": rng.uniform(0.5, 0.89),
                         "uncertain": rng.uniform(0.3, 0.49)}[cls]
            cand_prob = rng.uniform(0.5, 0.93) if cls == "confident" else rng.uniform(0.3, 0.5)
            flips.append({
                "position": rng.randrange(begin, end - 1),
                "window": i,
                "span": f"{kind} #{rng.randint(1, 40)}", "span_kind": kind.replace(" ", "_"),
                "base_token": 17 + zlib.crc32(bt.encode()) % 150000, "base_text": bt, "base_prob": round(base_prob, 6),
                "cand_token": 17 + zlib.crc32(ct.encode()) % 150000, "cand_text": ct, "cand_prob": round(cand_prob, 6),
                "cand_prob_of_base_token": round(min(cand_prob, 1 - cand_prob) * rng.uniform(0.3, 0.99), 6),
                "base_margin": round(math.log(base_prob / (1 - base_prob + 1e-9)) if cls == "confident"
                                     else rng.uniform(0.01, 0.3), 6),
                "kl": round(kl_scale * rng.uniform(5, 40), 9),
                "class": cls, "context": ctx,
            })
    flips.sort(key=lambda f: f["position"])
    return flips, counts


def kl_stats(scale):
    if scale == 0:
        return {"mean": 0.0, "median": 0.0, "p99": 0.0, "max": 0.0, "percentiles": {"99.9": 0.0}}
    mean = scale * rng.uniform(0.8, 1.2)
    return {"mean": mean, "median": mean * 0.31, "p99": mean * 14.0, "max": mean * 120.0,
            "percentiles": {"99.9": mean * 45.0}}


def compare(cand_path, rate, kl_scale, confident_ok=True):
    flips, counts = make_flips(rate, LAYOUT, kl_scale, confident_ok)
    windows = []
    for (i, begin, end, probes), k in zip(LAYOUT, counts):
        growth = 1.0 + 0.35 * i  # divergence grows deeper into the session
        km = kl_scale * growth * rng.uniform(0.85, 1.15)
        windows.append({"index": i, "begin": begin, "end": end, "probes": probes, "flips": k,
                        "flip_rate": k / probes, "flip_rate_ci": wilson(k, probes), "kl_mean": km,
                        "kl_median": km * 0.3, "kl_p99": km * 14, "kl_max": km * 110})
    total = sum(counts)
    # Bit-identical probes: all when the arithmetic is the same, a few where nothing differed.
    identical = N_PROBES if kl_scale == 0 and total == 0 else int(N_PROBES * rng.uniform(0.0, 0.02))
    conf = sum(1 for f in flips if f["class"] == "confident")
    unc = sum(1 for f in flips if f["class"] == "uncertain")
    kb = kl_stats(kl_scale)
    kc = kl_stats(kl_scale * 1.07)
    return {
        "base": {"path": "captures/baseline-r1.safetensors"}, "cand": {"path": cand_path},
        "kl_direction": "KL(base||cand)", "truncated": False,
        "probes_compared": N_PROBES, "probes_skipped_base": 0, "probes_skipped_cand": 0,
        "bit_identical": identical,
        "overall": {"probes": N_PROBES, "flips": total, "flip_rate": total / N_PROBES,
                    "flip_rate_ci": wilson(total, N_PROBES), "confident_flips": conf, "uncertain_flips": unc,
                    "same_top1_rate": 1 - total / N_PROBES, "top5_agree": 1 - 3 * total / N_PROBES,
                    "top10_agree": 1 - 5 * total / N_PROBES, "js_mean": kb["mean"] / 4,
                    "kl_base_cand": kb, "kl_cand_base": kc},
        "windows": windows, "flips": flips,
    }


ENGINE = {
    "engine": "llama", "llama_cpp": "b6710-9b8f4a2", "ggml": "0.9.4", "backends": ["CUDA", "CPU"],
    "devices": [{"name": "CUDA0", "description": "NVIDIA H200", "memory_total": 150109880320},
                {"name": "CPU", "description": "AMD EPYC 9654 96-Core Processor", "memory_total": 137438953472}],
    "system_info": "CUDA : ARCHS = 900 | USE_GRAPHS = 1 | PEER_MAX_BATCH_SIZE = 128 | CPU : SSE3 = 1 | "
                   "SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 1 | OPENMP = 1 | REPACK = 1 |",
}
MODEL_PATH = "/models/Qwen3-8B-Q4_K_M.gguf"
KV_ELEMS = 2 * 36 * 8 * 128
BYTES = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}


def knobs(fa="on", ctk="f16", ctv="f16", threads=16):
    return {"flash_attn": fa, "cache_type_k": ctk, "cache_type_v": ctv, "ctx_size": 40960, "batch_size": 2048,
            "ubatch_size": 512, "threads": threads, "n_gpu_layers": -1, "split_mode": "layer",
            "tensor_split": [], "device": ""}


def flags(k):
    return (f"-fa {k['flash_attn']} -ctk {k['cache_type_k']} -ctv {k['cache_type_v']} -c {k['ctx_size']} "
            f"-b {k['batch_size']} -ub {k['ubatch_size']} -t {k['threads']} -ngl 99 -sm {k['split_mode']}")


def config(name, desc, changes, k, status="ok", reason=None, repeats=3):
    c = {"name": name, "description": desc, "changes": changes, "knobs": k, "flags": flags(k),
         "model_path": MODEL_PATH, "status": status, "repeats": repeats if status == "ok" else 0,
         "captures": [f"captures/{name}-r{r}.safetensors" for r in range(1, repeats + 1)] if status == "ok" else [],
         "capture_seconds": [round(rng.uniform(38, 52), 2) for _ in range(repeats)] if status == "ok" else [],
         "engine": ENGINE, "reused": [False] * repeats if status == "ok" else [],
         "model_file_size": 5027783488,
         "kv_bytes_per_token": KV_ELEMS * (BYTES[k["cache_type_k"]] + BYTES[k["cache_type_v"]]) / 2}
    if reason:
        c["reason"] = reason
    return c


def future(pieces, probs):
    return {"text": "".join(pieces), "tokens": [1000 + i for i in range(len(pieces))], "probs": probs,
            "pieces": pieces}


def branches():
    mutated = {
        "position": 18431, "span": "tool call #3", "base_token": 17, "base_text": "2", "cand_token": 5205,
        "cand_text": "ql",
        "base_future": future(["2", "\"}}", "\n", "</tool_call>", "<|im_end|>"], [0.958, 0.991, 0.97, 0.999, 0.998]),
        "cand_future": future(["ql", " -U", " app", "\"}}", "\n", "</tool_call>"], [0.92, 0.41, 0.66, 0.88, 0.97, 0.99]),
        "reference": {"text": "2\"}}\n</tool_call>", "tokens": [17, 9207, 198, 151658]},
        "prefix_tail": '<tool_call>{"name": "bash", "arguments": {"command": "psql -h db.internal -p 543',
        "reconverge_at": None, "reconverge_cand_at": None, "first_difference": 0, "first_difference_cand": 0,
        "first_difference_byte": 0, "reproduced": True, "verdict": "literal_mutated",
        "reason": "the literal 5432 from the user's message became \"543ql\" inside tool call #3",
    }
    benign = {
        "position": 30977, "span": "assistant message #21", "base_token": 279, "base_text": " the",
        "cand_token": 1181, "cand_text": " its",
        "base_future": future([" the", " config", " & ", "<restart>", " it", "."], [0.46, 0.81, 0.52, 0.33, 0.9, 0.95]),
        "cand_future": future([" its", " config", " & ", "<restart>", " it", "."], [0.44, 0.83, 0.5, 0.35, 0.9, 0.95]),
        "reference": {"text": " the config & <restart> it. </script>", "tokens": [279, 2193, 609, 366, 432, 13]},
        "prefix_tail": "Edit /etc/nginx/nginx.conf (keep the \"upstream\" block), then reload",
        "reconverge_at": 1, "reconverge_cand_at": 1, "first_difference": 0, "first_difference_cand": 0,
        "first_difference_byte": 1, "reproduced": True, "verdict": "benign",
        "reason": "the futures reconverge after 1 token; same meaning",
    }
    return [{"config": "kv-q4_0", "records": [mutated, benign],
             "counts": {"benign": 41, "divergent": 17, "invalid_tool_call": 2, "literal_mutated": 1,
                        "wrong_command": 0, "total": 61},
             "branch_config": {"at": "flips", "max_tokens": 64, "max_branches": 16, "reconverge": 8,
                               "warnings": []}}]


def main():
    configs = [
        config("baseline", "reference: flash attention on, f16 KV cache", {}, knobs()),
        config("fa-off", "flash attention off", {"flash_attn": "off"}, knobs(fa="off")),
        config("kv-q8_0", "KV cache q8_0", {"cache_type_k": "q8_0", "cache_type_v": "q8_0"},
               knobs(ctk="q8_0", ctv="q8_0")),
        config("kv-q4_0", "KV cache q4_0", {"cache_type_k": "q4_0", "cache_type_v": "q4_0"},
               knobs(ctk="q4_0", ctv="q4_0")),
        config("threads-4", "4 CPU threads (all layers on the GPU)", {"threads": 4}, knobs(threads=4)),
        config("fa-off-kv-q8_0", "flash attention off with a q8_0 V cache",
               {"flash_attn": "off", "cache_type_v": "q8_0"}, knobs(fa="off", ctv="q8_0"), status="refused",
               reason="llama.cpp refused the context: V cache quantization requires flash_attn"),
    ]
    plan = {"baseline": (0.0012, 2e-6), "fa-off": (0.006, 3e-4), "kv-q8_0": (0.009, 1.1e-3),
            "kv-q4_0": (0.04, 2.2e-2), "threads-4": (0.0, 0.0)}
    comparisons = []
    for c in configs:
        if c["status"] != "ok":
            continue
        # Repeats are capture indexes (0-based); the baseline's capture 0 is the reference.
        first = 1 if c["name"] == "baseline" else 0
        for r in range(first, c["repeats"]):
            rate, kl = plan[c["name"]]
            cmp = compare(f"captures/{c['name']}-r{r + 1}.safetensors", rate, kl, c["name"] == "kv-q4_0")
            comparisons.append({"config": c["name"], "repeat": r, "compare": cmp})

    def by_config(name):
        return [x for x in comparisons if x["config"] == name]

    floor_cmps = by_config("baseline")
    floor = {"flip_rate": sum(x["compare"]["overall"]["flips"] for x in floor_cmps) /
             sum(x["compare"]["overall"]["probes"] for x in floor_cmps),
             "flips": sum(x["compare"]["overall"]["flips"] for x in floor_cmps),
             "probes": sum(x["compare"]["overall"]["probes"] for x in floor_cmps),
             "kl_mean": sum(x["compare"]["overall"]["kl_base_cand"]["mean"] for x in floor_cmps) / len(floor_cmps),
             "bit_identical": all(x["compare"]["bit_identical"] == x["compare"]["probes_compared"] for x in floor_cmps),
             "repeats": 3}
    floor["flip_rate_ci"] = wilson(floor["flips"], floor["probes"])
    summary = []
    for c in configs:
        cs = by_config(c["name"])
        if not cs:
            continue
        cs_sorted = sorted(cs, key=lambda x: x["compare"]["overall"]["flip_rate"])
        med = cs_sorted[(len(cs_sorted) - 1) // 2]["compare"]["overall"]
        kls = sorted(x["compare"]["overall"]["kl_base_cand"]["mean"] for x in cs)
        summary.append({
            "config": c["name"], "median_flip_rate": med["flip_rate"], "flip_rate_ci": med["flip_rate_ci"],
            "flips": med["flips"], "probes": med["probes"], "kl_mean": kls[(len(kls) - 1) // 2],
            "kl_p99": med["kl_base_cand"]["p99"], "kl_max": max(x["compare"]["overall"]["kl_base_cand"]["max"] for x in cs),
            "confident_flips": med["confident_flips"],
            "bit_identical": sum(x["compare"]["bit_identical"] for x in cs),
            "bit_identical_of": sum(x["compare"]["probes_compared"] for x in cs), "repeats": len(cs),
            "above_floor": med["flip_rate"] > floor["flip_rate_ci"][1]})
    ranking = [{"config": s["config"], "median_flip_rate": s["median_flip_rate"], "kl_mean": s["kl_mean"]}
               for s in sorted(summary, key=lambda s: (s["median_flip_rate"], s["kl_mean"]))]
    budget = 4 * 1024 ** 3
    kv_types = [{"type": t, "bytes_per_token": KV_ELEMS * b, "context_at_budget": int(budget // (KV_ELEMS * b))}
                for t, b in BYTES.items()]
    rec = "kv-q8_0"
    ctx = next(x["context_at_budget"] for x in kv_types if x["type"] == "q8_0") // 256 * 256
    recipe = {
        "recommended": rec,
        "reason": "the most faithful configuration whose KV cache holds the 40,000-token workload within the "
                  "4 GiB budget (f16 fits only 29,127 tokens); kv-q4_0 mutated a literal (5432 -> \"543ql\")",
        "ranking": ranking, "kv_types": kv_types,
        "server_command": f"llama-server -m {MODEL_PATH} -c {ctx} -fa on -ctk q8_0 -ctv q8_0 -b 2048 -ub 512 -ngl 99",
        "cli_command": f"llama-cli -m {MODEL_PATH} -c {ctx} -fa on -ctk q8_0 -ctv q8_0 -b 2048 -ub 512 -ngl 99",
        "memory_budget_bytes": budget,
    }
    results = {
        "flipscope_version": "0.1.0", "created": "2026-05-14T09:41:07Z", "name": "qwen3-8b <agent> & \"tools\"",
        "experiment_file": "experiments/qwen3-8b.toml", "environment": ENGINE,
        "model": {"path": MODEL_PATH, "sha256": "3f1c0a9be2d47c58a1f9e0b6d3c2a4f5e6b7c8d9e0f1a2b3c4d5e6f708192a3b",
                  "file_size": 5027783488, "architecture": "qwen3", "name": "Qwen3 8B", "n_params": 8190735360,
                  "n_layer": 36, "n_ctx_train": 40960, "n_vocab": 151936, "file_type": "Q4_K - Medium",
                  "quant_types": {"f32": 145, "q4_K": 216, "q6_K": 37}, "kv_elements_per_token": KV_ELEMS},
        "workload": {"path": "workloads/agent-session <prod>.jsonl",
                     "sha256": "9a8b7c6d5e4f30211203f4e5d6c7b8a99a8b7c6d5e4f30211203f4e5d6c7b8a9", "format": "chat-jsonl",
                     "n_tokens": N_TOKENS, "template": {"name": "qwen3", "sha256": "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90",
                                                       "source": "gguf:tokenizer.chat_template"},
                     "tool_call_form": "template", "tool_result_form": "template",
                     "text_sha256": "5e0c7d1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5",
                     "span_mapping": "exact"},
        "probe_plan": {"stride": 32, "full": ["tool_calls"], "n_probes": N_PROBES},
        "settings": {"window": WINDOW, "confident": 0.9, "memory_budget_bytes": budget},
        "baseline": "baseline", "configs": configs, "comparisons": comparisons, "summary": summary,
        "floor": floor, "recipe": recipe, "branches": branches(),
    }
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "results-sample.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
