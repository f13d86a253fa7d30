# Thin front end to CMake. The two commands a newcomer needs:
#   make run     build, then run the main job (all_reduce_perf: a rank per GPU,
#                or 4 ranks on host memory without GPUs)
#   make check   build, then pass every test (plus the ASan/UBSan suite)
# Everything else is optional.

BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
CTEST_ARGS ?=
RANKS ?=
PREFIX ?= /usr/local

.PHONY: all build run test check asan-test tsan-test tsan-build fuzz-test install format format-check clean

all: build

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# The main job: ranks on this machine, on its GPUs or on host memory
# (RANKS=n to choose how many).
run: build
	./scripts/main_job.sh $(BUILD) $(RANKS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600 $(CTEST_ARGS)

# The suite under ASan and UBSan, but tests of 5 ranks or more that have a
# 2-4-rank twin (label wide: the same paths with more peers, the longest
# tests); random-trial tests run a quarter of their trials there.
asan-test:
	$(MAKE) test BUILD=$(BUILD)-asan CMAKE_FLAGS="-DCHORUS_SANITIZE=address,undefined $(CMAKE_FLAGS) -DCHORUS_CUDA=OFF" \
	  CTEST_ARGS="-LE wide"

tsan-test:
	$(MAKE) test BUILD=$(BUILD)-tsan CMAKE_FLAGS="-DCHORUS_SANITIZE=thread $(CMAKE_FLAGS) -DCHORUS_CUDA=OFF"

# The library alone under ThreadSanitizer: what it refuses (fences, say)
# breaks tsan-test, which check does not run.
tsan-build:
	cmake -S . -B $(BUILD)-tsan-lib -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHORUS_SANITIZE=thread \
	  $(CMAKE_FLAGS) -DCHORUS_CUDA=OFF -DCHORUS_BUILD_TESTS=OFF -DCHORUS_BUILD_TOOLS=OFF
	cmake --build $(BUILD)-tsan-lib -j $(JOBS) --target nccl

# The libFuzzer harnesses (clang), a few seconds each (FUZZ_SECONDS).
FUZZ_SECONDS ?= 5
fuzz-test:
	CC=clang cmake -S . -B $(BUILD)-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHORUS_FUZZ=ON \
	  -DCHORUS_CUDA=OFF -DCHORUS_BUILD_TESTS=OFF -DCHORUS_BUILD_TOOLS=OFF \
	  -DCHORUS_FUZZ_SECONDS=$(FUZZ_SECONDS)
	cmake --build $(BUILD)-fuzz -j $(JOBS)
	cd $(BUILD)-fuzz && ctest --output-on-failure -L fuzz

# Every test, the same suite built with AddressSanitizer and UBSan, the
# library built with ThreadSanitizer, and the fuzzers.
check: test asan-test tsan-build fuzz-test

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu' '*.cc')

format-check:
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h' '*.cu' '*.cc')

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-tsan-lib $(BUILD)-fuzz
