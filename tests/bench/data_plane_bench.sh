#!/usr/bin/env bash
# The server's data plane side by side with the loader most users run today,
# in one run, on the same images and transforms (RandomResizedCrop(224) +
# RandomHorizontalFlip; antialiased on both sides, as torchvision's PIL path
# and Stoker's default, and Stoker once more with antialias=false):
#   1. torchvision ImageFolder + DataLoader, 1 worker and one per core, float
#      output (ToTensor + Normalize) and uint8 output (PILToTensor);
#   2. libjpeg-turbo full decode of every file on one core (just decoding);
#   3. stoker-server with 1 worker thread and with one per core, driven by
#      stoker-bench over loopback (uint8 NHWC batches of 64).
# Prints images/s and the ratios, and writes them as JSON.
# Goals for one server worker: >= 4.5x torchvision's 1-worker float rate and
# >= 1.1x the plain full-decode rate.
# Usage: tests/bench/data_plane_bench.sh [BUILD_DIR] [OUT_JSON]
#   BENCH_IMAGES (default 1000): size of the standard photo set used.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out_json=${2:-$build/data_plane_bench.json}
images=${BENCH_IMAGES:-1000}
photos=.bench/photos-$images
cores=$(nproc)

deploy/install-deps.sh
if ! /usr/bin/python3 -c 'import torchvision' 2>/dev/null; then
  echo "== installing python3-torchvision (Debian) for the baseline"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-torchvision >/dev/null
fi
echo "== photo set: $images images in $photos (../shared/bench/photoset.sh)"
../shared/bench/photoset.sh "$photos" "$images"

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

# Warm the page cache so that every contender reads from memory.
cat $(find "$photos" -name '*.jpg') >/dev/null

tv() {  # WORKERS OUTPUT
  echo "== torchvision DataLoader, $1 worker(s), $2 output" >&2
  /usr/bin/python3 tests/bench/torchvision_bench.py "$photos" --workers "$1" --output "$2" |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["images_per_second"])'
}
tv_1_float=$(tv 1 float)
tv_n_float=$(tv "$cores" float)
tv_1_uint8=$(tv 1 uint8)
tv_n_uint8=$(tv "$cores" uint8)

echo "== libjpeg-turbo full decode, one core" >&2
decode=$("$build/tests/stoker-decode-bench" --dir "$photos" --rounds 2 |
  /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["images_per_second"])')

stoker() {  # WORKERS [PIPELINE]
  echo "== stoker-server, $1 worker thread(s), stoker-bench over loopback ${2:-(antialiased, the default)}" >&2
  "$build/server/stoker-server" --host 127.0.0.1 --port 0 --metrics-port -1 --workers "$1" \
    --data-root "$(dirname "$photos")" >"$work/server.out" 2>"$work/server.err" &
  local pid=$!
  for _ in $(seq 100); do grep -q "listening on" "$work/server.out" && break; sleep 0.1; done
  local port
  port=$(grep "listening on" "$work/server.out" | grep -o '[0-9]*$')
  "$build/client/stoker-bench" --servers "127.0.0.1:$port" --dataset "$(basename "$photos")" --batch-size 64 --epochs 2 \
    --warmup-batches 2 --window 4 --device none --metrics-port -1 --json "$work/stoker.json" \
    ${2:+--pipeline "$2"} >/dev/null
  kill -TERM "$pid"; wait "$pid" || true
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' "$work/stoker.json"
}
stoker_1=$(stoker 1)
stoker_n=$(stoker "$cores")
sharp="random_resized_crop(224, antialias=false), random_horizontal_flip(0.5)"
stoker_1_sharp=$(stoker 1 "$sharp")
stoker_n_sharp=$(stoker "$cores" "$sharp")

/usr/bin/python3 - "$out_json" "$images" "$cores" "$tv_1_float" "$tv_n_float" "$tv_1_uint8" "$tv_n_uint8" \
  "$decode" "$stoker_1" "$stoker_n" "$stoker_1_sharp" "$stoker_n_sharp" <<'PY'
import json, sys
out, images, cores = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tv1f, tvnf, tv1u, tvnu, decode, s1, sn, s1s, sns = map(float, sys.argv[4:])
r = {
    "images": images, "cores": cores,
    "torchvision_1_worker_float": tv1f, "torchvision_all_workers_float": tvnf,
    "torchvision_1_worker_uint8": tv1u, "torchvision_all_workers_uint8": tvnu,
    "libjpeg_turbo_full_decode_1_core": decode,
    "stoker_1_worker": s1, "stoker_all_workers": sn,
    "stoker_1_worker_antialias_false": s1s, "stoker_all_workers_antialias_false": sns,
    "ratio_stoker_1_worker_antialias_false_vs_torchvision_1_worker_float": s1s / tv1f,
    "ratio_stoker_1_worker_vs_torchvision_1_worker_float": s1 / tv1f,
    "ratio_stoker_1_worker_vs_full_decode": s1 / decode,
    "ratio_stoker_all_vs_torchvision_all_float": sn / tvnf,
}
r["meets_goal_vs_torchvision"] = r["ratio_stoker_1_worker_vs_torchvision_1_worker_float"] >= 4.5
r["meets_goal_vs_decode"] = r["ratio_stoker_1_worker_vs_full_decode"] >= 1.1
json.dump(r, open(out, "w"), indent=2)
print(f"\nimages/s on {images} photos, RandomResizedCrop(224) + flip, {cores} cores")
rows = [("torchvision DataLoader, 1 worker, float", tv1f), (f"torchvision DataLoader, {cores} workers, float", tvnf),
        ("torchvision DataLoader, 1 worker, uint8", tv1u), (f"torchvision DataLoader, {cores} workers, uint8", tvnu),
        ("libjpeg-turbo full decode, 1 core", decode),
        ("stoker-server, 1 worker thread", s1), (f"stoker-server, {cores} worker threads", sn),
        ("stoker-server, 1 worker thread, antialias=false", s1s),
        (f"stoker-server, {cores} worker threads, antialias=false", sns)]
for name, v in rows:
    print(f"  {name:44s} {v:9.1f}")
g1 = r["ratio_stoker_1_worker_vs_torchvision_1_worker_float"]
g2 = r["ratio_stoker_1_worker_vs_full_decode"]
print(f"  stoker 1 worker / torchvision 1 worker float  {g1:6.2f}x  (goal >= 4.5: {'met' if g1 >= 4.5 else 'NOT met'})")
print(f"  stoker 1 worker / full decode                 {g2:6.2f}x  (goal >= 1.1: {'met' if g2 >= 1.1 else 'NOT met'})")
print(f"  stoker all / torchvision all workers float    {r['ratio_stoker_all_vs_torchvision_all_float']:6.2f}x")
print(f"  stoker 1 worker antialias=false / torchvision 1 worker float  "
      f"{r['ratio_stoker_1_worker_antialias_false_vs_torchvision_1_worker_float']:6.2f}x  (not like for like: "
      f"torchvision's PIL resize antialiases)")
print(f"written to {out}")
PY
