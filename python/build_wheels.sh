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

# The programs (console commands of the package) and the media modules
# (media_modules.txt, written by CMake: PATH=NAME per FFmpeg major version).
programs=(server/stoker-server client/stoker-bench client/stoker-diagnose materialize/stoker-materialize
  materialize/stoker-profile tools/stoker-health storage/stoker-storage)
program_args=() media_args=()
for p in "${programs[@]}"; do
  [ -x "$build/$p" ] || { echo "build_wheels: $build/$p is missing (make build first)" >&2; exit 1; }
  program_args+=(--program "$build/$p")
done
# The client's C ABI (libstoker_client.so.1), repaired with the rest for
# `make dist`, which carries it with its libraries.
client=$build/client/libstoker_client.so.1
[ -e "$client" ] || { echo "build_wheels: $client is missing (make build first)" >&2; exit 1; }
program_args+=(--library "$(readlink -f "$client")=libstoker_client.so.1")
if [ -s "$build/media_modules.txt" ]; then
  while read -r spec; do media_args+=(--media-module "$spec"); done < "$build/media_modules.txt"
else
  echo "build_wheels: no media module was built (FFmpeg's development files missing): the wheels leave audio and video out" >&2
fi
# FFmpeg stays the host's (Debian's is built with --enable-gpl): never grafted.
exclude=()
for lib in libavformat libavcodec libavutil libswresample libswscale libavdevice libavfilter libpostproc; do
  for major in $(seq 2 10) $(seq 55 65); do exclude+=(--exclude "$lib.so.$major"); done
done

extensions=$(ls "$build"/python/stoker/_stoker_ext.cpython-*.so "$build"/python-abi3/stoker/_stoker_ext.abi3.so 2>/dev/null || true)
[ -n "$extensions" ] || { echo "build_wheels: no extension in $build/python (build with STOKER_PYTHON=ON)" >&2; exit 1; }
for ext in $extensions; do
  "$python" "$here/make_wheel.py" --extension "$ext" --spm-module "$build/dataplane/libstoker_spm.so" \
    "${program_args[@]}" "${media_args[@]}" --out "$raw" >/dev/null
done
# Libraries the programs load that need a newer libstdc++ than manylinux_2_34
# allows (GLIBCXX_3.4.30) for symbols it also has under an older version:
# rebound copies, grafted in their place (pin_symbol_versions.py says which).
pinned=$raw/pinned
for p in "${programs[@]}" client/libstoker_client.so.1; do ldd "$build/$p"; done | awk '/=>/ {print $3}' | sort -u |
  while read -r lib; do
  if objdump -T "$lib" 2>/dev/null | grep 'UND.*(GLIBCXX_3\.4\.3[0-9])' >/dev/null; then  # not -q: pipefail
    "$python" "$here/pin_symbol_versions.py" "$lib" "$pinned"
  fi
done
export LD_LIBRARY_PATH=$pinned${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The platform the packages promise: glibc 2.34 (repair refuses a library
# that needs more). Not `auditwheel show`'s: it would count the host's FFmpeg,
# which the media modules load but the wheel does not carry.
plat=manylinux_2_34_x86_64
for whl in "$raw"/*.whl; do
  if ! log=$("$python" -m auditwheel repair --plat "$plat" "${exclude[@]}" -w "$out" "$whl" 2>&1); then
    echo "build_wheels: auditwheel repair --plat $plat failed for $(basename "$whl"):" >&2
    echo "$log" | grep -v '^INFO' | tail -20 >&2
    exit 1
  fi
  echo "$log" | grep -v '^INFO' || true
done
# What the manylinux policy leaves to the system beyond glibc and the C++
# runtime (zlib): bundled too, as auditwheel bundles the rest.
for whl in "$out"/*.whl; do
  "$python" "$here/bundle_system_libs.py" "$whl"
done
for whl in "$out"/*.whl; do
  echo "wheel: $whl ($(du -m "$whl" | cut -f1) MB)"
done
