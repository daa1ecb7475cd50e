"""`flipscope layers` on the real SmolLM2 over a short text (a generated session's first messages,
~250 tokens, as plain text): a 4-bit KV cache
against F16 (flash attention on). The recomputed rows reproduce both captures (the command fails
otherwise), the reported final difference at every flip agrees with the captures' own logits
(tests/ref/layers_check.py, numpy), and a quantized KV cache is born in attention: it changes
what every attention block reads, while the MLP weights are the same."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import common

CHECK = os.path.join(common.SRC, "tests", "ref", "layers_check.py")


class LayersOnSmolLM2(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        d = cls.dir.name
        # The generated session's messages cut to ~250 tokens of plain text: seconds, not minutes.
        with open(common.generated_session(d, 7, 200)) as f:
            text = " ".join(str(m.get("content") or "") for m in json.load(f)["messages"])
        session = os.path.join(d, "short.txt")
        with open(session, "w") as f:
            f.write(text[:700])
        cls.base, cls.cand = os.path.join(d, "f16.safetensors"), os.path.join(d, "q4.safetensors")
        for path, kv in ((cls.base, "f16"), (cls.cand, "q4_0")):
            common.run("capture", "-m", common.SMOL, "-w", session, "-o", path, "-fa", "on", "-ctk", kv, "-ctv", kv,
                       "--stride", "2", "-b", "128", "-ub", "64", "-q")
        cls.out, cls.html = os.path.join(d, "layers.json"), os.path.join(d, "layers.html")
        cls.said = common.run("layers", cls.base, cls.cand, "-o", cls.out, "--html", cls.html, "-q").stdout
        cls.result = json.load(open(cls.out))

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_final_difference_agrees_with_the_captures(self):
        print(self.said)
        self.assertGreater(len(self.result["flips"]), 0, "q4_0 against f16 should flip somewhere on the probes")
        p = subprocess.run([sys.executable, CHECK, self.base, self.cand, self.out], capture_output=True, text=True)
        print(p.stdout)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_rows_reproduced_and_born_in_attention(self):
        cfg = self.result["config"]
        for side in ("base", "cand"):
            probes = common.manifest(getattr(self, side))["probe_plan"]["n_probes"]
            self.assertEqual(cfg[side]["rows_checked"], probes)
            self.assertGreater(probes, 50)
        self.assertEqual(cfg["n_layer"], 30)
        births = self.result["summary"]["births"]
        self.assertEqual(births["attention"], len(self.result["flips"]), births)
        for f in self.result["flips"]:
            self.assertEqual(f["embedding"]["rel"], 0.0)
            self.assertGreater(f["layers"][0]["attn_out"]["rel"], 0.0)

    def test_html_has_the_chart_and_one_detail_per_flip(self):
        page = open(self.html).read()
        self.assertIn("<svg", page)
        self.assertEqual(page.count("<details>"), len(self.result["flips"]))

    def test_bad_input_is_one_error_line(self):
        p = common.run("layers", self.base, os.path.join(self.dir.name, "missing.safetensors"), "-o",
                       os.path.join(self.dir.name, "x.json"), check=False)
        self.assertEqual(p.returncode, 1)
        line = common.one_error_line(self, p.stderr)
        self.assertIn("missing.safetensors", line)


if __name__ == "__main__":
    unittest.main()
