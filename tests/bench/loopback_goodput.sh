#!/usr/bin/env bash
# Stoker's batch goodput over loopback against raw TCP (iperf3), measured in
# the same run on the same machine. Stoker runs with --cache-mode batch: the
# server decodes one batch, then re-sends its bytes, so the figure is the
# transport (serialization, gRPC/HTTP2, TCP, client reassembly), not decoding.
# Prints the rates (medians of GOODPUT_REPEATS interleaved runs of each) and
# the ratio (goal: >= 0.9), and writes them as JSON. Stoker runs as a client
# does by default (two streams to the server, each its own connection) and,
# for comparison, with one stream (--streams-per-server 1); see
# docs/transport.md for where the difference comes from. A third raw-TCP
# figure, for information: stoker-raw-tcp-bench moves batch-sized buffers
# (38.5 MB, from and into memory rather than the cache, as a data server and
# a client must); the goal is against iperf3.
# Rates are bytes of image data per second (1 GB = 1e9 bytes).
# Usage: tests/bench/loopback_goodput.sh [BUILD_DIR] [OUT_JSON]
set -euo pipefail
build=${1:-build}
out_json=${2:-$build/loopback_goodput.json}
seconds=${GOODPUT_SECONDS:-3}
repeats=${GOODPUT_REPEATS:-5}  # interleaved runs of each contender; medians are compared
command -v iperf3 >/dev/null || { echo "iperf3 missing: run deploy/install-deps.sh"; exit 1; }
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# 1. Raw TCP: one iperf3 stream over 127.0.0.1, with iperf3's default 128 KiB
#    writes and with 1 MiB writes; the faster of the two is the baseline.
iperf_rate() {  # extra iperf3 client args -> bytes/s
  local port
  port=$(free_port)
  iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  iperf3 -c 127.0.0.1 -p "$port" -t "$seconds" -J "$@" >"$work/iperf.json"
  wait "$server" 2>/dev/null || true
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]/8)' "$work/iperf.json"
}

# 2. Stoker: one server, one client, 256 x 224x224x3 uint8 batches (38.5 MB).
#    The dataset is 64 generated JPEGs hard-linked 1200 times: in cache mode
#    only the first batch is decoded, so the file count costs nothing. The
#    first 10 batches (decode, connection and buffer warm-up) are left out of the figure.
"$build/tests/stoker-make-images" --out "$work/src" --classes 1 --per-class 64 --min-side 256 --max-side 400 >/dev/null
mkdir -p "$work/data/ds/c"
/usr/bin/python3 - "$work" <<'PY'
import glob, os, sys
work = sys.argv[1]
files = sorted(glob.glob(f"{work}/src/class_000/*.jpg"))
for i in range(1200):  # 76800 samples: 300 batches of 256
    for f in files:
        os.link(f, f"{work}/data/ds/c/{i}_{os.path.basename(f)}")
PY
"$build/server/stoker-server" --host 127.0.0.1 --port 0 --metrics-port -1 --workers 1 \
  --data-root "$work/data" >"$work/server.out" 2>"$work/server.err" &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$work/server.out" && break; sleep 0.1; done
sport=$(grep "listening on" "$work/server.out" | grep -o '[0-9]*$')
stoker_rate() {  # extra stoker-bench args -> bytes/s
  "$build/client/stoker-bench" --servers "127.0.0.1:$sport" --dataset ds --batch-size 256 \
    --pipeline 'center_crop(224)' --cache-mode batch --epochs 1 --warmup-batches 10 --device none \
    --metrics-port -1 --json "$work/stoker.json" "$@" >"$work/bench.out"
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["megabytes_per_second"]*1e6)' "$work/stoker.json"
}

# The machine's speed drifts; interleave the contenders and compare medians.
tcp_default_runs=() tcp_1m_runs=() tcp_batch_runs=() stoker_runs=() stoker_one_runs=()
for r in $(seq "$repeats"); do
  tcp_default_runs+=("$(iperf_rate)")
  tcp_1m_runs+=("$(iperf_rate -l 1M)")
  tcp_batch_runs+=("$("$build/tests/stoker-raw-tcp-bench" --seconds "$seconds" | awk '{print $2}')")
  stoker_runs+=("$(stoker_rate)")
  stoker_one_runs+=("$(stoker_rate --streams-per-server 1)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
tcp_default_bps=$(median "${tcp_default_runs[@]}")
tcp_1m_bps=$(median "${tcp_1m_runs[@]}")
stoker_bps=$(median "${stoker_runs[@]}")
stoker_one_bps=$(median "${stoker_one_runs[@]}")
tcp_batch_bps=$(median "${tcp_batch_runs[@]}")
echo "runs (bytes/s): iperf3 128K ${tcp_default_runs[*]}; iperf3 1M ${tcp_1m_runs[*]};" \
  "raw TCP, batch buffers ${tcp_batch_runs[*]}; stoker ${stoker_runs[*]}; stoker, one stream ${stoker_one_runs[*]}"

/usr/bin/python3 - "$tcp_default_bps" "$tcp_1m_bps" "$stoker_bps" "$stoker_one_bps" "$tcp_batch_bps" "$out_json" <<'PY'
import json, sys
tcp_default, tcp_1m, stoker, stoker_one, tcp_batch = (float(v) for v in sys.argv[1:6])
out = sys.argv[6]
tcp = max(tcp_default, tcp_1m)
ratio, ratio_one = stoker / tcp, stoker_one / tcp
result = {"iperf3_128k_writes_bytes_per_second": tcp_default, "iperf3_1m_writes_bytes_per_second": tcp_1m,
          "baseline_bytes_per_second": tcp, "stoker_goodput_bytes_per_second": stoker,
          "stoker_one_stream_goodput_bytes_per_second": stoker_one,
          "raw_tcp_batch_buffers_bytes_per_second": tcp_batch, "ratio_to_raw_tcp_batch_buffers": stoker / tcp_batch,
          "ratio": ratio, "ratio_one_stream": ratio_one, "goal": 0.9, "meets_goal": ratio >= 0.9}
json.dump(result, open(out, "w"), indent=2)
print("medians of the interleaved runs:")
print(f"raw TCP, iperf3 128 KiB writes     {tcp_default / 1e9:7.3f} GB/s")
print(f"raw TCP, iperf3 1 MiB writes       {tcp_1m / 1e9:7.3f} GB/s")
print(f"raw TCP, batch-sized buffers       {tcp_batch / 1e9:7.3f} GB/s")
print(f"Stoker batches (cache mode)        {stoker / 1e9:7.3f} GB/s")
print(f"Stoker batches, one stream         {stoker_one / 1e9:7.3f} GB/s")
print(f"ratio to the faster TCP run        {ratio:7.3f}  (goal >= 0.9: {'met' if ratio >= 0.9 else 'NOT met'})")
print(f"ratio with one stream per server   {ratio_one:7.3f}")
print(f"ratio to raw TCP, batch buffers    {stoker / tcp_batch:7.3f}  (for information)")
print(f"written to {out}")
PY
