"""flipscope from Python (docs/python.md): open captures, read an experiment's results, and run
the CLI's compare. The metrics are computed by the CLI only; nothing here reimplements them.

    import flipscope
    cap = flipscope.open_capture("base.safetensors")      # manifest, tokens, positions, spans, rows (mmap)
    res = flipscope.load_results("out/demo")               # typed results.json
    fig = flipscope.compare("base.safetensors", "q4.safetensors")   # compare --json as a dict
"""
import json
import subprocess

from . import _native
from ._version import __version__
from .reader import Capture, CaptureError, open_capture
from .results import Results, load_results

__all__ = ["__version__", "Capture", "CaptureError", "Results", "compare", "load_results", "open_capture"]


def compare(base, cand, window=None, extra_args=()):
    """`flipscope compare BASE CAND --json` (its figures: overall, windows, flips, ...) as a dict;
    RuntimeError with the CLI's one-line error when it fails."""
    path, env = _native.binary()
    args = [path, "compare", str(base), str(cand), "--json", "-q"]
    if window is not None:
        args += ["--window", str(int(window))]
    p = subprocess.run(args + list(extra_args), capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError((p.stderr.strip().splitlines() or [f"flipscope compare exited {p.returncode}"])[-1])
    doc = json.loads(p.stdout)
    return doc[0] if isinstance(doc, list) and len(doc) == 1 else doc
