"""Moved to flipscope.capture.format; this name forwards to it."""
import sys

from flipscope.capture import format as _mod

sys.modules[__name__] = _mod
