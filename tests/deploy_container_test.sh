#!/usr/bin/env bash
# deploy/container/Containerfile, checked, built and run with Debian's podman.
#   1. Static: stages "build" and "runtime", a non-root USER, a HEALTHCHECK,
#      every COPY source present in the repository, the ENTRYPOINT one of
#      the binaries collect.sh installs.
#   2. The base image, with no registry: Debian bookworm made by debootstrap
#      (minbase) and imported into podman.
#   3. The image: both stages, the build stage compiling from source inside
#      podman (about 2 minutes here). STOKER_CONTAINER_PREBUILT=1 builds only
#      the runtime stage, with the build stage replaced by this build's
#      binaries (--build-context build=..., laid out by the same
#      deploy/container/collect.sh), for quick iterations.
#   4. Run: read-only root filesystem, the dataset mounted read-only, host
#      network on 127.0.0.1 only, a Python transform module mounted
#      (tests/python_transforms, --python-transforms); the image's
#      HEALTHCHECK reports healthy, the process runs as uid 65532, and
#      stoker-bench reads an epoch of images, one through the Python
#      transform (the image's Python and NumPy), and epochs of audio and
#      video (the image's media module and Debian's FFmpeg) from it.
# Where podman or debootstrap cannot work here, step 1 still runs and the test
# exits 77 (skipped) saying why.
# Usage: deploy_container_test.sh REPO_ROOT BUILD_DIR
set -uo pipefail
root=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
file=$root/deploy/container/Containerfile
tag=stoker-test-$$
work=$(mktemp -d)
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL: $1"; [ -n "${2:-}" ] && echo "$2" | tail -30; failed=$((failed + 1)); }
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ] || exit 1
  exit "${1:-0}"
}
# runc: crun refuses this VM's mixed cgroup v1/v2 layout ("cgroups in hybrid
# mode not supported"); the ulimits stay under the VM's hard limits (podman's
# defaults exceed them and the runtime's setrlimit fails).
oci_runtime=$(command -v runc >/dev/null && echo runc || echo crun)
limits=(--ulimit nofile=16384:16384 --ulimit nproc=4096:4096)
pm() { podman --runtime "$oci_runtime" "$@"; }
cleanup() {
  if command -v podman >/dev/null; then
    podman rm -f "$tag" >/dev/null 2>&1
    podman rmi -f "localhost/$tag:latest" "localhost/$tag-base:bookworm" >/dev/null 2>&1
  podman image prune -f >/dev/null 2>&1  # the build stage's layers
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# --- 1. static ---------------------------------------------------------------
stages=$(sed -n 's/^FROM .* AS \([a-z]*\)$/\1/p' "$file" | tr '\n' ' ')
[ "$stages" = "build runtime " ] && ok "stages: $stages" || fail "expected stages 'build runtime', got '$stages'"
runtime=$(sed -n '/^FROM .* AS runtime$/,$p' "$file")
user=$(echo "$runtime" | sed -n 's/^USER \(.*\)$/\1/p')
[ -n "$user" ] && [ "${user%%:*}" != 0 ] && [ "${user%%:*}" != root ] && ok "runtime runs as non-root user $user" \
  || fail "runtime stage has no non-root USER ('$user')"
echo "$runtime" | grep -q '^HEALTHCHECK ' && echo "$runtime" | grep -q 'CMD \["/usr/local/bin/stoker-health"' && ok "runtime has a HEALTHCHECK with stoker-health" \
  || fail "runtime stage has no HEALTHCHECK"
missing=
while read -r src; do
  [ -e "$root/$src" ] || missing="$missing $src"
done < <(sed -n 's/^COPY \([^-][^ ]*\) .*/\1/p' "$file")
[ -z "$missing" ] && ok "every COPY source exists" || fail "COPY sources missing:$missing"
# Every source folder the top-level CMakeLists adds, or reads files from
# (include/, cmake/), is copied into the build stage (python/ is off there):
# a new folder is not forgotten.
uncopied=
read_from=$(grep -o '\b[a-z_]*/[a-zA-Z_]*/\?[a-zA-Z_.]*\.\(h\|hpp\|in\)\b' "$root/CMakeLists.txt" | cut -d/ -f1)
for dir in $( (sed -n 's/^ *add_subdirectory(\([a-z_]*\).*/\1/p' "$root/CMakeLists.txt"; echo "$read_from") | sort -u); do
  [ "$dir" = python ] && continue
  [ -d "$root/$dir" ] || continue  # a system header's folder (stb/stb_image.h), not one of ours
  grep -q "^COPY $dir/ " "$file" || uncopied="$uncopied $dir"
done
[ -z "$uncopied" ] && ok "every source folder CMake adds is copied into the build stage" \
  || fail "source folders not copied into the build stage:$uncopied"
entry=$(sed -n 's/^ENTRYPOINT \["\/usr\/local\/bin\/\([^"]*\)"\]$/\1/p' "$file")
grep -q "/$entry\b" "$root/deploy/container/collect.sh" && ok "ENTRYPOINT $entry is installed by collect.sh" \
  || fail "ENTRYPOINT '$entry' is not among collect.sh's binaries"

# --- 2. base image -----------------------------------------------------------
why=
if ! command -v podman >/dev/null; then why="podman is not installed (deploy/install-deps.sh installs it)"
elif ! command -v debootstrap >/dev/null; then why="debootstrap is not installed"
elif ! out=$(podman info 2>&1); then why="podman cannot run here: $(echo "$out" | tail -2)"
fi
if [ -n "$why" ]; then
  echo "SKIPPED: building and running the image: $why"
  finish 77
fi
dangling_before=$(podman images -q -f dangling=true 2>/dev/null)
# Containers and images of earlier runs that were killed (a ctest timeout
# skips their exit trap): named after a pid that is gone.
for name in $(podman ps -a --format '{{.Names}}' 2>/dev/null | grep '^stoker-test-[0-9]*$'); do
  kill -0 "${name#stoker-test-}" 2>/dev/null || podman rm -f "$name" >/dev/null 2>&1
done
mirror=$(sed -n 's/^URIs: \(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
mirror=${mirror:-http://deb.debian.org/debian}
t0=$(date +%s)
if ! out=$(debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" 2>&1); then
  echo "SKIPPED: building and running the image: debootstrap from $mirror failed: $(echo "$out" | tail -3)"
  finish 77
fi
tar -C "$work/rootfs" -c . | podman import -q - "localhost/$tag-base:bookworm" >/dev/null \
  && ok "base image: Debian bookworm minbase by debootstrap ($(( $(date +%s) - t0 )) s)" \
  || { fail "podman import of the debootstrap tree"; finish; }
if ! out=$(pm run --rm --network=host "${limits[@]}" "localhost/$tag-base:bookworm" true 2>&1); then
  echo "SKIPPED: running the image: podman ($oci_runtime) cannot start a container here: $(echo "$out" | tail -2)"
  finish 77
fi

# --- 3. image -------------------------------------------------------------------
t0=$(date +%s)
if [ "${STOKER_CONTAINER_PREBUILT:-0}" != 1 ]; then
  how="both stages, compiled from source in the build stage"
  out=$(pm build --network=host "${limits[@]}" --build-arg "BASE=localhost/$tag-base:bookworm" --format docker \
        -f "$file" -t "localhost/$tag:latest" "$root" 2>&1)
else
  how="runtime stage over this build's binaries (STOKER_CONTAINER_PREBUILT=1)"
  mkdir -p "$work/prebuilt"
  "$root/deploy/container/collect.sh" "$build" "$work/prebuilt/out" >/dev/null
  out=$(pm build --network=host "${limits[@]}" --build-arg "BASE=localhost/$tag-base:bookworm" --target runtime \
        --build-context "build=$work/prebuilt" --format docker -f "$file" -t "localhost/$tag:latest" "$root" 2>&1)
fi
if [ $? -eq 0 ]; then
  size=$(podman image inspect "localhost/$tag:latest" --format '{{.Size}}')
  ok "image built: $how ($(( $(date +%s) - t0 )) s, $((size / 1000000)) MB)"
else
  fail "podman build ($how)" "$out"
  finish
fi

# --- 4. run -------------------------------------------------------------------
"$build/tests/stoker-make-images" --out="$work/data/ds" --classes=4 --per-class=32 --min-side=160 --max-side=320 \
  >/dev/null 2>&1
for c in a b; do
  mkdir -p "$work/data/clips/$c" "$work/data/videos/$c"
  for i in 1 2; do
    ffmpeg -v error -y -f lavfi -i "sine=frequency=$((300 * i)):sample_rate=22050:duration=0.8" "$work/data/clips/$c/$i.wav"
    ffmpeg -v error -y -f lavfi -i testsrc2=size=64x48:rate=25:duration=0.6 -c:v libx264 -pix_fmt yuv420p \
      "$work/data/videos/$c/$i.mp4"
  done
done
chmod -R a+rX "$work/data"
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# The image's own HEALTHCHECK asks 127.0.0.1:50051: the server listens there
# (host network) when that port is free; otherwise on a free port with the
# check pointed at it, said below.
health=()
if /usr/bin/python3 -c 'import socket; socket.socket().bind(("127.0.0.1", 50051))' 2>/dev/null; then
  port=50051
else
  port=$(free_port)
  health=(--health-cmd "/usr/local/bin/stoker-health --addr=127.0.0.1:$port --timeout-seconds=3")
  echo "note: 127.0.0.1:50051 is taken here; the health check is pointed at port $port"
fi
mport=$(free_port)
if ! out=$(pm run -d --name "$tag" --network=host "${limits[@]}" --read-only -v "$work/data:/data:ro" \
     -v "$root/tests/python_transforms:/transforms:ro" -e PYTHONPATH=/transforms \
     "${health[@]}" "localhost/$tag:latest" --data-root=/data --host=127.0.0.1 --port="$port" \
     --metrics-port="$mport" --python-transforms=stoker_test_transforms 2>&1); then
  fail "podman run" "$out"
  finish
fi
healthy=
for _ in $(seq 40); do
  if pm healthcheck run "$tag" >/dev/null 2>&1; then healthy=1; break; fi
  sleep 0.5
done
[ -n "$healthy" ] && ok "the container's health check reports healthy (${health:+overridden, }stoker-health over gRPC health)" \
  || fail "the container never became healthy" "$(podman logs "$tag" 2>&1 | tail -10)"
uid=$(pm exec "$tag" id -u 2>&1)
[ "$uid" = 65532 ] && ok "the server runs as uid 65532" || fail "the server runs as uid '$uid'"
pm exec "$tag" sh -c 'touch /probe' >/dev/null 2>&1 && fail "the root filesystem is writable" \
  || ok "the root filesystem is read-only"
if out=$("$build/client/stoker-bench" --servers="127.0.0.1:$port" --dataset=ds --batch-size=16 --epochs=1 \
         --device=none --metrics-port=-1 --slowest=0 --json="$work/bench.json" 2>&1) \
   && imgs=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["images"])' "$work/bench.json") \
   && [ "$imgs" = 128 ]; then
  ok "stoker-bench read an epoch (128 images) from the container"
else
  fail "stoker-bench against the container" "$out"
fi
# The image's Python with NumPy runs a mounted transform; its media module
# and Debian's FFmpeg decode audio and video.
for run in "ds|center_crop(64), python(stoker_test_transforms:invert)|128|an epoch through a Python transform" \
           "clips|audio(rate=16000, seconds=0.5)|4|an epoch of audio" \
           "videos|video_clip(frames=2), center_crop(32)|4|an epoch of video"; do
  IFS='|' read -r ds pipeline want what <<<"$run"
  if out=$("$build/client/stoker-bench" --servers="127.0.0.1:$port" --dataset="$ds" --pipeline="$pipeline" \
           --batch-size=2 --epochs=1 --device=none --metrics-port=-1 --slowest=0 --json="$work/bench-$ds.json" 2>&1) \
     && imgs=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["images"])' "$work/bench-$ds.json") \
     && [ "$imgs" = "$want" ]; then
    ok "stoker-bench read $what ($want samples) from the container"
  else
    fail "stoker-bench against the container: $what" "$out$(podman logs "$tag" 2>&1 | tail -5)"
  fi
done
pm stop -t 30 "$tag" >/dev/null 2>&1
code=$(podman inspect "$tag" --format '{{.State.ExitCode}}' 2>&1)
[ "$code" = 0 ] && ok "podman stop (SIGTERM) ends it cleanly" || fail "exit code after stop: $code" "$(podman logs "$tag" 2>&1 | tail -5)"
finish
