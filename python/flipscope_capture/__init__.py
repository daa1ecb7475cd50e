"""The capture writers' former name: they moved to flipscope.capture (docs/python.md). These
modules forward to them, so `python -m flipscope_capture.hf` and its imports keep working."""
from flipscope.capture import VERSION  # noqa: F401
