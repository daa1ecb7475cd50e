"""Python writers of flipscope capture files (docs/capture-format.md, docs/engines.md).

format: the file format itself (numpy + xxhash; safetensors only to read tokens back).
hf: Hugging Face transformers writer (`python -m flipscope.capture.hf`); vllm_offline: vLLM
offline writer (`python -m flipscope.capture.vllm_offline`); truncate: a full capture's top-k.
The engine writers import torch / transformers / vllm only when run.
"""
from .._version import __version__ as VERSION  # noqa: F401
