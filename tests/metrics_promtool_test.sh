#!/usr/bin/env bash
# Scrapes the /metrics endpoints of a real stoker-server and stoker-bench run
# and checks them with `promtool check metrics` (Debian's prometheus package):
# promtool must report nothing, and the per-stage metrics must be present with
# data. All traffic stays on 127.0.0.1.
# Usage: metrics_promtool_test.sh SERVER_BIN BENCH_BIN MAKE_IMAGES_BIN
set -euo pipefail
server_bin=$1 bench_bin=$2 make_images_bin=$3
command -v promtool >/dev/null || { echo "FAIL: promtool not installed (deploy/install-deps.sh installs it)"; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

wait_for() {  # FILE PATTERN: prints the first matching line, fails after 20 s
  for _ in $(seq 200); do
    if line=$(grep -m1 "$2" "$1" 2>/dev/null); then echo "$line"; return 0; fi
    sleep 0.1
  done
  echo "FAIL: no '$2' in $1:" >&2; cat "$1" >&2; return 1
}

"$make_images_bin" --out "$work/data/ds" --classes 2 --per-class 8 >/dev/null
"$server_bin" --host 127.0.0.1 --port 0 --metrics-port 0 --workers 1 --data-root "$work/data" >"$work/server.out" 2>"$work/server.err" &
pids+=($!)
grpc_port=$(wait_for "$work/server.out" "listening on" | grep -o '[0-9]*$')
server_metrics=$(wait_for "$work/server.out" "metrics on" | grep -o '[0-9]*$')

"$bench_bin" --servers "127.0.0.1:$grpc_port" --dataset ds --batch-size 4 --epochs 2 --metrics-port 0 \
  --linger-seconds 30 >"$work/bench.out" 2>"$work/bench.err" &
pids+=($!)
bench_metrics=$(wait_for "$work/bench.out" "metrics on" | grep -o '[0-9]*$')
wait_for "$work/bench.out" "stoker-bench summary" >/dev/null

status=0
check() {  # NAME PORT REQUIRED_SERIES...
  local name=$1 port=$2; shift 2
  curl -sf "http://127.0.0.1:$port/metrics" >"$work/$name.prom"
  if ! out=$(promtool check metrics <"$work/$name.prom" 2>&1) || [ -n "$out" ]; then
    echo "FAIL: promtool check metrics on $name:"; echo "$out"; status=1
  else
    echo "ok: promtool check metrics on $name reports nothing"
  fi
  for series in "$@"; do
    # The series must exist with a non-zero value.
    if ! grep -E "^${series}[^ ]* " "$work/$name.prom" | awk '$NF > 0 {found=1} END {exit !found}'; then
      echo "FAIL: $name lacks a non-zero $series"; status=1
    fi
  done
}
check server "$server_metrics" \
  'stoker_server_sample_stage_seconds_count\{stage="read"' 'stoker_server_sample_stage_seconds_count\{stage="decode"' \
  'stoker_server_sample_stage_seconds_count\{stage="augment"' 'stoker_server_batch_stage_seconds_count\{stage="assemble"' \
  'stoker_server_batch_stage_seconds_count\{stage="send"' stoker_server_samples_total stoker_server_sent_bytes_total \
  stoker_server_batches_total stoker_server_workers
check client "$bench_metrics" \
  stoker_client_wait_seconds_count stoker_client_receive_latency_seconds_count stoker_client_received_bytes_total \
  stoker_client_batches_total
[ $status -eq 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $status
