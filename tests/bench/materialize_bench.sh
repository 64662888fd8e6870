#!/usr/bin/env bash
# Offline materialisation against decoding online, in one run, on the standard
# photo set (issue 13). For each strategy it materialises the set with
# stoker-materialize (all cores), measures its storage (du) and the offline
# time, then serves it from one stoker-server with ONE worker thread to
# stoker-bench over loopback with RandomResizedCrop(224) + flip online, and
# compares with the same server on the source JPEGs: images per second of the
# worker's time (what one worker core makes; the goal figure) and images/s
# delivered to the client (on a 2-core machine the client and the transport
# share the other core, which caps this figure for the cheap strategies).
# Rounds are interleaved; the median of each strategy's rounds counts.
# Then stoker-profile profiles the same pipeline on a sample of the set
# (BENCH_PROFILE_SAMPLE) with every format and compression, and the run
# checks it against what was measured here in full.
# Goals: resize(256) raw pixels >= 5x the source; resize(256) JPEG q90 >= 1.5x;
# the profiler's throughput-only pick is the strategy measured fastest here,
# and its storage figures are within 5 % of du's.
# Usage: tests/bench/materialize_bench.sh [BUILD_DIR] [OUT_JSON]
#   BENCH_IMAGES (default 1000), BENCH_ROUNDS (default 3), BENCH_PROFILE_SAMPLE (default 250)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out_json=${2:-$build/materialize_bench.json}
images=${BENCH_IMAGES:-1000}
rounds=${BENCH_ROUNDS:-3}
profile_sample=${BENCH_PROFILE_SAMPLE:-250}
pipeline='resize(256), random_resized_crop(224), random_horizontal_flip(0.5)'
photos=.bench/photos-$images

deploy/install-deps.sh
echo "== photo set: $images images in $photos (../shared/bench/photoset.sh)"
../shared/bench/photoset.sh "$photos" "$images"
# The server's data root is .bench: the photo set and, in a scratch directory
# removed at exit, the materialised copies.
work=$(mktemp -d -p .bench materialize-bench.XXXXXX)
source tests/bench/bench_servers.sh
data_root=.bench
scratch=$(basename "$work")

# name format compression
strategies=("raw raw none" "raw+lz4 raw lz4" "raw+zstd raw zstd" "jpeg90 jpeg:90 none" "png png none")
for s in "${strategies[@]}"; do
  read -r name format compression <<<"$s"
  echo "== materialise resize(256) as $name" >&2
  start=$(date +%s.%N)
  "$build/materialize/stoker-materialize" --data-root "$data_root" --dataset "photos-$images" --prefix 'resize(256)' \
    --format "$format" --compression "$compression" --out "$work/$name" --progress none 2>"$work/mat_$name.log" |
    tee -a "$work/materialize.txt" >&2
  end=$(date +%s.%N)
  echo "$name $(du -sb --exclude='*.stoker-index' "$work/$name" | cut -f1) $(echo "$end - $start" | bc)" >>"$work/offline.txt"
done
echo "source $(du -sbL "$photos" | cut -f1) 0" >>"$work/offline.txt"
cat "$photos"/*/* "$work"/*/shard-*.tar >/dev/null  # every contender reads from the page cache

start_server one --workers 1 --data-root "$data_root"
online() {  # DATASET PIPELINE
  "$build/client/stoker-bench" --servers "$server_address" --dataset "$1" --pipeline "$2" --batch-size 64 \
    --epochs 2 --warmup-batches 2 --device none --metrics-port -1 --json "$work/bench.json" >/dev/null
  /usr/bin/python3 -c 'import json,sys; j = json.load(open(sys.argv[1]))
print(j["images_per_second"], j["server_images_per_worker_second"])' "$work/bench.json"
}
for r in $(seq "$rounds"); do
  echo "== round $r of $rounds: one worker thread, RandomResizedCrop(224) + flip online" >&2
  echo "source $(online "photos-$images" 'random_resized_crop(224), random_horizontal_flip(0.5)')" >>"$work/online.txt"
  for s in "${strategies[@]}"; do
    read -r name _ <<<"$s"
    echo "$name $(online "$scratch/$name" 'resize(256), random_resized_crop(224), random_horizontal_flip(0.5)')" >>"$work/online.txt"
  done
done

stop_servers
echo "== stoker-profile: '$pipeline' on $profile_sample of the $images photos" >&2
"$build/materialize/stoker-profile" --data-root "$data_root" --dataset "photos-$images" --pipeline "$pipeline" \
  --sample "$profile_sample" --formats raw,jpeg:90,png --compressions none,lz4,zstd --batch-size 64 \
  --rounds "$rounds" --work-dir "$work/profile" --progress none --json "$work/profile.json" \
  --html "${out_json%.json}_profile.html" | tee "$work/profile.txt" >&2

/usr/bin/python3 - "$out_json" "$images" "$rounds" "$work/offline.txt" "$work/online.txt" "$work/profile.json" <<'PY'
import json, statistics, sys
out, images, rounds, offline_path, online_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
profile = json.load(open(sys.argv[6]))
offline = {}
for line in open(offline_path):
    name, size, seconds = line.split()
    offline[name] = (int(size), float(seconds))
online, per_core = {}, {}
for line in open(online_path):
    name, rate, worker_rate = line.split()
    online.setdefault(name, []).append(float(rate))
    per_core.setdefault(name, []).append(float(worker_rate))
base = statistics.median(per_core["source"])
base_delivered = statistics.median(online["source"])
imagenet = 1_281_167
rows = []
for name in ["source", "raw", "raw+lz4", "raw+zstd", "jpeg90", "png"]:
    size, seconds = offline[name]
    rate, delivered = statistics.median(per_core[name]), statistics.median(online[name])
    rows.append({"strategy": name if name == "source" else f"resize(256) {name}", "bytes": size,
                 "bytes_per_sample": size / images, "imagenet_1k_gib": size / images * imagenet / 2**30,
                 "offline_seconds": seconds, "images_per_worker_second": rate, "rounds": per_core[name],
                 "ratio_vs_source": rate / base, "delivered_images_per_second": delivered,
                 "delivered_rounds": online[name], "delivered_ratio_vs_source": delivered / base_delivered})
by = {r["strategy"]: r for r in rows}
raw, jpeg = by["resize(256) raw"]["ratio_vs_source"], by["resize(256) jpeg90"]["ratio_vs_source"]
# The profiler's names for the strategies measured here.
profile_name = {"source": "source", "resize(256) raw": "resize(256) raw", "resize(256) raw+lz4": "resize(256) raw+lz4",
                "resize(256) raw+zstd": "resize(256) raw+zstd", "resize(256) jpeg90": "resize(256) jpeg:90",
                "resize(256) png": "resize(256) png"}
profiled = {s["name"]: s for s in profile["strategies"]}
fastest = max(rows, key=lambda r: r["images_per_worker_second"])["strategy"]
pick_ok = profile["recommended"] == profile_name[fastest]
storage = []
for r in rows:
    p = profiled[profile_name[r["strategy"]]]
    storage.append((r["strategy"], p["storage_bytes"], r["bytes"], p["storage_bytes"] / r["bytes"] - 1))
storage_ok = all(abs(e) <= 0.05 for _, _, _, e in storage)
result = {"images": images, "rounds": rounds, "strategies": rows,
          "goal_raw_5x": raw >= 5, "goal_jpeg90_1_5x": jpeg >= 1.5,
          "profile": {"sample": profile["sample"], "recommended": profile["recommended"], "fastest_measured": fastest,
                      "goal_pick_is_fastest": pick_ok,
                      "storage_vs_du": [{"strategy": n, "profiled_bytes": p, "du_bytes": d, "error": e}
                                        for n, p, d, e in storage],
                      "goal_storage_within_5_percent": storage_ok}}
json.dump(result, open(out, "w"), indent=2)
print(f"\n{images} photos; online: one server worker thread, RandomResizedCrop(224) + flip, batch 64, "
      f"median of {rounds} interleaved rounds")
print("  images/worker-s: images per second of the server's worker time (read + decode + augment + assemble);")
print("  delivered: images/s reaching stoker-bench (client and transport share this machine's other core)")
print(f"  {'strategy':24s} {'bytes/sample':>12s} {'ImageNet-1k':>12s} {'offline s':>10s} {'images/worker-s':>15s} "
      f"{'vs source':>9s} {'delivered/s':>11s} {'vs source':>9s}")
for r in rows:
    print(f"  {r['strategy']:24s} {r['bytes_per_sample']:12.0f} {r['imagenet_1k_gib']:8.1f} GiB "
          f"{r['offline_seconds']:10.1f} {r['images_per_worker_second']:15.1f} {r['ratio_vs_source']:8.2f}x "
          f"{r['delivered_images_per_second']:11.1f} {r['delivered_ratio_vs_source']:8.2f}x")
print(f"  goal: resize(256) raw >= 5x source: {raw:.2f}x ({'met' if raw >= 5 else 'NOT met'})")
print(f"  goal: resize(256) jpeg90 >= 1.5x source: {jpeg:.2f}x ({'met' if jpeg >= 1.5 else 'NOT met'})")
print(f"\nstoker-profile on {profile['sample']} of the {images} photos (table above):")
print(f"  throughput-only pick: {profile['recommended']}; fastest measured here: {fastest} "
      f"({'met' if pick_ok else 'NOT met'})")
for n, p, d, e in storage:
    print(f"  storage {n:24s} profiled {p / 2**20:9.2f} MiB  du {d / 2**20:9.2f} MiB  {100 * e:+6.2f} %")
print(f"  goal: profiled storage within 5 % of du: {'met' if storage_ok else 'NOT met'}")
print(f"written to {out}")
PY
