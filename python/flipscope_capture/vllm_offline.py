"""Moved to flipscope.capture.vllm_offline; this name forwards to it."""
import sys

from flipscope.capture import vllm_offline as _mod

if __name__ == "__main__":
    _mod.main()
else:
    sys.modules[__name__] = _mod
