# The two commands of the README:
#   make run   install dependencies, build, start the daemon in the foreground
#   make test  install dependencies, build, run every unit and integration test
BUILD_DIR ?= build
# ccache hits across checkouts in different directories.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
JOBS ?= $(shell nproc)

.PHONY: run test build deps

deps:
	@bash scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@$(BUILD_DIR)/lathe daemon

test: build
	@cd $(BUILD_DIR) && ctest -j2 -L 'unit|integ' --output-on-failure --timeout 300
