"""The Python reading API (python/flipscope, docs/python.md) against the flipscope binary and the
standard safetensors reader: open_capture on a full F32, a BF16, a truncated top-k and an exact
capture of SmolLM2 (tokens, positions, argmax, digests and rows equal safetensors', and rows equal
`flipscope inspect --row`), tampered and cut files refused with the file named, load_results and
compare, the one version, and the writers' old module names."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
from safetensors import safe_open

from common import BIN, SMOL, SRC, run, session_text

TMP = tempfile.mkdtemp(prefix="flipscope-pyapi-")
sys.path.insert(0, os.path.join(SRC, "python"))
os.environ["FLIPSCOPE_BIN"] = BIN
import flipscope  # noqa: E402
from flipscope.capture import truncate  # noqa: E402


def load_file(path):
    """The capture's tensors by the standard safetensors reader (BF16 rows left out: numpy has no
    bfloat16)."""
    with safe_open(path, "np") as f:
        return {k: f.get_tensor(k) for k in f.keys() if not (k == "logits" and "bf16" in os.path.basename(path))}


class Reader(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workload = session_text(TMP, 7, 1200)
        cls.f32 = os.path.join(TMP, "f32.safetensors")
        cls.bf16 = os.path.join(TMP, "bf16.safetensors")
        for path, store in ((cls.f32, "f32"), (cls.bf16, "bf16")):
            run("capture", "-m", SMOL, "-w", cls.workload, "-o", path, "-t", "2", "--stride", "8", "-q",
                "--store", store)

    def check_against_safetensors(self, path):
        cap, ref = flipscope.open_capture(path), load_file(path)
        for name in ("tokens", "positions", "argmax", "digest"):
            self.assertTrue(np.array_equal(getattr(cap, name), ref[name]), name)
        self.assertEqual(len(cap), len(ref["positions"]))
        self.assertEqual(cap.manifest["workload"]["n_tokens"], len(ref["tokens"]))
        return cap, ref

    def test_full_rows_equal_safetensors_and_the_cli(self):
        for path in (self.f32, self.bf16):
            cap, _ = self.check_against_safetensors(path)
            self.assertIsInstance(cap.rows, np.memmap)  # mapped, not read whole
            ref_rows = flipscope.open_capture(self.f32)
            for i in (0, len(cap) // 2, len(cap) - 1):
                row = cap.row(i)
                self.assertEqual(int(np.argmax(ref_rows.row(i))), int(cap.argmax[i]))
                cli = json.loads(run("inspect", path, "--row", str(i), "--json").stdout)
                self.assertEqual(cli["position"], int(cap.positions[i]))
                self.assertEqual(cli["digest"], f"{int(cap.digest[i]):016x}")
                ids, _ = cap.topk(i, 5)
                self.assertEqual([t[0] for t in cli["top"]], ids.tolist(), f"{path} row {i}")
                self.assertEqual([t[1] for t in cli["top"]], [float(row[j]) for j in ids])  # bit for bit
        f32, bf16 = flipscope.open_capture(self.f32), flipscope.open_capture(self.bf16)
        self.assertEqual(bf16.store, "bf16")
        self.assertTrue(np.array_equal(f32.digest, bf16.digest))  # digests are of the F32 rows
        self.assertTrue(np.array_equal(f32.row(1), load_file(self.f32)["logits"][1]))
        # BF16 widens exactly: the F32 row rounded to nearest even, then widened.
        bits = f32.row(1).view(np.uint32).astype(np.uint64)
        rounded = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint32) << 16).view(np.float32)
        self.assertTrue(np.array_equal(bf16.row(1), rounded))

    def test_topk_is_the_log_softmax_order(self):
        cap = flipscope.open_capture(self.f32)
        x = cap.row(3).astype(np.float64)
        lp = x - (x.max() + np.log(np.exp(x - x.max()).sum()))
        ids, lps = cap.topk(3, 4)
        self.assertEqual(ids.tolist(), np.argsort(-lp, kind="stable")[:4].tolist())
        self.assertTrue(np.allclose(lps, lp[ids], rtol=0, atol=1e-12))

    def test_truncated_capture(self):
        out = os.path.join(TMP, "top8.safetensors")
        truncate.main([self.f32, out, "-k", "8"])
        cap, ref = self.check_against_safetensors(out)
        self.assertTrue(cap.truncated)
        self.assertIsNone(cap.rows)
        ids, lps = cap.topk(2, 20)  # at most the capture's own k
        self.assertEqual(len(ids), 8)
        self.assertTrue(np.array_equal(ids, ref["topk_ids"][2]))
        cli = json.loads(run("inspect", out, "--row", "2", "--json").stdout)
        self.assertEqual([t[0] for t in cli["top"]], ids[:5].tolist())
        with self.assertRaises(flipscope.CaptureError):
            cap.row(0)

    def test_exact_capture(self):
        ids = os.path.join(TMP, "ids.txt")
        with open(ids, "w") as f:
            f.write(" ".join(map(str, flipscope.open_capture(self.f32).tokens[:40].tolist())))
        out = os.path.join(TMP, "exact.safetensors")
        run("capture", "--engine", "exact", "-m", SMOL, "-w", ids, "--format", "tokens", "-o", out, "--stride", "4",
            "-t", "2", "-q")
        cap, ref = self.check_against_safetensors(out)
        self.assertEqual(cap.manifest["engine"]["name"], "exact")
        self.assertTrue(np.array_equal(cap.row(5), ref["logits"][5]))

    def test_damaged_files_are_refused_naming_the_file(self):
        data = open(self.f32, "rb").read()
        cases = {
            "cut.safetensors": data[: len(data) - 4096],                  # truncated
            "short.safetensors": data[:6],                                # no header length
            "hlen.safetensors": (10**9).to_bytes(8, "little") + data[8:],  # header length past the end
            "json.safetensors": data[:8] + b"{" * (int.from_bytes(data[:8], "little")) + data[8 + int.from_bytes(data[:8], "little"):],
        }
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
        header["logits"]["data_offsets"][1] += 4  # a tensor reaching past the data
        text = json.dumps(header).encode()
        cases["offsets.safetensors"] = len(text).to_bytes(8, "little") + text + data[8 + n:]
        header = json.loads(data[8:8 + n])
        del header["__metadata__"]
        text = json.dumps(header).encode()
        cases["nomanifest.safetensors"] = len(text).to_bytes(8, "little") + text + data[8 + n:]
        for name, blob in cases.items():
            path = os.path.join(TMP, name)
            with open(path, "wb") as f:
                f.write(blob)
            with self.assertRaises(flipscope.CaptureError, msg=name) as e:
                flipscope.open_capture(path)
            self.assertIn(path, str(e.exception))
            self.assertNotIn("\n", str(e.exception))

    def test_random_damage_is_refused_or_read_within_bounds(self):
        # The reader's fuzzing: random byte changes in the header and random cuts of a small capture
        # either open (and then every row reads) or raise CaptureError, never anything else.
        small = os.path.join(TMP, "small.safetensors")
        run("capture", "-m", SMOL, "-w", session_text(TMP, 7, 300), "-o", small, "-t", "2", "--stride", "16", "-q")
        data = open(small, "rb").read()
        n = int.from_bytes(data[:8], "little")
        rng = np.random.default_rng(7)
        path = os.path.join(TMP, "fuzz.safetensors")
        opened = refused = 0
        for trial in range(400):
            blob = bytearray(data)
            if trial % 4 == 0:
                blob = blob[: int(rng.integers(0, len(blob)))]
            else:
                for _ in range(int(rng.integers(1, 4))):
                    blob[int(rng.integers(0, 8 + n))] = int(rng.integers(0, 256))
            with open(path, "wb") as f:
                f.write(bytes(blob))
            try:
                cap = flipscope.open_capture(path)
                for i in range(len(cap)):
                    cap.row(i)
                opened += 1
            except flipscope.CaptureError as e:
                self.assertIn(path, str(e))
                refused += 1
        self.assertGreater(refused, 100)  # most damage is caught
        self.assertEqual(opened + refused, 400)


class Api(unittest.TestCase):
    def test_compare_is_the_cli_figures(self):
        a, b = os.path.join(TMP, "a.safetensors"), os.path.join(TMP, "b.safetensors")
        w = session_text(TMP, 8, 1200)
        run("capture", "-m", SMOL, "-w", w, "-o", a, "-t", "2", "--stride", "8", "-q")
        run("capture", "-m", SMOL, "-w", w, "-o", b, "-t", "2", "--stride", "8", "-q", "-ctk", "q4_0", "-ctv", "q4_0")
        got = flipscope.compare(a, b, window=256)
        cli = json.loads(run("compare", a, b, "--json", "-q", "--window", "256").stdout)
        cli = cli[0] if isinstance(cli, list) and len(cli) == 1 else cli
        for key in ("overall", "windows", "bit_identical", "probes_compared"):
            self.assertEqual(got[key], cli[key], key)
        with self.assertRaises(RuntimeError) as e:
            flipscope.compare(a, os.path.join(TMP, "missing.safetensors"))
        self.assertIn("missing.safetensors", str(e.exception))

    def test_load_results(self):
        r = flipscope.load_results(os.path.join(SRC, "tests", "data", "results-sample.json"))
        raw = json.load(open(os.path.join(SRC, "tests", "data", "results-sample.json")))
        self.assertEqual([c.name for c in r.configs], [c["name"] for c in raw["configs"]])
        self.assertEqual([s.config for s in r.summary], [s["config"] for s in raw["summary"]])
        first = raw["summary"][1]
        row = r.row(first["config"])
        self.assertEqual(row.median_flip_rate, first["median_flip_rate"])
        self.assertEqual(row.flips, first["flips"])
        self.assertEqual(r.recipe.recommended, raw["recipe"].get("recommended"))
        self.assertIs(r.raw, r.raw)
        bad = os.path.join(TMP, "bad.json")
        with open(bad, "w") as f:
            f.write("[1, 2]")
        with self.assertRaises(ValueError) as e:
            flipscope.load_results(bad)
        self.assertIn(bad, str(e.exception))

    def test_one_version(self):
        cmake = open(os.path.join(SRC, "CMakeLists.txt")).read()
        self.assertEqual(re.search(r"project\(flipscope VERSION ([0-9.]+)", cmake).group(1), flipscope.__version__)
        self.assertEqual(run("--version").stdout.split()[1], flipscope.__version__)
        from flipscope_capture import VERSION
        self.assertEqual(VERSION, flipscope.__version__)

    def test_console_command_and_old_module_names(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"))
        p = subprocess.run([sys.executable, "-m", "flipscope._cli", "--version"], capture_output=True, text=True,
                           env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith(f"flipscope {flipscope.__version__}"), p.stdout)
        for mod in ("flipscope_capture.truncate", "flipscope.capture.truncate", "flipscope_capture.hf"):
            h = subprocess.run([sys.executable, "-m", mod, "--help"], capture_output=True, text=True, env=env)
            self.assertEqual(h.returncode, 0, f"{mod}: {h.stderr}")
        from flipscope_capture import format as old
        from flipscope.capture import format as new
        self.assertIs(old, new)


if __name__ == "__main__":
    try:
        unittest.main()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
