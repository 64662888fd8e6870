#!/usr/bin/env bash
# The folders' promise, checked on the built artefacts:
# - the data plane's archives (dataplane/, one per part) refer to no gRPC
#   symbol at all;
# - no part's archive refers to a symbol that a part above it defines (the
#   archives come bottom first, as tools/layers.txt orders the parts): a call
#   into a part above fails here, whatever the linker would have pulled in;
# - stoker-bench (the client) carries the data-plane core (local mode) but
#   none of the server's gRPC service (server/: DataServiceImpl, the stream
#   reactor, the stream state);
# - stoker-server carries both (so the symbol names checked are real).
set -euo pipefail
dataplane=$1 client=$2 server=$3
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }

# $1: the data-plane parts' archives, separated by colons (dataplane/CMakeLists.txt).
IFS=: read -r -a archives <<< "$dataplane"
[ "${#archives[@]}" -ge 1 ] || { echo "FAIL: no data-plane archive given"; exit 1; }
for archive in "${archives[@]}"; do
  grpc_refs=$(nm -C "$archive" | grep -c -E ' U .*(grpc::|grpc_)' || true)
  check "$(basename "$archive") refers to no gRPC symbol ($grpc_refs found)" '[ "$grpc_refs" -eq 0 ]'
done

# Each part's undefined symbols against what the parts above it define.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in "${!archives[@]}"; do
  # Defined: text (also ifunc, as the AVX2 clones are), weak, data, bss, read-only and unique symbols.
  nm --defined-only "${archives[$i]}" | awk 'NF == 3 && $2 ~ /^[TWDBRVGSiu]$/ {print $3}' \
    | sort -u > "$tmp/def.$i" || { echo "FAIL: nm cannot read ${archives[$i]}"; exit 1; }
  nm -u "${archives[$i]}" | awk 'NF >= 2 {print $NF}' | sort -u > "$tmp/undef.$i" \
    || { echo "FAIL: nm cannot read ${archives[$i]}"; exit 1; }
done
for i in "${!archives[@]}"; do
  : > "$tmp/above"
  for ((j = i + 1; j < ${#archives[@]}; j++)); do cat "$tmp/def.$j" >> "$tmp/above"; done
  sort -u -o "$tmp/above" "$tmp/above"
  # A symbol the part defines itself (an inline function, a template) is not a call upward.
  comm -12 "$tmp/undef.$i" "$tmp/above" | comm -23 - "$tmp/def.$i" > "$tmp/upward.$i"
  count=$(wc -l < "$tmp/upward.$i")
  upward=$(c++filt < "$tmp/upward.$i" | sed -n 1,5p)
  check "$(basename "${archives[$i]}") calls nothing a part above defines ($count found${upward:+: $upward})" \
    '[ "$count" -eq 0 ]'
done

service='stoker::DataServiceImpl::|stoker::StreamState::'
core='stoker::DataServiceCore::StartSession'
client_service=$(nm -C "$client" | grep -c -E "$service" || true)
client_core=$(nm -C "$client" | grep -c -E "$core" || true)
server_service=$(nm -C "$server" | grep -c -E "$service" || true)
server_core=$(nm -C "$server" | grep -c -E "$core" || true)
check "server has the gRPC service ($server_service symbols) and the core ($server_core)" \
  '[ "$server_service" -gt 0 ] && [ "$server_core" -gt 0 ]'
check "client has the data-plane core ($client_core symbols)" '[ "$client_core" -gt 0 ]'
check "client has none of the server's gRPC service ($client_service symbols)" '[ "$client_service" -eq 0 ]'
exit $fail
