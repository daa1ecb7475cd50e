"""Moved to flipscope.capture.hf; this name forwards to it."""
import sys

from flipscope.capture import hf as _mod

if __name__ == "__main__":
    _mod.main()
else:
    sys.modules[__name__] = _mod
