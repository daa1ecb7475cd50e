"""`flipscope run` with server configurations: the real test server process
(tests/servers/logprob_server.py) launched by flipscope itself (`launch`) and reached by URL,
forks followed over HTTP, a server that dies or stalls mid-run, and the re-run that resumes.

The servers serve two full SmolLM2 captures of one generated session made here by llama.cpp: f16
and q4_0 KV caches. Their flips, and the futures the test server's generation rule gives (it
resumes the transcript after the prompt), are computed independently from those files with numpy.
"""
import json
import os
import signal
import subprocess
import sys
import unittest

import numpy as np
from safetensors.numpy import load_file

from common import SMOL, SRC, generated_session, manifest, one_error_line, run
import common

SERVER = os.path.join(SRC, "tests", "servers", "logprob_server.py")
TMP = common.temp_folder("flipscope-http-run-")
MAX_TOKENS = 6


def serve(capture, *extra):
    """The launch command of a test server over capture, on flipscope's {port}."""
    return " ".join([sys.executable, SERVER, "--capture", capture, "--port", "{port}", *extra])


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def read(path):
    with open(path) as f:
        return f.read()


def pids_in(log):
    """Every PID a test server printed into a server log."""
    with open(log) as f:
        return [int(line.split()[1]) for line in f if line.startswith("PID ")]


class HttpRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # A short plain-text workload (about 400 tokens): the served captures hold every
        # position's logits, which costs the vocabulary projection at each.
        cls.workload = os.path.join(TMP, "session.txt")
        with open(cls.workload, "w") as f:
            for i in range(8):
                f.write(f"Device r{i} port {5400 + 7 * i} is up on vlan {100 + 3 * i}, mtu 1500, "
                        f"{i * i % 97} input errors; next hop 10.0.{i}.1.\n")
        cls.f16 = os.path.join(TMP, "served-f16.safetensors")
        cls.q4 = os.path.join(TMP, "served-q4.safetensors")
        common = ["-m", SMOL, "-w", cls.workload, "-t", "2", "--stride", "1", "-q", "-fa", "on"]
        run("capture", *common, "-o", cls.f16)
        run("capture", *common, "-o", cls.q4, "-ctk", "q4_0", "-ctv", "q4_0")

    def experiment(self, name, body):
        folder = os.path.join(TMP, name)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "exp.toml")
        with open(path, "w") as f:
            f.write(f'model = "{SMOL}"\nworkload = "{self.workload}"\n[probe]\nstride = 2\n' + body)
        return path, os.path.join(folder, "out")

    def test_launched_and_url_servers_capture_and_follow_forks_over_http(self):
        requests = os.path.join(TMP, "requests.jsonl")
        with subprocess.Popen([sys.executable, SERVER, "--capture", self.f16], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) as by_url:
            url = "http://127.0.0.1:" + by_url.stdout.readline().split()[1]
            path, out = self.experiment("forks", f'''
[baseline]
launch = "{serve(self.f16)}"
api = "sglang"
logprobs = 5
[[variant]]
name = "q4kv"
launch = "{serve(self.q4, "--request-log", requests)}"
api = "vllm"
env = {{ FLIPSCOPE_TEST_MARK = "q4" }}
[[variant]]
name = "by-url"
url = "{url}"
[[variant]]
name = "no-start"
launch = "echo 'error: unknown argument --kv-cache-dtyp' >&2; exit 2"
port = 9
[branch]
max_tokens = {MAX_TOKENS}
max_call_tokens = 0
max_branches = 5
''')
            try:
                proc = run("run", path, "-o", out, "-q")
            finally:  # the with block waits for the server: it must be gone even when the run failed
                by_url.kill()
        self.assertIn("following 5 forks of q4kv over HTTP", proc.stderr)
        res = json.loads(read(os.path.join(out, "results.json")))
        cfg = {c["name"]: c for c in res["configs"]}
        self.assertEqual([cfg[n]["status"] for n in ("baseline", "q4kv", "by-url")], ["ok"] * 3)
        # A server that does not start is recorded with its reason and log line; the run goes on.
        self.assertEqual(cfg["no-start"]["status"], "failed")
        self.assertIn("exited with status 2", cfg["no-start"]["reason"])
        self.assertIn("error: unknown argument --kv-cache-dtyp", cfg["no-start"]["reason"])

        # The flips are the full captures' argmax differences at the probed positions.
        f16, q4 = load_file(self.f16), load_file(self.q4)
        tokens = f16["tokens"]
        probes = np.arange(0, len(tokens) - 1, 2)
        flips = probes[f16["argmax"][probes] != q4["argmax"][probes]]
        self.assertGreater(len(flips), 0, "the q4_0 KV cache should flip something")
        comparisons = {(c["config"], c["repeat"]): c["compare"] for c in res["comparisons"]}
        self.assertEqual([f["position"] for f in comparisons[("q4kv", 0)]["flips"]], flips.tolist())
        self.assertEqual(comparisons[("by-url", 0)]["overall"]["flips"], 0)

        # The manifest records the launch (as asked and as run), the server's version and settings.
        m = manifest(cfg["q4kv"]["captures"][0])
        launch = m["engine"]["launch"]
        self.assertEqual(launch["asked"]["command"], serve(self.q4, "--request-log", requests))
        self.assertEqual(launch["asked"]["env"], {"FLIPSCOPE_TEST_MARK": "q4"})
        self.assertNotIn("{port}", launch["run"]["command"])
        self.assertEqual(m["engine"]["server"]["version"], "0.0.0-test")
        self.assertIn("kv_cache_dtype=auto", m["engine"]["server"]["vllm_config"])
        log = os.path.join(out, "captures", "q4kv.server.log")
        self.assertEqual(launch["run"]["log"], log)
        self.assertEqual(pids_in(log), [launch["run"]["pid"]])  # a plain command is exec'd: the server is the pid
        self.assertIn(f"PORT {launch['run']['url'].rsplit(':', 1)[1]}", read(log))
        self.assertEqual(manifest(cfg["by-url"]["captures"][0])["engine"]["url"], url)
        # Every launched server is stopped when its captures are done.
        for name in ("baseline", "q4kv"):
            for pid in pids_in(os.path.join(out, "captures", f"{name}.server.log")):
                self.assertFalse(alive(pid), f"{name}'s server {pid} still runs")

        # Forks over HTTP (the baseline's through SGLang's /generate, q4kv's through vLLM's
        # /v1/completions): each side's future is its own first token, then what the server generated
        # for the prompt tokens[:p+1] + [first] (the test server resumes the transcript after it).
        (b,) = [x for x in res["branches"] if x["config"] == "q4kv"]
        records = b["records"]
        self.assertEqual([r["position"] for r in records], flips[:5].tolist())
        for r in records:
            p = r["position"]
            rest = tokens[p + 2:p + 1 + MAX_TOKENS].tolist()
            self.assertEqual(r["base_future"]["tokens"], [int(f16["argmax"][p])] + rest)
            self.assertEqual(r["cand_future"]["tokens"], [int(q4["argmax"][p])] + rest)
        self.assertEqual(b["branch_config"]["cand"]["engine"], "openai")
        self.assertEqual(manifest(cfg["baseline"]["captures"][0])["engine"]["api"], "sglang")
        self.assertEqual(manifest(cfg["by-url"]["captures"][0])["engine"]["api"], "sglang")  # inherited
        self.assertIsNotNone(b["branch_config"]["cand"]["decoded_during_capture"])
        with open(requests) as f:
            posts = [json.loads(line) for line in f]
        forks = [x["body"] for x in posts if "prompt_logprobs" not in x["body"]]
        self.assertEqual(len(forks), len(records))
        for body, r in zip(forks, records):
            p = r["position"]
            self.assertEqual(body["prompt"], tokens[:p + 1].tolist() + [int(q4["argmax"][p])])
            self.assertEqual((body["temperature"], body["max_tokens"]), (0, MAX_TOKENS - 1))

    def test_a_history_over_server_configurations(self):
        # "vLLM 0.25 to 0.26" as one history: three launched servers in order (the f16 rows, the
        # q4_0 rows, the q4_0 rows again under another version), each step compared on the probes,
        # and the forks the run followed at the step that changed most.
        path, out = self.experiment("history-servers", f'''
[baseline]
launch = "{serve(self.f16, "--version", "0.25.0")}"
[[variant]]
name = "next"
launch = "{serve(self.q4, "--version", "0.26.0")}"
[[variant]]
name = "patch"
launch = "{serve(self.q4, "--version", "0.26.1")}"
[branch]
configs = ["next"]
max_tokens = {MAX_TOKENS}
max_call_tokens = 0
max_branches = 3
[history]
configs = ["baseline", "next", "patch"]
''')
        proc = run("run", path, "-o", out, "-q")
        self.assertIn("history: " + out + "/history.json, history.md and history.html", proc.stdout)
        doc = json.loads(read(os.path.join(out, "history.json")))
        self.assertEqual(doc["kind"], "configurations")
        self.assertEqual([v["release"] for v in doc["versions"]], ["baseline", "next", "patch"])
        self.assertEqual([v["server"]["version"] for v in doc["versions"]], ["0.25.0", "0.26.0", "0.26.1"])
        self.assertEqual({v["engine"] for v in doc["versions"]}, {"openai"})
        # The steps, recomputed from the served files on the experiment's probes (stride 2).
        f16, q4 = load_file(self.f16), load_file(self.q4)
        probes = np.arange(0, len(f16["argmax"]), 2)
        flips = int(np.sum(f16["argmax"][probes] != q4["argmax"][probes]))
        self.assertGreater(flips, 3)
        steps = doc["steps"]
        self.assertEqual([(s["base"], s["cand"]) for s in steps], [("baseline", "next"), ("next", "patch")])
        self.assertEqual([s["flips"] for s in steps], [flips, 0])
        self.assertEqual([s["probes"] for s in steps], [len(probes)] * 2)
        self.assertEqual(steps[1]["bit_identical"], len(probes))
        (first,) = doc["from_first"]
        self.assertEqual((first["cand"], first["flips"]), ("patch", flips))
        self.assertEqual(doc["changed_most"], 0)
        # The same figures as the experiment's own comparison of next against the baseline, and
        # the forks the run followed there, attached to the step.
        res = json.loads(read(os.path.join(out, "results.json")))
        (cmp,) = [c for c in res["comparisons"] if c["config"] == "next"]
        self.assertEqual(cmp["compare"]["overall"]["flips"], flips)
        (b,) = [x for x in res["branches"] if x["config"] == "next"]
        self.assertEqual(doc["forks"]["records"], b["records"])
        self.assertEqual(len(doc["forks"]["records"]), 3)
        md = read(os.path.join(out, "history.md"))
        self.assertIn("## History across configurations", md)
        self.assertIn("| next | openai |", md)
        self.assertIn("Forks followed at this step: 3 of", md)
        html = read(os.path.join(out, "history.html"))
        self.assertIn("History across configurations", html)
        self.assertIn("0.26.1", html)
        self.assertIn("Forks followed by the run between baseline and next", html)

    def test_served_twins_of_server_configurations(self):
        # replay = "both" over a chat: a launched server's twin is captured over HTTP (one-token
        # requests over its prefix cache) and measured against the llama baseline's served twin on
        # the probes it proved; a server without a prefix cache is refused there, and the run goes on.
        chat = generated_session(TMP, 11, 1800)  # the shortest of seed 11 with an assistant turn
        q4 = os.path.join(TMP, "chat-q4.safetensors")
        run("capture", "-m", SMOL, "-w", chat, "-t", "2", "--stride", "1", "-q", "-fa", "on", "-ctk", "q4_0",
            "-ctv", "q4_0", "-o", q4)
        folder = os.path.join(TMP, "served-twins")
        os.makedirs(folder, exist_ok=True)
        path, out = os.path.join(folder, "exp.toml"), os.path.join(folder, "out")
        with open(path, "w") as f:
            f.write(f'''model = "{SMOL}"
workload = "{chat}"
replay = "both"
[probe]
stride = 2
[baseline]
threads = 2
flash_attn = "on"
[[variant]]
name = "q4kv"
launch = "{serve(q4, "--prefix-caching", "1", "--prompt-tokens-details")}"
api = "vllm"
logprobs = 5
[[variant]]
name = "no-cache"
launch = "{serve(q4, "--prompt-tokens-details")}"
api = "vllm"
logprobs = 5
[branch]
max_tokens = {MAX_TOKENS}
max_call_tokens = 0
max_branches = 3
''')
        run("run", path, "-o", out, "-q")
        res = json.loads(read(os.path.join(out, "results.json")))
        served = res["served"]
        self.assertEqual(served["skipped"], [])
        cfg = {c["name"]: c for c in served["configs"]}
        self.assertEqual(cfg["q4kv@served"]["status"], "ok")
        self.assertEqual(cfg["no-cache@served"]["status"], "refused")
        self.assertIn("--enable-prefix-caching", cfg["no-cache@served"]["reason"])
        twin = cfg["q4kv@served"]["captures"][0]
        m = manifest(twin)
        self.assertEqual(m["knobs"]["replay"], "served")
        self.assertGreater(m["served"]["proof"]["compared"], 0)
        # The flips: the served baseline's argmax against the q4_0 rows the server proved, paired
        # by position, recomputed from the files.
        t, b = load_file(twin), load_file(cfg["baseline@served"]["captures"][0])
        kept, base_pos = t["positions"], b["positions"]
        paired = np.intersect1d(kept, base_pos)
        self.assertGreater(len(paired), 20)
        twin_top = dict(zip(kept.tolist(), t["topk_ids"][:, 0].tolist()))
        base_top = dict(zip(base_pos.tolist(), b["argmax"].tolist()))
        flips = [p for p in paired.tolist() if twin_top[p] != base_top[p]]
        cmp = {c["config"]: c["compare"] for c in served["comparisons"]}["q4kv@served"]
        self.assertEqual(cmp["overall"]["probes"], len(paired))
        self.assertEqual([f["position"] for f in cmp["flips"]], flips)
        self.assertGreater(len(flips), 0, "the q4_0 rows should flip something against the served baseline")
        # The twin's forks over HTTP: its own first token, then what the test server generates
        # (it resumes the transcript after the prompt).
        (b,) = [x for x in served["branches"] if x["config"] == "q4kv@served"]
        self.assertEqual([r["position"] for r in b["records"]], flips[:3])
        tokens = t["tokens"]
        for r in b["records"]:
            p = r["position"]
            self.assertEqual(r["cand_future"]["tokens"], [twin_top[p]] + tokens[p + 2:p + 1 + MAX_TOKENS].tolist())
        # Its prefill-vs-served distance: the server's prefill capture against its twin.
        self.assertIsNotNone(next((d for d in served["distance"] if d["config"] == "q4kv"), None))

    def test_the_recipe_prints_the_recommended_servers_launch_command_as_run_with_its_env(self):
        marks = {"baseline": "f16 base", "q4kv": "q4"}
        path, out = self.experiment("recipe", f'''
[baseline]
launch = "{serve(self.f16)}"
env = {{ FLIPSCOPE_TEST_MARK = "{marks['baseline']}" }}
[[variant]]
name = "q4kv"
launch = "{serve(self.q4)}"
env = {{ FLIPSCOPE_TEST_MARK = "{marks['q4kv']}" }}
''')
        proc = run("run", path, "-o", out, "-q")
        res = json.loads(read(os.path.join(out, "results.json")))
        recipe = res["recipe"]
        best = recipe["recommended"]
        cfg = {c["name"]: c for c in res["configs"]}
        run_record = manifest(cfg[best]["captures"][0])["engine"]["launch"]["run"]
        # The command as it was run (the port flipscope chose), after the variables it set.
        as_run = run_record["command"]
        self.assertNotIn("{port}", as_run)
        self.assertEqual(recipe["server_command"], f"FLIPSCOPE_TEST_MARK='{marks[best]}' {as_run}"
                         if " " in marks[best] else f"FLIPSCOPE_TEST_MARK={marks[best]} {as_run}")
        self.assertEqual(recipe["cli_command"], "")
        launch = recipe["server_launch"]
        self.assertEqual(launch["env"], {"FLIPSCOPE_TEST_MARK": marks[best]})
        self.assertEqual(launch["as_run"], as_run)
        self.assertIn("as it was run", launch["note"])
        # The report and the terminal say what the command is.
        md = read(os.path.join(out, "report.md"))
        self.assertIn("launch command (as run):\n\n", md)
        self.assertIn(recipe["server_command"], md)
        self.assertIn("The recommended configuration is a server: this is the launch command flipscope ran", md)
        self.assertIn("This command served the recommended configuration's own captures in this run.", md)
        self.assertIn("  launch: " + recipe["server_command"] + "\n", proc.stdout)
        self.assertIn("The recommended configuration is a server", proc.stdout)
        # Pasted into a shell, the printed line starts the same server with the same variable.
        with subprocess.Popen(["/bin/sh", "-c", recipe["server_command"]], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, start_new_session=True) as again:
            try:
                lines = [again.stdout.readline().split(" ", 1) for _ in range(3)]
            finally:
                os.killpg(again.pid, signal.SIGKILL)
        self.assertEqual(lines[0][1].strip(), run_record["url"].rsplit(":", 1)[1])
        self.assertEqual(lines[2], ["MARK", marks[best] + "\n"])

    def test_a_server_that_dies_or_stalls_is_one_line_and_the_rerun_resumes(self):
        body = f'''
[baseline]
launch = "{serve(self.f16)}"
logprobs = 5
[[variant]]
name = "q4kv"
launch = "{serve(self.q4)}"
[[variant]]
name = "flaky"
launch = "{{flaky}}"
timeout = 1
retries = 1
stop_timeout = 1
'''
        dies = serve(self.f16, "--fault", "die:1")
        path, out = self.experiment("dies", body.replace("{flaky}", dies))
        p = run("run", path, "-o", out, "-q", check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        line = one_error_line(self, p.stderr)
        log = os.path.join(out, "captures", "flaky.server.log")
        self.assertIn(f"{path}: configuration 'flaky': ", line)
        self.assertIn("was killed by signal 9", line)
        self.assertIn(log, line)
        caps = os.path.join(out, "captures")
        self.assertTrue(os.path.exists(os.path.join(caps, "q4kv-r0.safetensors")))
        self.assertFalse(os.path.exists(os.path.join(caps, "flaky-r0.safetensors")))

        # A stall: the server never answers and ignores SIGTERM; the request times out, the run
        # stops naming the configuration, and the server is killed.
        stalls = serve(self.f16, "--fault", "slow:60:99", "--ignore-term")
        path, out = self.experiment("dies", body.replace("{flaky}", stalls))
        p = run("run", path, "-o", out, "-q", check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        line = one_error_line(self, p.stderr)
        self.assertIn("configuration 'flaky': ", line)
        self.assertIn("no answer within 1 s", line)
        for pid in pids_in(log):
            self.assertFalse(alive(pid), f"the stalled server {pid} still runs")

        # Fixed, the re-run reuses the baseline's and q4kv's captures and makes only flaky's.
        path, out = self.experiment("dies", body.replace("{flaky}", serve(self.f16)))
        run("run", path, "-o", out, "-q")
        res = json.loads(read(os.path.join(out, "results.json")))
        reused = {c["name"]: c["reused"] for c in res["configs"]}
        self.assertEqual(reused, {"baseline": [True], "q4kv": [True], "flaky": [False]})
        self.assertEqual(len(pids_in(log)), 3)  # one server per run of flaky


if __name__ == "__main__":
    unittest.main()
