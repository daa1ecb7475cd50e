"""The `flipscope` console command of the pip package: runs the compiled CLI with the same
arguments (its exit code, output and progress bar are the CLI's own)."""
import os
import sys

from . import _native


def main():
    """Replaces this process with the CLI."""
    try:
        path, env = _native.binary()
    except FileNotFoundError as e:
        sys.stderr.write(f"flipscope: error: {e}\n")
        return 2
    os.execve(path, [path] + sys.argv[1:], env)


if __name__ == "__main__":
    sys.exit(main())
