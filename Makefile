# Top-level wrapper: installs missing Debian packages, configures CMake + Ninja, builds, tests, demos.
BUILD ?= build/release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release

.PHONY: all deps configure build test test-sanitize test-asan test-tsan fuzz demo bench clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

configure: $(BUILD)/build.ninja

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Sanitizer builds (CUDA off): the unit and e2e tests under AddressSanitizer + UBSan, and the store,
# server and thread-pool tests under ThreadSanitizer. Any report fails the test (halt_on_error);
# tests/tsan.supp says why reports from inside the uninstrumented libcpp-httplib are suppressed.
SAN_ASAN = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_TSAN = -fsanitize=thread -fno-omit-frame-pointer
# Both sanitizer builds: the library code at -O1 (the level the sanitizers' documentation
# recommends) with -g1 (line tables and inline frames, what a report's stack needs; no types or
# variables), the unit test sources and src/cli at -O0 (SLUICE_GLUE_OPT: gtest's macros and the
# CLI's CLI11 and JSON templates, optimized under instrumentation, were over half of the ASan
# build's compile time; the code they drive keeps -O1). The TSan build compiles unit_tests from only the sources of the suites it runs; CI
# runs it after the ASan build (.ci/run). Compile times: docs/BENCHMARKS.md, "The house".
SAN_CMAKE = -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_CUDA=OFF \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DSLUICE_GLUE_OPT=-O0
TSAN_CMAKE = $(SAN_CMAKE)
# The fuzz runs have their own sanitizer build (run_fuzz.sh, label fuzz); the 10 MB tokenizer inputs
# only repeat under ASan what the release run checks, at ~10x the time; serve_load asserts that the
# server's RSS stays flat, which a sanitizer's allocator (ASan's quarantine of freed memory, TSan's
# shadow) does not let it do. crash_kill runs 6 kill points per command there (16 and every rename and unlink in make test).
# GuidedReplyTest.RequiredToolCalls... decodes 50 replies with the default model (32 s in release,
# 313 s under ASan); the guided-decoding code it runs is covered under ASan by the other Guide*,
# Constraint* and GuidedReplyTest tests.
ASAN_EXCLUDE ?= TokenizerLargeInput|^e2e\.serve_load$$|^GuidedReplyTest\.RequiredToolCalls
# The TSan build compiles only the unit sources that hold these suites (SLUICE_UNIT_TEST_SUITES).
TSAN_SUITES ?= Store|Serve|CancelTest|ThreadPool|KernelBatchInvariance|GrammarConstraint|ParallelMasks
TSAN_TESTS ?= ^($(TSAN_SUITES))|^e2e\.serve_(http|limits)$$
export ASAN_OPTIONS ?= abort_on_error=1:halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS ?= halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp

test-sanitize: test-asan test-tsan

test-asan: deps
	cmake -S . -B build/asan -G Ninja $(SAN_CMAKE) "-DCMAKE_CXX_FLAGS=$(SAN_ASAN)" \
	  "-DCMAKE_EXE_LINKER_FLAGS=$(SAN_ASAN)"
	cmake --build build/asan -j $(JOBS) --target sluice unit_tests
	cd build/asan && SLUICE_CRASH_POINTS=6 SLUICE_CRASH_ALL_COMMITS=0 SLUICE_E2E_SMALL=1 ctest --output-on-failure -j $(JOBS) -LE fuzz -E '$(ASAN_EXCLUDE)'

test-tsan: deps
	cmake -S . -B build/tsan -G Ninja $(TSAN_CMAKE) "-DCMAKE_CXX_FLAGS=$(SAN_TSAN)" \
	  "-DCMAKE_EXE_LINKER_FLAGS=$(SAN_TSAN)" "-DSLUICE_UNIT_TEST_SUITES=$(TSAN_SUITES)"
	cmake --build build/tsan -j $(JOBS) --target sluice unit_tests
	bash tests/check_test_selection.sh build/tsan $(BUILD) '$(TSAN_TESTS)'
	cd build/tsan && ctest --output-on-failure --no-tests=error -j $(JOBS) -R '$(TSAN_TESTS)'

# Long fuzz runs: every tests/fuzz/*_fuzz.cpp for FUZZ_RUNS executions (libFuzzer -runs), printing
# executions/s per target. A crash stops the run and leaves its input under build/fuzz-long/<target>/.
FUZZ_RUNS ?= 1000000
fuzz:
	@for f in tests/fuzz/*_fuzz.cpp; do \
	  t=$$(basename $$f .cpp); \
	  SLUICE_FUZZ_RUNS=$(FUZZ_RUNS) bash tests/fuzz/run_fuzz.sh $$t . build/fuzz-long || exit 1; \
	done
	@echo "make fuzz: executions and executions/s per target"
	@for f in tests/fuzz/*_fuzz.cpp; do \
	  t=$$(basename $$f .cpp); log=build/fuzz-long/$$t/log; \
	  printf '  %-22s %10s executions %8s/s\n' $$t \
	    "$$(sed -n 's/^stat::number_of_executed_units: *//p' $$log)" "$$(sed -n 's/^stat::average_exec_per_sec: *//p' $$log)"; \
	done

demo: build
	bash scripts/demo.sh $(BUILD)/sluice

bench: build
	bash scripts/bench.sh $(BUILD)

clean:
	rm -rf build
