# The two commands: `make demo` and `make test`. Both do all set-up from a fresh clone.
# Reliability (docs/reliability.md): `make fuzz` and `make test-sanitize` share one clang build
# with ASan + UBSan + libFuzzer's coverage hooks (SAN_BUILD), apart from the normal one.
BUILD ?= build
SAN_BUILD ?= build-san
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
CTEST_ARGS ?=
# llama.cpp's tools (llama-server, llama-perplexity, llama-quantize): the tests use them, the demo not.
LLAMA_TOOLS ?= ON
export CCACHE_DIR ?= $(HOME)/.cache/flipscope/ccache

.PHONY: all setup configure build test test-long demo bench clean san-configure fuzz test-sanitize

all: build

setup:
	scripts/setup.sh

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
	  -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache -DFLIPSCOPE_LLAMA_TOOLS=$(LLAMA_TOOLS) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# make test: every test but those labelled long (minutes each); make test-long runs those.
test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 3000 -LE long

test-long: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) --timeout 3000 -L long $(CTEST_ARGS)

# The benchmarks (docs/performance.md): no test runs them, so `make build` and `make test` leave them out.
bench: configure
	cmake --build $(BUILD) -j$(JOBS) --target benchmarks

# The demo needs the CLI alone: not the tests, the benchmarks or llama.cpp's tools (a cold build of
# about half the time; docs/building.md).
demo: LLAMA_TOOLS = OFF
demo: configure
	cmake --build $(BUILD) -j$(JOBS) --target flipscope
	$(BUILD)/bin/flipscope run examples/demo.toml -o out/demo

# Sanitizer runtime settings: stop at the first error of either sanitizer; leaks inside the
# prebuilt llama.cpp libraries are suppressed by name (scripts/lsan.supp says which and why).
SAN_ENV = ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_stack_use_after_return=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp

san-configure: setup
	CC=clang CXX=clang++ cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_C_COMPILER_LAUNCHER=ccache \
	  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DFLIPSCOPE_SANITIZE=ON -DFLIPSCOPE_FUZZ=ON -DFLIPSCOPE_BENCH=OFF \
	  -DFLIPSCOPE_TEST_TIMEOUT_SCALE=4

fuzz: san-configure
	cmake --build $(SAN_BUILD) -j$(JOBS) --target fuzz_all
	$(SAN_ENV) scripts/fuzz.sh $(SAN_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

test-sanitize: san-configure
	$(SAN_ENV) cmake --build $(SAN_BUILD) -j$(JOBS)
	cd $(SAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j$(JOBS) --timeout 6000

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
