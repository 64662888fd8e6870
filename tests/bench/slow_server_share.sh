#!/usr/bin/env bash
# How much of two unequal servers' combined rate one client gets (review 5.2:
# this ratio was a timed assertion in failover_test; it is a benchmark now).
# Two stoker-server processes on loopback, one worker each, one made 3x
# slower (--test-sample-delay-ms 4 and 12); stoker-bench reads a synthetic
# dataset from the fast one alone, the slow one alone, then both, interleaved
# SHARE_REPEATS times. Prints the medians and together / (fast + slow)
# (goal: >= 0.9), and writes them as JSON.
# Usage: tests/bench/slow_server_share.sh [BUILD_DIR] [OUT_JSON]
set -euo pipefail
build=${1:-build}
out_json=${2:-$build/slow_server_share.json}
repeats=${SHARE_REPEATS:-3}
samples=${SHARE_SAMPLES:-600}
work=$(mktemp -d)
source "$(dirname "$0")/bench_servers.sh"
start_server fast --workers 1 --test-sample-delay-ms 4
fast=$server_address
start_server slow --workers 1 --test-sample-delay-ms 12
slow=$server_address

rate() {  # servers -> images/s
  "$build/client/stoker-bench" --servers "$1" --dataset "synthetic:64x64:$samples:4" --batch-size 2 \
    --pipeline 'center_crop(48)' --epochs 1 --unordered --warmup-batches 4 --metrics-port -1 \
    --json "$work/run.json" >/dev/null 2>&1
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' "$work/run.json"
}

for _ in $(seq "$repeats"); do
  rate "$fast" >>"$work/fast"
  rate "$slow" >>"$work/slow"
  rate "$fast,$slow" >>"$work/together"
done
/usr/bin/python3 - "$work" "$out_json" <<'PY'
import json, statistics, sys
work, out = sys.argv[1], sys.argv[2]
read = lambda n: [float(x) for x in open(f"{work}/{n}").read().split()]
fast, slow, together = (statistics.median(read(n)) for n in ("fast", "slow", "together"))
ratio = together / (fast + slow)
print(f"images/s (medians): fast alone {fast:.1f}, slow alone {slow:.1f}, together {together:.1f}")
print(f"together / (fast + slow) = {ratio:.2f} (goal >= 0.9)")
json.dump({"fast": fast, "slow": slow, "together": together, "ratio": ratio}, open(out, "w"), indent=2)
PY
