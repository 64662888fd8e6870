#!/usr/bin/env bash
# Installs the Debian (bookworm) packages Stoker builds, tests and demos with.
# Idempotent and quiet when everything is present; runs `apt-get update` only
# when something must be installed. Needs root (or sudo) only then.
set -euo pipefail

PACKAGES=(
  # toolchain
  cmake ninja-build g++ clang clang-format pkg-config make
  # gRPC, protobuf, Abseil
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  # decode and augment: libjpeg-turbo and only the OpenCV modules we use
  libturbojpeg0-dev libjpeg62-turbo-dev libopencv-core-dev libopencv-imgproc-dev
  # the other image formats, each with its own library (imgcodecs is a test reference only)
  libwebp-dev libtiff-dev libstb-dev libopencv-imgcodecs-dev
  # audio and video: Debian's FFmpeg libraries (a module loaded at run time)
  # and the ffmpeg tool the tests make their clips with
  libavformat-dev libavcodec-dev libavutil-dev libswresample-dev libswscale-dev ffmpeg
  # metrics, logging, hashing, JSON
  prometheus-cpp-dev libgoogle-glog-dev libxxhash-dev nlohmann-json3-dev
  # fast normal draws for random erasing's noise (Boost.Random, header-only)
  libboost-dev
  # materialised datasets (tar shards, zstd / lz4), segmentation masks (libpng),
  # caption tokenisation (SentencePiece)
  libarchive-dev libzstd-dev liblz4-dev libpng-dev libsentencepiece-dev
  # tests and benchmarks: GoogleTest, promtool/prometheus, iperf3, curl
  libgtest-dev libgmock-dev prometheus iperf3 curl
  # TLS: OpenSSL checks certificate files and hashes tokens; the openssl tool
  # makes the tests' certificates and inspects what the server presents
  libssl-dev openssl
  # datasets in object storage and over HTTP(S) (storage/): libcurl, tinyxml2
  # for S3's listings; nginx serves shards with Range requests in the tests
  libcurl4-openssl-dev libtinyxml2-dev nginx-light
  # other tools read materialised shards in tests: xxhsum, zstd, lz4, tar
  xxhash zstd lz4 tar
  # the Python package: headers and venv to build it (its build tools come
  # from PyPI into build/pyenv); torch, torchvision, NumPy, pytest, xxhash to
  # test it with Debian's interpreter
  python3-dev python3-venv python3-pip python3-numpy python3-pytest python3-torch python3-torchvision python3-xxhash
  # auditwheel repairs the wheels `make wheel` packs with patchelf, and
  # python/bundle_system_libs.py renames the libraries it bundles with it
  patchelf
  # references of the audio parity tests: PyAV (on the same FFmpeg) and torchaudio
  python3-av python3-torchaudio
  # libtorch's C++ API for examples/cpp_train, the C++ client in a training loop
  libtorch-dev
  # the per-batch timeline plot (tests/bench/plot_timeline.py)
  python3-matplotlib
  # deployment files: systemd-analyze checks the unit; PyYAML reads manifests;
  # iproute2 (ip netns, tc) builds the multi-host cluster tests
  systemd python3-yaml iproute2
  # the container image: built and run with podman (runc) on a debootstrap base
  podman runc debootstrap uidmap slirp4netns fuse-overlayfs
)

missing=()
for p in "${PACKAGES[@]}"; do
  if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != "installed" ]; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install packages" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
