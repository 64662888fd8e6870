#!/usr/bin/env bash
# Debian trixie packages unpacked (dpkg -x) into OUT, for what the build
# compiles against but bookworm lacks: CPython 3.13's headers (the abi3
# extension) and FFmpeg 7.1's headers and libraries (the second media
# module; linked against, never shipped). Downloaded with apt from the mirror
# this machine's apt uses, under a private sources list and state folder (the
# system's apt configuration is not touched). Quiet and quick when OUT
# already holds them (OUT/.packages lists what it holds).
# Usage: fetch_trixie_packages.sh OUT PACKAGE...
set -euo pipefail
out=$1
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
want="$*"
[ "$(cat "$out/.packages" 2>/dev/null)" = "$want" ] && exit 0
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
  echo "fetch_trixie_packages: apt could not read Debian trixie's index from $mirror: $log" >&2
  exit 1
fi
(cd "$apt_dir" && apt-get "${apt_opts[@]}" -qq download "$@" >/dev/null 2>&1) || {
  echo "fetch_trixie_packages: apt could not download $want from $mirror" >&2
  exit 1
}
for deb in "$apt_dir"/*.deb; do dpkg -x "$deb" "$out"; done
echo "$want" > "$out/.packages"
