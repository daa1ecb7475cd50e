#!/usr/bin/env python3
"""Independent check of `flipscope branch` output against the two capture files (numpy + safetensors).

usage: branch_check.py BASE.safetensors CAND.safetensors BRANCHES.json

BRANCHES.json is RunBranches' output ({"config", "records", "counts"}). Checks, with --at flips:
the branch points are exactly the probes of both captures whose stored argmax differ and, with
fork_where "assistant", whose next token the model writes by the manifest's spans (the first
max_branches of them; the others are config.teacher_forced_only); each side's first token is its own capture's argmax there, and that
token's probability is the softmax of the capture's stored F32 row (where the record says the row
was reproduced); the reference is tokens[p+1 : p+1+L] with L the longer future's length (at least
max_tokens), on to the end of a tool call of the fork's own turn that it reaches into; futures are at most max_tokens long (max_call_tokens when a tool call was let
finish) and their pieces join to their text; first_difference_byte is the common prefix of the two
texts; the counts match the records. Prints one line per failure and exits 1, else one "ok" line.
"""
import json
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

VERDICTS = ["invalid_tool_call", "literal_mutated", "wrong_command", "divergent", "benign"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def softmax_prob(row, token):
    row = row.astype(np.float64)
    m = row.max()
    e = np.exp(row - m)
    return e[token] / e.sum()


def model_writes(spans, pos):
    """Whether token pos lies in an assistant message or a tool call, not a tool result (the
    innermost message/tool span; plain text without message spans is written everywhere)."""
    spans = [s for s in spans if s["kind"] != "literal"]
    if not any(s["kind"] == "message" for s in spans):
        return True
    holding = [s for s in spans if s["begin"] <= pos < s["end"]]
    if not holding:
        return False
    # Shortest first; on equal lengths a tool call/result is inside its message.
    inner = min(holding, key=lambda s: (s["end"] - s["begin"], s["kind"] == "message"))
    if inner["kind"] == "tool_call":
        return True
    if inner["kind"] == "tool_result":
        return False
    return inner.get("role") == "assistant"


def spans_of(path):
    with safe_open(path, framework="np") as f:
        meta = f.metadata() or {}
    manifest = json.loads(meta.get("flipscope.manifest", "{}"))
    return manifest.get("workload", {}).get("spans", [])


def common_prefix(a: bytes, b: bytes) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def main():
    base, cand = load_file(sys.argv[1]), load_file(sys.argv[2])
    out = json.load(open(sys.argv[3], encoding="utf-8"))
    cfg, records, counts = out["config"], out["records"], out["counts"]
    tokens = base["tokens"]
    check(np.array_equal(tokens, cand["tokens"]), "the captures' tokens differ")
    max_tokens = cfg["max_tokens"]
    # A future inside a tool call may run past max_tokens until its call closes, up to the cap.
    longest = max(max_tokens, cfg.get("max_call_tokens", max_tokens))

    # Flips: common probe positions where the stored argmax differ.
    pb, pc = base["positions"], cand["positions"]
    common, ib, ic = np.intersect1d(pb, pc, return_indices=True)
    flips = common[base["argmax"][ib] != cand["argmax"][ic]]
    if cfg["at"] == "flips":
        if cfg.get("fork_where", "all") == "assistant":
            spans = spans_of(sys.argv[1])
            read = [int(p) for p in flips if not model_writes(spans, int(p) + 1)]
            got_read = [e["position"] for e in cfg["teacher_forced_only"]]
            check(got_read == read, f"teacher_forced_only {got_read[:8]}... != {read[:8]}...")
            check(counts.get("teacher_forced_only") == len(read), "counts.teacher_forced_only != its list")
            flips = np.array([p for p in flips if model_writes(spans, int(p) + 1)], dtype=flips.dtype)
        check(cfg["branch_points"] == len(flips), f"branch_points {cfg['branch_points']} != {len(flips)} flips")
        want = flips[: cfg["max_branches"]] if cfg["max_branches"] > 0 else flips
        got = [r["position"] for r in records]
        check(got == [int(p) for p in want], f"record positions {got[:8]}... != flips {list(want[:8])}...")

    row_of_b = {int(p): i for i, p in enumerate(pb)}
    row_of_c = {int(p): i for i, p in enumerate(pc)}
    for r in records:
        p = r["position"]
        where = f"position {p}"
        bi, ci = row_of_b.get(p), row_of_c.get(p)
        check(bi is not None and ci is not None, f"{where}: not a probe of both captures")
        if bi is None or ci is None:
            continue
        check(r["base_token"] == int(base["argmax"][bi]), f"{where}: base_token != base argmax")
        check(r["cand_token"] == int(cand["argmax"][ci]), f"{where}: cand_token != cand argmax")
        # The reference is as long as the longer future, and at least max_tokens; a tool call of
        # the fork's own turn (every token up to it written by the model) that it reaches into is
        # taken whole.
        ref_len = max(max_tokens, len(r["base_future"]["tokens"]), len(r["cand_future"]["tokens"]))
        end = min(len(tokens), p + 1 + ref_len)
        all_spans = spans_of(sys.argv[1])
        for s in all_spans:
            if s["kind"] == "tool_call" and s["begin"] < end < s["end"] and \
                    all(model_writes(all_spans, q) for q in range(p + 1, max(p + 1, s["begin"]))):
                end = min(len(tokens), s["end"])
        ref = [int(t) for t in tokens[p + 1 : end]]
        check(r["reference"]["tokens"] == ref, f"{where}: reference tokens != tokens[p+1:{end}]")
        for side, cap, i in (("base", base, bi), ("cand", cand, ci)):
            f = r[side + "_future"]
            n_f = len(f["tokens"])
            check(1 <= n_f <= longest, f"{where}: {side} future has {n_f} tokens (max {longest})")
            check(f["tokens"][0] == r[side + "_token"] or f.get("first_masked", False),
                  f"{where}: {side} future does not start with its own choice (nor says the grammar replaced it)")
            check(len(f["probs"]) == len(f["tokens"]) == len(f["pieces"]), f"{where}: {side} future lengths differ")
            if not any("\ufffd" in x for x in f["pieces"]):  # pieces of split characters are replaced
                check("".join(f["pieces"]) == f["text"], f"{where}: {side} pieces do not join to the text")
            check(all(0.0 < q <= 1.0 for q in f["probs"]), f"{where}: {side} probabilities outside (0, 1]")
            if r["reproduced"] and "logits" in cap:
                want_p = softmax_prob(cap["logits"][i], f["tokens"][0])
                check(abs(f["probs"][0] - want_p) <= 1e-5 + 1e-4 * want_p,
                      f"{where}: {side} first-token probability {f['probs'][0]} != softmax of the capture row {want_p}")
        tb, tc = r["base_future"]["text"].encode(), r["cand_future"]["text"].encode()
        if r["first_difference_byte"] is not None and "\ufffd" not in r["base_future"]["text"] + r["cand_future"]["text"]:
            check(r["first_difference_byte"] == common_prefix(tb, tc),
                  f"{where}: first_difference_byte {r['first_difference_byte']} != {common_prefix(tb, tc)}")
        check(r["verdict"] in VERDICTS, f"{where}: unknown verdict {r['verdict']}")
        check(isinstance(r["reason"], str) and r["reason"] and "\n" not in r["reason"], f"{where}: reason not one line")

    for v in VERDICTS:
        n = sum(1 for r in records if r["verdict"] == v)
        check(counts.get(v) == n, f"counts[{v}] = {counts.get(v)}, records say {n}")
    check(counts.get("total") == len(records), "counts.total != number of records")

    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print(f"ok: {len(records)} records checked against {len(flips)} flips")


if __name__ == "__main__":
    main()
