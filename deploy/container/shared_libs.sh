#!/usr/bin/env bash
# Prints, one per line, the shared libraries (resolved paths, from ldd) that
# the given ELF files load, except the C library's own (libc, libm, ld.so,
# ...), which every Linux host has. What the container image (collect.sh)
# and the tarball (deploy/dist.sh) carry beside the binaries.
# Usage: shared_libs.sh FILE...
set -euo pipefail
for f in "$@"; do
  ldd "$f" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libresolv.so*|libutil.so*) continue;;
  esac
  echo "$lib"
done
