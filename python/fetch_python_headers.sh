#!/usr/bin/env bash
# The C headers of a CPython >= 3.12, for the abi3 extension (nanobind's
# stable ABI serves 3.12 and every later Python from one file): Debian
# trixie's libpython3.13-dev, unpacked by fetch_trixie_packages.sh.
# Prints the include folders, ';'-separated, for CMake's
# STOKER_PYTHON_ABI3_INCLUDE. Quiet and quick when OUT already holds them.
# Usage: fetch_python_headers.sh OUT
set -euo pipefail
out=$1
version=3.13
if [ ! -f "$out/usr/include/python$version/Python.h" ]; then
  "$(dirname "$0")/fetch_trixie_packages.sh" "$out" "libpython$version-dev"
fi
out=$(cd "$out" && pwd)
[ -f "$out/usr/include/python$version/Python.h" ] || { echo "fetch_python_headers: no Python.h in the package" >&2; exit 1; }
echo "$out/usr/include/python$version;$out/usr/include"
