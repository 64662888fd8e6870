# Sourced by tests/bench/*.sh: starts stoker-server processes on 127.0.0.1
# (free ports, metrics off) and stops them when the script exits, even when it
# fails. Needs $build (the build directory) and $work (a scratch directory,
# removed at exit).
#   start_server NAME [FLAG...]   starts one server with --data-root $work and
#                                 the flags; sets $server_address (host:port)
#   stop_servers                  stops the servers started so far
bench_pids=()
stop_servers() {
  for p in "${bench_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${bench_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  bench_pids=()
}
bench_cleanup() {
  stop_servers
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap bench_cleanup EXIT

start_server() {
  local name=$1
  shift
  local log="$work/server_$name.log"
  "$build/server/stoker-server" --host 127.0.0.1 --port 0 --metrics-port -1 --data-root "$work" "$@" \
    >"$log" 2>&1 &
  bench_pids+=($!)  # in this shell, not a $(...) subshell, so that the exit trap stops it
  server_address=
  for _ in $(seq 100); do
    server_address=$(sed -n 's/.*listening on \(.*\)$/\1/p' "$log" | head -1)
    [[ -n $server_address ]] && return
    sleep 0.1
  done
  echo "stoker-server $name did not start: $(cat "$log")" >&2
  exit 1
}
