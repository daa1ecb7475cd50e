"""`flipscope capture --engine openai` against a real HTTP server process (tests/servers/
logprob_server.py) that serves vLLM's and SGLang's response schemas over real SmolLM2 logits from
a full llama.cpp capture. The HTTP captures' top-k rows are checked against an independent numpy
reading of that full capture, and compare's flips against the full captures' own.
"""
import json
import os
import unittest

import numpy as np
from safetensors.numpy import load_file

from common import SMOL, SRC, LogprobServer, manifest, one_error_line, reference_topk, run, session_text
import common

TMP = common.temp_folder("flipscope-http-")
KEY = "sk-test-5b2c9e0d7a41"


# A filler busy longer than flipscope's head start (250 ms) before the measured request: the first
# fillers are still in flight when it arrives, however slowly a loaded machine schedules them.
LONG_FILLERS = ("--filler-ms", "1000")


def Server(*args):
    """The test server over the class's full capture."""
    return LogprobServer(Http.base, *args)


class Http(unittest.TestCase):
    base = workload = None

    @classmethod
    def setUpClass(cls):
        cls.workload = session_text(TMP, 3, 1000)  # about 480 tokens
        # The served logits: every position.
        cls.base = os.path.join(TMP, "base.safetensors")
        run("capture", "-m", SMOL, "-w", cls.workload, "-o", cls.base, "-t", "2", "--stride", "1", "-q")

    def capture(self, url, out, *extra, check=True, env=None):
        path = os.path.join(TMP, out)
        p = run("capture", "-m", SMOL, "-w", self.workload, "-o", path, "--engine", "openai", "--url", url,
                "--stride", "3", "-q", *extra, check=check, env=env)
        return path, p

    def expect_topk(self, path, k):
        """The capture's rows equal the top-k of the full capture's log_softmax (float64, then float32)."""
        t, b = load_file(path), load_file(self.base)
        self.assertTrue(np.array_equal(t["tokens"], b["tokens"]))
        pos = t["positions"]
        self.assertTrue(np.array_equal(pos, np.arange(0, len(b["tokens"]) - 1, 3)))
        ids, lps = reference_topk(b["logits"][pos], k)
        self.assertTrue(np.array_equal(t["topk_ids"], ids))
        self.assertTrue(np.array_equal(t["topk_logprobs"], lps))
        self.assertTrue(np.array_equal(t["argmax"], b["argmax"][pos]))
        self.assertNotIn("logits", t)
        return t

    def test_vllm_and_sglang_rows_are_the_servers_top_k(self):
        with Server("--max-model-len", "4096") as s:
            v, _ = self.capture(s.url, "vllm.safetensors", "--api", "vllm", "--logprobs", "20",
                                "--server-note", "vllm serve X --max-logprobs 20")
            g, _ = self.capture(s.url, "sglang.safetensors", "--api", "sglang", "--logprobs", "7")
        tv = self.expect_topk(v, 20)
        self.expect_topk(g, 7)
        m = manifest(v)
        self.assertTrue(m["truncated"])
        self.assertEqual(m["topk"], 20)
        self.assertIn("tail-bucket", m["truncation"]["note"])
        e = m["engine"]
        self.assertEqual((e["engine"], e["api"], e["url"]), ("openai", "vllm", s.url))
        self.assertEqual(e["server"]["model"]["id"], "smollm2-135m-test")
        self.assertEqual(e["server"]["model"]["max_model_len"], 4096)
        self.assertEqual(e["server"]["version"], "0.0.0-test")
        self.assertEqual(e["server_note"], "vllm serve X --max-logprobs 20")
        self.assertEqual(m["workload"]["n_tokens"], len(tv["tokens"]))
        self.assertEqual(manifest(g)["engine"]["server"]["args"]["context_length"], 4096)
        self.assertEqual(manifest(g)["engine"]["server"]["model"]["model_path"], "HuggingFaceTB/SmolLM2-135M-Instruct")
        # inspect reads it and discloses the truncation.
        self.assertIn("truncated  yes: top-20 ids and logprobs", run("inspect", v).stdout)

    def test_compare_flips_are_exact_against_a_truncated_capture(self):
        with Server() as s:
            v, _ = self.capture(s.url, "served.safetensors", "--logprobs", "20")

        cand = os.path.join(TMP, "q4kv.safetensors")  # a KV-cache change that flips some greedy tokens
        run("capture", "-m", SMOL, "-w", self.workload, "-o", cand, "-t", "2", "--stride", "1", "-q",
            "-fa", "on", "-ctk", "q4_0", "-ctv", "q4_0")

        def cmp(a, b):
            return json.loads(run("compare", a, b, "--json", "--no-text", "-q").stdout)
        full = cmp(cand, self.base)         # full vs full, every position
        trunc = cmp(cand, v)                # full vs the served top-20, every third position
        self.assertTrue(trunc["truncated"])
        self.assertIn("tail bucket", trunc["kl_estimate"])
        probes = set(load_file(v)["positions"].tolist())
        want = [(f["position"], f["base_token"], f["cand_token"]) for f in full["flips"] if f["position"] in probes]
        got = [(f["position"], f["base_token"], f["cand_token"]) for f in trunc["flips"]]
        self.assertEqual(got, want)
        self.assertGreater(full["overall"]["flips"], 0, "the KV-cache change should flip something")
        same = cmp(self.base, v)            # the served capture against its own source
        self.assertEqual(same["overall"]["flips"], 0)
        self.assertLess(same["overall"]["kl_base_cand"]["max"], 1e-6)

    def test_retries_after_5xx_and_a_timeout(self):
        with Server("--fault", "5xx:2") as s:
            path, _ = self.capture(s.url, "retry.safetensors", "--retries", "3")
            self.assertEqual(s.posts(), 3)
        self.expect_topk(path, 20)
        with Server("--fault", "slow:10:1") as s:
            path, _ = self.capture(s.url, "slow.safetensors", "--timeout", "4", "--retries", "2")
            self.assertEqual(s.posts(), 2)
        self.expect_topk(path, 20)

    def load_floor(self, server, name, *extra):
        """capture --load 3 --load-repeats 3 against the server: the summary, the alone capture,
        the loaded ones and the server's counts."""
        alone, p = self.capture(server.url, name, "--load", "3", "--load-repeats", "3", *extra)
        with open(alone.replace(".safetensors", ".load.json")) as f:
            summary = json.load(f)
        stats = server.stats()
        loaded = [alone.replace(".safetensors", f".load{r}.safetensors") for r in (1, 2, 3)]
        return summary, alone, loaded, stats, p.stderr

    def expect_overlap(self, loaded, stats):
        """Every loaded measured request ran beside filler requests, as the server saw it too."""
        self.assertEqual(stats["loaded"], 3)
        self.assertGreaterEqual(stats["fillers"], 9)
        for path in loaded:
            rec = manifest(path)["load"]
            self.assertEqual(rec["fillers"], 3)
            self.assertGreaterEqual(rec["overlapping"], 1)
            self.assertTrue(all(q["status"] == 200 for q in rec["requests"]))
            self.assertGreater(len({q["length"] for q in rec["requests"]}), 1)  # varied lengths
            self.assertTrue(any(q["generate"] > 1 for q in rec["requests"]))   # some generate

    def test_under_load_a_batch_invariant_server_repeats_bit_for_bit(self):
        for api in ("vllm", "sglang"):
            with Server(*LONG_FILLERS) as s:
                summary, alone, loaded, stats, err = self.load_floor(s, f"load-{api}.safetensors", "--api", api)
            self.assertIn("--load 3: 3 of 3 loaded repeats bit-identical to the alone capture", err)
            self.assertEqual((summary["bit_identical_repeats"], summary["of"]), (3, 3))
            self.assertNotIn("load", manifest(alone))  # the alone capture ran alone
            self.expect_overlap(loaded, stats)
            a = load_file(alone)
            for path, rep in zip(loaded, summary["repeats"]):
                t = load_file(path)
                self.assertTrue(np.array_equal(t["digest"], a["digest"]))
                self.assertEqual(rep["flips"], 0)

    def test_under_load_a_batch_variant_server_is_caught_and_its_flips_counted(self):
        with Server("--fault", "batch_variant", *LONG_FILLERS) as s:
            summary, alone, loaded, stats, err = self.load_floor(s, "load-variant.safetensors")
        self.assertIn("--load 3: 0 of 3 loaded repeats bit-identical", err)
        self.expect_overlap(loaded, stats)
        # Independently: the served distribution swaps its top two ids at every 5th entry, so the
        # greedy token flips at each probe p with (p + 1) % 5 == 0 whose top two differ.
        b = load_file(self.base)
        pos = load_file(alone)["positions"]
        x = b["logits"][pos].astype(np.float64)
        mx = x.max(1, keepdims=True)
        lp = (x - (mx + np.log(np.exp(x - mx).sum(1, keepdims=True)))).astype(np.float32)  # as served
        top2 = -np.sort(-lp, axis=1)[:, :2]
        want = int(np.sum(((pos + 1) % 5 == 0) & (top2[:, 0] > top2[:, 1])))
        self.assertGreater(want, 0)
        a = load_file(alone)
        for path, rep in zip(loaded, summary["repeats"]):
            t = load_file(path)
            self.assertEqual(rep["flips"], int(np.sum(t["argmax"] != a["argmax"])))
            self.assertEqual(rep["flips"], want)
            self.assertEqual(rep["identical_rows"], int(np.sum(t["digest"] == a["digest"])))
            self.assertFalse(rep["bit_identical"])

    def expect_error(self, url, expect, *extra, env=None):
        out = os.path.join(TMP, "bad.safetensors")
        _, p = self.capture(url, "bad.safetensors", *extra, check=False, env=env)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(expect, one_error_line(self, p.stderr))
        self.assertFalse(os.path.exists(out))
        return p.stderr

    def test_faults_give_one_clear_line(self):
        with Server("--fault", "slow:3:9") as s:
            err = self.expect_error(s.url, "no answer within 1 s", "--timeout", "1", "--retries", "1")
            self.assertIn(s.url + "/v1/completions", err)
        with Server("--fault", "malformed") as s:
            self.expect_error(s.url, s.url + "/v1/completions: the body is not JSON")
            self.expect_error(s.url, s.url + "/generate: the body is not JSON", "--api", "sglang")
        with Server("--fault", "wrong_count") as s:
            n = len(load_file(self.base)["tokens"])
            self.expect_error(s.url, f"returned {n - 1} prompt positions for the {n} tokens sent")
            self.expect_error(s.url, f"returned {n - 1} prompt positions for the {n} tokens sent", "--api", "sglang")
        with Server("--max-logprobs", "20") as s:
            err = self.expect_error(s.url, "HTTP 400: Requested prompt logprobs of 50, which is greater than max allowed: 20",
                                    "--logprobs", "50")
            self.assertIn("--max-logprobs", err)
        with Server("--max-model-len", "100") as s:
            self.expect_error(s.url, "do not fit the server's context of 100")
            self.expect_error(s.url, "do not fit the server's context of 100", "--api", "sglang")
        self.expect_error("http://127.0.0.1:9", "127.0.0.1:9/v1/models", "--retries", "0")

    def test_api_key_is_sent_and_never_recorded(self):
        env = dict(os.environ, FS_TEST_KEY=KEY)
        with Server("--api-key", KEY) as s:
            path, p = self.capture(s.url.replace("://", "://user:pw@"), "keyed.safetensors", "--api-key-env",
                                   "FS_TEST_KEY", "--api", "sglang", env=env)
            self.expect_error(s.url, "HTTP 401")  # no key
        with open(path, "rb") as f:
            data = f.read()
        self.assertNotIn(KEY.encode(), data)  # SGLang's server info holds it; the manifest must not
        self.assertNotIn(b"user:pw", data)
        self.assertNotIn(KEY, p.stderr)
        self.assertEqual(manifest(path)["engine"]["api_key_env"], "FS_TEST_KEY")
        self.assertEqual(manifest(path)["engine"]["url"], s.url)
        with Server("--api-key", KEY, "--fault", "5xx:9") as s:  # the server echoes the header it got
            err = self.expect_error(s.url, "HTTP 503", "--api-key-env", "FS_TEST_KEY", "--retries", "1", env=env)
            self.assertNotIn(KEY, err)
            self.assertIn("Bearer ***", err)
        self.expect_error("http://127.0.0.1:9", "--api-key-env FS_UNSET_KEY: the environment variable is not set",
                          "--api-key-env", "FS_UNSET_KEY")


if __name__ == "__main__":
    unittest.main()
