#!/usr/bin/env bash
# Issue 12's flow goals, measured in one run, with the behaviour before the
# change (every epoch cold: --overlap-epochs=false) as the baseline:
#  1. steadiness: two servers that supply more than the consumer takes (a
#     training step long enough that starved % stays under 5), 5 epochs:
#     inter-batch p99/p50 over every batch, epoch boundaries included
#     (goal <= 1.5); also writes the per-batch times and draws the timeline
#     PNG (tests/bench/plot_timeline.py);
#  2. short epochs: throughput of 5 short epochs against 1 long epoch of the
#     same number of batches, servers flat out (step 0), FLOW_REPEATS
#     interleaved runs, medians (goal >= 0.95).
# Two stoker-server processes on 127.0.0.1, one worker each, a synthetic
# dataset of 256x256 JPEGs through RandomResizedCrop(224) + flip, batches of
# 32 (flat out the two servers give about 150 batches/s on the 2-core
# machine, but a cold epoch start still costs one batch's latency; the step of
# 60 ms keeps starved under 5%). Prints the figures and writes them as JSON;
# FLOW_* variables change the sizes.
# Usage: tests/bench/epoch_flow.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
build=${1:-build}
out=${2:-$build/epoch_flow}
repeats=${FLOW_REPEATS:-3}
step_ms=${FLOW_STEP_MS:-60}
batch=${FLOW_BATCH:-32}
per_epoch=${FLOW_BATCHES_PER_EPOCH:-30}
side=${FLOW_IMAGE_SIDE:-256}
epochs=5
mkdir -p "$out"
work=$(mktemp -d)
source "$(dirname "$0")/bench_servers.sh"
start_server a --workers 1
a=$server_address
start_server b --workers 1
servers="$a,$server_address"
short="synthetic:${side}x${side}:$((batch * per_epoch)):4"
long="synthetic:${side}x${side}:$((batch * per_epoch * epochs)):4"

bench() {  # json_out dataset epochs step_ms overlap [extra...]
  local json=$1 dataset=$2 n=$3 step=$4 overlap=$5
  shift 5
  "$build/client/stoker-bench" --servers "$servers" --dataset "$dataset" --batch-size "$batch" \
    --pipeline 'random_resized_crop(224), random_horizontal_flip' --epochs "$n" --step-ms "$step" \
    --overlap-epochs="$overlap" --warmup-batches 0 --metrics-port -1 --slowest 0 --json "$json" "$@" \
    >"$json.log" 2>&1 || { cat "$json.log" >&2; exit 1; }
}

# Warm both servers' dataset caches first.
bench "$work/warm.json" "$short" 1 0 true
bench "$work/warm.json" "$long" 1 0 true

# 1. Steadiness, consumer-bound, with and without the overlap.
bench "$work/steady_new.json" "$short" "$epochs" "$step_ms" true --batch-times "$out/timeline.csv"
bench "$work/steady_old.json" "$short" "$epochs" "$step_ms" false --batch-times "$out/timeline_cold.csv"

# 2. Short against long epochs, server-bound, interleaved.
for _ in $(seq "$repeats"); do
  bench "$work/long.json" "$long" 1 0 true
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' "$work/long.json" >>"$work/long"
  bench "$work/short.json" "$short" "$epochs" 0 true
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' "$work/short.json" >>"$work/short"
  bench "$work/cold.json" "$short" "$epochs" 0 false
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' "$work/cold.json" >>"$work/cold"
done

/usr/bin/python3 - "$work" "$out" "$step_ms" <<'PY'
import json, statistics, sys
work, out, step = sys.argv[1], sys.argv[2], sys.argv[3]
def summary(name):
    return json.load(open(f"{work}/{name}.json"))
read = lambda n: [float(x) for x in open(f"{work}/{n}").read().split()]
new, old = summary("steady_new"), summary("steady_old")
ratio = lambda s: s["inter_batch_p99_ms"] / s["inter_batch_p50_ms"]
long_, short, cold = (statistics.median(read(n)) for n in ("long", "short", "cold"))
print(f"steady flow, 2 servers, step {step} ms, 5 epochs (every batch, boundaries included):")
for label, s in (("epochs flow into each other", new), ("every epoch cold (before)", old)):
    print(f"  {label:28s} p50 {s['inter_batch_p50_ms']:.2f} ms, p90 {s['inter_batch_p90_ms']:.2f}, "
          f"p99 {s['inter_batch_p99_ms']:.2f}, max {s['inter_batch_max_ms']:.2f}; p99/p50 {ratio(s):.2f} "
          f"(goal <= 1.5); starved {s['starved_percent']:.1f}%")
print(f"short epochs, servers flat out (images/s, medians of {len(read('long'))} interleaved runs):")
print(f"  1 long epoch {long_:.1f}; 5 short epochs {short:.1f} = {short / long_:.3f}x (goal >= 0.95); "
      f"5 short cold epochs (before) {cold:.1f} = {cold / long_:.3f}x")
json.dump({"steady": new, "steady_cold": old, "p99_over_p50": ratio(new), "p99_over_p50_cold": ratio(old),
           "long_images_per_second": long_, "short_images_per_second": short, "cold_images_per_second": cold,
           "short_over_long": short / long_, "cold_over_long": cold / long_},
          open(f"{out}/epoch_flow.json", "w"), indent=2)
PY
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  /usr/bin/python3 "$(dirname "$0")/plot_timeline.py" "$out/timeline.csv" "$out/timeline.png" \
    --title "epochs flow into each other: 2 servers, step ${step_ms} ms, 5 epochs"
  /usr/bin/python3 "$(dirname "$0")/plot_timeline.py" "$out/timeline_cold.csv" "$out/timeline_cold.png" \
    --title "every epoch cold (before): 2 servers, step ${step_ms} ms, 5 epochs"
else
  echo "epoch_flow: no matplotlib (apt install python3-matplotlib): timeline PNGs not drawn"
fi
