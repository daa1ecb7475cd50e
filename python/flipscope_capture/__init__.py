"""Python writers of flipscope capture files (docs/capture-format.md, docs/engines.md).

format: the file format itself (numpy + xxhash; safetensors only to read tokens back).
hf: Hugging Face transformers writer; vllm_offline: vLLM offline writer; truncate: a full
capture's top-k. The engine writers import torch / transformers / vllm only when run.
"""
VERSION = "0.1.0"
