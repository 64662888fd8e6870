# Entry points. Each target does its own set-up on a fresh machine.
#   make demo   build, then run two data servers and stoker-bench against them
#   make test   build, then run every test through ctest
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
# Build the CUDA device path wherever nvcc exists, so that it always compiles
# and links (tests that need a GPU report themselves skipped without one).
NVCC := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_FLAG := $(if $(NVCC),-DSTOKER_CUDA=ON,-DSTOKER_CUDA=AUTO)

# Build-time Python tools for the extension (nanobind, scikit-build-core),
# from PyPI into a venv that also sees Debian's packages; the tests run with
# /usr/bin/python3 itself.
PYENV := $(BUILD_DIR)/pyenv
PYTOOLS := nanobind==3.1.0 scikit-build-core==1.1.2

.PHONY: all deps pyenv build demo test bench thread-safety clean

all: build

deps:
	@deploy/install-deps.sh

$(PYENV)/.ready: | deps
	@/usr/bin/python3 -m venv --system-site-packages $(PYENV)
	@$(PYENV)/bin/pip install -q --disable-pip-version-check $(PYTOOLS)
	@touch $@

pyenv: $(PYENV)/.ready

build: deps pyenv
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CUDA_FLAG) \
	  -DSTOKER_PYTHON=ON -DPython_EXECUTABLE=$(abspath $(PYENV))/bin/python >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

demo: build
	@deploy/demo.sh $(BUILD_DIR)

test: build thread-safety
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

# Compiles the server and client libraries with clang's -Wthread-safety as
# errors, so the locking annotations are checked on every test run.
thread-safety: deps
	@cmake -S . -B $(BUILD_DIR)-tsa -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
	  -DSTOKER_WERROR_THREAD_SAFETY=ON -DSTOKER_CUDA=OFF >/dev/null
	@cmake --build $(BUILD_DIR)-tsa -j $(JOBS) --target stoker_server_grpc stoker_client

bench: build
	@tests/bench/loopback_goodput.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR)-tsa
