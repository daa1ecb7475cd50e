"""The capture file format (docs/capture-format.md): writer, reader and the manifest's common
fields. Needs numpy and xxhash (the row digest); nothing else.

A capture is a safetensors file written here byte for byte (numpy has no bfloat16, so the
safetensors package cannot write BF16 rows): 8-byte header length, the JSON header padded with
spaces to a multiple of 8, then the tensors in the format's data order. Writes are atomic: a
temporary file next to the target, fsync, rename, fsync of the folder.
"""
import datetime
import hashlib
import json
import os

import numpy as np

from .._version import __version__ as VERSION

MANIFEST_KEY = "flipscope.manifest"
_DTYPES = {np.dtype("<u8"): "U64", np.dtype("<i4"): "I32", np.dtype("<f4"): "F32"}


def digest_rows(rows):
    """XXH3-64 (seed 0) of each row's native bytes, as the format's uint64 `digest` tensor.

    rows: a 2-D array, or a tuple of 2-D arrays whose rows are concatenated (truncated: ids then
    logprobs)."""
    import xxhash
    parts = rows if isinstance(rows, tuple) else (rows,)
    parts = [np.ascontiguousarray(p) for p in parts]
    return np.array([xxhash.xxh3_64_intdigest(b"".join(p[i].tobytes() for p in parts))
                     for i in range(len(parts[0]))], dtype="<u8")


def bf16_bits(f32):
    """F32 -> BF16 bit patterns, round to nearest, ties to even (the format's rule)."""
    bits = np.ascontiguousarray(f32, dtype="<f4").view("<u4").astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


def topk_rows(logprob_rows, k):
    """(ids, logprobs) of the k most probable entries of each row of a [n, V] float64 log-prob
    array, by descending log-probability, ties to the lower id; logprobs as float32."""
    ids = np.argsort(-logprob_rows, axis=1, kind="stable")[:, :k].astype("<i4")
    return ids, np.take_along_axis(logprob_rows, ids, 1).astype("<f4")


def topk_from_entries(entries, k):
    """The k most probable (id, logprob) of one position given as {id: logprob}, ties to the lower id."""
    best = sorted(entries.items(), key=lambda e: (-e[1], e[0]))[:k]
    if len(best) < k:
        raise ValueError(f"{len(best)} log-probabilities at a position, expected at least {k}")
    return [i for i, _ in best], [lp for _, lp in best]


def log_softmax(rows):
    """Rows of logits -> float64 log-probabilities."""
    x = np.asarray(rows, dtype=np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))


def _check_common(tokens, positions, n_rows):
    if tokens.ndim != 1 or len(tokens) < 2:
        raise ValueError("tokens must be a 1-D array of at least 2 ids")
    if positions.ndim != 1 or len(positions) != n_rows:
        raise ValueError(f"{len(positions)} positions for {n_rows} rows")
    if len(positions) and (np.any(np.diff(positions) <= 0) or positions[0] < 0 or positions[-1] >= len(tokens)):
        raise ValueError("positions must be strictly ascending and inside the tokens")


def write_full(path, tokens, positions, logits, manifest, store="f32"):
    """Writes a full capture: logits [n_probes, n_vocab] as produced (F32); argmax and digest are
    taken from these F32 rows, storage is f32 or bf16."""
    tokens, positions = np.asarray(tokens, "<i4"), np.asarray(positions, "<i4")
    logits = np.ascontiguousarray(logits, dtype="<f4")
    _check_common(tokens, positions, len(logits))
    bad = ~np.isfinite(logits).all(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"probe {i} (position {int(positions[i])}) holds NaN or Inf logits")
    if store not in ("f32", "bf16"):
        raise ValueError(f"store must be f32 or bf16, not {store!r}")
    rows = logits if store == "f32" else bf16_bits(logits)
    tensors = [("digest", digest_rows(logits)), ("tokens", tokens), ("positions", positions),
               ("argmax", np.argmax(logits, axis=1).astype("<i4")), ("logits", rows)]
    _write(path, tensors, dict(manifest, store=store, truncated=False, topk=0))


def write_topk(path, tokens, positions, topk_ids, topk_logprobs, argmax, manifest):
    """Writes a truncated capture: top-k ids / logprobs (descending) and the source's greedy token."""
    tokens, positions = np.asarray(tokens, "<i4"), np.asarray(positions, "<i4")
    ids, lps = np.ascontiguousarray(topk_ids, "<i4"), np.ascontiguousarray(topk_logprobs, "<f4")
    _check_common(tokens, positions, len(ids))
    if ids.shape != lps.shape or ids.ndim != 2 or ids.shape[1] < 1:
        raise ValueError(f"topk_ids {ids.shape} and topk_logprobs {lps.shape} must be equal [n_probes, k>0]")
    if np.isnan(lps).any() or np.isposinf(lps).any():
        raise ValueError("topk_logprobs hold NaN or +Inf")
    tensors = [("digest", digest_rows((ids, lps))), ("tokens", tokens), ("positions", positions),
               ("argmax", np.asarray(argmax, "<i4")), ("topk_ids", ids), ("topk_logprobs", lps)]
    _write(path, tensors, dict(manifest, store="f32", truncated=True, topk=int(ids.shape[1])))


def _write(path, tensors, manifest):
    header, offset = {}, 0
    for name, a in tensors:
        dtype = "BF16" if name == "logits" and a.dtype == np.dtype("<u2") else _DTYPES[a.dtype]
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    header["__metadata__"] = {MANIFEST_KEY: json.dumps(manifest)}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    # The temporary name is the writer's own: a missing folder is said of the final path.
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{path}: cannot create: its folder {os.path.dirname(path) or folder} does not exist")
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(len(text).to_bytes(8, "little"))
            f.write(text)
            for _, a in tensors:
                f.write(np.ascontiguousarray(a).tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read(path):
    """(tensors as numpy arrays, manifest) of a capture; BF16 logits are widened to float32."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    manifest = json.loads(header.pop("__metadata__")[MANIFEST_KEY])
    kinds = {"U64": "<u8", "I32": "<i4", "F32": "<f4", "BF16": "<u2"}
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        arr = np.frombuffer(data[a:b], kinds[t["dtype"]]).reshape(t["shape"])
        if t["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = arr
    return out, manifest


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def probe_positions(n_tokens, stride):
    """Every stride-th position that predicts a token: 0, s, 2s, ... < n_tokens - 1."""
    return np.arange(0, n_tokens - 1, stride, dtype="<i4")


def tokens_and_positions(tokens_from, stride=None):
    """(tokens, positions, source manifest or None) from a flipscope capture (its probe positions
    unless stride is given) or a token-id file (JSON list or whitespace-separated ids; stride
    default 32)."""
    if tokens_from.endswith(".safetensors"):
        t, m = read(tokens_from)
        pos = t["positions"] if stride is None else probe_positions(len(t["tokens"]), stride)
        return np.array(t["tokens"], "<i4"), np.array(pos, "<i4"), m
    with open(tokens_from) as f:
        text = f.read().strip()
    ids = json.loads(text) if text.startswith("[") else [int(v) for v in text.split()]
    tokens = np.array(ids, "<i4")
    return tokens, probe_positions(len(tokens), stride or 32), None


def manifest(engine, tokens, positions, source=None, model=None, stride=None, timings=None):
    """The manifest fields every capture holds (docs/capture-format.md), for a writer whose
    tokens came from `source` (a capture's manifest: its workload, spans and tools carry over)."""
    workload = dict(source["workload"]) if source and "workload" in source else {}
    workload["n_tokens"] = int(len(tokens))
    workload["tokens_sha256"] = hashlib.sha256(np.asarray(tokens, "<i4").tobytes()).hexdigest()
    m = {
        "format": "flipscope.capture",
        "format_version": 1,
        "tool": {"name": "flipscope-python", "version": VERSION},
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "model": model or {},
        "workload": workload,
        "engine": engine,
        "knobs": {},
        "probe_plan": {"stride": stride, "full": "", "n_probes": int(len(positions)),
                       "positions_from": "source capture" if stride is None and source else "stride"},
        "timings": timings or {},
    }
    if source:
        m["source_capture"] = {"model_sha256": source.get("model", {}).get("sha256"),
                               "tokenizer_sha256": source.get("tokenizer_sha256")}
        if "tokenizer_sha256" in source:
            m["tokenizer_sha256"] = source["tokenizer_sha256"]
    return m
