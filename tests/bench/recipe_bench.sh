#!/usr/bin/env bash
# The timm-style ImageNet recipe, per core, against torchvision's DataLoader
# doing the same work in one run on the standard photo set:
# RandomResizedCrop(224) + flip + RandAugment(2, 9) (or TrivialAugmentWide) +
# RandomErasing(0.25, per-pixel noise), float output for torchvision (its
# erasing works on the normalised tensor), uint8 for Stoker (normalising is
# the device's job). torchvision's RandAugment stands in for timm's
# rand-m9-mstd0.5-inc1, which Stoker does not have. Both sides use one
# worker: a DataLoader worker process, a server worker thread. Then each
# op's cost per 224x224 image (stoker-op-cost). Goal: >= 3x per core.
# Usage: tests/bench/recipe_bench.sh [BUILD_DIR]   (BENCH_IMAGES, default 1000)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
images=${BENCH_IMAGES:-1000}
photos=.bench/photos-$images
../shared/bench/photoset.sh "$photos" "$images" >/dev/null
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
cat $(find "$photos" -name '*.jpg') >/dev/null

tv() {  # RECIPE
  /usr/bin/python3 tests/bench/torchvision_bench.py "$photos" --workers 1 --output float --recipe "$1" |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["images_per_second"])'
}
stoker() {  # PIPELINE
  "$build/server/stoker-server" --host 127.0.0.1 --port 0 --metrics-port -1 --workers 1 \
    --data-root "$(dirname "$photos")" >"$work/server.out" 2>"$work/server.err" &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 100); do grep -q "listening on" "$work/server.out" && break; sleep 0.1; done
  local port
  port=$(grep "listening on" "$work/server.out" | grep -o '[0-9]*$')
  "$build/client/stoker-bench" --servers "127.0.0.1:$port" --dataset "$(basename "$photos")" --batch-size 64 \
    --epochs 1 --warmup-batches 2 --window 4 --device none --metrics-port -1 --json "$work/stoker.json" \
    --pipeline "$1" >/dev/null
  kill -TERM "$pid"; wait "$pid" || true
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' "$work/stoker.json"
}
base="random_resized_crop(224), random_horizontal_flip(0.5)"
erase="random_erasing(p=0.25, value_random=true)"
echo "== torchvision, RandAugment recipe" >&2; tv_ra=$(tv randaugment)
echo "== stoker, RandAugment recipe" >&2; st_ra=$(stoker "$base, rand_augment(num_ops=2, magnitude=9), $erase")
echo "== torchvision, TrivialAugmentWide recipe" >&2; tv_ta=$(tv trivialaugment)
echo "== stoker, TrivialAugmentWide recipe" >&2; st_ta=$(stoker "$base, trivial_augment_wide(), $erase")
/usr/bin/python3 - "$tv_ra" "$st_ra" "$tv_ta" "$st_ta" <<'PY'
import sys
tv_ra, st_ra, tv_ta, st_ta = map(float, sys.argv[1:])
print("\nimages/s per core (one DataLoader worker / one server worker thread)")
print(f"  RandAugment(2, 9) recipe:   torchvision {tv_ra:7.1f}   stoker {st_ra:7.1f}   {st_ra / tv_ra:5.2f}x "
      f"(goal >= 3: {'met' if st_ra / tv_ra >= 3 else 'NOT met'})")
print(f"  TrivialAugmentWide recipe:  torchvision {tv_ta:7.1f}   stoker {st_ta:7.1f}   {st_ta / tv_ta:5.2f}x "
      f"(goal >= 3: {'met' if st_ta / tv_ta >= 3 else 'NOT met'})")
PY
echo
"$build/tests/stoker-op-cost" --dir "$photos" --images 48 --rounds 10 \
  --ops "rand_augment(num_ops=2, magnitude=9);trivial_augment_wide();auto_augment(policy=imagenet);augmix();rotate(degrees=-30:30);affine(degrees=-10:10, translate_x=0.1, translate_y=0.1, scale=0.9:1.1, shear_x=-5:5);perspective(p=1);random_crop(200, padding=8)"
