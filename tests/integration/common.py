"""What the integration tests share: where the flipscope binary, the sources and the models are
(from the environment tests/CMakeLists.txt sets), running flipscope, reading a capture's manifest,
and generated sessions and texts."""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

from safetensors import safe_open

def temp_folder(prefix):
    """A new folder under the system's temporary one, removed when the test process ends (its
    captures are hundreds of MB); FLIPSCOPE_KEEP_TMP=1 keeps it to look at after a failure."""
    path = tempfile.mkdtemp(prefix=prefix)
    if os.environ.get("FLIPSCOPE_KEEP_TMP") != "1":
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


BIN = os.environ["FLIPSCOPE_BIN"]
SRC = os.environ["FLIPSCOPE_SOURCE_DIR"]
MODELS = os.path.join(os.environ["FLIPSCOPE_CACHE_DIR"], "models")
SMOL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
GEMMA = os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf")


def run(*args, check=True, env=None):
    """Runs flipscope with args; with check, a non-zero exit fails the test with its stderr."""
    p = subprocess.run([BIN, *args], capture_output=True, text=True, env=env)
    if check and p.returncode != 0:
        raise AssertionError(f"flipscope {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return p


def manifest(path):
    """The flipscope manifest of a capture, read with safetensors."""
    with safe_open(path, "np") as f:
        return json.loads(f.metadata()["flipscope.manifest"])


def generated_session(folder, seed, target_tokens):
    """examples/gen_session.py's session for (seed, target_tokens) in folder, generated once."""
    path = os.path.join(folder, f"session-{seed}-{target_tokens}.json")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(SRC, "examples", "gen_session.py"), "--seed", str(seed),
                        "--target-tokens", str(target_tokens), "-o", path], check=True)
    return path


def session_text(folder, seed, chars):
    """Plain text (a .txt workload) of about `chars` characters: the messages of a generated session
    (requests, tool output, answers) joined in order. For tests that need real-looking text but
    neither a chat template nor tool calls: a capture of a few hundred tokens takes a second."""
    path = os.path.join(folder, f"text-{seed}-{chars}.txt")
    if not os.path.exists(path):
        with open(generated_session(folder, seed, 4000)) as f:
            messages = json.load(f)["messages"][1:]  # the system prompt is the same in every session
        parts = [m["content"] for m in messages if m.get("content")]
        text = "\n\n".join(parts)[:chars]
        with open(path, "w") as f:
            f.write(text[:text.rfind("\n") + 1] if "\n" in text else text)
    return path


def error_lines(stderr):
    """flipscope's own error lines in stderr. llama.cpp and ggml may print warnings of their own
    there (before the log is routed, or from code that writes to stderr directly): a test of
    the one-line error contract counts only flipscope's lines."""
    return [line for line in stderr.splitlines() if line.startswith("flipscope: error: ")]


def one_error_line(test, stderr):
    """Asserts that flipscope printed exactly one error line and returns it."""
    lines = error_lines(stderr)
    test.assertEqual(len(lines), 1, stderr)
    return lines[0]


class LogprobServer:
    """The test server (tests/servers/logprob_server.py) as a subprocess on a free port, serving the
    full capture `base`; extra args are its flags. A context manager: leaving it kills the server."""

    def __init__(self, base, *args):
        script = os.path.join(SRC, "tests", "servers", "logprob_server.py")
        self.proc = subprocess.Popen([sys.executable, script, "--capture", base, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.proc.kill()
            raise AssertionError(f"the test server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def stats(self):
        """The server's request counters (GET /_stats)."""
        import urllib.request
        with urllib.request.urlopen(self.url + "/_stats") as r:
            return json.load(r)

    def posts(self):
        return self.stats()["posts"]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


def reference_topk(logits, k):
    """An independent top-k of full-capture rows: FP64 log_softmax, ids by descending log-prob
    (stable), and their log-probs rounded to F32 as a server's answer carries them."""
    import numpy as np
    x = logits.astype(np.float64)
    mx = x.max(1, keepdims=True)
    lp = x - (mx + np.log(np.exp(x - mx).sum(1, keepdims=True)))
    ids = np.argsort(-lp, axis=1, kind="stable")[:, :k]
    return ids, np.take_along_axis(lp, ids, 1).astype(np.float32)
