"""Moved to flipscope.capture.truncate; this name forwards to it."""
import sys

from flipscope.capture import truncate as _mod

if __name__ == "__main__":
    _mod.main()
else:
    sys.modules[__name__] = _mod
