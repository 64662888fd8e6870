#!/usr/bin/env bash
# The demo behind `make demo`: makes a small image set, starts two
# stoker-server processes on free local ports, runs stoker-bench against both
# for a few epochs with a simulated training step, prints the summary, and
# shuts everything down cleanly. Everything listens on 127.0.0.1.
# Usage: deploy/demo.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
demo=.demo
data=$demo/data
epochs=${DEMO_EPOCHS:-3}
step_ms=${DEMO_STEP_MS:-20}
mkdir -p "$demo"

if [ ! -d "$data/demo" ]; then
  echo "== making the demo image set (8 classes x 128 synthetic JPEG photos, 200-500 px)"
  "$build/tests/stoker-make-images" --out "$data/demo" --classes 8 --per-class 128 --min-side 200 --max-side 500
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

start_server() {  # NAME -> prints "grpc_port metrics_port"
  "$build/server/stoker-server" --host 127.0.0.1 --port 0 --metrics-port 0 --workers 1 \
    --data-root "$data" >"$demo/$1.out" 2>"$demo/$1.log" &
  pids+=($!)
  for _ in $(seq 100); do
    if grep -q "metrics on" "$demo/$1.out" 2>/dev/null; then break; fi
    sleep 0.1
  done
  grep -q "metrics on" "$demo/$1.out" || { echo "$1 did not start:"; cat "$demo/$1.log"; exit 1; }
}

echo "== starting two data servers (1 worker thread each)"
start_server server-a
start_server server-b
port_a=$(grep "listening on" $demo/server-a.out | grep -o '[0-9]*$')
port_b=$(grep "listening on" $demo/server-b.out | grep -o '[0-9]*$')
echo "   server-a on 127.0.0.1:$port_a (metrics :$(grep "metrics on" $demo/server-a.out | grep -o '[0-9]*$'))"
echo "   server-b on 127.0.0.1:$port_b (metrics :$(grep "metrics on" $demo/server-b.out | grep -o '[0-9]*$'))"

echo "== stoker-bench: $epochs epochs, RandomResizedCrop(224) + flip, batch 64, ${step_ms} ms simulated step"
"$build/client/stoker-bench" --servers "127.0.0.1:$port_a,127.0.0.1:$port_b" --dataset demo \
  --batch-size 64 --epochs "$epochs" --step-ms "$step_ms" --metrics-port -1 --warmup-batches 2 \
  --log-batches "$demo/batches.jsonl" | tee "$demo/bench.out"

echo "== shutting down (SIGTERM)"
for i in "${!pids[@]}"; do
  kill -TERM "${pids[$i]}"
  if wait "${pids[$i]}"; then echo "   server $((i + 1)) exited 0"; else echo "   server $((i + 1)) exited $?"; exit 1; fi
done
pids=()
echo "== per-batch log with sample indices and hashes: $demo/batches.jsonl"
echo "== verdict (what limits input; see docs/how-to/diagnose.md):"
grep "^bottleneck:" "$demo/bench.out"
