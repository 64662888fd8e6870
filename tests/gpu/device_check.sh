#!/usr/bin/env bash
# The GPU check in one command (tests/gpu/README.md).
#
# On a GPU machine, from the repository root, with the bundle that
# `make gpu-bundle` made (build/gpu-check/stoker-gpu-check.tar.xz) copied
# beside the working tree:
#   tests/gpu/device_check.sh [OUT_DIR] [device_check.py options]
# writes OUT_DIR/device_check.json and .log (default: $OUT, else
# ./gpu-check-out) step by step and ends within 4 minutes.
#
# Without a GPU (`make test`, ctest gpu_device_check_dry_run):
#   tests/gpu/device_check.sh --dry-run BUILD_DIR DIST_DIR
# checks what would be copied (the wheel's CUDA build, the bundle's size, the
# scripts' syntax), then runs the check's CPU-only parts from the bundle; the
# GPU steps report themselves skipped with the reason.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
start=$SECONDS
limit=${STOKER_GPU_CHECK_SECONDS:-230}  # the whole command, set-up included

fail() { echo "device_check: $*" >&2; exit 1; }

unpack_wheel() {  # unpack_wheel PYTHON WHEEL DIR: the wheel's files, importable from DIR
  "$1" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$2" "$3"
}

if [ "${1:-}" = "--dry-run" ]; then
  build=$(cd "${2:?--dry-run BUILD_DIR DIST_DIR}" && pwd)
  dist=$(cd "${3:?--dry-run BUILD_DIR DIST_DIR}" && pwd)
  python=/usr/bin/python3
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  bash -n "$here/device_check.sh" && bash -n "$here/bundle.sh" || fail "shell syntax"
  "$python" -m py_compile "$here/device_check.py" || fail "device_check.py does not compile"

  # The wheel that goes: Python 3.12+ (abi3), with the CUDA device path and
  # kernels for the GPUs the machines have (sm_90: H100, H200).
  abi3=$(ls "$dist"/stoker-*-cp312-abi3-*.whl 2>/dev/null | head -1)
  [ -n "$abi3" ] || fail "no cp312 abi3 wheel in $dist (make wheel)"
  unpack_wheel "$python" "$abi3" "$work/abi3"
  ext=$work/abi3/stoker/_stoker_ext.abi3.so
  [ -f "$ext" ] || fail "the abi3 wheel has no stoker/_stoker_ext.abi3.so"
  readelf -SW "$ext" | grep -q '\.nv_fatbin' || fail "the abi3 wheel's extension has no CUDA kernels (.nv_fatbin)"
  if readelf -dW "$ext" | grep -q 'NEEDED.*libcudart'; then
    fail "the extension needs libcudart.so (the CUDA runtime must be linked statically)"
  fi
  cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  if [ -x "$cuobjdump" ]; then
    archs=$("$cuobjdump" --list-elf "$ext" 2>/dev/null | grep -o 'sm_[0-9]*' | sort -u | tr '\n' ' ')
    case " $archs" in *" sm_90 "*) ;; *) fail "the extension's kernels are for '$archs', not sm_90 (H100/H200)";; esac
    echo "device_check: the abi3 wheel has CUDA kernels for: $archs(cudart linked statically)"
  else
    echo "device_check: cuobjdump not found; the kernels' architectures not listed"
  fi

  # What is copied: the working tree and the bundle, 64 MiB in all.
  "$here/bundle.sh" "$build" "$dist" "$work" >/dev/null || fail "tests/gpu/bundle.sh failed"
  bundle_mb=$(( $(stat -c %s "$work/stoker-gpu-check.tar.xz") / 1048576 ))
  tree_mb=$(( $(cd "$root" && git ls-files -z 2>/dev/null | xargs -0 -r stat -c %s 2>/dev/null | \
    awk '{s += $1} END {print s + 0}') / 1048576 ))
  echo "device_check: bundle ${bundle_mb} MiB + working tree ${tree_mb} MiB (the copy allows 64 MiB)"
  [ $((bundle_mb + tree_mb)) -lt 60 ] || fail "bundle ${bundle_mb} MiB + tree ${tree_mb} MiB leaves no margin under 64 MiB"

  # The check's CPU-only parts from the bundle: data made, the bundle's
  # server serving, device_gpu_test loading its libraries (and skipping).
  tar -C "$work" -xJf "$work/stoker-gpu-check.tar.xz" || fail "the bundle does not unpack"
  cp311=$(ls "$dist"/stoker-*-cp311-cp311-*.whl 2>/dev/null | head -1)
  [ -n "$cp311" ] || fail "no cp311 wheel in $dist for the dry run's Python"
  unpack_wheel "$python" "$cp311" "$work/site"
  out=$work/out
  PYTHONPATH=$work/site STOKER_MEDIA_MODULE=$build/dataplane/libstoker_media.so \
    timeout -k 5 300 "$python" "$here/device_check.py" --dry-run --out "$out" --bin "$work/stoker-gpu-check/bin" \
    --classes 4 --per-class 24 --workers 2 --seconds 240 || fail "device_check.py --dry-run failed"
  # Every GPU step said why it was skipped; the CPU-only ones passed.
  "$python" - "$out/device_check.json" <<'EOF' || fail "the dry run's report is not as expected"
import json, sys
doc = json.load(open(sys.argv[1]))
steps = {s["step"]: s for s in doc["steps"]}
want_gpu = ["1 h2d bandwidth", "2 cuda equals cpu", "3 stream safety", "4 mixup and dlpack", "5 resnet-50 training",
            "6 device tests and compute-sanitizer"]
assert steps["0 data"]["status"] == "pass", steps["0 data"]
assert steps["0 data"]["figures"]["media"] == "usable", steps["0 data"]
assert steps["5b servers from the bundle (cpu)"]["status"] == "pass", steps["5b servers from the bundle (cpu)"]
for name in want_gpu:
    s = steps[name]
    assert s["status"] == "skipped" and "dry run" in s["reason"], s
assert steps[want_gpu[-1]]["figures"]["device_gpu_test_rc"] == 77, steps[want_gpu[-1]]
print("device_check: dry run as expected:", ", ".join(f"{n}: {s['status']}" for n, s in steps.items()))
EOF
  exit 0
fi

# -- on the GPU machine ------------------------------------------------------------
out=${1:-${OUT:-$root/gpu-check-out}}
[ $# -gt 0 ] && shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
bundle=${STOKER_GPU_BUNDLE:-$root/build/gpu-check/stoker-gpu-check.tar.xz}
media=${STOKER_GPU_MEDIA:-$root/build/gpu-media/stoker-gpu-media.tar.xz}
python=${PYTHON:-}
if [ -z "$python" ]; then  # the interpreter that has torch (Python 3.12 there)
  for p in python3 python3.12 python; do
    if command -v "$p" >/dev/null && "$p" -c 'import torch' 2>/dev/null; then python=$p; break; fi
  done
  python=${python:-python3}
fi
[ -f "$bundle" ] || fail "no bundle at $bundle (make gpu-bundle here, then carry build/gpu-check)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
  echo "== $(date -u +%FT%TZ) $(hostname) =="
  nvidia-smi 2>&1 | head -15
  "$python" --version 2>&1
} | tee -a "$out/device_check.log"
tar -C "$work" -xJf "$bundle" || fail "the bundle does not unpack"
unpack_wheel "$python" "$(ls "$work"/stoker-gpu-check/wheel/*.whl | head -1)" "$work/site" || fail "the wheel does not unpack"
if [ -f "$media" ]; then
  tar -C "$work" -xJf "$media" && export STOKER_MEDIA_MODULE=$work/stoker-gpu-media/bin/libstoker_media.so
fi
left=$((limit - (SECONDS - start) - 8))
PYTHONPATH=$work/site${PYTHONPATH:+:$PYTHONPATH} timeout -k 5 $((left + 5)) \
  "$python" "$here/device_check.py" --out "$out" --bin "$work/stoker-gpu-check/bin" --seconds "$left" "$@"
rc=$?
echo "device_check: exit $rc after $((SECONDS - start)) s; $out/device_check.json" | tee -a "$out/device_check.log"
exit $rc
