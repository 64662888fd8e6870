#!/usr/bin/env bash
# stoker-materialize on local workers against the data-server pool
# (--servers), in one run, on the standard photo set: resize(256) raw pixels
# made by one local worker thread, by one stoker-server with one worker, and
# by two such servers; samples/s of each and their ratios to the local run,
# and a check that all three outputs hold the same shards (checksums). On a
# 2-core machine the two servers share the cores with stoker-materialize
# (which receives and writes the shards), so the pool's figure is a floor.
# All three use 128 samples per shard, so their shards must be identical.
# Rounds are interleaved; the median counts.
# Usage: tests/bench/materialize_pool_bench.sh [BUILD_DIR]
#   BENCH_IMAGES (default 1000), BENCH_ROUNDS (default 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
images=${BENCH_IMAGES:-1000}
rounds=${BENCH_ROUNDS:-3}
photos=.bench/photos-$images

deploy/install-deps.sh
echo "== photo set: $images images in $photos (../shared/bench/photoset.sh)"
../shared/bench/photoset.sh "$photos" "$images"
work=$(mktemp -d -p .bench materialize-pool.XXXXXX)
source tests/bench/bench_servers.sh
cat "$photos"/*/* >/dev/null  # every contender reads from the page cache

start_server a --workers 1 --data-root .bench
a=$server_address
start_server b --workers 1 --data-root .bench
b=$server_address

materialize() {  # NAME FLAG...: prints samples/s
  local name=$1
  shift
  rm -rf "$work/$name"
  "$build/materialize/stoker-materialize" --dataset "photos-$images" --prefix 'resize(256)' --format raw \
    --shard-samples 128 --out "$work/$name" --progress none "$@" 2>"$work/$name.log" >"$work/$name.out"
  sed -n 's/^stoker-materialize: \([0-9]*\) samples .* \([0-9.]*\) s -> .*/\1 \2/p' "$work/$name.out" |
    awk '{ printf "%.1f\n", $1 / $2 }'
}
for r in $(seq "$rounds"); do
  echo "== round $r of $rounds" >&2
  echo "local $(materialize local --data-root .bench --local-workers 1)" >>"$work/rates.txt"
  echo "one_server $(materialize one_server --servers "$a")" >>"$work/rates.txt"
  echo "two_servers $(materialize two_servers --servers "$a,$b")" >>"$work/rates.txt"
done
stop_servers

/usr/bin/python3 - "$work" "$images" "$rounds" <<'PY'
import json, statistics, sys
work, images, rounds = sys.argv[1], sys.argv[2], sys.argv[3]
rates = {}
for line in open(f"{work}/rates.txt"):
    name, rate = line.split()
    rates.setdefault(name, []).append(float(rate))
median = {n: statistics.median(v) for n, v in rates.items()}
shards = {n: [(s["name"], s["checksum"]) for s in json.load(open(f"{work}/{n}/manifest.json"))["shards"]]
          for n in rates}
same = all(shards[n] == shards["local"] for n in shards)
print(f"\n{images} photos, resize(256) raw, median of {rounds} interleaved rounds (samples/s offline)")
for n in ("local", "one_server", "two_servers"):
    print(f"  {n:12s} {median[n]:8.1f} samples/s  {median[n] / median['local']:5.2f}x local  (rounds: {rates[n]})")
print(f"  two servers vs one: {median['two_servers'] / median['one_server']:.2f}x")
print(f"  shards identical across the three outputs (names and xxh128 checksums): {'yes' if same else 'NO'}")
sys.exit(0 if same else 1)
PY
