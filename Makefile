# Entry points. Each target does its own set-up on a fresh machine.
#   make demo   build, then run two data servers and stoker-bench against them
#   make test   build, then run every test through ctest
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)

.PHONY: all deps build demo test bench clean

all: build

deps:
	@deploy/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	@deploy/demo.sh $(BUILD_DIR)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

bench: build
	@tests/bench/loopback_goodput.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)
