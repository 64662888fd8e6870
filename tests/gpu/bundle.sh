#!/usr/bin/env bash
# What the GPU check copies to the GPU machine (tests/gpu/README.md), as one
# xz tarball that a `run` carries:
#   stoker-gpu-check/wheel/   the cp312 abi3 wheel from `make wheel` (CUDA compiled in)
#   stoker-gpu-check/bin/     stoker-server and device_gpu_test (stripped)
#   stoker-gpu-check/lib/     every shared library they load but the C library's,
#                             found through RPATH $ORIGIN/../lib (as `make dist`)
# With --media, a second tarball holds the media module (libstoker_media.so,
# FFmpeg) with its libraries, for the audio batch where it fits the copy.
# Usage: bundle.sh [--media] BUILD_DIR DIST_DIR OUT_DIR
set -euo pipefail
media=0
if [ "${1:-}" = "--media" ]; then media=1; shift; fi
build=$(cd "$1" && pwd)
dist=$2
out=$3
here=$(cd "$(dirname "$0")" && pwd)
shared_libs=$here/../../deploy/container/shared_libs.sh
command -v patchelf >/dev/null || { echo "bundle: patchelf is needed (deploy/install-deps.sh installs it)" >&2; exit 1; }
wheel=$(ls "$dist"/stoker-*-cp312-abi3-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "bundle: no cp312 abi3 wheel in $dist (make wheel)" >&2; exit 1; }
bins=(server/stoker-server client/device_gpu_test)
for b in "${bins[@]}"; do
  [ -x "$build/$b" ] || { echo "bundle: $build/$b is missing (make build)" >&2; exit 1; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out"

pack() {  # pack NAME BINARY...: NAME/bin, NAME/lib from the binaries' closure
  local name=$1
  shift
  mkdir -p "$stage/$name/bin" "$stage/$name/lib"
  local paths=()
  for b in "$@"; do
    install -m 755 -s "$b" "$stage/$name/bin/"
    paths+=("$b")
  done
  "$shared_libs" "${paths[@]}" | while read -r lib; do
    install -m 644 "$(readlink -f "$lib")" "$stage/$name/lib/$(basename "$lib")"
  done
  for f in "$stage/$name"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
  for f in "$stage/$name"/lib/*; do patchelf --set-rpath '$ORIGIN' "$f"; done
}

pack stoker-gpu-check "${bins[@]/#/$build/}"
mkdir -p "$stage/stoker-gpu-check/wheel"
# The wheel without the C and C++ client's library (stoker/libstoker_client.so.1,
# which `make dist` takes from the wheel): the check runs the Python loader,
# and the copy to the machine allows 64 MiB in all. The check unpacks the
# wheel (no pip), so the RECORD line left for it does no harm.
/usr/bin/python3 - "$wheel" "$stage/stoker-gpu-check/wheel/$(basename "$wheel")" <<'PY'
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as src, zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as dst:
    for info in src.infolist():
        if info.filename != "stoker/libstoker_client.so.1":
            dst.writestr(info, src.read(info))
PY
tar -C "$stage" -cf - stoker-gpu-check | xz -T2 -6 > "$out/stoker-gpu-check.tar.xz"
echo "bundle: $out/stoker-gpu-check.tar.xz ($(du -m "$out/stoker-gpu-check.tar.xz" | cut -f1) MB)"

if [ "$media" = 1 ]; then
  [ -f "$build/dataplane/libstoker_media.so" ] || { echo "bundle: no libstoker_media.so in $build" >&2; exit 1; }
  pack stoker-gpu-media "$build/dataplane/libstoker_media.so"
  tar -C "$stage" -cf - stoker-gpu-media | xz -T2 -9 > "$out/stoker-gpu-media.tar.xz"
  echo "bundle: $out/stoker-gpu-media.tar.xz ($(du -m "$out/stoker-gpu-media.tar.xz" | cut -f1) MB)"
fi
