#!/usr/bin/env bash
# The mains under AddressSanitizer + UndefinedBehaviorSanitizer with leak
# checking: stoker-server and stoker-bench from the sanitizer build run a
# short job over loopback (127.0.0.1, a free port), the server stops on
# SIGTERM, and both must exit 0 -- so flag parsing, start-up, the metrics
# endpoint, shutdown and exit are checked, not only the library code the test
# binaries reach. Also `--help` of each main.
# Usage: tests/asan_mains.sh SAN_BUILD_DIR
set -euo pipefail
build=${1:?usage: tests/asan_mains.sh SAN_BUILD_DIR}
work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

for main in server/stoker-server client/stoker-bench client/stoker-diagnose; do
  # absl's --help exits 1 after printing; a sanitizer report would abort (134).
  rc=0
  "$build/$main" --help >"$work/help.txt" 2>&1 || rc=$?
  if [[ $rc -ne 0 && $rc -ne 1 ]] || ! grep -q -- "--" "$work/help.txt"; then
    echo "asan mains: $main --help failed (exit $rc):" >&2
    cat "$work/help.txt" >&2
    exit 1
  fi
done

log="$work/server.log"
"$build/server/stoker-server" --host 127.0.0.1 --port 0 --metrics-port 0 --workers 2 \
  --data-root "$work" --shutdown-grace-seconds 2 >"$log" 2>&1 &
server_pid=$!
address=
for _ in $(seq 300); do
  address=$(sed -n 's/.*listening on \(.*\)$/\1/p' "$log" | head -1)
  [[ -n $address ]] && break
  if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
  sleep 0.1
done
if [[ -z $address ]]; then
  echo "asan mains: stoker-server did not start:" >&2
  cat "$log" >&2
  exit 1
fi

if ! "$build/client/stoker-bench" --servers "$address" --dataset synthetic:64x48:96:3 --batch-size 8 \
    --pipeline 'random_resized_crop(32), random_horizontal_flip' --epochs 2 --metrics-port 0 \
    --json "$work/bench.json" >"$work/bench.log" 2>&1; then
  echo "asan mains: stoker-bench failed:" >&2
  cat "$work/bench.log" >&2
  exit 1
fi
grep -q '"images": 192' "$work/bench.json" || {
  echo "asan mains: stoker-bench did not report 2 x 96 images:" >&2
  cat "$work/bench.json" >&2
  exit 1
}

kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=
if [[ $rc -ne 0 ]]; then
  echo "asan mains: stoker-server exited $rc after SIGTERM:" >&2
  cat "$log" >&2
  exit 1
fi
echo "asan mains: stoker-server, stoker-bench and stoker-diagnose clean (help, a 2-epoch run, SIGTERM)"
