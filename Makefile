# ringfeed - thin wrapper over CMake. The real build is CMakeLists.txt.
#
#   make deps      install the missing Debian packages (root; apt-get only if something is missing),
#                  then the virtualenv $(TEST_VENV) (--system-site-packages) with the test-only
#                  PyPI packages TEST_PIP_PACKAGES; both are quick when nothing is missing.
#                  CMake runs the Python tests with $(TEST_VENV)/bin/python when it exists.
#   make build     configure + build into build/ with all cores
#   make test      deps + build + every test (ctest)
#   make bench     deps + build + build/ringfeed-bench on its generated sample: sizing table,
#                  DataLoader side by side, recommendation; build/bench/bench.{jsonl,png}
#   make sanitize  deps + address,undefined build in build-asan and thread build in build-tsan,
#                  ctest in both (the python test is not registered under sanitizers)
#   make memcheck  deps + build + the valgrind memcheck tests (ctest -L memcheck: the C tests
#                  tests/CMakeLists.txt lists, the end-to-end ones among them; pread backend,
#                  JSIMD_FORCENONE=1)
#   make fuzz      deps + clang libFuzzer+ASan+UBSan build in build-fuzz of the fuzzers
#                  (FUZZERS: the decoders' fuzz_decode, fuzz_webp, fuzz_formats; the remote
#                  shards' fuzz_tar, fuzz_manifest, fuzz_listing, fuzz_kept), their seed
#                  corpora, replays and short runs (ctest -L fuzz). First the decoders'
#                  libraries FUZZ_DEPS (libjpeg-turbo, libspng, libdeflate) are built from
#                  Debian's source packages with the fuzzer's instrumentation
#                  (cmake/fuzz_deps.sh, once: kept in build-fuzz/deps), so that libFuzzer sees
#                  inside the decoders; FUZZ_DEPS= builds against the system's libraries.
#                  FUZZ_TIME=600 then fuzzes FUZZ_TARGET (fuzz_decode) 600 s more, keeping
#                  its corpus in build-fuzz/test-tmp/<target>/corpus
#   make fuzz-deep make fuzz with zlib and libwebp instrumented too (FUZZ_DEEP_DEPS; ~110
#                  CPU-seconds more to build them, once, where make fuzz's three take ~80;
#                  fuzz_webp then runs several times slower: CI runs make fuzz)
#   make format    clang-format the C sources in place
#   make clean     remove build/, build-asan/, build-tsan/, build-fuzz/
#
# Variables: BUILD / ASAN_BUILD / TSAN_BUILD (build folders), CMAKE_ARGS (extra
# -D options), CTEST_ARGS (extra ctest options), JOBS (parallel build jobs),
# SKIP_DEPS=1 (do not look at packages, e.g. on a machine without a package registry),
# BENCH_STEP_MS (simulated training step for make bench, default 100), BENCH_WORKERS
# (worker counts, default all,auto: 1..usable cores and the tuner),
# BENCH_ARGS (more ringfeed-bench options, e.g. BENCH_ARGS="--data DIR --device cuda"),
# FUZZ_BUILD (build-fuzz), FUZZ_CC (clang), FUZZ_DEPS (the instrumented libraries: jpeg spng
# deflate, any of jpeg spng deflate zlib webp), FUZZ_TIME (seconds of extra fuzzing),
# FUZZ_TARGET (fuzz_decode), FUZZ_ARGS (more libFuzzer options, e.g. FUZZ_ARGS=-fork=4).

SHELL := /bin/bash
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_CC ?= clang
FUZZ_DEPS ?= jpeg spng deflate
FUZZ_DEEP_DEPS := zlib jpeg spng deflate webp
FUZZ_TIME ?=
FUZZ_TARGET ?= fuzz_decode
FUZZ_ARGS ?=
FUZZERS := fuzz_decode fuzz_webp fuzz_formats fuzz_tar fuzz_manifest fuzz_listing fuzz_kept
# fuzz_decode's corpus folder is test-tmp/fuzz, every other's its own name
FUZZ_DIR = $(FUZZ_BUILD)/test-tmp/$(if $(filter fuzz_decode,$(FUZZ_TARGET)),fuzz,$(FUZZ_TARGET))
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PYTHON ?= /usr/bin/python3
CMAKE ?= cmake
CTEST ?= ctest
CMAKE_ARGS ?=
CTEST_ARGS ?=
SKIP_DEPS ?=
BENCH_STEP_MS ?= 100
BENCH_WORKERS ?= all,auto
BENCH_ARGS ?=
# fixed: CMake looks for the test interpreter at .venv-test/bin/python
TEST_VENV := .venv-test

# python3-venv: make deps' virtualenv and the pip_install test's fresh one; git:
# that test installs a copy of the tracked files.
DEB_PACKAGES := build-essential cmake pkg-config liburing-dev libturbojpeg0-dev libspng-dev \
	libjpeg62-turbo-dev libwebp-dev libdeflate-dev libcurl4-openssl-dev libcmocka-dev \
	python3-numpy python3-pytest python3-torch python3-torchvision python3-matplotlib \
	python3-pil python3-venv git valgrind clang libclang-rt-14-dev

# Test-only packages from PyPI (not in Debian 12, or too old there), installed
# into $(TEST_VENV). scikit-build-core: pyproject.toml's build backend; webdataset:
# the tar-shard tests write shards with its ShardWriter and compare with its reader;
# moto[server] + boto3: the remote-shard tests run an S3-compatible server on 127.0.0.1;
# numba: a sample_fn written in Python (@cfunc); pyarrow: ringfeed-pack reads Parquet and
# Arrow tables with it (below 26, which needs NumPy 2: Debian 12 has 1.24).
TEST_PIP_PACKAGES := scikit-build-core>=0.10 webdataset moto[server] boto3 numba pyarrow<26

.PHONY: all deps deps-debian deps-venv build test bench sanitize memcheck fuzz fuzz-deep format clean

all: build

deps: deps-venv

# The virtualenv sees the Debian packages (numpy, torch, pytest) through
# --system-site-packages and adds TEST_PIP_PACKAGES; it is (re)made only when
# missing, broken, or made for another package list (recorded in .packages).
deps-venv: deps-debian
ifeq ($(SKIP_DEPS),)
	@set -ef; \
	want='$(TEST_PIP_PACKAGES)'; \
	if [ -x $(TEST_VENV)/bin/python ] && $(TEST_VENV)/bin/python -c '' 2>/dev/null && \
	   [ "$$(cat $(TEST_VENV)/.packages 2>/dev/null)" = "$$want" ]; then \
		echo "deps: $(TEST_VENV) up to date ($$want)"; exit 0; \
	fi; \
	if ! [ -x $(TEST_VENV)/bin/python ] || ! $(TEST_VENV)/bin/python -c '' 2>/dev/null; then \
		rm -rf $(TEST_VENV); \
		echo "deps: creating $(TEST_VENV)"; \
		$(PYTHON) -m venv --system-site-packages $(TEST_VENV); \
	fi; \
	echo "deps: pip install into $(TEST_VENV): $$want"; \
	$(TEST_VENV)/bin/python -m pip install --disable-pip-version-check -q $$want; \
	echo "$$want" > $(TEST_VENV)/.packages
else
	@echo "deps: virtualenv skipped (SKIP_DEPS=$(SKIP_DEPS))"
endif

deps-debian:
ifeq ($(SKIP_DEPS),)
	@set -e; \
	if ! command -v dpkg-query >/dev/null 2>&1; then \
		echo "deps: not a Debian system; make sure these (or their equivalents) are installed:"; \
		echo "  $(DEB_PACKAGES)"; \
		exit 0; \
	fi; \
	missing=""; \
	for p in $(DEB_PACKAGES); do \
		if [ "$$(dpkg-query -W -f='$${Status}' $$p 2>/dev/null)" != "install ok installed" ]; then \
			missing="$$missing $$p"; \
		fi; \
	done; \
	if [ -z "$$missing" ]; then echo "deps: all packages present"; exit 0; fi; \
	echo "deps: missing:$$missing"; \
	if [ "$$(id -u)" != 0 ]; then \
		echo "deps: not root; run:"; \
		echo "  sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends$$missing"; \
		exit 1; \
	fi; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update; \
	apt-get install -y --no-install-recommends $$missing
else
	@echo "deps: skipped (SKIP_DEPS=$(SKIP_DEPS))"
endif

build:
	$(CMAKE) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)
	$(CMAKE) --build $(BUILD) -j $(JOBS)

test: deps
	$(MAKE) build
	$(CTEST) --test-dir $(BUILD) --output-on-failure $(CTEST_ARGS)

bench: deps
	$(MAKE) build
	$(BUILD)/ringfeed-bench --workers $(BENCH_WORKERS) --step-ms $(BENCH_STEP_MS) --compare-torch \
		--json $(BUILD)/bench/bench.jsonl --plot $(BUILD)/bench/bench.png $(BENCH_ARGS)

sanitize: deps
	$(CMAKE) -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DRF_SANITIZE=address,undefined $(CMAKE_ARGS)
	$(CMAKE) --build $(ASAN_BUILD) -j $(JOBS)
	$(CTEST) --test-dir $(ASAN_BUILD) --output-on-failure -E '^python$$' $(CTEST_ARGS)
	$(CMAKE) -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DRF_SANITIZE=thread $(CMAKE_ARGS)
	$(CMAKE) --build $(TSAN_BUILD) -j $(JOBS)
	$(CTEST) --test-dir $(TSAN_BUILD) --output-on-failure -E '^python$$' $(CTEST_ARGS)

memcheck: deps
	$(MAKE) build
	$(CTEST) --test-dir $(BUILD) --output-on-failure -L memcheck $(CTEST_ARGS)

# libclang_rt.fuzzer comes with libclang-rt-14-dev (in DEB_PACKAGES). Only the
# fuzz targets are built here; CUDA plays no part in decoding.
fuzz: deps
ifneq ($(strip $(FUZZ_DEPS)),)
	JOBS=$(JOBS) cmake/fuzz_deps.sh $(FUZZ_BUILD)/deps $(FUZZ_CC) $(FUZZ_DEPS)
endif
	CC=$(FUZZ_CC) $(CMAKE) -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Release -DRF_FUZZ=ON \
		-DRF_SANITIZE=address,undefined -DRF_WITH_CUDA=OFF \
		-DRF_FUZZ_DEPS=$(if $(strip $(FUZZ_DEPS)),$(abspath $(FUZZ_BUILD))/deps/prefix,) \
		-DRF_FUZZ_DEPS_LIBS="$(subst $(eval) ,;,$(strip $(FUZZ_DEPS)))" $(CMAKE_ARGS)
	$(CMAKE) --build $(FUZZ_BUILD) -j $(JOBS) --target $(FUZZERS) $(addsuffix _seeds,$(FUZZERS))
	$(CTEST) --test-dir $(FUZZ_BUILD) --output-on-failure -L fuzz $(CTEST_ARGS)
ifneq ($(FUZZ_TIME),)
	cd $(FUZZ_DIR) && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		$(abspath $(FUZZ_BUILD))/$(FUZZ_TARGET) -max_total_time=$(FUZZ_TIME) -timeout=30 \
		-rss_limit_mb=2560 -max_len=65536 -print_final_stats=1 -artifact_prefix=artifacts/ \
		$$([ -f dict ] && echo -dict=dict) $(FUZZ_ARGS) corpus seeds
endif

fuzz-deep:
	$(MAKE) fuzz FUZZ_DEPS="$(FUZZ_DEEP_DEPS)"

format:
	clang-format -i $(wildcard include/*.h lib/*/*.c lib/*/*.h tests/*.c tests/*.h bench/*.c examples/*.c)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
