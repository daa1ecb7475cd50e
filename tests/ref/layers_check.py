"""Independent check of `flipscope layers` output against the two capture files (numpy, FP64):

- the flips are exactly the probes both captures share whose stored argmax differ (first N when
  --max-flips cut them);
- each flip's final difference ("logits": relative difference and cosine) equals the one computed
  here from the captures' own logits rows;
- each flip's birth and largest jump follow the documented rules over its reported residual
  stream, and the
  summary's counts and medians are those of the records.

Usage: layers_check.py BASE CAND LAYERS.json; exit 0 when everything agrees."""
import json
import sys

import numpy as np
from safetensors.numpy import load_file


def flips_of(base, cand):
    pb, pc = base["positions"], cand["positions"]
    common, ib, ic = np.intersect1d(pb, pc, return_indices=True)
    differ = base["argmax"][ib] != cand["argmax"][ic]
    return common[differ], ib[differ], ic[differ]


def diff(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    rel = np.linalg.norm(a - b) / np.linalg.norm(a)
    cos = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
    return rel, cos


def birth(stream, jump, floor):
    level = 0.0
    for i, v in enumerate(stream):
        if v >= floor and v > jump * level:
            return i
        level = max(level, v)
    return -1


def check(base_path, cand_path, out_path):
    base, cand = load_file(base_path), load_file(cand_path)
    out = json.load(open(out_path))
    cfg, records = out["config"], out["flips"]
    errors = []
    positions, ib, ic = flips_of(base, cand)
    if cfg["flips_available"] != len(positions):
        errors.append(f"flips_available {cfg['flips_available']}, the captures have {len(positions)}")
    n = len(records)
    if [r["position"] for r in records] != positions[:n].tolist():
        errors.append("the flip positions are not the captures' first flips")
    worst = 0.0
    for k, r in enumerate(records):
        rel, cos = diff(base["logits"][ib[k]], cand["logits"][ic[k]])
        if r["base_token"] != int(base["argmax"][ib[k]]) or r["cand_token"] != int(cand["argmax"][ic[k]]):
            errors.append(f"position {r['position']}: tokens differ from the captures' argmax")
        err = max(abs(r["logits"]["rel"] - rel) / rel, abs(r["logits"]["cosine"] - cos))
        worst = max(worst, err)
        if err > 1e-9:
            errors.append(f"position {r['position']}: logits rel {r['logits']['rel']} cosine {r['logits']['cosine']}, "
                          f"the captures give {rel} {cos}")
        if len(r["layers"]) != cfg["n_layer"]:
            errors.append(f"position {r['position']}: {len(r['layers'])} layers, not {cfg['n_layer']}")
        stream = [r["embedding"]["rel"]]
        for layer in r["layers"]:
            stream += [layer["attn_resid"]["rel"], layer["layer_out"]["rel"]]
        at = birth(stream, cfg["jump"], cfg["floor"])
        want = None if at < 0 else {"layer": -1 if at == 0 else (at - 1) // 2,
                                    "block": "embedding" if at == 0 else ("attention" if at % 2 else "mlp")}
        got = None if r["birth"] is None else {"layer": r["birth"]["layer"], "block": r["birth"]["block"]}
        if got != want:
            errors.append(f"position {r['position']}: birth {got}, the rule gives {want}")
        jump = None
        if at >= 0:
            level, best = max(stream[:at + 1]), 1.0
            for i in range(at + 1, len(stream)):
                if level > 0 and stream[i] / level > best:
                    best, jump = stream[i] / level, i
                level = max(level, stream[i])
        want_jump = None if jump is None else {"layer": (jump - 1) // 2, "block": "attention" if jump % 2 else "mlp"}
        lj = r["largest_jump"]
        got_jump = None if lj is None else {"layer": lj["layer"], "block": lj["block"]}
        if got_jump != want_jump:
            errors.append(f"position {r['position']}: largest jump {got_jump}, the rule gives {want_jump}")
    births = {"embedding": 0, "attention": 0, "mlp": 0, "none": 0}
    for r in records:
        births["none" if r["birth"] is None else r["birth"]["block"]] += 1
    if out["summary"]["births"] != births:
        errors.append(f"summary births {out['summary']['births']}, the records give {births}")
    if n:
        med = float(np.median([r["logits"]["rel"] for r in records]))
        if abs(out["summary"]["median_logits_rel"] - med) > 1e-12 * max(1.0, med):
            errors.append(f"median logits rel {out['summary']['median_logits_rel']}, the records give {med}")
    print(f"{n} flips checked; largest logits disagreement {worst:.2e}; births {births}")
    for e in errors:
        print("MISMATCH:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(check(*sys.argv[1:4]))
