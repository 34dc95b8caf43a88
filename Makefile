# The two commands of the README:
#   make run   install dependencies, build, start the daemon in the foreground
#   make test  install dependencies, build, run every unit and integration test
# And: make install [PREFIX=/usr/local] [DESTDIR=staging-dir]
#   build, then install bin/lathe, lib/lathe/backends/ and lib/systemd/system/lathe.service
#   under $(DESTDIR)$(PREFIX) (docs/install.md)
BUILD_DIR ?= build
# ccache hits across checkouts in different directories.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: run test build deps install format format-check os-seam-check modules-check \
	thread-safety-check

deps:
	@bash scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@$(BUILD_DIR)/lathe daemon

test: build
	@cd $(BUILD_DIR) && ctest -j2 -L 'unit|integ' --output-on-failure --timeout 300

install: build
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD_DIR) --prefix $(PREFIX)

# The committed style (.clang-format: Google, 100 columns) for every C++ file
# under src/ and bench/; .ci/run checks it.
FORMAT_FILES = $(shell git ls-files 'src/*.cc' 'src/*.h' 'bench/*.cc' 'bench/*.h')

# Neither target installs anything: clang-format is used if it is there, and
# its absence is an error that says how to get it.
CLANG_FORMAT ?= clang-format
NEED_CLANG_FORMAT = command -v $(CLANG_FORMAT) >/dev/null 2>&1 || { \
	echo "$(CLANG_FORMAT) is missing: 'bash scripts/deps.sh' installs it" >&2; exit 1; }

format-check:
	@$(NEED_CLANG_FORMAT)
	@$(CLANG_FORMAT) --dry-run -Werror $(FORMAT_FILES)

format:
	@$(NEED_CLANG_FORMAT)
	@$(CLANG_FORMAT) -i $(FORMAT_FILES)

# Raw OS calls stay in src/lathe/os or on scripts/os_seam_allowed.txt; .ci/run checks it.
os-seam-check:
	@/usr/bin/python3 scripts/check_os_seam.py

# CONTRIBUTING.md's module table equals the CMake DEPS; no module includes one it may not use.
modules-check:
	@/usr/bin/python3 scripts/check_modules.py

# The lock annotations (GUARDED_BY, REQUIRES: src/lathe/common/thread_annotations.h) hold:
# clang++ -Wthread-safety on the units of the annotated classes, with the build's flags
# (configured first if need be, hence deps); skipped without clang++. .ci/run checks it.
thread-safety-check: deps
	@BUILD_DIR="$(BUILD_DIR)" JOBS="$(JOBS)" bash scripts/check_thread_safety.sh
