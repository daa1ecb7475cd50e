"""The pip route (docs/python.md): the sdist built by `python -m build --sdist`, installed into a
fresh venv (the build backend and numpy from PyPI, llama.cpp from the cache), then the installed
console command's --version and a capture through it, opened with open_capture and checked
against the installed CLI's inspect --row; the writers' test through the installed package."""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from common import SMOL, SRC, session_text

TMP = tempfile.mkdtemp(prefix="flipscope-pip-")


def sh(*args, env=None, cwd=None):
    p = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


class PipPackage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        venv = os.path.join(TMP, "venv")
        sh(sys.executable, "-m", "venv", venv)
        cls.py = os.path.join(venv, "bin", "python")
        cls.bin = os.path.join(venv, "bin", "flipscope")
        sh(cls.py, "-m", "pip", "install", "-q", "build")
        dist = os.path.join(TMP, "dist")
        sh(cls.py, "-m", "build", "--sdist", "-o", dist, SRC)
        cls.sdist = glob.glob(os.path.join(dist, "flipscope-*.tar.gz"))[0]
        # The environment of a user's shell: no test variables pointing at the build tree.
        cls.env = {k: v for k, v in os.environ.items() if not k.startswith("FLIPSCOPE_BIN")}
        cls.env.pop("PYTHONPATH", None)
        sh(cls.py, "-m", "pip", "install", "-q", cls.sdist + "[writers]", "safetensors", env=cls.env)

    def test_version_and_a_capture_through_the_installed_command(self):
        out = sh(self.bin, "--version", env=self.env).stdout
        version = sh(self.py, "-c", "import flipscope; print(flipscope.__version__)", env=self.env, cwd=TMP).stdout
        self.assertTrue(out.startswith(f"flipscope {version.strip()}"), out)
        cap = os.path.join(TMP, "pip.safetensors")
        sh(self.bin, "capture", "-m", SMOL, "-w", session_text(TMP, 9, 800), "-o", cap, "-t", "2", "--stride", "8",
           "-q", env=self.env)
        probe = ("import flipscope, json, sys; c = flipscope.open_capture(sys.argv[1]); "
                 "ids, _ = c.topk(2, 5); p = int(c.positions[2]); print(json.dumps({'n': len(c), 'pos': p, "
                 "'n_tokens': len(c.tokens), 'next': int(c.tokens[p + 1]), 'positions': c.positions.tolist(), "
                 "'top': ids.tolist(), 'vals': [float(c.row(2)[i]) for i in ids], "
                 "'native': flipscope._native.binary()[0]}))")
        got = json.loads(sh(self.py, "-c", probe, cap, env=self.env, cwd=TMP).stdout)
        whole = json.loads(sh(self.bin, "inspect", cap, "--json", env=self.env).stdout)
        self.assertEqual((got["n"], got["n_tokens"]), (whole["n_probes"], whole["n_tokens"]))
        self.assertEqual(got["positions"], sorted(set(got["positions"])))  # probes in order, none twice
        cli = json.loads(sh(self.bin, "inspect", cap, "--row", "2", "--json", env=self.env).stdout)
        self.assertEqual((got["pos"], got["next"]), (cli["position"], cli["next_token"]))
        self.assertEqual(got["top"], [t[0] for t in cli["top"]])
        self.assertEqual(got["vals"], [t[1] for t in cli["top"]])
        self.assertIn(os.path.join("flipscope", "_native"), got["native"])  # the package's own binary

    def test_writers_through_the_installed_package(self):
        env = dict(self.env, FLIPSCOPE_BIN=os.environ["FLIPSCOPE_BIN"], FLIPSCOPE_PY_INSTALLED="1")
        sh(self.py, os.path.join(SRC, "tests", "integration", "test_python_writers.py"), env=env, cwd=TMP)


if __name__ == "__main__":
    try:
        unittest.main()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
