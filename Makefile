# ringfeed - thin wrapper over CMake. The real build is CMakeLists.txt.
#
#   make deps      install the missing Debian packages (root; apt-get only if something is missing)
#   make build     configure + build into build/ with all cores
#   make test      deps + build + every test (ctest)
#   make bench     deps + build + the loader benchmark (JSON, PNG, summary in build/bench)
#   make sanitize  deps + address,undefined build in build-asan and thread build in build-tsan,
#                  ctest in both (the python test is not registered under sanitizers)
#   make format    clang-format the C sources in place
#   make clean     remove build/, build-asan/, build-tsan/
#
# Variables: BUILD / ASAN_BUILD / TSAN_BUILD (build folders), CMAKE_ARGS (extra
# -D options), CTEST_ARGS (extra ctest options), JOBS (parallel build jobs),
# SKIP_DEPS=1 (do not look at packages, e.g. on a machine without a package registry).

SHELL := /bin/bash
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PYTHON ?= /usr/bin/python3
CMAKE ?= cmake
CTEST ?= ctest
CMAKE_ARGS ?=
CTEST_ARGS ?=
SKIP_DEPS ?=

DEB_PACKAGES := build-essential cmake pkg-config liburing-dev libturbojpeg0-dev \
	libjpeg62-turbo-dev libcmocka-dev python3-numpy python3-pytest python3-torch \
	python3-torchvision python3-matplotlib python3-pil valgrind

.PHONY: all deps build test bench sanitize format clean

all: build

deps:
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
	$(PYTHON) bench/loader_bench.py --gen $(BUILD)/rf-gen-folder --lib $(BUILD)/libringfeed.so \
		--out $(BUILD)/bench

sanitize: deps
	$(CMAKE) -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DRF_SANITIZE=address,undefined $(CMAKE_ARGS)
	$(CMAKE) --build $(ASAN_BUILD) -j $(JOBS)
	$(CTEST) --test-dir $(ASAN_BUILD) --output-on-failure -E '^python$$' $(CTEST_ARGS)
	$(CMAKE) -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DRF_SANITIZE=thread $(CMAKE_ARGS)
	$(CMAKE) --build $(TSAN_BUILD) -j $(JOBS)
	$(CTEST) --test-dir $(TSAN_BUILD) --output-on-failure -E '^python$$' $(CTEST_ARGS)

format:
	clang-format -i $(wildcard include/*.h lib/*.c lib/*.h tests/*.c tests/*.h bench/*.c examples/*.c)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
