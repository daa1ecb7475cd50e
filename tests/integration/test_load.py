"""`flipscope capture --load N` on the real llama.cpp engine and SmolLM2: filler sequences cut from
another real session share every batch with the measured one. Checked with numpy over the capture
files: the rows are sequence 0's at exactly the probe positions, load 0 is the alone path bit for
bit, a loaded run is reproducible, and the manifest says under what load it was made.
"""
import hashlib
import json
import os
import unittest

import numpy as np
from safetensors.numpy import load_file

from common import SMOL, SRC, manifest, one_error_line, run
import common

TMP = common.temp_folder("flipscope-load-")
FILLERS = os.path.join(SRC, "examples", "netops-session.json")
# A small logical batch, so that a short workload is prefilled in several shared batches, and a
# small context, which bounds the fillers' cells (and so their work) to (640 - n_tokens) / load.
KNOBS = ["-t", "2", "-c", "640", "-b", "64", "-ub", "32", "--stride", "7", "-q"]


def capture(out, *extra):
    path = os.path.join(TMP, out)
    run("capture", "-m", SMOL, "-w", Load.workload, "-o", path, *KNOBS, *extra)
    return path


class Load(unittest.TestCase):
    workload = None

    @classmethod
    def setUpClass(cls):
        # A short plain-text workload (the README's first paragraphs, about 300 tokens): seconds.
        cls.workload = os.path.join(TMP, "readme.txt")
        with open(os.path.join(SRC, "README.md")) as f, open(cls.workload, "w") as w:
            w.write(f.read()[:1400])
        cls.alone = capture("alone.safetensors")
        cls.loaded = capture("loaded.safetensors", "--load", "3", "--load-text", FILLERS)
        # The floor: alone (the load set to 0), then once more under the same load.
        cls.floor = os.path.join(TMP, "floor.safetensors")
        cls.floor_stderr = run("capture", "-m", SMOL, "-w", cls.workload, "-o", cls.floor, *KNOBS, "--load", "3",
                               "--load-text", FILLERS, "--load-repeats", "1").stderr

    def test_load_zero_is_the_alone_path_bit_for_bit(self):
        zero = self.floor  # captured with the load set to 0
        a, z = load_file(self.alone), load_file(zero)
        for key in ("tokens", "positions", "logits", "argmax", "digest"):
            self.assertTrue(np.array_equal(a[key], z[key]), key)
        self.assertNotIn("load", manifest(zero))
        self.assertEqual(manifest(zero)["knobs"]["load"], 0)

    def test_loaded_rows_are_sequence_zeros_at_exactly_the_probes(self):
        a, t = load_file(self.alone), load_file(self.loaded)
        n = len(a["tokens"])
        self.assertTrue(np.array_equal(t["tokens"], a["tokens"]))
        self.assertTrue(np.array_equal(t["positions"], np.arange(0, n - 1, 7)))  # the probe plan, recomputed
        self.assertEqual(t["logits"].shape, a["logits"].shape)
        self.assertTrue(np.array_equal(t["argmax"], np.argmax(t["logits"], axis=1)))
        # Sequence 0's rows, not a filler's: the loaded rows stay close to the alone ones (a
        # filler's row at the same index would predict unrelated text).
        x, y = a["logits"].astype(np.float64), t["logits"].astype(np.float64)
        lx = x - np.log(np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)) - x.max(1, keepdims=True)
        ly = y - np.log(np.exp(y - y.max(1, keepdims=True)).sum(1, keepdims=True)) - y.max(1, keepdims=True)
        kl = (np.exp(lx) * (lx - ly)).sum(1)
        self.assertLess(kl.max(), 0.05)
        self.assertGreater(np.mean(t["argmax"] == a["argmax"]), 0.9)
        # compare's flips against the alone capture are the argmax differences.
        cmp = json.loads(run("compare", self.alone, self.loaded, "--json", "--no-text", "-q").stdout)
        self.assertEqual(cmp["overall"]["flips"], int(np.sum(t["argmax"] != a["argmax"])))

    def test_a_loaded_run_is_reproducible(self):
        again = self.floor.replace(".safetensors", ".load1.safetensors")
        t, g = load_file(self.loaded), load_file(again)
        self.assertTrue(np.array_equal(t["digest"], g["digest"]))
        self.assertTrue(np.array_equal(t["logits"], g["logits"]))
        self.assertEqual(manifest(again)["load"], manifest(self.loaded)["load"])

    def test_the_manifest_records_the_load(self):
        m = manifest(self.loaded)
        rec, n = m["load"], m["workload"]["n_tokens"]
        self.assertEqual((rec["fillers"], rec["seed"], m["knobs"]["load"]), (3, 0, 3))
        with open(FILLERS, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        self.assertEqual([(s["name"], s["sha256"]) for s in rec["sources"]], [("netops-session.json", sha)])
        # Sequence 0 went in its usual chunks of -b, every one of them beside filler tokens.
        measured = [b[1] for b in rec["batches"]]
        self.assertEqual(sum(measured), n)
        self.assertTrue(all(c == 64 for c in measured[:-1]))
        self.assertTrue(all(b[0] + b[2] > 0 for b in rec["batches"]))
        self.assertGreater(sum(b[0] for b in rec["batches"]), 0)  # fillers decoding meanwhile
        jobs = rec["jobs"]
        self.assertGreater(len({j["length"] for j in jobs}), 1)
        self.assertTrue(all(j["length"] + j["generate"] <= rec["cells_per_filler"] for j in jobs))
        self.assertTrue(all(j["source"] == "netops-session.json" for j in jobs))
        # Another seed, other fillers.
        other = capture("seed.safetensors", "--load", "3", "--load-seed", "5", "--load-text", FILLERS)
        self.assertNotEqual(manifest(other)["load"]["jobs"], jobs)

    def test_load_repeats_count_the_repeats_identical_to_the_alone_capture(self):
        path = self.floor
        with open(path.replace(".safetensors", ".load.json")) as f:
            s = json.load(f)
        a = load_file(path)
        want = 0
        for r, rep in enumerate(s["repeats"], 1):
            t = load_file(path.replace(".safetensors", f".load{r}.safetensors"))
            same = int(np.sum(t["digest"] == a["digest"]))
            self.assertEqual(rep["identical_rows"], same)
            self.assertEqual(rep["flips"], int(np.sum(t["argmax"] != a["argmax"])))
            want += same == len(a["digest"])
        self.assertEqual(s["bit_identical_repeats"], want)
        self.assertIn(f"--load 3: {want} of 1 loaded repeats bit-identical", self.floor_stderr)

    def test_a_load_that_does_not_fit_the_context_is_one_error_line(self):
        out = os.path.join(TMP, "tight.safetensors")
        n = manifest(self.alone)["workload"]["n_tokens"]
        p = run("capture", "-m", SMOL, "-w", self.workload, "-o", out, *KNOBS[:2], *KNOBS[4:], "-c", str(n + 100),
                "--load", "15", check=False)
        self.assertEqual(p.returncode, 1)
        line = one_error_line(self, p.stderr)
        self.assertIn(SMOL, line)
        self.assertIn("raise -c or lower --load", line)
        self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    unittest.main()
