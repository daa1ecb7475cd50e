#!/usr/bin/env python3
"""make-llama-history.py OLD NEW DEST: a local git history from one llama.cpp tree to another.

Releases give only trees (scripts/fetch-llama.sh extracts them), so to bisect a change between two
of them this makes a repository whose first commit is OLD and whose last is NEW, one commit per
changed part in between, in an order meant to keep most commits buildable: what the libraries do
not compile first (documentation, Python, tests, examples), the source files the old tree lacks
(a build file that names one then finds it), then the build files, ggml's core,
ggml's CPU backend file by file, the other backends, llama.h and libllama (the graph, the model
code of Gemma 3 apart from the other models), common, and the tools. Whatever is left goes into a
last commit, so the last commit's tree is NEW, file for file (checked at the end).

The first commit is tagged from-OLD and the last to-NEW, OLD and NEW the names of the trees'
parent folders (the releases, in the cache). Author, committer and dates are fixed, so the same two trees always give the same commit ids.
Prints one line per commit (id and subject). Example (docs/history.md, "Bisect"):

    scripts/make-llama-history.py ~/.cache/flipscope/llama/0.3.35/src \\
        ~/.cache/flipscope/llama/0.3.36/src /tmp/llama-history
"""
import os
import shutil
import subprocess
import sys
import time

# (subject, paths relative to the tree root: files or folders), in commit order.
CPU = "ggml/src/ggml-cpu/"
NEW_SOURCES = "sources and headers the first tree lacks (unused until a build file names them)"
SOURCE_EXT = (".c", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".in")
UNITS = [
    ("docs: documentation and project files",
     ["README.md", "AGENTS.md", "CLAUDE.md", "AUTHORS", "CODEOWNERS", "CONTRIBUTING.md", "SECURITY.md", ".devops",
      ".github", ".pi", ".ecrc", "docs", "skills", "ci", "flake.nix", "build-xcframework.sh", "media", "licenses"]),
    ("python: conversion scripts and gguf-py",
     ["conversion", "gguf-py", "convert_hf_to_gguf.py", "convert_hf_to_gguf_update.py", "requirements",
      "requirements.txt", "pyproject.toml", "mypy.ini", "pyrightconfig.json", "ty.toml"]),
    ("tests: llama.cpp's own tests", ["tests"]),
    ("examples, scripts, models and grammars", ["examples", "pocs", "scripts", "models", "grammars", "benches"]),
    ("vendor: third-party libraries", ["vendor"]),
    (NEW_SOURCES, []),  # the files OLD lacks, named below, before any build file names them
    ("build: top-level CMake", ["CMakeLists.txt", "CMakePresets.json", "Makefile", "cmake"]),
    ("ggml: build files", ["ggml/CMakeLists.txt", "ggml/cmake", "ggml/src/CMakeLists.txt",
                           "ggml/src/ggml-version.h.in"]),
    ("ggml: public headers and ggml.c", ["ggml/include", "ggml/src/ggml.c", "ggml/src/ggml-impl.h",
                                         "ggml/src/ggml-common.h"]),
    ("ggml: ggml-quants.c (reference quantization)", ["ggml/src/ggml-quants.c"]),
    ("ggml: allocator and backend scheduler", ["ggml/src/ggml-alloc.c", "ggml/src/ggml-backend-impl.h",
                                               "ggml/src/ggml-backend.cpp", "ggml/src/ggml-backend-reg.cpp",
                                               "ggml/src/ggml-backend-meta.cpp"]),
    ("ggml: gguf.cpp", ["ggml/src/gguf.cpp"]),
    ("ggml-cpu: build files and non-x86 code", [CPU + "CMakeLists.txt", CPU + "arch/arm", CPU + "arch/s390",
                                                CPU + "arch/riscv", CPU + "arch/powerpc", CPU + "arch/loongarch",
                                                CPU + "arch/wasm", CPU + "kleidiai", CPU + "spacemit",
                                                CPU + "amx"]),
    ("ggml-cpu: arch-fallback.h", [CPU + "arch-fallback.h"]),
    ("ggml-cpu: ggml-cpu-impl.h", [CPU + "ggml-cpu-impl.h"]),
    ("ggml-cpu: simd-mappings.h", [CPU + "simd-mappings.h"]),
    ("ggml-cpu: simd-gemm.h", [CPU + "simd-gemm.h"]),
    ("ggml-cpu: vec.h and vec.cpp", [CPU + "vec.h", CPU + "vec.cpp"]),
    ("ggml-cpu: ops.h and ops.cpp", [CPU + "ops.h", CPU + "ops.cpp"]),
    ("ggml-cpu: repack.h and repack.cpp", [CPU + "repack.h", CPU + "repack.cpp"]),
    ("ggml-cpu: llamafile/sgemm.cpp", [CPU + "llamafile"]),
    ("ggml-cpu: tiled matrix multiplication", [CPU + "tiled"]),
    ("ggml-cpu: ggml-cpu.c", [CPU + "ggml-cpu.c"]),
    ("ggml-cpu: ggml-cpu.cpp", [CPU + "ggml-cpu.cpp"]),
    ("ggml-cpu: the rest", [CPU]),
    ("ggml: the other backends", ["ggml/src"]),
    ("llama: llama.h and llama-cpp.h", ["include"]),
    ("llama: the graph (llama-graph)", ["src/llama-graph.h", "src/llama-graph.cpp"]),
    ("llama: context, batch and memory", ["src/llama-context.h", "src/llama-context.cpp", "src/llama-cparams.h",
                                          "src/llama-batch.h", "src/llama-batch.cpp", "src/llama-kv-cache.h",
                                          "src/llama-kv-cache.cpp", "src/llama-kv-cells.h"]),
    ("llama: the model and its loader", ["src/llama-model.h", "src/llama-model.cpp", "src/llama-model-loader.h",
                                         "src/llama-model-loader.cpp", "src/llama-hparams.h",
                                         "src/llama-hparams.cpp", "src/llama-arch.h", "src/llama-arch.cpp"]),
    ("llama: Gemma 3's model code (src/models/gemma3.cpp)", ["src/models/gemma3.cpp"]),
    ("llama: the other models", ["src/models"]),
    ("llama: the rest of libllama", ["src"]),
    ("common: the common library", ["common"]),
    ("tools: server, cli and the other tools", ["tools", "app"]),
    ("the rest", ["."]),
]
SKIP = {".git", ".flipscope-commit", ".flipscope-extracted"}  # cache stamps, not part of a tree


def run(dest, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="flipscope", GIT_AUTHOR_EMAIL="flipscope@localhost",
               GIT_COMMITTER_NAME="flipscope", GIT_COMMITTER_EMAIL="flipscope@localhost",
               GIT_AUTHOR_DATE="2026-01-01T00:00:00Z", GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
    return subprocess.run(["git", "-C", dest, *args], check=True, capture_output=True, text=True, env=env).stdout


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def copy(src, dst):
    """dst becomes src (a file, a folder or nothing), stamps and .git left out."""
    remove(dst)
    if os.path.isdir(src) and not os.path.islink(src):
        shutil.copytree(src, dst, symlinks=True, ignore=lambda d, names: [n for n in names if n in SKIP],
                        copy_function=shutil.copy)
    elif os.path.lexists(src):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(src, dst, follow_symlinks=False)


def apply(new, dest, rel):
    """Makes rel in dest as it is in new (a whole folder at once; "." is the whole tree)."""
    if rel == ".":
        for name in set(os.listdir(dest)) | set(os.listdir(new)):
            if name not in SKIP:
                copy(os.path.join(new, name), os.path.join(dest, name))
    else:
        copy(os.path.join(new, rel), os.path.join(dest, rel))


def commit(dest, subject):
    # git tells a changed file by its size and time: a copy made in the second the file it replaces
    # was written, of the same size, would look unchanged. Copies take the time of their making
    # (shutil.copy), a second after the last commit.
    time.sleep(1)
    run(dest, "add", "-A", "-f", ".")  # -f: llama.cpp's .gitignore must not hide files of the tree
    if not run(dest, "status", "--porcelain"):
        return
    run(dest, "commit", "-q", "--no-verify", "-m", subject)
    print(run(dest, "log", "-1", "--format=%H %s").strip(), flush=True)


def same_trees(new, dest):
    """Whether the last commit holds new, byte for byte (git's own record, not the work tree)."""
    check = os.path.join(os.path.dirname(dest), os.path.basename(dest) + ".check")
    remove(check)
    os.makedirs(check)
    archive = subprocess.run(["git", "-C", dest, "archive", "HEAD"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", check], input=archive, check=True)
    excludes = [x for s in SKIP for x in ("-x", s)]
    same = subprocess.run(["diff", "-r", "-q", "--no-dereference", *excludes, new, check],
                          capture_output=True).returncode == 0
    remove(check)
    return same


def new_sources(old, new):
    """The library sources and headers (ggml/src, src, include, common) that are in new, not in old:
    added before the build files that name them, so that no commit names a file it lacks. Not
    src/models, which libllama's CMake globs: a model file comes with the model code it needs."""
    found = []
    for top in ("ggml/src", "src", "include", "common"):
        for root, dirs, files in os.walk(os.path.join(new, top)):
            dirs[:] = sorted(d for d in dirs if os.path.relpath(os.path.join(root, d), new) != "src/models")
            for f in sorted(files):
                rel = os.path.relpath(os.path.join(root, f), new)
                if f.endswith(SOURCE_EXT) and not os.path.lexists(os.path.join(old, rel)):
                    found.append(rel)
    return found


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: make-llama-history.py OLD NEW DEST")
    old, new, dest = (os.path.abspath(p) for p in sys.argv[1:])
    if os.path.exists(dest):
        sys.exit(f"{dest}: exists; give a new folder")
    copy(old, dest)
    run(dest, "init", "-q", "-b", "main")
    run(dest, "config", "core.autocrlf", "false")
    # The trees' folders are named after their releases (~/.cache/flipscope/llama/X/src).
    old_name, new_name = (os.path.basename(os.path.dirname(p)) for p in (old, new))
    commit(dest, f"llama.cpp as in the first tree ({old_name})")
    run(dest, "tag", f"from-{old_name}")
    for subject, paths in UNITS:
        for rel in new_sources(old, new) if subject == NEW_SOURCES else paths:
            apply(new, dest, rel)
        commit(dest, subject)
    run(dest, "tag", f"to-{new_name}")
    if not same_trees(new, dest):
        sys.exit(f"{dest}: the last commit's tree differs from {new}")


if __name__ == "__main__":
    main()
