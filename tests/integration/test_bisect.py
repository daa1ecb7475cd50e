"""flipscope bisect over a llama.cpp git repository the test makes from the pinned release's tree:
a commit that changes nothing the libraries compile (README), one that does not build (an #error in
ggml-cpu/vec.cpp), one that builds again, one that changes the logits deterministically (ggml-cpu's
RMS norm scaled by 1 + 2^-10), and a last that changes nothing again. The bisect must skip the
broken commit, name the scaling one with its file and a comparison that is not bit-identical, log
every step, keep every capture, and resume on a rerun without building or capturing anything.
Builds llama.cpp (with ccache, a few times): labelled long."""
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import common

TREE = os.path.join(os.environ["FLIPSCOPE_CACHE_DIR"], "llama", "0.3.36", "src")
DEMO = os.path.join(common.SRC, "examples", "netops-demo.json")
OPS = "ggml/src/ggml-cpu/ops.cpp"
VEC = "ggml/src/ggml-cpu/vec.cpp"


def git(repo, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def commit(repo, subject):
    git(repo, "add", "-A", "-f", ".")
    git(repo, "commit", "-q", "-m", subject)
    return git(repo, "rev-parse", "HEAD")


def edit(path, old, new):
    with open(path) as f:
        text = f.read()
    assert old in text, (path, old)
    with open(path, "w") as f:
        f.write(text.replace(old, new, 1))


def make_repo(repo):
    """The five commits after good; returns {name: sha}."""
    shutil.copytree(TREE, repo, symlinks=True, ignore=shutil.ignore_patterns(".flipscope-*"))
    git(repo, "init", "-q", "-b", "main")
    c = {"good": commit(repo, "the pinned release's tree")}
    with open(os.path.join(repo, "README.md"), "a") as f:
        f.write("\nA line of documentation.\n")
    c["docs"] = commit(repo, "docs: a line in the README")
    with open(os.path.join(repo, VEC), "a") as f:
        f.write('\n#error "this commit does not build"\n')
    c["broken"] = commit(repo, "ggml-cpu: a commit that does not build")
    git(repo, "checkout", c["docs"], "--", VEC)
    c["fixed"] = commit(repo, "ggml-cpu: builds again")
    edit(os.path.join(repo, OPS), "const float scale = 1.0f/sqrtf(mean + eps);",
         "const float scale = (1.0f + 0x1p-10f)/sqrtf(mean + eps);")
    c["scaled"] = commit(repo, "ggml-cpu: RMS norm scaled by 1 + 2^-10")
    with open(os.path.join(repo, "README.md"), "a") as f:
        f.write("\nAnother line.\n")
    c["bad"] = commit(repo, "docs: another line")
    return c


class Bisect(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="flipscope-bisect-")
        cls.repo = os.path.join(cls.dir, "llama.cpp")
        cls.c = make_repo(cls.repo)
        cls.out = os.path.join(cls.dir, "out")
        cls.args = ["bisect", "--llama-src", cls.repo, "--good", cls.c["good"], "--bad", "main",
                    "--criterion", "not-bit-identical", "-m", common.SMOL, "-w", DEMO, "--max-tokens", "300",
                    "--stride", "16", "-t", "2", "-q", "-o", cls.out]
        cls.first = common.run(*cls.args)
        with open(os.path.join(cls.out, "bisect.json")) as f:
            cls.doc = json.load(f)

    @classmethod
    def tearDownClass(cls):
        subprocess.run(["git", "-C", cls.repo, "worktree", "prune"], check=False)
        # The commits' worktrees and builds (2.4 GB) sit in the cache, in commits/KEY/SHA/ with KEY
        # made of the checkout's path (CommitCacheDir), new at every run: nothing would reuse them.
        key = hashlib.sha256(os.path.realpath(cls.repo).encode()).hexdigest()[:12]
        for s in getattr(cls, "doc", {}).get("steps", []):
            folder = os.path.dirname(os.path.dirname(os.path.dirname(s.get("build_log", ""))))
            if os.path.basename(folder) == key and os.path.basename(os.path.dirname(folder)) == "commits":
                shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_names_the_scaling_commit_its_file_and_comparison(self):
        first = self.doc["result"]["first_bad"]
        self.assertEqual(first["commit"], self.c["scaled"])
        self.assertEqual(first["subject"], "ggml-cpu: RMS norm scaled by 1 + 2^-10")
        self.assertEqual(first["files"], [OPS])
        self.assertIn(OPS, first["stat"])
        cmp = first["comparison"]
        self.assertLess(cmp["bit_identical"], cmp["probes"])
        self.assertGreater(cmp["kl_mean"], 0)
        self.assertIn(self.c["scaled"], self.first.stdout)
        self.assertIn("ggml-cpu: RMS norm scaled", self.first.stdout)

    def test_the_broken_commit_is_skipped_with_its_log(self):
        steps = {s["commit"]: s for s in self.doc["steps"]}
        self.assertEqual(steps[self.c["broken"]]["mark"], "skip")
        log = steps[self.c["broken"]]["build_log"]
        with open(log) as f:
            self.assertIn("this commit does not build", f.read())
        self.assertEqual(steps[self.c["fixed"]]["mark"], "good")
        self.assertEqual(steps[self.c["scaled"]]["mark"], "bad")
        # A commit whose libraries are those of good is bit for bit good's.
        fixed = steps[self.c["fixed"]]["comparison"]
        self.assertEqual(fixed["bit_identical"], fixed["probes"])

    def test_every_step_is_logged_and_its_capture_kept(self):
        self.assertEqual(self.doc["header"]["n_tokens"], 300)
        for s in self.doc["steps"]:
            self.assertIn("build_seconds", s)
            if s["mark"] != "skip":
                self.assertGreater(s["capture_seconds"], 0)
                self.assertTrue(os.path.exists(os.path.join(self.out, "captures", s["commit"] + ".safetensors")))
                m = common.manifest(s["capture"])["engine"]["llama_source"]
                self.assertEqual(m["commit"], s["commit"])
        self.assertTrue(os.path.exists(os.path.join(self.out, "captures", self.c["good"] + ".safetensors")))
        self.assertLessEqual(len(self.doc["steps"]), 4)

    def test_a_rerun_resumes_without_building_or_capturing(self):
        again = common.run(*self.args)
        self.assertIn(self.c["scaled"], again.stdout)
        with open(os.path.join(self.out, "bisect.json")) as f:
            doc = json.load(f)
        self.assertEqual(doc["steps"], self.doc["steps"])
        self.assertEqual(doc["result"]["first_bad"], self.doc["result"]["first_bad"])
        self.assertTrue(doc["good_capture"]["reused"])

    def test_bad_input_is_one_line(self):
        cases = {("nope", "main"): "no commit 'nope'", ("main", "main"): "are the same commit",
                 (self.c["bad"], self.c["good"]): "is not an ancestor"}
        for (good, bad), want in cases.items():
            p = common.run("bisect", "--llama-src", self.repo, "--good", good, "--bad", bad, "-m", common.SMOL,
                           "-w", DEMO, "-o", os.path.join(self.dir, "refused"), check=False)
            self.assertEqual(p.returncode, 1)
            self.assertIn(want, common.one_error_line(self, p.stderr))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "refused")))


if __name__ == "__main__":
    unittest.main()
