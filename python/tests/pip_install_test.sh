#!/usr/bin/env bash
# `pip install ./python` as the README says, into a fresh target directory,
# then the installed package is imported by /usr/bin/python3 from outside the
# source tree. Uses the build tools already in build/pyenv (no network).
# Usage: pip_install_test.sh SOURCE_DIR PYTHON_WITH_BUILD_TOOLS
set -euo pipefail
src=$1
python=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --target "$tmp/site" "$src/python"
cd "$tmp"
PYTHONPATH="$tmp/site" /usr/bin/python3 - "$tmp/site" <<'PY'
import sys
import stoker
assert stoker.__file__.startswith(sys.argv[1]), f"imported {stoker.__file__}, not the installed package"
assert stoker.__version__ == "0.1.0"
try:
    stoker.Loader(servers="127.0.0.1:1", dataset="ds", connect_timeout=1, framework="numpy")
except stoker.Unavailable as e:
    print(f"installed stoker {stoker.__version__} at {stoker.__file__}; a dead server gives {type(e).__name__}: {e}")
else:
    raise SystemExit("a loader on a dead port connected")
PY
