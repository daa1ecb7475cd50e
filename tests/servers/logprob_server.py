#!/usr/bin/env python3
"""A prompt-logprobs server for the tests: vLLM's and SGLang's documented response schemas over
real llama.cpp logits.

    logprob_server.py --capture FULL.safetensors [--port 0] [--fault MODE] [--api-key KEY]
                      [--max-logprobs 20] [--max-model-len N]

FULL.safetensors is a full flipscope capture with a probe at every position (--stride 1): the
distribution of position p is log_softmax(logits[p]) in float64, sent as float32 values. A
prompt must be a prefix of the capture's tokens (any other prompt gets HTTP 400), so the tests
see exactly the ids they sent. Endpoints:

    GET  /v1/models, /version                 vLLM's model card and version
    POST /v1/completions                      vLLM: choices[0].prompt_logprobs
    GET  /get_model_info, /get_server_info    SGLang (the server info holds "api_key", as SGLang's does)
    POST /generate                            SGLang: meta_info.input_top_logprobs
    GET  /_stats                              {"posts": POSTs answered so far, "fillers": generation-only
                                              requests among them, "loaded": prompt-logprobs requests that
                                              ran while a generation-only request was in flight}

A request without prompt log-probabilities (no "prompt_logprobs" / "return_logprob": the fillers of
flipscope's --load) may hold any token ids: it takes --filler-ms and answers max_tokens generated ids.

    GET  /health, /server_info                vLLM's readiness check and reported settings

Generation (max_tokens / max_new_tokens > 1, with logprobs): the served "model" resumes the
transcript. A prompt of L tokens whose first L-1 are a prefix of the capture's tokens (its last
token may differ: a fork) generates tokens[L : L+n] of the capture, fewer at its end (finish
reason "stop"), each with the capture's log-probability of it at that position. vLLM answers
with logprobs.tokens = "token_id:N" (return_tokens_as_token_ids), SGLang with
meta_info.output_token_logprobs. --request-log FILE appends every POST body as one JSON line.

Prefix caching (served replay, docs/served.md "Over HTTP"): --prefix-caching B keeps every
prompt and generation it has answered, as blocks of B tokens (vLLM's full-block rule: a prompt
reuses the longest run of whole blocks that an earlier sequence shares with it, never its last
token); answers then report the reused count: SGLang's meta_info.cached_tokens always, vLLM's
usage.prompt_tokens_details.cached_tokens with --prompt-tokens-details (vLLM's
--enable-prompt-tokens-details). Without --prefix-caching nothing is reused (cached 0).
Generations answer the top --logprobs K of each step (vLLM top_logprobs, SGLang output_top_logprobs);
--generate-max M stops every generation after M tokens. /_stats also counts "served" (one-token
requests), "generations" and "cached" (the cached tokens reported, summed).

Faults (--fault): "5xx:N" the first N POSTs answer 503 (the body echoes the Authorization header,
as a careless proxy might); "slow:S:N" the first N POSTs wait S seconds; "malformed" POSTs answer
a cut JSON body; "wrong_count" prompt_logprobs / input_top_logprobs lack their last entry;
"batch_variant" a prompt-logprobs request that runs while a filler is in flight has the top two ids
of every 5th position swapped (a server whose kernels depend on the batch).
"cache_miss:N" the N-th one-token request reuses nothing (it reports 0 cached, as after an eviction).
"decode_differs" every one-token answer's log-probabilities are 1e-3 lower than the generation's at
the same position (a server whose decode step depends on how its cache was filled).
"die:N" the process kills itself (SIGKILL) on its N-th POST. --ignore-term ignores SIGTERM (only
SIGKILL stops it). Prints "PORT <n>" and "PID <n>" once listening.
"""
import argparse
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from safetensors.numpy import load_file


class Model:
    def __init__(self, path):
        t = load_file(path)
        self.tokens = t["tokens"].tolist()
        pos = t["positions"]
        if not np.array_equal(pos, np.arange(len(self.tokens) - 1)):
            sys.exit(f"{path}: needs a probe at every position (capture with --stride 1)")
        x = t["logits"].astype(np.float64)
        m = x.max(axis=1, keepdims=True)
        self.lp = x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))  # log_softmax, float64
        self.n_vocab = x.shape[1]
        self.order = {}  # (row, k) -> ids, sorted on first use: a full sort of every row at start-up
        #                  took seconds, and every test starts several servers

    def entry(self, i, k):
        """(id, float32 logprob) of the k most probable ids of the distribution predicting token i,
        most probable first, ties to the lower id."""
        row = self.lp[i - 1]
        k = min(k, self.n_vocab)
        if (i, k) not in self.order:
            kth = np.partition(row, self.n_vocab - k)[self.n_vocab - k]  # the k-th largest value
            cand = np.nonzero(row >= kth)[0]  # every id tied with it too, ascending
            self.order[(i, k)] = cand[np.argsort(-row[cand], kind="stable")][:k]
        return [(int(v), float(np.float32(row[v]))) for v in self.order[(i, k)]]

    def rank(self, i, token, top):
        """vLLM's rank: 1 + the number of ids strictly more probable (all of them are in a top list
        reaching token's log-probability, so only the prompt token outside it scans the row)."""
        row = self.lp[i - 1]
        if token in top:
            return 1 + sum(1 for v in top if row[v] > row[token])
        return int(np.sum(row > row[token])) + 1


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def send(self, code, obj=None, raw=None):
        body = raw if raw is not None else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def authorized(self):
        key = self.server.opts.api_key
        if key and self.headers.get("Authorization") != f"Bearer {key}":
            self.send(401, {"object": "error", "message": "Unauthorized", "type": "AuthenticationError", "code": 401})
            return False
        return True

    def do_GET(self):
        o, m = self.server.opts, self.server.model
        if self.path == "/_stats":
            return self.send(200, {"posts": self.server.posts, "fillers": self.server.fillers_started,
                                   "loaded": self.server.loaded, "served": self.server.served,
                                   "generations": self.server.generations, "cached": self.server.cached})
        if not self.authorized():
            return
        if self.path == "/v1/models":
            return self.send(200, {"object": "list", "data": [{
                "id": "smollm2-135m-test", "object": "model", "created": 1736000000, "owned_by": "vllm",
                "root": "HuggingFaceTB/SmolLM2-135M-Instruct", "parent": None, "max_model_len": o.max_model_len,
                "permission": [{"id": "modelperm-0", "object": "model_permission", "allow_sampling": True}]}]})
        if self.path == "/version":
            return self.send(200, {"version": o.version})
        if self.path == "/health":
            return self.send(200, {})
        if self.path == "/server_info":
            return self.send(200, {"vllm_config": f"model='{o.capture}', kv_cache_dtype=auto, max_model_len={o.max_model_len}"})
        if self.path == "/get_model_info":
            return self.send(200, {"model_path": "HuggingFaceTB/SmolLM2-135M-Instruct",
                                   "tokenizer_path": "HuggingFaceTB/SmolLM2-135M-Instruct", "is_generation": True})
        if self.path == "/get_server_info":
            return self.send(200, {"model_path": "HuggingFaceTB/SmolLM2-135M-Instruct", "api_key": o.api_key,
                                   "context_length": o.max_model_len, "tp_size": 1, "dtype": "auto",
                                   "kv_cache_dtype": "auto", "version": o.version, "n_vocab": m.n_vocab})
        self.send(404, {"detail": "Not Found"})

    def do_POST(self):
        o, m = self.server.opts, self.server.model
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        with self.server.lock:
            self.server.posts += 1
            n_post = self.server.posts
        if o.request_log:
            with self.server.lock, open(o.request_log, "a") as f:
                f.write(json.dumps({"path": self.path, "body": req}) + "\n")
        kind, *arg = o.fault.split(":") if o.fault else [""]
        if kind == "die" and n_post >= int(arg[0]):
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "5xx" and n_post <= int(arg[0]):
            auth = self.headers.get("Authorization", "")
            return self.send(503, {"object": "error", "message": f"overloaded (request had '{auth}')", "code": 503})
        if kind == "slow" and n_post <= int(arg[1]):
            time.sleep(float(arg[0]))
        if not self.authorized():
            return
        sglang = self.path == "/generate"
        if self.path not in ("/generate", "/v1/completions"):
            return self.send(404, {"detail": "Not Found"})
        # A filler asks for no log-probabilities; a fork's continuation asks for its tokens' (logprobs).
        if not any(key in req for key in (("return_logprob",) if sglang else ("prompt_logprobs", "logprobs"))):
            return self.filler(req, sglang)
        with self.server.lock:
            seen = self.server.fillers_started
            busy = self.server.in_flight > 0
        ids = req["input_ids"] if sglang else req["prompt"]
        n_new = req["sampling_params"]["max_new_tokens"] if sglang else req["max_tokens"]
        if n_new > 1 or (sglang and req.get("logprob_start_len", 0) > 0) or (not sglang and "prompt_logprobs" not in req):
            return self.generate(req, ids, n_new, sglang)
        k = req["top_logprobs_num"] if sglang else req["prompt_logprobs"]
        if not sglang and k > o.max_logprobs:
            return self.send(400, {"object": "error", "type": "BadRequestError", "code": 400, "message":
                                   f"Requested prompt logprobs of {k}, which is greater than max allowed: {o.max_logprobs}"})
        if ids != m.tokens[:len(ids)]:
            return self.send(400, {"object": "error", "message": "prompt is not a prefix of the served capture"})
        if len(ids) + 1 > o.max_model_len:
            return self.send(400, {"object": "error", "message": f"prompt too long for max_model_len {o.max_model_len}"})
        k = m.n_vocab if k == -1 else k
        n = len(ids) - (1 if kind == "wrong_count" else 0)
        with self.server.lock:
            loaded = busy or self.server.in_flight > 0 or self.server.fillers_started != seen
            self.server.loaded += loaded
        entry = m.entry
        if kind == "batch_variant" and loaded:
            def entry(i, k):
                e = m.entry(i, k)
                # The top two ids trade log-probabilities: the greedy choice flips there.
                return [(e[1][0], e[0][1]), (e[0][0], e[1][1])] + e[2:] if i % 5 == 0 and len(e) > 1 else e
        if sglang:
            top = [None] + [[[lp, v, None] for v, lp in entry(i, k)] for i in range(1, n)]
            own = [[None, ids[0], None]] + [[float(np.float32(m.lp[i - 1, ids[i]])), ids[i], None] for i in range(1, n)]
            body = {"text": "", "meta_info": {
                "id": "0", "finish_reason": {"type": "length", "length": 1}, "prompt_tokens": len(ids),
                "completion_tokens": 1, "cached_tokens": 0, "input_token_logprobs": own,
                "output_token_logprobs": [], "input_top_logprobs": top, "output_top_logprobs": []}}
        else:
            plp = [None]
            for i in range(1, n):
                entries = entry(i, k)
                top = [v for v, _ in entries]
                if ids[i] not in top:  # vLLM adds the prompt token with its rank
                    entries.append((ids[i], float(np.float32(m.lp[i - 1, ids[i]]))))
                # Reversed, so a client cannot rely on the order of the keys.
                plp.append({str(v): {"logprob": lp, "rank": m.rank(i, v, top), "decoded_token": f"<{v}>"}
                            for v, lp in reversed(entries)})
            body = {"id": "cmpl-test", "object": "text_completion", "created": 1736000000,
                    "model": req.get("model"), "choices": [{
                        "index": 0, "text": "", "logprobs": None, "finish_reason": "length",
                        "stop_reason": None, "prompt_logprobs": plp}],
                    "usage": {"prompt_tokens": len(ids), "total_tokens": len(ids) + 1, "completion_tokens": 1}}
        raw = json.dumps(body).encode()
        if kind == "malformed":
            raw = raw[: len(raw) // 2]
        self.send(200, raw=raw)

    def filler(self, req, sglang):
        """A generation-only request: busy for --filler-ms, then max_tokens ids (the prompt's last)."""
        with self.server.lock:
            self.server.in_flight += 1
            self.server.fillers_started += 1
        time.sleep(self.server.opts.filler_ms / 1000)
        ids = req["input_ids"] if sglang else req["prompt"]
        n_gen = req["sampling_params"]["max_new_tokens"] if sglang else req["max_tokens"]
        with self.server.lock:
            self.server.in_flight -= 1
        out = [ids[-1]] * n_gen
        if sglang:
            return self.send(200, {"text": "", "output_ids": out, "meta_info": {"prompt_tokens": len(ids)}})
        self.send(200, {"id": "cmpl-filler", "object": "text_completion", "choices": [
            {"index": 0, "text": "", "finish_reason": "length", "token_ids": out}],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": n_gen}})


    def reuse(self, ids):
        """Prompt tokens reused from the prefix cache (whole blocks shared with an earlier sequence,
        never the last token), and the sequence remembered; 0 without --prefix-caching."""
        o, b = self.server.opts, self.server.opts.prefix_caching
        if b <= 0:
            return 0
        with self.server.lock:
            best = max((len(os.path.commonprefix([seq, ids])) for seq in self.server.sequences), default=0)
        return min(best, len(ids) - 1) // b * b

    def remember(self, seq):
        if self.server.opts.prefix_caching > 0:
            with self.server.lock:
                # The last few sequences: a served replay extends the previous one each time.
                self.server.sequences = self.server.sequences[-7:] + [list(seq)]

    def generate(self, req, ids, n_new, sglang):
        """The greedy future of a (fork) prompt: the capture's tokens after it, with their log-probabilities
        and the top K of each step (K = logprobs / top_logprobs_num)."""
        o, m = self.server.opts, self.server.model
        if ids[:-1] != m.tokens[:len(ids) - 1]:
            return self.send(400, {"object": "error", "message": "prompt (but its last token) is not a prefix of the served capture"})
        temperature = req["sampling_params"]["temperature"] if sglang else req["temperature"]
        if temperature != 0:
            return self.send(400, {"object": "error", "message": "this server decodes greedily only (temperature 0)"})
        n_out = min(n_new, o.generate_max) if o.generate_max > 0 else n_new
        gen = list(range(len(ids), min(len(ids) + n_out, len(m.tokens))))
        out = [(m.tokens[q], float(np.float32(m.lp[q - 1, m.tokens[q]]))) for q in gen]
        k = req.get("top_logprobs_num", 0) if sglang else (req.get("logprobs") or 0)
        tops = [m.entry(q, k) if k > 0 else [] for q in gen]
        finish = "length" if len(out) == n_new else "stop"
        kind, *arg = o.fault.split(":") if o.fault else [""]
        cached = self.reuse(ids)
        if kind == "decode_differs" and n_new == 1 and k > 0:
            out = [(t, float(np.float32(lp - 1e-3))) for t, lp in out]
            tops = [[(v, float(np.float32(lp - 1e-3))) for v, lp in e] for e in tops]
        with self.server.lock:
            one = n_new == 1 and k > 0
            self.server.served += one
            self.server.generations += not one
            if kind == "cache_miss" and one and self.server.served == int(arg[0]):
                cached = 0
            self.server.cached += cached
        self.remember(ids + [t for t, _ in out])
        if sglang:
            body = {"text": "", "meta_info": {"id": "0", "prompt_tokens": len(ids), "completion_tokens": len(out),
                                              "cached_tokens": cached, "finish_reason": {"type": finish},
                                              "output_token_logprobs": [[lp, t, None] for t, lp in out],
                                              "output_top_logprobs": [[[lp, v, None] for v, lp in e] for e in tops]}}
        else:
            if not req.get("return_tokens_as_token_ids") or req.get("logprobs") is None:
                return self.send(400, {"object": "error", "message": "ask for logprobs with return_tokens_as_token_ids"})
            usage = {"prompt_tokens": len(ids), "completion_tokens": len(out), "total_tokens": len(ids) + len(out)}
            if o.prompt_tokens_details:
                usage["prompt_tokens_details"] = {"cached_tokens": cached}
            body = {"id": "cmpl-test", "object": "text_completion", "model": req.get("model"), "choices": [{
                "index": 0, "text": "".join(f"<{t}>" for t, _ in out), "finish_reason": finish, "stop_reason": None,
                "logprobs": {"text_offset": [3 * i for i in range(len(out))],
                             "token_logprobs": [lp for _, lp in out],
                             "tokens": [f"token_id:{t}" for t, _ in out],
                             # vLLM lists the chosen token beside the top K
                             "top_logprobs": [{**{f"token_id:{v}": lp for v, lp in e}, f"token_id:{t}": lp0}
                                              for e, (t, lp0) in zip(tops, out)]}}],
                "usage": usage}
        self.send(200, body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--capture", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--fault", default="")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--max-logprobs", type=int, default=20)
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--filler-ms", type=float, default=100)
    ap.add_argument("--request-log", default="")
    ap.add_argument("--ignore-term", action="store_true")
    ap.add_argument("--prefix-caching", type=int, default=0, metavar="BLOCK")
    ap.add_argument("--prompt-tokens-details", action="store_true")
    ap.add_argument("--generate-max", type=int, default=0)
    ap.add_argument("--version", default="0.0.0-test", help="what /version answers (a history's releases)")
    opts = ap.parse_args()
    if opts.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    model = Model(opts.capture)  # before listening: a health check must not queue behind the load
    server = ThreadingHTTPServer(("127.0.0.1", opts.port), Handler)
    server.daemon_threads = True
    server.opts, server.model, server.posts, server.lock = opts, model, 0, threading.Lock()
    server.in_flight = server.fillers_started = server.loaded = 0
    server.served = server.generations = server.cached = 0
    server.sequences = []
    print(f"PORT {server.server_address[1]}", flush=True)
    print(f"PID {os.getpid()}", flush=True)
    if "FLIPSCOPE_TEST_MARK" in os.environ:  # tells a test which environment it was started with
        print(f"MARK {os.environ['FLIPSCOPE_TEST_MARK']}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
