#!/usr/bin/env bash
# Stoker's batch goodput over loopback against raw TCP (iperf3), measured in
# the same run on the same machine. Stoker runs with --cache-mode batch: the
# server decodes one batch, then re-sends its bytes, so the figure is the
# transport (serialization, gRPC/HTTP2, TCP, client reassembly), not decoding.
# Prints both rates and the ratio (goal: >= 0.8) and writes them as JSON.
# Usage: tests/bench/loopback_goodput.sh [BUILD_DIR] [OUT_JSON]
set -euo pipefail
build=${1:-build}
out_json=${2:-$build/loopback_goodput.json}
seconds=${GOODPUT_SECONDS:-5}
command -v iperf3 >/dev/null || { echo "iperf3 missing: run deploy/install-deps.sh"; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# 1. Raw TCP: one iperf3 stream over 127.0.0.1.
port=$(free_port)
iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
pids+=($!)
sleep 0.5
iperf3 -c 127.0.0.1 -p "$port" -t "$seconds" -J >"$work/iperf.json"
tcp_bps=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]/8)' "$work/iperf.json")

# 2. Stoker: one server, one client, 256 x 224x224x3 uint8 batches (38.5 MB).
#    The dataset is 64 real JPEGs hard-linked many times: only the first batch
#    is decoded in cache mode, so the file count costs nothing.
"$build/tests/stoker-make-images" --out "$work/src" --classes 1 --per-class 64 --min-side 256 --max-side 400 >/dev/null
mkdir -p "$work/data/ds/c"
for i in $(seq 0 199); do
  for f in "$work"/src/class_000/*.jpg; do ln "$f" "$work/data/ds/c/${i}_$(basename "$f")"; done
done
"$build/server/stoker-server" --host 127.0.0.1 --port 0 --metrics-port -1 --workers 1 \
  --data-root "$work/data" >"$work/server.out" 2>"$work/server.err" &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$work/server.out" && break; sleep 0.1; done
sport=$(grep "listening on" "$work/server.out" | grep -o '[0-9]*$')
batches=$((seconds * 1500 / 38))  # about `seconds` at 1.5 GB/s; the bench stops at the epoch's end anyway
"$build/client/stoker-bench" --servers "127.0.0.1:$sport" --dataset ds --batch-size 256 \
  --pipeline 'center_crop(224)' --cache-mode batch --epochs 1 --max-batches "$batches" --warmup-batches 2 \
  --metrics-port -1 --json "$work/stoker.json" >"$work/bench.out"
stoker_bps=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["megabytes_per_second"]*1e6)' "$work/stoker.json")

/usr/bin/python3 - "$tcp_bps" "$stoker_bps" "$out_json" <<'PY'
import json, sys
tcp, stoker, out = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
ratio = stoker / tcp
result = {"iperf3_tcp_bytes_per_second": tcp, "stoker_goodput_bytes_per_second": stoker,
          "ratio": ratio, "goal": 0.8, "meets_goal": ratio >= 0.8}
json.dump(result, open(out, "w"), indent=2)
print(f"raw TCP (iperf3, 1 stream)  {tcp / 1e9:8.3f} GB/s")
print(f"Stoker batches (cache mode) {stoker / 1e9:8.3f} GB/s")
print(f"ratio                       {ratio:8.3f}  (goal >= 0.8: {'met' if ratio >= 0.8 else 'NOT met'})")
print(f"written to {out}")
PY
