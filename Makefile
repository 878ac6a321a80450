# SPDX-License-Identifier: Apache-2.0
# The two README commands:
#   make run    install what is missing, build, generate the demo repository, serve it on :8000
#   make test   install what is missing, build, run every test (CTest)
#             (with the `llm` and `deploy` groups of scripts/install-deps: the generative-model
#             references, and the tools that check the Kubernetes manifests)
# and `make` alone: configure and build into build/ (the binary is build/kiln).
# `make thread-safety` builds the whole tree (src, tools, tests) with clang++ in build-clang/,
# where Clang's thread-safety analysis (-Wthread-safety) checks the KILN_GUARDED_BY /
# KILN_REQUIRES annotations of src/base/thread_annotations.h and any violation is an error.
# `make tidy` runs clang-tidy (the checks of .clang-tidy) over src/ and tools/.
#
# Variables: BUILD_DIR (build), BUILD_TYPE (Release | Debug | Asan | Tsan), JOBS (cores),
# HTTP_PORT (8000), KILN_ARGS (extra flags for `kiln serve` in `make run`), CLANG_BUILD_DIR
# (build-clang) and CLANGXX (clang++-14) for `make thread-safety`, TIDY_JOBS (JOBS) and
# TIDY_FILES for `make tidy`.

BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
HTTP_PORT ?= 8000
KILN_ARGS ?=

.PHONY: all build deps run test thread-safety tidy conformance conformance-baseline asan tsan fuzz bench bench-engine bench-int8 clean

all: build

deps:
	@scripts/install-deps

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: deps
	@$(MAKE) --no-print-directory build
	$(BUILD_DIR)/kiln serve --model-repository $(BUILD_DIR)/demo_models --http-port $(HTTP_PORT) $(KILN_ARGS)

test:
	@scripts/install-deps llm deploy
	@$(MAKE) --no-print-directory build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# Clang's thread-safety analysis over the whole tree: a Debug build (assertions on, no
# optimization, no debug info: the analysis needs neither) of every target with clang++ and the
# CMake option KILN_THREAD_SAFETY (on by default with Clang: -Wthread-safety
# -Wthread-safety-beta -Werror=thread-safety). Also proves the analysis rejects lock mistakes
# (src/base/thread_safety_probe.cc). Builds only; `make test` runs the tests.
CLANG_BUILD_DIR ?= build-clang
CLANGXX ?= clang++-14
thread-safety:
	@scripts/install-deps thread-safety
	cmake -S . -B $(CLANG_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
	  -DCMAKE_CXX_COMPILER=$(CLANGXX) -DKILN_THREAD_SAFETY=ON
	cmake --build $(CLANG_BUILD_DIR) -j $(JOBS)

# clang-tidy over the .cc files of src/ and tools/ (and the headers they include), with the
# compile commands of $(BUILD_DIR) (built first: the generated headers must exist). The checks
# are in .clang-tidy; every finding is an error. TIDY_FILES: a regex of the files to check, e.g.
# TIDY_FILES='/src/sched/' (the default leaves out the generated protobuf sources under
# $(BUILD_DIR)/src). Not part of `make test`.
TIDY_JOBS ?= $(JOBS)
TIDY_FILES ?= ^$(CURDIR)/(src|tools)/.*\.cc$$
RUN_CLANG_TIDY ?= run-clang-tidy-14
tidy:
	@scripts/install-deps tidy
	@$(MAKE) --no-print-directory build
	$(RUN_CLANG_TIDY) -p $(BUILD_DIR) -j $(TIDY_JOBS) -quiet '$(TIDY_FILES)'

# ONNX backend conformance alone: per-case table in $(BUILD_DIR)/conformance/results.md.
conformance: build
	/usr/bin/python3 tests/conformance/run_conformance.py --kiln $(BUILD_DIR)/kiln \
	  --baseline tests/conformance/baseline.txt --table $(BUILD_DIR)/conformance/results.md

# Record the cases that pass now as the baseline `make test` holds kiln to.
conformance-baseline: build
	/usr/bin/python3 tests/conformance/run_conformance.py --kiln $(BUILD_DIR)/kiln \
	  --write-baseline tests/conformance/baseline.txt --table $(BUILD_DIR)/conformance/results.md

# Sanitizer runs: ASan+UBSan and TSan builds in their own folders.
asan: deps
	@$(MAKE) --no-print-directory test BUILD_DIR=build-asan BUILD_TYPE=Asan

# tests/tsan.supp: reports inside Debian's uninstrumented gRPC/abseil/protobuf/oneDNN/OpenMP only.
tsan: deps
	TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp halt_on_error=0 exitcode=66 $(TSAN_OPTIONS)" \
	  $(MAKE) --no-print-directory test BUILD_DIR=build-tsan BUILD_TYPE=Tsan

# The nine libFuzzer targets of tests/fuzz (model bytes, infer JSON, the binary tensor section,
# HTTP requests, gRPC infer requests, repository JSON, .npy, value files, config.pbtxt), built
# with clang in build-fuzz/ and run for FUZZ_SECONDS each (default 60). Crashes land in
# build-fuzz/fuzz/crashes.
FUZZ_SECONDS ?= 60
fuzz:
	@scripts/install-deps fuzz
	cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Fuzz -DKILN_FUZZ=ON \
	  -DCMAKE_CXX_COMPILER=clang++-14 -DKILN_BUILD_TESTS=OFF
	cmake --build build-fuzz -j $(JOBS) --target fuzz_targets demo_models
	tests/fuzz/run_fuzzers.sh build-fuzz $(FUZZ_SECONDS)

# Engine comparison (not a test): kiln vs ONNX Runtime (npm onnxruntime-node, installed into
# $(BUILD_DIR)/bench-node) and PyTorch eager / TorchScript on generated ResNet-50, MobileNetV2,
# BERT-style and MLP models; prints a table of latencies and ratios and writes bench/results/.
# COMPARE_ARGS passes flags through (e.g. COMPARE_ARGS="--models bert --batches 1").
COMPARE_ARGS ?=
bench-engine: deps
	@scripts/install-deps bench
	@$(MAKE) --no-print-directory build
	/usr/bin/python3 bench/compare/compare.py --kiln $(BUILD_DIR)/kiln \
	  --models-dir $(BUILD_DIR)/bench-models --node-dir $(BUILD_DIR)/bench-node $(COMPARE_ARGS)

# INT8 against FP32 (not a test): `kiln quantize` on ResNet-50 and MobileNetV2, then speed at
# batch 8, top-1 agreement, cosine and file size, with ONNX Runtime running the same files
# (bench/compare/quant.py). QUANT_ARGS passes flags through.
QUANT_ARGS ?=
bench-int8: deps
	@scripts/install-deps bench
	@$(MAKE) --no-print-directory build
	/usr/bin/python3 bench/compare/quant.py --kiln $(BUILD_DIR)/kiln \
	  --models-dir $(BUILD_DIR)/bench-models --node-dir $(BUILD_DIR)/bench-node $(QUANT_ARGS)

# The serving benchmark suite (bench/serving/run.py; not part of `make test`): writes
# bench/results/<date>-<commit>.{json,md}. BENCH_ARGS passes flags, e.g. BENCH_ARGS=--quick.
BENCH_ARGS ?=
bench:
	@scripts/install-deps bench
	@$(MAKE) --no-print-directory $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS) --target kiln demo_models
	/usr/bin/python3 bench/serving/run.py --kiln $(BUILD_DIR)/kiln --models $(BUILD_DIR)/demo_models $(BENCH_ARGS)

clean:
	rm -rf $(BUILD_DIR)
