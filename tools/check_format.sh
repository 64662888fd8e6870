#!/usr/bin/env bash
# Every tracked C++ and CUDA source as .clang-format has it (Google's style,
# 120 columns; clang-format 14, Debian bookworm's, which deploy/install-deps.sh
# installs). The `format` test in make test. Exits 77 (skipped) without
# clang-format. To mend: `clang-format -i FILE`, or for a change only,
# `git diff -U0 | clang-format-diff -p1 -i`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "SKIP: no clang-format on PATH (deploy/install-deps.sh installs Debian's)"
  exit 77
fi
# The check can fail: a source written against the style is caught.
if printf 'int  f( ){return 1;}\n' | clang-format --dry-run -Werror --assume-filename=probe.cc 2>/dev/null; then
  echo "FAIL: clang-format passed a badly formatted probe; the check would catch nothing"
  exit 1
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' '*.c')
else  # an unpacked source tarball
  mapfile -t files < <(find . -path ./build -prune -o \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.c' \) -print | sed 's|^\./||' | sort)
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -gt 0 ]; then
  echo "FAIL: ${#bad[@]} of ${#files[@]} sources differ from .clang-format ($(clang-format --version)):"
  printf '  %s\n' "${bad[@]}"
  echo "mend with: clang-format -i FILE ..."
  exit 1
fi
echo "format ok: ${#files[@]} sources as .clang-format has them ($(clang-format --version))"
