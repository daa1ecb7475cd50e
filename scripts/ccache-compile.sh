#!/bin/sh
# ccache-compile.sh CACHE_DIR BASE_DIR COMPILER ARGS... : the compiler launcher of the pip package's
# build (CMakeLists.txt). BASE_DIR (the unpacked source) makes the paths ccache hashes relative to
# the build folder, and NOHASHDIR keeps that folder's own path out of the hash, so a build in
# another temporary folder is a hit. ccache also hashes the compiler's name, which scikit-build-core
# takes from Python's sysconfig (g++) unless CXX is set: it is resolved to the file it points at.
cache_dir=$1 base_dir=$2 compiler=$3
shift 3
CCACHE_DIR=$cache_dir CCACHE_BASEDIR=$base_dir CCACHE_NOHASHDIR=1 exec ccache "$(readlink -f "$compiler")" "$@"
