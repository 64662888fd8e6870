#!/usr/bin/env bash
# `make wheel`: the wheels of the Python package, from the extensions a CMake
# build made (no second compile), repaired by auditwheel so that they carry
# every shared library they load but glibc's and the compiler runtime's, under
# their own names and loaded through RPATH $ORIGIN, with a manylinux tag.
#   BUILD_DIR/python/stoker/_stoker_ext.cpython-3XY-*.so  -> cp3XY-cp3XY wheel
#   BUILD_DIR/python-abi3/stoker/_stoker_ext.abi3.so       -> cp312-abi3 wheel
#                                                            (Python 3.12 and later)
# Usage: build_wheels.sh BUILD_DIR OUT_DIR PYTHON_WITH_AUDITWHEEL
set -euo pipefail
build=$(cd "$1" && pwd)
out=$2
python=$3
here=$(cd "$(dirname "$0")" && pwd)
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT
mkdir -p "$out"
rm -f "$out"/stoker-*.whl  # none of an earlier build's

extensions=$(ls "$build"/python/stoker/_stoker_ext.cpython-*.so "$build"/python-abi3/stoker/_stoker_ext.abi3.so 2>/dev/null || true)
[ -n "$extensions" ] || { echo "build_wheels: no extension in $build/python (build with STOKER_PYTHON=ON)" >&2; exit 1; }
for ext in $extensions; do
  "$python" "$here/make_wheel.py" --extension "$ext" --spm-module "$build/dataplane/libstoker_spm.so" --out "$raw" >/dev/null
done
for whl in "$raw"/*.whl; do
  # The oldest glibc the wheel's symbols allow (the build machine's glibc
  # decides it: Debian bookworm gives manylinux_2_35).
  plat=$("$python" -m auditwheel show "$whl" | tr -s ' \n' ' ' | sed -n 's/.*constrains the platform tag to "\([^"]*\)".*/\1/p')
  [ -n "$plat" ] || { echo "build_wheels: auditwheel gave no platform tag for $whl" >&2; exit 1; }
  "$python" -m auditwheel repair --plat "$plat" -w "$out" "$whl" 2>&1 | grep -v '^INFO' || true
done
# What the manylinux policy leaves to the system beyond glibc and the C++
# runtime (zlib): bundled too, as auditwheel bundles the rest.
for whl in "$out"/*.whl; do
  "$python" "$here/bundle_system_libs.py" "$whl"
done
for whl in "$out"/*.whl; do
  echo "wheel: $whl ($(du -m "$whl" | cut -f1) MB)"
done
