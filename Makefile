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
GRPCIO := 1.68.1
# auditwheel (with Debian's patchelf) repairs the wheels `make wheel` packs.
PYTOOLS := nanobind==3.1.0 scikit-build-core==1.1.2 auditwheel==6.1.0
# Test-only validators: the Kubernetes API schemas, and JSON patches where no
# kubectl renders overlays (tests/deploy_k8s_test.py).
PYVALIDATORS := kubernetes-validate==1.37.0 jsonpatch==1.33
# Test-only references the parity tests compare with (python/tests/test_fields.py,
# test_targets.py): shards written by webdataset's own ShardWriter, COCO masks
# from pycocotools, boxes and masks through Albumentations. NumPy stays 1.x
# so that Debian's torch (built against it) keeps working in the venv.
# timm: only its mixup module is loaded (python/tests/test_mixup.py); without
# its dependencies, which would replace Debian's torch. mosaicml-streaming:
# only its shuffle module (py1e) is loaded (tests/bench/shard_order_bench.py).
PYNODEPS := timm==0.9.16 mosaicml-streaming==0.13.0
# PyPI's grpcio and CPU jax: the wheel shares a process with grpcio, and
# framework="jax" is tested with jax (python/tests/test_jax.py, wheel_test.sh).
# moto's S3 server (with IAM and STS) is the object store of the storage
# tests (tests/storage_real_test.py).
PYREFERENCES := "moto[server]==5.0.28" grpcio==$(GRPCIO) jax==0.4.38 jaxlib==0.4.38 webdataset==0.2.100 pycocotools==2.0.8 albumentations==1.4.24 sentencepiece==0.2.0 numpy==1.26.4 \
  opencv-python-headless==4.10.0.84 "scipy<1.15"

# Benchmark-only references (tests/bench/video_bench.py: decord beside PyAV),
# installed by `make bench` alone.
BENCH_REFERENCES := decord==0.6.0

# The documentation site (mkdocs.yml, docs/): MkDocs with the Material theme
# from PyPI, in a venv of its own (its Jinja2, Markdown and Pygments stay out
# of the one the tests use). `make docs` serves it; `make test` builds it
# strictly (tests: docs_site).
DOCSENV := $(BUILD_DIR)/docs-env
DOCTOOLS := mkdocs==1.6.1 mkdocs-material==9.5.49

# The installed wheel is tried in a Debian trixie root (Python 3.13) with
# PyPI's grpcio for that Python, downloaded once beside the build.
WHEELHOUSE := $(BUILD_DIR)/wheelhouse-cp313
DIST_DIR ?= dist
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' python/pyproject.toml)

.PHONY: all deps pyenv docs-env docs reference build demo test bench thread-safety sanitizers tsan fuzz clean wheel dist \
  gpu-bundle

all: build

deps:
	@deploy/install-deps.sh

$(PYENV)/.ready: Makefile | deps
	@/usr/bin/python3 -m venv --system-site-packages $(PYENV)
	@$(PYENV)/bin/pip install -q --disable-pip-version-check $(PYTOOLS) $(PYVALIDATORS) $(PYREFERENCES)
	@$(PYENV)/bin/pip install -q --disable-pip-version-check --no-deps $(PYNODEPS)
	@touch $@

pyenv: $(PYENV)/.ready

$(DOCSENV)/.ready: Makefile | deps
	@/usr/bin/python3 -m venv $(DOCSENV)
	@$(DOCSENV)/bin/pip install -q --disable-pip-version-check $(DOCTOOLS)
	@touch $@

docs-env: $(DOCSENV)/.ready

# Serves the site at http://127.0.0.1:8000 (Ctrl-C stops it).
docs: docs-env
	@$(DOCSENV)/bin/mkdocs serve -a 127.0.0.1:8000

# Rewrites the reference pages generated from the code (flags, metrics,
# Python API) after a change to them; `make test` fails while they are stale.
reference: build
	@/usr/bin/python3 docs/gen_reference.py $(BUILD_DIR)

$(WHEELHOUSE)/.ready: Makefile | pyenv
	@$(PYENV)/bin/pip download -q --disable-pip-version-check --only-binary=:all: --no-deps --python-version 3.13 \
	  --platform manylinux_2_17_x86_64 -d $(WHEELHOUSE) grpcio==$(GRPCIO)
	@touch $@

build: deps pyenv
	$(STAMP)
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CUDA_FLAG) \
	  -DSTOKER_PYTHON=ON -DPython_EXECUTABLE=$(abspath $(PYENV))/bin/python >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Debian trixie's FFmpeg 7.1 headers and libraries, which the second media
# module is built against (the packages carry one module per FFmpeg major
# version and load the host's FFmpeg; FFmpeg itself is never shipped).
FFMPEG7_PACKAGES := libavformat-dev libavcodec-dev libavutil-dev libswresample-dev libswscale-dev libavformat61 \
  libavcodec61 libavutil59 libswresample5 libswscale8

# The wheels, in $(DIST_DIR): one for this build's Python (cp311 on bookworm)
# and one for Python 3.12 and later (nanobind's stable ABI, compiled against
# Debian trixie's CPython 3.13 headers, which python/fetch_python_headers.sh
# downloads; where they cannot be had, that wheel is left out, said so).
wheel: build
	$(STAMP)
	@if includes=$$(python/fetch_python_headers.sh $(BUILD_DIR)/python-headers); then \
	  cmake -S . -B $(BUILD_DIR) -DSTOKER_PYTHON_ABI3_INCLUDE="$$includes" >/dev/null && \
	  cmake --build $(BUILD_DIR) -j $(JOBS) --target _stoker_ext_abi3 >/dev/null; \
	else echo "wheel: no CPython >= 3.12 headers; the abi3 wheel (Python 3.12+) is left out"; fi
	@if python/fetch_trixie_packages.sh $(BUILD_DIR)/ffmpeg7 $(FFMPEG7_PACKAGES); then \
	  cmake -S . -B $(BUILD_DIR) -DSTOKER_FFMPEG7_ROOT="$(abspath $(BUILD_DIR))/ffmpeg7" >/dev/null && \
	  cmake --build $(BUILD_DIR) -j $(JOBS) --target stoker_media_ffmpeg7 >/dev/null; \
	else echo "wheel: no FFmpeg 7 headers; the packages' audio and video need the host's FFmpeg 5"; fi
	@python/build_wheels.sh $(BUILD_DIR) $(DIST_DIR) $(abspath $(PYENV))/bin/python

# The server and tools with their libraries, runnable by path elsewhere:
# the programs of the wheel, laid out as bin/ and lib/.
dist: wheel
	$(STAMP)
	@deploy/dist.sh $(DIST_DIR) $(VERSION)

# What the GPU check copies to a GPU machine (tests/gpu/README.md):
# build/gpu-check/stoker-gpu-check.tar.xz, the abi3 wheel with stoker-server
# and device_gpu_test and their libraries; run there as
# tests/gpu/device_check.sh with build/gpu-check carried.
gpu-bundle: wheel
	@tests/gpu/bundle.sh $(BUILD_DIR) $(DIST_DIR) $(BUILD_DIR)/gpu-check

demo: build
	@deploy/demo.sh $(BUILD_DIR)

test: build wheel dist docs-env $(WHEELHOUSE)/.ready thread-safety sanitizers tsan
	$(STAMP)
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

# The unit and in-process tests under AddressSanitizer + UndefinedBehavior-
# Sanitizer (leaks checked), the mains for a short job (tests/asan_mains.sh),
# then each libFuzzer target for a short run. One
# clang build serves both. Debian's gRPC/Abseil/OpenCV are not instrumented:
# our code is checked, theirs is not.
SAN_DIR := $(BUILD_DIR)-asan
SAN_TESTS := common/common_test storage/storage_test dataplane/dataplane_test server/server_test client/client_core_test \
  client/client_test tests/bad_input_test materialize/materialize_test materialize/profile_test \
  materialize/remote_maker_test
FUZZERS := tar_index image_decode pipeline_text chunk_assembler stream_request stored_sample sample_fields \
  coco_annotations media_decode
FUZZ_SECONDS ?= 15
# The sanitizer builds: -O1 (what the sanitizers' own documentation advises)
# and line tables only (reports still name file and line), which compile in
# about two thirds of the time -O2 -g takes; NDEBUG as RelWithDebInfo has it.
SAN_OPT := -O1 -gline-tables-only -DNDEBUG
SAN_FLAGS := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="$(SAN_OPT)" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(SAN_OPT)"
# Each step of `make test` says when it starts (CI's log shows where the time goes).
STAMP = @echo "[make] $@: $$(date +%T)"
sanitizers: deps
	$(STAMP)
	@cmake -S . -B $(SAN_DIR) -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  $(SAN_FLAGS) -DSTOKER_CUDA=OFF -DSTOKER_PYTHON=OFF \
	  -DSTOKER_SANITIZE=address,undefined -DSTOKER_FUZZ=ON >/dev/null
	@cmake --build $(SAN_DIR) -j $(JOBS) --target $(notdir $(SAN_TESTS)) $(FUZZERS:%=%_fuzz) \
	  stoker-server stoker-bench stoker-diagnose
	@for t in $(SAN_TESTS); do \
	  echo "asan+ubsan: $$t"; \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    $(SAN_DIR)/$$t --gtest_brief=1 || exit 1; \
	done
	@tests/asan_mains.sh $(SAN_DIR)
	@tests/fuzz/run.sh $(SAN_DIR) $(FUZZ_SECONDS)

# ThreadSanitizer on the gRPC-free cores, driven by in-process fakes and
# threads: the stream state machine, the dataset catalog's scan threads, the
# worker pool, the client's scheduler (and its seeded simulation), the host
# buffer pool and the CPU stager. Debian's Abseil is not built with
# TSan; tests/tsan/absl_sync_annotations.cc gives TSan absl::Mutex's
# happens-before edges; the one suppression (a lock order inside GDAL)
# is explained in tests/tsan/suppressions.txt. gRPC is not run under
# TSan (its own threads and Debian's uninstrumented build drown real reports).
TSAN_DIR := $(BUILD_DIR)-tsan
TSAN_RUNS := "client/client_core_test *" \
  "server/server_test StreamStateTest.*" \
  "dataplane/dataplane_test WorkerPoolTest.*:DatasetTest.*:TarShardsTest.Catalog*:PythonStageTest.*" \
  "client/client_test DeviceStagerTest.*:HostBufferTest.*:ChunkAssemblerTest.*"
tsan: deps
	$(STAMP)
	@cmake -S . -B $(TSAN_DIR) -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  $(SAN_FLAGS) -DSTOKER_CUDA=OFF -DSTOKER_PYTHON=OFF -DSTOKER_SANITIZE=thread >/dev/null
	@cmake --build $(TSAN_DIR) -j $(JOBS) --target client_core_test dataplane_test server_test client_test
	@set -f; for run in $(TSAN_RUNS); do \
	  set -- $$run; echo "tsan: $$1 $$2"; \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan/suppressions.txt" \
	    $(TSAN_DIR)/$$1 --gtest_brief=1 --gtest_filter="$$2" \
	    || exit 1; \
	done

# Longer fuzzing: make fuzz FUZZ_SECONDS=600
fuzz: sanitizers

# Compiles the server and client libraries with clang's -Wthread-safety as
# errors, so the locking annotations are checked on every test run.
thread-safety: deps
	$(STAMP)
	@cmake -S . -B $(BUILD_DIR)-tsa -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
	  -DSTOKER_WERROR_THREAD_SAFETY=ON -DSTOKER_CUDA=OFF >/dev/null
	@cmake --build $(BUILD_DIR)-tsa -j $(JOBS) --target stoker_server stoker_client stoker_materialize stoker_profiler stoker_remote_maker \
	  stoker_storage

bench: build
	@tests/bench/loopback_goodput.sh $(BUILD_DIR)
	@tests/bench/slow_server_share.sh $(BUILD_DIR)
	@tests/bench/epoch_flow.sh $(BUILD_DIR)
	@tests/bench/materialize_bench.sh $(BUILD_DIR)
	@tests/bench/materialize_pool_bench.sh $(BUILD_DIR)
	@tests/bench/scale_servers.py $(BUILD_DIR)
	@tests/bench/sharing_bench.py $(BUILD_DIR)
	@tests/bench/tls_goodput.py $(BUILD_DIR)
	@tests/bench/audio_bench.py $(BUILD_DIR)
	@/usr/bin/python3 tests/bench/storage_bench.py $(BUILD_DIR)
	@$(PYENV)/bin/pip install -q --disable-pip-version-check --no-deps $(BENCH_REFERENCES)
	@$(PYENV)/bin/python tests/bench/video_bench.py $(BUILD_DIR)
	@$(PYENV)/bin/python tests/bench/fields_bench.py $(BUILD_DIR)
	@$(BUILD_DIR)/tests/stoker-convert-bench

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR)-tsa $(BUILD_DIR)-asan
