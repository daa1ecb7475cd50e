"""Crash safety of `flipscope capture` and `flipscope run` (docs/reliability.md).

Each command is killed with SIGKILL at seeded random moments, again and again. After every kill,
every file under a final name must be complete: each capture opens and validates (flipscope's
reader and safetensors + numpy independently) and results.json parses. A re-run then finishes
and gives what an uninterrupted run gives: the same capture rows bit for bit, and the same
results.json apart from timings. A full disk (a small tmpfs, when this runs as root and may
mount) must give one clear error, keep the captures already written, and leave no partial file.

FLIPSCOPE_CRASH_SEED picks the kill moments (default 11); FLIPSCOPE_CRASH_KILLS how many kills per
command (default 5; at most three times as many rounds).
"""
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import numpy as np
from safetensors.numpy import load_file

from common import BIN, SMOL, manifest, one_error_line, run, session_text

SEED = int(os.environ.get("FLIPSCOPE_CRASH_SEED", "11"))
KILLS = int(os.environ.get("FLIPSCOPE_CRASH_KILLS", "5"))
TMP = tempfile.mkdtemp(prefix="flipscope-crash-")
# Keys of results.json that hold timings (a comparison's "timing", a capture's "timings") or say what was
# reused: the only ones a resumed run may change.
TIMING_KEYS = {"created", "capture_seconds", "reused", "timings", "timing"}


def session():
    """Text from a generated session, about 350 SmolLM2 tokens: a capture takes about a second."""
    return session_text(TMP, 3, 700)


def timed(args):
    """Runs flipscope to completion; returns (seconds, completed process)."""
    t0 = time.monotonic()
    p = run(*args)
    return time.monotonic() - t0, p


def kill_after(args, seconds):
    """Starts flipscope, SIGKILLs it after `seconds` (unless it finished first); True if killed."""
    p = subprocess.Popen([BIN, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        p.wait(timeout=seconds)
        return False
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGKILL)
        p.wait()
        return True


class Kills:
    """Rounds of kills at seeded moments, drawn as fractions of an uncut run's time.

    The uncut run may have been timed while the machine was busier (other tests beside it), so a
    run from nothing that finishes before its moment rescales later moments to its own time;
    rounds go on until KILLS runs were killed, at most 3 * KILLS rounds."""

    def __init__(self, rng, seconds):
        self.rng, self.seconds, self.killed, self.rounds = rng, seconds, 0, 0

    def more(self):
        return self.killed < KILLS and self.rounds < 3 * KILLS

    def round(self, args, from_nothing=True):
        """Runs flipscope once, killed at the next moment unless it finishes; True if killed."""
        self.rounds += 1
        t0 = time.monotonic()
        killed = kill_after(args, self.rng.uniform(0.05, 1.0) * self.seconds)
        if not killed and from_nothing:
            self.seconds = min(self.seconds, time.monotonic() - t0)
        self.killed += killed
        return killed


def final_captures(folder):
    return sorted(os.path.join(d, f) for d, _, files in os.walk(folder) for f in files if f.endswith(".safetensors"))


def strip_timings(j):
    if isinstance(j, dict):
        return {k: strip_timings(v) for k, v in j.items() if k not in TIMING_KEYS and not k.endswith("seconds")}
    if isinstance(j, list):
        return [strip_timings(v) for v in j]
    return j


def manifest_without_timings(path):
    return strip_timings(manifest(path))


class CrashSafety(unittest.TestCase):
    def check_complete(self, path):
        """A file under a final name: flipscope's reader and numpy both accept all of it."""
        p = subprocess.run([BIN, "inspect", path, "--json"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, f"{path}: {p.stderr}")
        t = load_file(path)
        self.assertEqual(t["logits"].shape[0], len(t["positions"]), path)
        self.assertTrue(np.all(np.isfinite(t["logits"])), path)
        self.assertTrue(np.array_equal(t["argmax"], np.argmax(t["logits"], axis=1)), path)
        return t

    def test_capture_killed_at_random_moments(self):
        rng = random.Random(SEED)
        ref = os.path.join(TMP, "ref.safetensors")
        args = ["capture", "-m", SMOL, "-w", session(), "-t", "2", "--stride", "4", "-q"]  # ~90 rows, 17 MB
        seconds, _ = timed([*args, "-o", ref])
        want = self.check_complete(ref)
        out = os.path.join(TMP, "killed", "cap.safetensors")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        kills = Kills(rng, seconds)  # up to the uncut run's end: header rewrite and rename too
        while kills.more():
            kills.round([*args, "-o", out])
            if os.path.exists(out):  # the run finished before the kill: complete, never partial
                self.check_complete(out)
                os.remove(out)
        self.assertGreater(kills.killed, 0, f"no run was killed in {kills.rounds} rounds (uncut run: {seconds:.2f} s)")
        timed([*args, "-o", out])
        got = self.check_complete(out)
        for name in ("tokens", "positions", "logits", "argmax", "digest"):
            self.assertTrue(np.array_equal(got[name], want[name]), name)
        self.assertEqual(manifest_without_timings(out), manifest_without_timings(ref))
        # The killed writers' temporary files went when the last run opened its own.
        self.assertEqual([f for f in os.listdir(os.path.dirname(out)) if ".tmp." in f], [])

    def experiment(self, folder, name="exp.toml"):
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(f"""name = "crash test"
model = "{SMOL}"
workload = "{session()}"
window = 128
[probe]
stride = 4
[baseline]
flash_attn = "on"
threads = 2
[[variant]]
name = "fa-off"
flash_attn = "off"
""")
        return path

    def test_run_killed_at_random_moments_resumes_to_the_same_results(self):
        rng = random.Random(SEED + 1)
        exp = self.experiment(os.path.join(TMP, "run"))
        ref_dir, out_dir = os.path.join(TMP, "run", "ref"), os.path.join(TMP, "run", "killed")
        seconds, _ = timed(["run", exp, "-o", ref_dir, "-q"])
        with open(os.path.join(ref_dir, "results.json")) as f:
            want = strip_timings(json.load(f))
        kills = Kills(rng, seconds)
        while kills.more():
            from_nothing = not os.path.exists(out_dir)
            kills.round(["run", exp, "-o", out_dir, "-q"], from_nothing)
            for c in final_captures(out_dir):
                self.check_complete(c)
            results = os.path.join(out_dir, "results.json")
            if os.path.exists(results):
                with open(results) as f:
                    json.load(f)  # complete JSON, or it would not be there
                # A finished run leaves nothing to resume: the next round starts from nothing.
                shutil.rmtree(out_dir)
        self.assertGreater(kills.killed, 0, f"no run was killed in {kills.rounds} rounds (uncut run: {seconds:.2f} s)")
        timed(["run", exp, "-o", out_dir, "-q"])
        with open(os.path.join(out_dir, "results.json")) as f:
            got = strip_timings(json.load(f))
        # Paths differ only by the results folder's name.
        self.assertEqual(json.loads(json.dumps(got).replace(out_dir, ref_dir)), want)

    def test_full_disk(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to mount a small tmpfs (not root)")
        disk = os.path.join(TMP, "disk")
        os.makedirs(disk, exist_ok=True)
        # SmolLM2 rows are 49152 F32 values (192 KiB): 12 MiB holds the stride-32 capture (~11 rows,
        # 2 MiB), not the stride-1 one (~350 rows) nor the experiment's stride-4 baseline (~90).
        m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", disk], capture_output=True, text=True)
        if m.returncode != 0:
            self.skipTest(f"cannot mount a tmpfs here: {m.stderr.strip()}")
        try:
            args = ["capture", "-m", SMOL, "-w", session(), "-t", "2", "-q"]
            kept = os.path.join(disk, "kept.safetensors")
            timed([*args, "-o", kept])
            before = self.check_complete(kept)
            big = os.path.join(disk, "big.safetensors")
            p = subprocess.run([BIN, *args, "--stride", "1", "-o", big], capture_output=True, text=True)
            self.assertNotEqual(p.returncode, 0)
            err = one_error_line(self, p.stderr)
            self.assertIn(big, err)
            # Found before any row is computed: the file's size against the space left.
            self.assertIn("not enough space: the capture needs", err)
            self.assertFalse(os.path.exists(big))
            self.assertEqual(sorted(os.listdir(disk)), ["kept.safetensors"])  # no temporary file left
            after = self.check_complete(kept)
            self.assertTrue(np.array_equal(after["logits"], before["logits"]))
            # `run` into the full disk: the baseline cannot be written, so the run stops with one
            # clear line; nothing under a final name is partial.
            exp = self.experiment(os.path.join(TMP, "run-disk"))
            p = subprocess.run([BIN, "run", exp, "-o", os.path.join(disk, "run"), "-q"], capture_output=True,
                               text=True)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("not enough space", one_error_line(self, p.stderr))
            for c in final_captures(os.path.join(disk, "run")):
                self.check_complete(c)
            self.assertEqual([f for d, _, fs in os.walk(disk) for f in fs if ".tmp" in f], [])
        finally:
            subprocess.run(["umount", disk], check=False)


if __name__ == "__main__":
    try:
        unittest.main()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
