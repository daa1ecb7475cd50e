"""Writes the fuzz targets' seed corpora (fuzz/corpus/TARGET/) from real files and real writers.

    ~/.cache/flipscope/venv/bin/python fuzz/make_seeds.py BUILD/bin/flipscope

Seeds: captures written by flipscope (SmolLM2 over a short text, BF16; the manifests of F32
and BF16) and by
safetensors' own serializer (tests/ref/check_capture.py's sample, a truncated top-k capture),
their manifests, the example transcript as JSON and JSONL and a token-id list, the example
experiment files, two results.json files of tests/data, a small GGUF written by the gguf package and a safetensors checkpoint. The
results are committed; rerun this when a format changes. docs/reliability.md describes them.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
SMOL = os.path.expanduser("~/.cache/flipscope/models/SmolLM2-135M-Instruct.Q4_1.gguf")
MANIFEST_KEY = "flipscope.manifest"


def out(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(os.path.join(d, name), mode) as f:
        f.write(data)


def manifest_of(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(n))["__metadata__"][MANIFEST_KEY]


def captures(flipscope, tmp):
    text = os.path.join(tmp, "short.txt")
    with open(text, "w") as f:
        f.write("ssh admin@10.0.3.17 -p 2222 && ip link set eth1 up\n")
    for store in ("f32", "bf16"):
        path = os.path.join(tmp, f"smol-{store}.safetensors")
        subprocess.run([flipscope, "capture", "-m", SMOL, "-w", text, "-o", path, "--stride", "8", "--store", store,
                        "-t", "2", "-q"], check=True)
        if store == "bf16":  # the F32 one adds 0.8 MB of rows and no new path (python-py-f32 is F32)
            with open(path, "rb") as f:
                out("fuzz_capture_file", f"flipscope-smollm2-{store}.safetensors", f.read())
        out("fuzz_manifest", f"flipscope-smollm2-{store}.json", manifest_of(path))
    # A chat workload's manifest carries spans (messages, tool calls, literals).
    chat = os.path.join(tmp, "chat.safetensors")
    subprocess.run([flipscope, "capture", "-m", SMOL, "-w", os.path.join(tmp, "session.json"), "-o", chat,
                    "--stride", "64", "-t", "2", "-q"], check=True)
    out("fuzz_manifest", "flipscope-smollm2-chat.json", manifest_of(chat))


def python_captures(tmp):
    f32, bf16 = os.path.join(tmp, "py-f32.safetensors"), os.path.join(tmp, "py-bf16.safetensors")
    subprocess.run([sys.executable, os.path.join(ROOT, "tests", "ref", "check_capture.py"), "--write-sample", f32,
                    bf16], check=True)
    for p in (f32, bf16):
        with open(p, "rb") as f:
            data = f.read()
        out("fuzz_capture_file", "python-" + os.path.basename(p), data)
        out("fuzz_safetensors_checkpoint", "capture-" + os.path.basename(p), data)
    ids = np.array([[3, 1, 7], [0, 2, 9], [5, 4, 1]], np.int32)
    lps = np.array([[-0.1, -2.5, -4.0], [-0.7, -0.9, -3.0], [-1.0, -1.2, -1.3]], np.float32)
    trunc = os.path.join(tmp, "py-topk.safetensors")
    save_file({"tokens": np.arange(12, dtype=np.int32), "positions": np.array([0, 4, 8], np.int32),
               "argmax": ids[:, 0].copy(), "digest": np.arange(3, dtype=np.uint64), "topk_ids": ids,
               "topk_logprobs": lps}, trunc, metadata={MANIFEST_KEY: json.dumps({"engine": {"engine": "openai"}})})
    out("fuzz_capture_file", "python-topk.safetensors", open(trunc, "rb").read())
    out("fuzz_manifest", "minimal.json", json.dumps({"engine": {"engine": "openai"}}))


def transcripts(tmp):
    src = os.path.join(tmp, "session.json")
    with open(src) as f:
        chat = json.load(f)
    out("fuzz_transcript", "session.json", json.dumps(chat))
    lines = [json.dumps({"tools": chat["tools"]})] + [json.dumps(m) for m in chat["messages"]]
    out("fuzz_transcript", "session.jsonl", "\n".join(lines) + "\n")
    out("fuzz_transcript", "messages-array.json", json.dumps(chat["messages"][:4]))
    out("fuzz_transcript", "token-ids.txt", "1 17, 42\n9 0 49151\n")
    out("fuzz_transcript", "token-ids.json", "[1, 17, 42, 9]")
    with open(os.path.join(ROOT, "examples", "netops-session.json")) as f:
        out("fuzz_transcript", "netops-session.json", f.read())


def experiments():
    with open(os.path.join(ROOT, "examples", "demo.toml")) as f:
        out("fuzz_experiment", "demo.toml", f.read())
    out("fuzz_experiment", "small.toml", """name = "small"
model = "/dev/null"
workload = "/dev/null"
chat_template = "chatml"
format = "chat"
window = 128
confident = 0.8
memory = "512MiB"
[probe]
stride = 4
full = "10-20,30-31"
store = "bf16"
[baseline]
flash_attn = "on"
cache_type_k = "q8_0"
cache_type_v = "q8_0"
ctx_size = 1024
batch_size = 256
ubatch_size = 64
threads = 1
n_gpu_layers = 0
split_mode = "none"
tensor_split = [1.0]
device = "none"
repeats = 2
[[variant]]
name = "f16"
description = "weights F16"
requantize = "F16"
[branch]
enabled = true
configs = ["f16"]
max_tokens = 8
max_branches = 2
reconverge = 4
""")


def results_files():
    # Results written by flipscope run: every part a run can have (v0.1.0) and an older layout.
    for name in ("results-v0.1.0.json", "results-sample.json"):
        with open(os.path.join(ROOT, "tests", "data", name)) as f:
            out("fuzz_results", name, f.read())


def gguf_file(tmp):
    import gguf
    path = os.path.join(tmp, "tiny.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("tiny")
    w.add_block_count(1)
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_feed_forward_length(16)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(1)
    w.add_tokenizer_model("llama")
    w.add_token_list(["<unk>", "<s>", "</s>", "a", "b"])
    w.add_token_scores([0.0, 0.0, 0.0, -1.0, -2.0])
    w.add_token_types([2, 3, 3, 1, 1])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")
    w.add_tensor("token_embd.weight", np.linspace(-1, 1, 5 * 8, dtype=np.float32).reshape(5, 8))
    w.add_tensor("blk.0.attn_q.weight", np.eye(8, dtype=np.float16))
    w.add_tensor("output_norm.weight", np.ones(8, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out("fuzz_gguf", "tiny-llama.gguf", open(path, "rb").read())


def safetensors_checkpoint(tmp):
    path = os.path.join(tmp, "ckpt.safetensors")
    save_file({"model.embed_tokens.weight": np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4),
               "model.layers.0.self_attn.q_proj.weight": np.eye(4, dtype=np.float16),
               "model.norm.weight": np.ones(4, np.float32), "step": np.array([7], np.int64)}, path,
              metadata={"format": "pt"})
    out("fuzz_safetensors_checkpoint", "checkpoint.safetensors", open(path, "rb").read())


def main(flipscope):
    tmp = tempfile.mkdtemp(prefix="flipscope-seeds-")
    try:
        subprocess.run([sys.executable, os.path.join(ROOT, "examples", "gen_session.py"), "--seed", "5",
                        "--target-tokens", "600", "-o", os.path.join(tmp, "session.json")], check=True)
        shutil.rmtree(CORPUS, ignore_errors=True)
        captures(flipscope, tmp)
        python_captures(tmp)
        transcripts(tmp)
        experiments()
        results_files()
        gguf_file(tmp)
        safetensors_checkpoint(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for target in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, target))
        size = sum(os.path.getsize(os.path.join(CORPUS, target, f)) for f in files)
        print(f"{target}: {len(files)} seeds, {size} bytes")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
