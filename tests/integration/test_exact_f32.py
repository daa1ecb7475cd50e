"""llama.cpp on an all-F32 copy of SmolLM2 (F32 KV cache, flash attention off) against the exact
engine on the Q4_1 original over the ~4,300-token demo session: 100% top-1 and mean KL below 1e-8.

The F32 copy is made by llama.cpp's llama-quantize (`--allow-requantize ... F32`); since ggml's
float dequantization of Q4_1 / Q8_0 is exact (exact_test checks it), the copy holds the same
weights, so the only differences left are llama.cpp's F32 arithmetic (a wrong RoPE pairing, norm
or head mapping in either would miss by orders of magnitude)."""
import json
import os
import subprocess
import tempfile
import unittest

import common


class ExactAgainstLlamaF32(unittest.TestCase):
    def test_demo_session(self):
        demo = os.path.join(common.SRC, "examples", "netops-demo.json")
        with tempfile.TemporaryDirectory() as d:
            f32 = os.path.join(d, "smol-f32.gguf")
            subprocess.run([os.path.join(os.environ["LLAMA_BIN_DIR"], "llama-quantize"), "--allow-requantize",
                            common.SMOL, f32, "F32"], check=True, capture_output=True)
            llama, exact = os.path.join(d, "llama.safetensors"), os.path.join(d, "exact.safetensors")
            common.run("capture", "-m", f32, "-w", demo, "-o", llama, "-ctk", "f32", "-ctv", "f32", "-fa", "off", "-q")
            common.run("capture", "--engine", "exact", "-m", common.SMOL, "-w", demo, "-o", exact, "-q")
            m = common.manifest(exact)["engine"]
            self.assertEqual(m["name"], "exact")
            self.assertTrue(m["dequantization"]["exact"], m["dequantization"])
            r = json.loads(common.run("compare", exact, llama, "--json").stdout)["overall"]
            print(f"same top-1 {r['same_top1_rate']:.4f}, KL(exact||llama f32) mean {r['kl_base_cand']['mean']:.3e} "
                  f"max {r['kl_base_cand']['max']:.3e} over {r['probes']} probes")
            self.assertEqual(r["flips"], 0)
            self.assertEqual(r["same_top1_rate"], 1.0)
            self.assertLess(r["kl_base_cand"]["mean"], 1e-8)


if __name__ == "__main__":
    unittest.main()
