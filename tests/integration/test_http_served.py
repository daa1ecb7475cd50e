"""`flipscope capture --engine openai --replay served` against the test server (tests/servers/
logprob_server.py) with its prefix cache: every row's source and the server's cached / computed
counts, the request count, the proof (one-token rows against the generation's), a forced cache
miss, and the refusals of a server without prefix caching or without cache counts. The rows are
checked against the top-k of the full capture the server serves, read with numpy; which positions
a served replay keeps is recomputed here from the manifest's spans.
"""
import json
import os
import unittest

import numpy as np
from safetensors.numpy import load_file

from common import SMOL, SRC, LogprobServer, generated_session, reference_topk, manifest, one_error_line, run
import common

TMP = common.temp_folder("flipscope-http-served-")


Server = LogprobServer


def written_flags(m):
    """ModelWrites per token, from the manifest's spans: a tool call, or what an assistant message
    generated (its "generated" range)."""
    n = m["workload"]["n_tokens"]
    w = np.zeros(n, dtype=bool)
    for s in m["workload"]["spans"]:
        if s["kind"] == "message" and s["role"] == "assistant":
            b, e = s.get("generated", [s["begin"], s["end"]])
            w[b:e] = True
    for s in m["workload"]["spans"]:  # tool results inside an assistant message are read
        if s["kind"] == "tool_result":
            w[s["begin"]:s["end"]] = False
    for s in m["workload"]["spans"]:
        if s["kind"] == "tool_call":
            w[s["begin"]:s["end"]] = True
    return w


class HttpServed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workload = generated_session(TMP, 5, 2500)
        cls.base = os.path.join(TMP, "base.safetensors")
        run("capture", "-m", SMOL, "-w", cls.workload, "-o", cls.base, "-t", "2", "--stride", "1", "-q")
        cls.w = written_flags(manifest(cls.base))
        n = len(cls.w)
        cls.singles = [p for p in range(n - 1) if cls.w[p] and cls.w[p + 1]]
        cls.prompts = [p for p in range(n - 1) if not cls.w[p] and cls.w[p + 1]]
        assert len(cls.prompts) >= 2 and len(cls.singles) > 50, (len(cls.prompts), len(cls.singles))

    def capture(self, url, out, *extra, check=True):
        path = os.path.join(TMP, out)
        p = run("capture", "-m", SMOL, "-w", self.workload, "-o", path, "--engine", "openai", "--url", url,
                "--stride", "1", "--replay", "served", "--logprobs", "5", "-q", *extra, check=check)
        return path, p

    def expect_rows(self, path, k=5):
        """The kept rows are the top-k of the served full capture's log_softmax at their positions."""
        t, b = load_file(path), load_file(self.base)
        pos = t["positions"]
        ids, lps = reference_topk(b["logits"][pos], k)
        self.assertTrue(np.array_equal(t["topk_ids"], ids))
        self.assertTrue(np.array_equal(t["topk_logprobs"], lps))
        return t

    def test_every_block_cached(self):
        # Page size 1 (SGLang's default): every decode step is one computed token over p cached.
        for api in ("vllm", "sglang"):
            with self.subTest(api=api), Server(self.base, "--prefix-caching", "1", "--prompt-tokens-details") as s:
                path, _ = self.capture(s.url, f"served-{api}.safetensors", "--api", api)
                t = self.expect_rows(path)
                self.assertEqual(t["positions"].tolist(), sorted(self.singles + self.prompts))
                m = manifest(path)
                sv = m["served"]
                self.assertEqual(m["knobs"]["replay"], "served")
                st = s.stats()
                self.assertEqual(st["served"], len(self.singles), "one request per decode step")
                self.assertEqual(st["generations"], len(self.prompts), "one generation per message")
                self.assertEqual(sv["requests"], len(self.singles) + len(self.prompts))
                self.assertEqual(st["posts"], sv["requests"])
                rows = sv["per_row"]
                for p, src, cached, computed in zip(rows["positions"], rows["source"], rows["cached"], rows["computed"]):
                    if p in self.prompts:
                        self.assertEqual(src, "prompt")
                    else:
                        self.assertEqual((src, cached, computed), ("decode", p, 1), p)
                self.assertEqual(sv["rows"]["recomputed"], 0)
                self.assertEqual(sv["proof"]["compared"], len(self.singles))
                self.assertEqual(sv["proof"]["identical"], len(self.singles))

    def test_a_failed_proof_is_said(self):
        # A server whose one-token rows differ from its own generation's (vLLM FA3 on the H200 did:
        # docs/served.md): the capture is written, and the terminal says the proof failed.
        with Server(self.base, "--prefix-caching", "1", "--prompt-tokens-details", "--fault", "decode_differs") as s:
            path, p = self.capture(s.url, "served-differs.safetensors")
            sv = manifest(path)["served"]
            self.assertEqual(sv["proof"]["compared"], len(self.singles))
            self.assertEqual(sv["proof"]["identical"], 0)
            warnings = [line for line in p.stderr.splitlines() if line.startswith("warning:")]
            self.assertEqual(len(warnings), 1, p.stderr)
            self.assertIn(f"{len(self.singles)} of {len(self.singles)} decode-step rows differ", warnings[0])
        with Server(self.base, "--prefix-caching", "1", "--prompt-tokens-details") as s:
            _, p = self.capture(s.url, "served-same.safetensors")
            self.assertNotIn("warning:", p.stderr)

    def test_full_blocks_only(self):
        # vLLM's rule, 16-token blocks: a one-token request reuses floor(p / 16) * 16 tokens, so only a
        # step at a block boundary is computed alone; the others are the generation's decode steps.
        with Server(self.base, "--prefix-caching", "16", "--prompt-tokens-details") as s:
            path, _ = self.capture(s.url, "served-b16.safetensors")
            self.expect_rows(path)
            rows = manifest(path)["served"]["per_row"]
            for p, src, cached, computed in zip(rows["positions"], rows["source"], rows["cached"], rows["computed"]):
                if src == "prompt":
                    continue
                self.assertEqual(cached, p // 16 * 16, p)
                self.assertEqual(computed, p + 1 - p // 16 * 16, p)
                self.assertEqual(src, "decode" if p % 16 == 0 else "generation", p)

    def test_forced_cache_miss_is_not_presented_as_served(self):
        # The 5th one-token request reuses nothing; generations stop after one token, so no
        # generation row can stand in: the row is left out and listed.
        with Server(self.base, "--prefix-caching", "1", "--prompt-tokens-details", "--fault", "cache_miss:5",
                    "--generate-max", "1") as s:
            path, _ = self.capture(s.url, "served-miss.safetensors")
            missed = self.singles[4]
            t = self.expect_rows(path)
            self.assertNotIn(missed, t["positions"].tolist())
            self.assertEqual(len(t["positions"]), len(self.singles) + len(self.prompts) - 1)
            sv = manifest(path)["served"]
            self.assertEqual(sv["recomputed"], [{"position": missed, "cached": 0, "computed": missed + 1}])
            self.assertEqual(sv["rows"]["recomputed"], 1)
            self.assertEqual(sv["proof"]["compared"], 0, "a one-token generation proves nothing")

    def test_refusals(self):
        with Server(self.base, "--prompt-tokens-details") as s:
            _, p = self.capture(s.url, "no-cache.safetensors", check=False)
            self.assertEqual(p.returncode, 1)
            line = one_error_line(self, p.stderr)
            self.assertIn("the server reused none of a", line)
            self.assertIn("--enable-prefix-caching", line)
        with Server(self.base, "--prefix-caching", "1") as s:
            _, p = self.capture(s.url, "no-details.safetensors", check=False)
            line = one_error_line(self, p.stderr)
            self.assertIn("--enable-prompt-tokens-details", line)
        self.assertFalse(os.path.exists(os.path.join(TMP, "no-cache.safetensors")))
        self.assertFalse(os.path.exists(os.path.join(TMP, "no-details.safetensors")))
        with Server(self.base, "--prefix-caching", "1", "--prompt-tokens-details") as s:
            _, p = self.capture(s.url, "loaded.safetensors", "--load", "2", check=False)
            self.assertIn("--replay served with --load:", one_error_line(self, p.stderr))
            text = os.path.join(TMP, "plain.txt")
            with open(text, "w") as f:
                f.write("a plain text workload without roles\n" * 20)
            p = run("capture", "-m", SMOL, "-w", text, "-o", os.path.join(TMP, "t.safetensors"), "--engine", "openai",
                    "--url", s.url, "--replay", "served", "-q", check=False)
            self.assertIn("needs a chat workload", one_error_line(self, p.stderr))


if __name__ == "__main__":
    unittest.main()
