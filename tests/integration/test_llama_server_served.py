"""llama.cpp's own llama-server as the server of a served replay over HTTP, against flipscope's
embedded served replay of the same model, flags and tokens (SmolLM2, CPU, one thread): both feed
what the model read in -b chunks from each segment's start and every decode step alone, so the rows
must agree. Checked here: every decode step was one computed token over its whole prefix (the
server's timings), the proof (one-token rows bit for bit equal to the generation's where it followed
the transcript), the same top-k ids and greedy tokens as the embedded rows, and the log-probabilities
against the embedded logits read with numpy: their gaps to the top-1 equal the logits' gaps to
float32 rounding (the normalizer, llama-server's float32 running sum over the vocabulary, cancels;
a numpy replica of that sum is not bit-exact, its exp is not glibc's).
"""
import os
import socket
import subprocess
import time
import unittest
import urllib.request

import numpy as np
from safetensors.numpy import load_file

from common import SMOL, generated_session, manifest, run
import common

TMP = common.temp_folder("flipscope-llama-server-")
FLAGS = ["-fa", "on", "-t", "1", "-c", "4096", "-b", "2048", "-ub", "512"]
K = 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_logprobs(logits, ids):
    """llama-server's n_probs log-probabilities of ids from float32 logits (get_token_probabilities)."""
    x = logits.astype(np.float32)
    e = np.exp(x - x.max())
    total = np.cumsum(e, dtype=np.float32)[-1]  # a running float sum, in vocabulary order
    return np.log(e[ids] / total).astype(np.float32)


class LlamaServerServed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workload = generated_session(TMP, 5, 2500)
        port = free_port()
        cls.url = f"http://127.0.0.1:{port}"
        binary = os.path.join(os.environ["LLAMA_BIN_DIR"], "llama-server")
        cls.log = open(os.path.join(TMP, "llama-server.log"), "w")
        cls.proc = subprocess.Popen([binary, "-m", SMOL, "--host", "127.0.0.1", "--port", str(port), "-np", "1",
                                     *FLAGS], stdout=cls.log, stderr=subprocess.STDOUT)
        for _ in range(600):
            try:
                with urllib.request.urlopen(cls.url + "/health") as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        else:
            raise AssertionError("llama-server did not start")
        cls.embedded = os.path.join(TMP, "embedded.safetensors")
        cls.embedded_err = run("capture", "-m", SMOL, "-w", cls.workload, "-o", cls.embedded, "--stride", "1",
                               "--replay", "served", "-q", *FLAGS).stderr
        cls.http = os.path.join(TMP, "http.safetensors")
        t0 = time.time()
        cls.http_err = run("capture", "-m", SMOL, "-w", cls.workload, "-o", cls.http, "--engine", "openai", "--api",
                           "llama-server", "--url", cls.url, "--replay", "served", "--logprobs", str(K), "--stride", "1",
                           "-q").stderr
        cls.http_s = time.time() - t0

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait(timeout=20)
        cls.log.close()

    def test_the_terminal_says_the_replay(self):
        # The engine's flags leave the replay out (they are a launch command's); the line says it.
        sv = manifest(self.embedded)["served"]
        n = manifest(self.embedded)["workload"]["n_tokens"]
        self.assertIn(f", --replay served ({sv['fed_singly']} of {n} tokens fed alone)", self.embedded_err)
        self.assertIn(", --replay served\n", self.http_err)

    def test_decode_steps_and_proof(self):
        sv = manifest(self.http)["served"]
        rows = sv["per_row"]
        decode = [(p, c, n) for p, s, c, n in zip(rows["positions"], rows["source"], rows["cached"], rows["computed"])
                  if s == "decode"]
        self.assertEqual(sv["rows"]["recomputed"], 0)
        self.assertEqual(sv["rows"]["generation"], 0, "every decode step was computed alone")
        self.assertGreater(len(decode), 100)
        for p, cached, computed in decode:
            self.assertEqual((cached, computed), (p, 1), p)
        self.assertGreater(sv["proof"]["compared"], 20)
        self.assertEqual(sv["proof"]["identical"], sv["proof"]["compared"], sv["proof"])
        print(f"\nllama-server served replay: {sv['requests']} requests in {sv['seconds']:.1f} s "
              f"({sv['requests_per_s']:.1f}/s; whole capture {self.http_s:.1f} s), {len(decode)} decode rows, "
              f"proof {sv['proof']['identical']} of {sv['proof']['compared']} bit-identical, "
              f"generation matched {sv['generation_matched']} of {sv['generated_tokens']} tokens")

    def test_rows_equal_the_embedded_served_replay(self):
        h, e = load_file(self.http), load_file(self.embedded)
        self.assertTrue(np.array_equal(h["tokens"], e["tokens"]))
        index = {int(p): i for i, p in enumerate(e["positions"])}
        rows = [index[int(p)] for p in h["positions"]]
        logits = e["logits"][rows]
        self.assertTrue(np.array_equal(h["argmax"], e["argmax"][rows]), "the same greedy token at every kept row")
        exact = same_ids = 0
        worst = worst_gap = 0.0
        for i in range(len(rows)):
            x = logits[i].astype(np.float64)
            ids = h["topk_ids"][i]
            same_ids += np.array_equal(ids[:5], np.argsort(-x, kind="stable")[:5])
            lp = server_logprobs(logits[i], ids)
            exact += np.array_equal(lp, h["topk_logprobs"][i])
            worst = max(worst, float(np.abs(lp.astype(np.float64) - h["topk_logprobs"][i]).max()))
            # The gaps to the top-1 cancel the normalizer (llama-server's float32 running sum over the
            # vocabulary, whose own error is ~1e-4): they are the logits' gaps, to float32 rounding.
            got = h["topk_logprobs"][i][:5].astype(np.float64)
            worst_gap = max(worst_gap, float(np.abs((got - got[0]) - (x[ids[:5]] - x[ids[0]])).max()))
        print(f"\n{len(rows)} rows: top-5 ids equal in {same_ids}; log-probabilities equal to numpy's float32 "
              f"replica of llama-server's softmax bit for bit in {exact}, largest difference {worst:.3g}; "
              f"gaps to the top-1 against the embedded logits' largest difference {worst_gap:.3g}")
        self.assertEqual(same_ids, len(rows))
        self.assertLess(worst_gap, 2e-6)
        self.assertLess(worst, 1e-3)


if __name__ == "__main__":
    unittest.main()
