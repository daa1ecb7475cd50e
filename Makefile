# The two commands: `make demo` and `make test`. Both do all set-up from a fresh clone.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
export CCACHE_DIR ?= $(HOME)/.cache/flipscope/ccache

.PHONY: all setup configure build test demo bench clean

all: build

setup:
	scripts/setup.sh

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 3000

demo: build
	$(BUILD)/bin/flipscope run examples/demo.toml -o out/demo

clean:
	rm -rf $(BUILD)
