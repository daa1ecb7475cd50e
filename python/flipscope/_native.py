"""Where the compiled CLI is: the binary installed inside this package (pip), else FLIPSCOPE_BIN,
else `flipscope` on PATH. The package's own binary runs with the llama.cpp libraries installed
beside it first on the library path, so it never picks up another build's."""
import os
import shutil

_HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")


def binary():
    """(path, environment) to run the flipscope CLI with; FileNotFoundError when there is none."""
    env = dict(os.environ)
    own = os.path.join(_HERE, "flipscope")
    if os.access(own, os.X_OK):
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (_HERE, env.get("LD_LIBRARY_PATH", "")) if p)
        return own, env
    for cand in (os.environ.get("FLIPSCOPE_BIN"), shutil.which("flipscope")):
        if cand and os.access(cand, os.X_OK):
            return cand, env
    raise FileNotFoundError("no flipscope binary: install the package (pip install .), set FLIPSCOPE_BIN, "
                            "or put flipscope on PATH")
