"""A full capture's top-k as a truncated capture: what a server returning k log-probabilities per
position would have given. Measures what truncation costs (docs/engines.md).

    python -m flipscope_capture.truncate FULL.safetensors OUT.safetensors -k 20
"""
import argparse
import sys

import numpy as np

from . import format as fmt


def truncate(src, out, k, chunk=256):
    """Writes the top-k of every row of the full capture src to out; argmax is src's own."""
    t, m = fmt.read(src)
    if "logits" not in t:
        raise ValueError(f"{src}: already truncated")
    n = len(t["positions"])
    ids = np.empty((n, k), "<i4")
    lps = np.empty((n, k), "<f4")
    for a in range(0, n, chunk):  # log_softmax in float64, a chunk of rows at a time
        ids[a:a + chunk], lps[a:a + chunk] = fmt.topk_rows(fmt.log_softmax(t["logits"][a:a + chunk]), k)
    manifest = dict(m)
    manifest["truncation"] = {"k": k, "from": src, "note": "the top-k of a full capture (flipscope_capture.truncate)"}
    fmt.write_topk(out, t["tokens"], t["positions"], ids, lps, t["argmax"], manifest)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m flipscope_capture.truncate", description=__doc__.split("\n")[0])
    ap.add_argument("full")
    ap.add_argument("out")
    ap.add_argument("-k", type=int, default=20)
    a = ap.parse_args(argv)
    try:
        truncate(a.full, a.out, a.k)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"flipscope_capture.truncate: error: {e}")


if __name__ == "__main__":
    main()
