"""End-to-end checks of the flipscope binary on the real SmolLM2 and Gemma 3 models.

Every figure flipscope prints is checked against an independent reading of the same files:
the GGUF through the `gguf` package, captures through `safetensors.numpy`.
"""
import hashlib
import json
import os
import sys
import unittest

import numpy as np
from safetensors.numpy import load_file

from common import GEMMA, SMOL, SRC, generated_session, manifest, one_error_line, run

sys.path.insert(0, os.path.join(SRC, "tests", "ref"))
import gguf_fast  # noqa: E402  (the gguf package's reader, 3x faster on Gemma's vocabulary)
import common

TMP = common.temp_folder("flipscope-it-")


def short_session():
    """A short generated session (tools, calls, literals) so captures take seconds, not minutes."""
    return generated_session(TMP, 7, 1700)


class Info(unittest.TestCase):
    def check_model(self, path):
        info = json.loads(run("info", path, "--json").stdout)
        r = gguf_fast.reader(path)

        def field(key):
            f = r.fields[key]
            return f.contents()
        arch = field("general.architecture")
        self.assertEqual(info["architecture"], arch)
        self.assertEqual(info["n_layer"], field(f"{arch}.block_count"))
        self.assertEqual(info["n_ctx_train"], field(f"{arch}.context_length"))
        self.assertEqual(info["n_embd"], field(f"{arch}.embedding_length"))
        self.assertEqual(info["n_vocab"], len(r.fields["tokenizer.ggml.tokens"].data))
        self.assertEqual(info["tokenizer"], field("tokenizer.ggml.model"))
        self.assertEqual(info["n_params"], sum(int(np.prod(t.shape)) for t in r.tensors))
        counts = {}
        for t in r.tensors:
            name = t.tensor_type.name.lower()
            counts[name] = counts.get(name, 0) + 1
        self.assertEqual({k.lower(): v for k, v in info["quant_types"].items()}, counts)
        self.assertEqual(info["bos"], field("tokenizer.ggml.bos_token_id"))
        self.assertEqual(info["eos"], field("tokenizer.ggml.eos_token_id"))
        has_tmpl = "tokenizer.chat_template" in r.fields
        self.assertEqual(info["chat_template"], has_tmpl)
        if has_tmpl:
            self.assertEqual(info["chat_template_sha256"],
                             hashlib.sha256(field("tokenizer.chat_template").encode()).hexdigest())
        with open(path, "rb") as f:
            self.assertEqual(info["sha256"], hashlib.file_digest(f, "sha256").hexdigest())
        return info

    def test_smollm2(self):
        info = self.check_model(SMOL)
        self.assertTrue(info["chat_template"])
        self.assertEqual((info["sliding_window"], info["sliding_window_layers"]), (0, 0))

    def test_gemma3(self):
        info = self.check_model(GEMMA)
        self.assertIn("SWA 512", info["layer_pattern"])
        # 15 of 18 layers keep a 512-token window: llama.cpp gives them a smaller KV cache.
        self.assertEqual((info["sliding_window"], info["sliding_window_layers"]), (512, 15))

    def test_bad_files(self):
        cut = os.path.join(TMP, "cut.gguf")
        with open(SMOL, "rb") as f, open(cut, "wb") as g:
            g.write(f.read(5_000_000))
        for path, expect in [("/nonexistent.gguf", "no such file"), (__file__, "not a GGUF file"),
                             (cut, "truncated")]:
            p = run("info", path, check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            line = one_error_line(self, p.stderr)
            self.assertIn(path, line)
            self.assertIn(expect, line)


class Capture(unittest.TestCase):
    def capture(self, out, *knobs, workload=None):
        path = os.path.join(TMP, out)
        run("capture", "-m", SMOL, "-w", workload or short_session(), "-o", path, "-t", "2", "--full",
            "tool_calls", *knobs)
        return path

    def test_repeat_is_bit_for_bit_and_python_agrees(self):
        a = self.capture("a.safetensors", "-fa", "on")
        b = self.capture("b.safetensors", "-fa", "on")
        ta, tb = load_file(a), load_file(b)
        self.assertTrue(np.array_equal(ta["logits"], tb["logits"]))
        self.assertTrue(np.array_equal(ta["digest"], tb["digest"]))
        # Independent checks: shapes, argmax of the stored rows, tokens = the rendered workload.
        m = manifest(a)
        n_probes = m["probe_plan"]["n_probes"]
        self.assertEqual(ta["logits"].shape, (n_probes, 49152))
        self.assertEqual(ta["positions"].shape, (n_probes,))
        self.assertTrue(np.array_equal(ta["argmax"], np.argmax(ta["logits"], axis=1)))
        self.assertEqual(len(ta["tokens"]), m["workload"]["n_tokens"])
        self.assertTrue(np.all(np.diff(ta["positions"]) > 0))
        calls = [s for s in m["workload"]["spans"] if s["kind"] == "tool_call"]
        self.assertGreater(len(calls), 0)
        pos = set(ta["positions"].tolist())
        for s in calls:  # --full tool_calls: every position predicting a call token is probed
            self.assertTrue(all(p in pos for p in range(s["begin"] - 1, s["end"] - 1)), s)
        # The tokens are the rendered transcript's: the text of the tool-call span names a tool.
        names = {t["function"]["name"] for t in m["workload"]["tools"]}
        self.assertTrue(any(n in s["label"] for s in calls for n in names))

    def test_fork_at_decodes_futures_from_the_captures_own_tokens(self):
        plain = self.capture("plain.safetensors", "-fa", "on")
        positions = load_file(plain)["positions"].tolist()
        chosen = [positions[3], positions[10], positions[11]]
        spec = ",".join(f"{p}-{p}" for p in chosen)
        forked = self.capture("forked.safetensors", "-fa", "on", "--fork-at", spec, "--fork-tokens", "12")
        tp, tf = load_file(plain), load_file(forked)
        # Forks do not change the rows.
        self.assertTrue(np.array_equal(tp["digest"], tf["digest"]))
        with open(forked + ".forks.json") as f:
            doc = json.load(f)
        self.assertEqual(doc["format"], "flipscope.forks")
        self.assertEqual((doc["max_tokens"], doc["decoding"]), (12, "free"))
        futures = {f["position"]: f for f in doc["futures"]}
        self.assertEqual(sorted(futures), sorted(chosen))
        argmax = dict(zip(tf["positions"].tolist(), tf["argmax"].tolist()))
        for p, fut in futures.items():
            self.assertEqual(fut["tokens"][0], argmax[p], p)  # from the capture's own greedy token
            self.assertTrue(len(fut["tokens"]) == 12 or fut["stop"] != "budget", fut)
        # A position that stores no row: one line naming it, and no futures file.
        missing = next(p for p in range(1, 10**6) if p not in set(positions))
        path = os.path.join(TMP, "notprobe.safetensors")
        p = run("capture", "-m", SMOL, "-w", short_session(), "-o", path, "-t", "2", "--fork-at",
                f"{missing}-{missing}", check=False)
        self.assertNotEqual(p.returncode, 0)
        line = one_error_line(self, p.stderr)
        self.assertIn(f"--fork-at: {missing} is not a probe position of", line)
        self.assertFalse(os.path.exists(path + ".forks.json"))

    def test_repack_is_a_knob_and_the_kernel_path_is_recorded(self):
        """--repack off keeps Gemma 3's Q4_K/Q6_K weights out of ggml's extra buffer types; the
        manifest says where the weights were, and compare says so when the paths differ."""
        text = os.path.join(TMP, "repack.txt")
        with open(text, "w") as f:
            f.write("The uplink on lab-core01 carries VLAN 251 to the PostgreSQL host on port 5432.\n" * 4)
        caps = {}
        for r in ("on", "off"):
            caps[r] = os.path.join(TMP, f"gemma-repack-{r}.safetensors")
            run("capture", "-m", GEMMA, "--chat-template", "gemma", "-w", text, "-o", caps[r], "-t", "2",
                "--stride", "1", "-q", *(["-nr"] if r == "off" else []))
        on, off = manifest(caps["on"]), manifest(caps["off"])
        self.assertEqual(off["knobs"]["repack"], "off")
        self.assertIn("-nr", off["engine"]["flags"])
        for m in (on, off):
            kp = m["engine"]["kernel_path"]
            self.assertTrue(kp["cpu_features"], kp)  # whatever this CPU runs: no feature is assumed
            self.assertGreater(sum(kp["weight_buffers"].values()), 100)  # MiB: the 270M model's weights
            self.assertRegex(kp["llama_build"], r"^(cpu|cuda) cpu=(native|portable) amx=(ON|OFF)$")
        self.assertEqual(off["engine"]["kernel_path"]["extra_buffer_types"], [])
        cmp = json.loads(run("compare", caps["on"], caps["off"], "--json", "-q", "--no-text").stdout)
        differ = on["engine"]["kernel_path"]["summary"] != off["engine"]["kernel_path"]["summary"]
        self.assertEqual(cmp["kernel_path"]["differ"], differ)
        text_out = run("compare", caps["on"], caps["off"], "-q").stdout
        self.assertEqual("kernel paths differ" in text_out, differ, text_out)

    def test_bad_inputs_leave_no_file(self):
        out = os.path.join(TMP, "bad.safetensors")
        cases = [(["-c", "512"], "do not fit the context"),
                 (["-ctk", "q3_k"], "unknown KV cache type"),
                 (["-ctv", "q8_0", "-fa", "off"], "needs flash attention"),
                 (["--chat-template", "/nonexistent.jinja"], "/nonexistent.jinja")]
        for extra, expect in cases:
            p = run("capture", "-m", SMOL, "-w", short_session(), "-o", out, *extra, check=False)
            self.assertNotEqual(p.returncode, 0, extra)
            self.assertIn(expect, one_error_line(self, p.stderr), extra)
            self.assertFalse(os.path.exists(out), extra)
        for args, expect in [(["-w", "/nonexistent.json"], "/nonexistent.json"),
                             (["-m", "/nonexistent.gguf"], "/nonexistent.gguf")]:
            base = {"-m": SMOL, "-w": short_session()}
            base[args[0]] = args[1]
            p = run("capture", "-m", base["-m"], "-w", base["-w"], "-o", out, check=False)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn(expect, p.stderr)
        # A folder that does not exist: said of the capture (not of its temporary file) before any work.
        folder = os.path.join(TMP, "no-such-folder")
        missing = os.path.join(folder, "x.safetensors")
        p = run("capture", "-m", SMOL, "-w", short_session(), "-o", missing, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertEqual(one_error_line(self, p.stderr),
                         f"flipscope: error: {missing}: cannot create: its folder {folder} does not exist")
        self.assertFalse(os.path.exists(folder))
        # A template that fails to render: Jinja that raises.
        bad = os.path.join(TMP, "bad.jinja")
        with open(bad, "w") as f:
            f.write("{{ raise_exception('this template refuses to render') }}")
        p = run("capture", "-m", SMOL, "-w", short_session(), "-o", out, "--chat-template", bad, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("refuses to render", p.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertEqual([f for f in os.listdir(TMP) if ".tmp" in f], [])


class EffectiveSettings(unittest.TestCase):
    """The manifest, the terminal line and the flags say what ran, not what was asked."""

    def test_fa_auto_with_a_quantized_v_cache_is_recorded_as_on(self):
        text = os.path.join(TMP, "fa-auto.txt")
        with open(text, "w") as f:
            f.write("Restart nginx on web-03 and check port 8443 before the db-east-02 failover.\n" * 6)
        caps = {}
        for name, fa in (("auto", []), ("on", ["-fa", "on"])):
            caps[name] = os.path.join(TMP, f"gemma-q8-fa-{name}.safetensors")
            p = run("capture", "-m", GEMMA, "--chat-template", "gemma", "-w", text, "-o", caps[name], "-t", "2",
                    "--stride", "4", "-ctk", "q8_0", "-ctv", "q8_0", "-q", *fa)
        m = manifest(caps["auto"])
        self.assertEqual(m["knobs"]["flash_attn"], "on")
        self.assertEqual(m["request"]["knobs"]["flash_attn"], "auto")
        fa = m["engine"]["resolved"]["flash_attn"]
        self.assertEqual((fa["requested"], fa["effective"]), ("auto", "on"))
        self.assertIn("quantized V cache", fa["reason"])
        self.assertIn("-fa on", m["engine"]["flags"])
        a, b = load_file(caps["auto"]), load_file(caps["on"])
        self.assertTrue(np.array_equal(a["digest"], b["digest"]))  # the kernel recorded is the one that ran
        self.assertTrue(np.array_equal(a["logits"], b["logits"]))

    def test_exact_engine_refuses_knobs_it_does_not_use(self):
        text = os.path.join(TMP, "exact-knobs.txt")
        with open(text, "w") as f:
            f.write("ping 10.20.3.17 then ssh admin@lab-core01 -p 2222\n" * 3)
        out = os.path.join(TMP, "exact-knobs.safetensors")
        for extra in (["-ctk", "q4_0", "-ctv", "q4_0", "-ub", "32"], ["-ctk", "q4_0", "-ctv", "q4_0", "-fa", "off"]):
            p = run("capture", "--engine", "exact", "-m", SMOL, "-w", text, "-o", out, *extra, check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            line = one_error_line(self, p.stderr)
            self.assertIn("--engine exact does not use these knobs", line)
            for flag in extra[::2]:
                self.assertIn(flag + " ", line)
            self.assertNotIn("needs flash attention", line)
            self.assertFalse(os.path.exists(out))
        run("capture", "--engine", "exact", "-m", SMOL, "-w", text, "-o", out, "-t", "2", "--stride", "8", "-q")
        m = manifest(out)
        self.assertEqual(m["request"]["knobs"], {"threads": 2})
        self.assertEqual(m["knobs"], {"threads": 2})
        llama = os.path.join(TMP, "exact-knobs-llama.safetensors")
        run("capture", "-m", SMOL, "-w", text, "-o", llama, "-t", "2", "--stride", "8", "-q")
        for stage in ("branch", "layers"):
            p = run(stage, llama, out, "-o", os.path.join(TMP, f"exact-{stage}.json"), check=False)
            self.assertEqual(p.returncode, 1, p.stderr)
            line = one_error_line(self, p.stderr)
            self.assertIn("an exact (FP64) capture cannot be re-run by " + stage, line)
            self.assertIn("--engine llama", line)


class ArgumentErrors(unittest.TestCase):
    """Every argument error: one line naming the flag and what it accepts, exit 1."""

    def test_bad_command_lines(self):
        w, o = os.path.join(TMP, "none.json"), os.path.join(TMP, "none.safetensors")
        cases = [
            (["compare", "a.safetensors", "b.safetensors", "--window", "0"],
             "--window must be a whole number >= 1, not '0'"),
            (["compare", "a.safetensors", "b.safetensors", "--window", "abc"],
             "--window must be a whole number >= 1, not 'abc'"),
            (["compare", "a.safetensors", "b.safetensors", "--confident", "2"],
             "--confident must be a number from 0 to 1, not '2'"),
            (["compare", "a.safetensors", "b.safetensors", "--max-kl", "-1"], "--max-kl must be a number >= 0"),
            (["compare", "a.safetensors"], "<captures> needs at least 2 values"),
            (["capture", "-m", SMOL, "-w", w, "-o", o, "-fa"], "-fa needs a value (Flash attention: on, off or auto)"),
            (["capture", "-m", SMOL, "-w", w, "-o", o, "-fa", "sometimes"], "-fa: "),
            (["capture", "-m", SMOL, "-w", w, "-o", o, "--stride", "abc"], "--stride cannot read 'abc' (a whole number"),
            (["capture", "-m", SMOL, "-w", w, "-o", o, "-t", "x"], "-t: 'x' is not an integer"),
            (["capture", "-w", w, "-o", o], "-m is required (GGUF model file"),
            (["branch", "a.safetensors", "-o", o], "<cand> is required"),
            (["capture", "-m", SMOL, "-w", w, "-o", o, "--bogus"], "--bogus"),
            (["frobnicate"], "frobnicate"),
        ]
        for args, expect in cases:
            p = run(*args, check=False)
            self.assertEqual(p.returncode, 1, (args, p.stderr))
            self.assertIn(expect, one_error_line(self, p.stderr), args)
        self.assertEqual(run("compare", "--help").returncode, 0)

    def test_help_lists_the_llama_spellings_of_the_knob_flags(self):
        """-fa, -ctk... are what users type (rewritten to the long names before parsing): --help shows them."""
        spellings = [("-fa", "--flash-attn"), ("-ctk", "--cache-type-k"), ("-ctv", "--cache-type-v"),
                     ("-ub", "--ubatch-size"), ("-ngl", "--n-gpu-layers"), ("-sm", "--split-mode"),
                     ("-ts", "--tensor-split"), ("-dev", "--device")]
        for command in ("capture", "history", "bisect"):
            text = run(command, "--help").stdout
            for short, long in spellings:
                self.assertIn(f"{short},{long} ", text, command)
            self.assertIn("-b,--batch-size ", text, command)  # a knob with a CLI11 short flag keeps it


class RunErrors(unittest.TestCase):
    def test_a_missing_model_names_the_line_and_creates_nothing(self):
        folder = os.path.join(TMP, "run-missing-model")
        os.makedirs(folder, exist_ok=True)
        exp = os.path.join(folder, "exp.toml")
        with open(exp, "w") as f:
            f.write(f'name = "m"\nmodel = "nowhere.gguf"\nworkload = "{short_session()}"\n')
        out = os.path.join(folder, "out")
        p = run("run", exp, "-o", out, check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(one_error_line(self, p.stderr),
                         f"flipscope: error: {exp}:2: model '{folder}/nowhere.gguf' not found")
        self.assertFalse(os.path.exists(out))
        # The same in a variant, at the variant's line; the results folder is left as it was.
        os.makedirs(out)
        with open(exp, "w") as f:
            f.write(f'model = "{SMOL}"\nworkload = "{short_session()}"\n\n[[variant]]\nname = "q8"\n'
                    f'model = "/no/such/q8.gguf"\n')
        p = run("run", exp, "-o", out, check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(one_error_line(self, p.stderr),
                         f"flipscope: error: {exp}:6: model '/no/such/q8.gguf' not found")
        self.assertEqual(os.listdir(out), [])


class Report(unittest.TestCase):
    def test_report_renders_a_results_file_again(self):
        out = os.path.join(TMP, "report-again")
        sample = os.path.join(SRC, "tests", "data", "results-sample.json")
        p = run("report", sample, "-o", out)
        self.assertIn("report.html", p.stdout)
        doc = json.load(open(sample))
        html = open(os.path.join(out, "report.html"), encoding="utf-8").read()
        for c in doc["configs"]:
            self.assertIn(c["name"], html)
        self.assertEqual(html.count("<svg"), 2)
        rows = open(os.path.join(out, "results.csv")).read().strip().splitlines()
        self.assertEqual(len(rows), 1 + len(doc["configs"]))

    def test_report_refuses_what_is_not_a_results_file(self):
        p = run("report", os.path.join(SRC, "examples", "demo.toml"), "-o", os.path.join(TMP, "r2"), check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("demo.toml: not a results.json", one_error_line(self, p.stderr))
        bad = os.path.join(TMP, "configs-not-a-list.json")
        with open(bad, "w") as f:
            json.dump({"configs": 3}, f)
        p = run("report", bad, "-o", os.path.join(TMP, "r3"), check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("configs-not-a-list.json: not a results.json", p.stderr)


if __name__ == "__main__":
    unittest.main()
