#!/usr/bin/env bash
# The C headers of a CPython >= 3.12, for the abi3 extension (nanobind's
# stable ABI serves 3.12 and every later Python from one file): Debian
# trixie's libpython3.13-dev, downloaded with apt from the mirror this
# machine's apt uses, under a private sources list and state folder (the
# system's apt configuration is not touched), and unpacked with dpkg -x.
# Prints the include folders, ';'-separated, for CMake's
# STOKER_PYTHON_ABI3_INCLUDE. Quiet and quick when OUT already holds them.
# Usage: fetch_python_headers.sh OUT
set -euo pipefail
out=$1
mkdir -p "$out"
out=$(cd "$out" && pwd)
version=3.13
includes="$out/usr/include/python$version;$out/usr/include"
if [ -f "$out/usr/include/python$version/Python.h" ]; then
  echo "$includes"
  exit 0
fi
mirror=$(sed -n 's/^URIs: \(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
mirror=${mirror:-$(awk '$1 == "deb" && $2 ~ /debian$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)}
mirror=${mirror:-http://deb.debian.org/debian}
apt_dir=$(mktemp -d)
trap 'rm -rf "$apt_dir"' EXIT
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" > "$apt_dir/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o Debug::NoLocking=1
  -o APT::Get::List-Cleanup=0)
if ! log=$(apt-get "${apt_opts[@]}" -qq update 2>&1); then
  echo "fetch_python_headers: apt could not read Debian trixie's index from $mirror: $log" >&2
  exit 1
fi
(cd "$apt_dir" && apt-get "${apt_opts[@]}" -qq download "libpython$version-dev" >/dev/null 2>&1) || {
  echo "fetch_python_headers: apt could not download libpython$version-dev from $mirror" >&2
  exit 1
}
dpkg -x "$apt_dir"/libpython"$version"-dev_*.deb "$out"
[ -f "$out/usr/include/python$version/Python.h" ] || { echo "fetch_python_headers: no Python.h in the package" >&2; exit 1; }
echo "$includes"
