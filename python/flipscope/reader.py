"""Reads a capture file (docs/capture-format.md) without loading it: the small tensors are read,
the rows are numpy memory maps. Every offset, shape and dtype in the header is checked against the
file before anything is mapped, so a truncated or tampered file raises CaptureError naming the
file and what is wrong, and nothing is read out of bounds."""
import json
import os

import numpy as np

MANIFEST_KEY = "flipscope.manifest"
_DTYPES = {"U64": np.dtype("<u8"), "I32": np.dtype("<i4"), "F32": np.dtype("<f4"), "BF16": np.dtype("<u2")}
# The tensors of each kind of capture, with their dtypes and ranks (the format's table).
_COMMON = {"digest": ("U64", 1), "tokens": ("I32", 1), "positions": ("I32", 1), "argmax": ("I32", 1)}
_FULL = {"logits": (("F32", "BF16"), 2)}
_TOPK = {"topk_ids": ("I32", 2), "topk_logprobs": ("F32", 2)}
_MAX_HEADER = 100 << 20  # the format's header is JSON of a few tensors and a manifest


class CaptureError(ValueError):
    """A file that is not a readable capture; the message names the file and the defect."""


def _fail(path, what):
    raise CaptureError(f"{path}: {what}")


def _read_header(path, size):
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            _fail(path, f"{size} bytes: too short for a capture (no header length)")
        n = int.from_bytes(head, "little")
        if n == 0 or n > _MAX_HEADER or 8 + n > size:
            _fail(path, f"header length {n} does not fit a file of {size} bytes (truncated or not a capture)")
        text = f.read(n)
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        _fail(path, f"the header is not JSON ({type(e).__name__})")
    if not isinstance(header, dict):
        _fail(path, "the header is not a JSON object")
    return header, 8 + n


def _check_tensors(path, header, data_start, size):
    meta = header.pop("__metadata__", None)
    if not isinstance(meta, dict) or not isinstance(meta.get(MANIFEST_KEY), str):
        _fail(path, f"no {MANIFEST_KEY} in the metadata: not a flipscope capture")
    kind = _FULL if "logits" in header else _TOPK
    wanted = dict(_COMMON, **kind)
    if set(header) != set(wanted):
        _fail(path, f"tensors {sorted(header)}, expected {sorted(wanted)}")
    end = 0
    for name, t in header.items():
        dtypes, rank = wanted[name]
        if not isinstance(t, dict) or t.get("dtype") not in ((dtypes,) if isinstance(dtypes, str) else dtypes):
            _fail(path, f"tensor {name}: dtype {t.get('dtype') if isinstance(t, dict) else t!r} not allowed")
        shape, offs = t.get("shape"), t.get("data_offsets")
        if (not isinstance(shape, list) or len(shape) != rank or not all(isinstance(d, int) and d >= 0 for d in shape)
                or not isinstance(offs, list) or len(offs) != 2 or not all(isinstance(o, int) for o in offs)):
            _fail(path, f"tensor {name}: bad shape {shape!r} or data_offsets {offs!r}")
        nbytes = int(np.prod(shape, dtype=np.int64)) * _DTYPES[t["dtype"]].itemsize
        if offs[0] < 0 or offs[1] - offs[0] != nbytes or data_start + offs[1] > size:
            _fail(path, f"tensor {name}: {offs} for {nbytes} bytes does not fit the file's {size - data_start} "
                        "bytes of data (truncated or tampered)")
        end = max(end, offs[1])
    if data_start + end != size:
        _fail(path, f"the data section ends at {end} but the file holds {size - data_start} bytes")
    try:
        manifest = json.loads(meta[MANIFEST_KEY])
    except (ValueError, RecursionError) as e:
        _fail(path, f"the manifest is not JSON ({type(e).__name__})")
    if not isinstance(manifest, dict):
        _fail(path, "the manifest is not a JSON object")
    return header, manifest


class Capture:
    """One capture file. manifest: dict; tokens, positions, argmax, digest: numpy arrays; spans: the
    workload's spans (list of dicts, empty when the workload had none); rows: the logits
    [n_probes, n_vocab] as a memory map (F32, or BF16 bit patterns as uint16: row() widens), or for
    a truncated capture topk_ids / topk_logprobs [n_probes, k]."""

    def __init__(self, path):
        self.path = os.fspath(path)
        size = os.path.getsize(self.path)
        header, data_start = _read_header(self.path, size)
        self._tensors, self.manifest = _check_tensors(self.path, header, data_start, size)
        self._start = data_start
        small = {name: self._map(name) for name in _COMMON}
        self.tokens, self.positions = np.array(small["tokens"]), np.array(small["positions"])
        self.argmax, self.digest = np.array(small["argmax"]), np.array(small["digest"])
        n = len(self.positions)
        if len(self.argmax) != n or len(self.digest) != n:
            _fail(self.path, f"{n} positions but {len(self.argmax)} argmax and {len(self.digest)} digests")
        if n and (np.any(np.diff(self.positions) <= 0) or self.positions[0] < 0
                  or self.positions[-1] >= len(self.tokens)):
            _fail(self.path, "positions are not strictly ascending inside the tokens")
        self.truncated = "logits" not in self._tensors
        if self.truncated:
            self.topk_ids, self.topk_logprobs = self._map("topk_ids"), self._map("topk_logprobs")
            self.rows = None
            if self.topk_ids.shape != self.topk_logprobs.shape or self.topk_ids.shape[0] != n:
                _fail(self.path, f"topk tensors {self.topk_ids.shape} and {self.topk_logprobs.shape} for {n} probes")
        else:
            self.rows = self._map("logits")
            self.topk_ids = self.topk_logprobs = None
            if self.rows.shape[0] != n:
                _fail(self.path, f"{self.rows.shape[0]} logits rows for {n} probes")
        self.store = "bf16" if self._tensors.get("logits", {}).get("dtype") == "BF16" else "f32"
        workload = self.manifest.get("workload")
        spans = workload.get("spans") if isinstance(workload, dict) else None
        self.spans = spans if isinstance(spans, list) else []

    def _map(self, name):
        t = self._tensors[name]
        shape = tuple(t["shape"])
        if 0 in shape:
            return np.zeros(shape, _DTYPES[t["dtype"]])
        return np.memmap(self.path, dtype=_DTYPES[t["dtype"]], mode="r", offset=self._start + t["data_offsets"][0],
                         shape=shape)

    def __len__(self):
        """The number of probes (rows)."""
        return len(self.positions)

    def row(self, i):
        """Row i's logits as float32 (BF16 widened exactly); full captures only."""
        if self.truncated:
            raise CaptureError(f"{self.path}: a truncated capture has no full rows; use topk()")
        r = np.asarray(self.rows[i])
        return (r.astype(np.uint32) << 16).view(np.float32) if self.store == "bf16" else r.astype(np.float32)

    def topk(self, i, k=5):
        """(ids, log-probabilities as float64) of row i's k most probable tokens, most probable
        first, ties to the lower id; a truncated capture gives at most its own k."""
        if self.truncated:
            k = min(k, self.topk_ids.shape[1])
            return np.array(self.topk_ids[i, :k]), np.array(self.topk_logprobs[i, :k], dtype=np.float64)
        x = self.row(i).astype(np.float64)
        lp = x - (x.max() + np.log(np.exp(x - x.max()).sum()))
        ids = np.argsort(-lp, kind="stable")[:k]
        return ids.astype(np.int32), lp[ids]


def open_capture(path):
    """Opens a capture file (full, truncated top-k or exact); raises CaptureError naming the file
    and the defect when it is not a readable capture."""
    return Capture(path)
